"""Training: fit a :class:`mlip.Potential` to energies, forces and stresses.

>>> from mlip.training import TrainConfig, train          # doctest: +SKIP
>>> result = train(TrainConfig.from_yaml("train.yaml"))   # doctest: +SKIP
"""

from mlip.training.config import TrainConfig
from mlip.training.reference_energies import fit_reference_energies
from mlip.training.evaluation import evaluate
from mlip.training.trainer import TrainResult, train

__all__ = ["TrainConfig", "TrainResult", "evaluate", "fit_reference_energies", "train"]
