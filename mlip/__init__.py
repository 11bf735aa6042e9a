"""mlip: machine-learning interatomic potentials for PyTorch and ASE.

>>> import mlip
>>> from mlip.models import create_model
>>> potential = create_model("platonic", species=["Cu", "Au"], cutoff=4.5)
>>> atoms.calc = mlip.MLIPCalculator(potential, dtype="float64")   # doctest: +SKIP
"""

from mlip.version import __version__
from mlip.graph import AtomicGraph, batch_atoms, edge_vectors, validate_atoms
from mlip.potential import Potential
from mlip.checkpoint import CheckpointError, read_header, save_potential
from mlip.pretrained import load_potential


def load_calculator(path_or_name: str = "default", device="auto", dtype="float32", **kwargs):
    """ASE calculator for a checkpoint path or a shipped model's name (see :mod:`mlip.pretrained`;
    :func:`mlip.calculators.model_loading.resolve_calculator` takes every form of a model)."""
    from mlip.calculators.model_loading import load_calculator as _load

    return _load(path_or_name, device=device, dtype=dtype, **kwargs)


def __getattr__(name):
    # Lazy: keeps ``import mlip`` light and mlip.models/calculators importable on their own.
    if name == "MLIPCalculator":
        from mlip.calculators import MLIPCalculator

        return MLIPCalculator
    if name == "create_model":
        from mlip.models import create_model

        return create_model
    raise AttributeError(f"module 'mlip' has no attribute {name!r}")


__all__ = [
    "AtomicGraph",
    "CheckpointError",
    "MLIPCalculator",
    "Potential",
    "__version__",
    "batch_atoms",
    "create_model",
    "edge_vectors",
    "load_calculator",
    "load_potential",
    "read_header",
    "save_potential",
    "validate_atoms",
]
