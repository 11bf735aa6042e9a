"""The training configuration (``mlip train CONFIG.yaml``): model, data, loss, optimiser, run."""

from __future__ import annotations

import typing
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any, Dict, List, Optional

from mlip.keys import expected_type, matches_type, type_error_message, unknown_keys_message
from mlip.training.schedule import SCHEDULES


def _check_keys(data: dict, cls, where: str, what: str = "key") -> None:
    known = {f.name for f in fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"{where}: {unknown_keys_message(unknown, known, what)}")


def _check_types(data: dict, cls, where: str, prefix: str = "") -> None:
    """ValueError naming the first value of ``data`` that does not have its field's type."""
    hints = typing.get_type_hints(cls)
    for key, value in data.items():
        hint = hints[key]
        if is_dataclass(hint):
            continue  # a section, checked on its own
        if not matches_type(value, hint):
            raise ValueError(f"{where}: {type_error_message(prefix + key, expected_type(hint), value)}")


@dataclass
class LossConfig:
    """Weights of the loss terms, each on targets divided by the output scale (so all are per-atom
    energies): energy per atom, force components, and stress × volume per atom. ``kind``: ``"mse"``,
    ``"mae"`` or ``"huber"`` (δ = ``huber_delta`` in those units). A zero weight skips computing that
    derivative in training steps (energy only: no double backward, about a third of the cost);
    validation still reports every error."""

    energy_weight: float = 1.0
    forces_weight: float = 1.0
    stress_weight: float = 1.0
    kind: str = "mse"
    huber_delta: float = 0.1


@dataclass
class OptimizerConfig:
    """AdamW with gradient clipping and an EMA of the weights, and its learning-rate ``schedule``:
    ``"cosine"`` (linear warm-up over ``warmup_fraction`` of the run, then cosine decay to
    ``min_lr_factor`` at ``epochs``) or ``"wsd"`` (warm-up over ``warmup_epochs``, a constant rate until
    the plateau rule fires (:class:`PlateauConfig`), then a linear decay to ``min_lr_factor`` over
    ``decay_fraction`` of the epochs run by then, after which the run ends; ``epochs`` is only a cap)."""

    lr: float = 2e-3
    weight_decay: float = 1e-3
    betas: tuple = (0.9, 0.999)
    clip_norm: float = 100.0
    warmup_fraction: float = 0.05
    min_lr_factor: float = 0.01
    ema_decay: float = 0.99
    schedule: str = "cosine"
    warmup_epochs: float = 1.0
    decay_fraction: float = 0.2


@dataclass
class PlateauConfig:
    """The plateau rule of the ``wsd`` schedule (:mod:`mlip.training.plateau`): it fires when the validation
    loss, smoothed by an exponential moving average of coefficient ``smoothing``, has fallen by less than
    the fraction ``min_improvement`` over the last ``window`` epochs."""

    window: int = 10
    min_improvement: float = 0.01
    smoothing: float = 0.7


@dataclass
class DataConfig:
    """``train``: a file ``mlip.data``/ASE can read; ``valid``: a file, or else ``valid_fraction`` of
    ``train`` split off with ``seed``; label keys default to ASE's energy/forces/stress.
    ``exclude_config_types``: frames whose ``config_type`` is one of these are left out of training
    and validation (e.g. ``[compressed]`` for a teacher without a repulsive wall); the run prints how
    many, and a name no frame carries is an error."""

    train: Optional[str] = None
    valid: Optional[str] = None
    valid_fraction: float = 0.1
    energy_key: Optional[str] = None
    forces_key: Optional[str] = None
    stress_key: Optional[str] = None
    exclude_config_types: List[str] = field(default_factory=list)


@dataclass
class TrainConfig:
    """Everything a training run needs; ``model`` holds :func:`mlip.models.create_model` arguments
    (``name``, ``species``, ``cutoff`` and hyperparameters)."""

    model: Dict[str, Any] = field(default_factory=dict)
    data: DataConfig = field(default_factory=DataConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    plateau: PlateauConfig = field(default_factory=PlateauConfig)
    epochs: int = 10
    batch_size: int = 8
    seed: int = 0
    dtype: str = "float32"
    eval_dtype: str = "float32"
    device: str = "cpu"
    out_dir: str = "training"
    max_minutes: Optional[float] = None
    #: present every training structure in a random orientation (for models that are not exactly
    #: rotation invariant, such as the Platonic Transformer); validation data are not rotated
    augment_rotations: bool = False
    #: start from the weights of this checkpoint (a path, or the name of a shipped model) instead of
    #: random ones: fine-tuning, or the second stage of a two-stage recipe. Its architecture, species,
    #: cutoff and hyperparameters must be those of ``model``; its reference energies and output
    #: scale are kept (not refitted)
    init_from: Optional[str] = None
    #: with ``init_from``: grow a deeper model from a trained shallower one. The checkpoint may have
    #: fewer transformer blocks (``num_layers``) than ``model``, and nothing else may differ; its
    #: blocks are copied and the extra ones are appended with their residual branches zeroed, so
    #: training starts exactly from the checkpoint's energies and forces
    init_grow: bool = False
    #: start the model's embedded-atom term (``terms: {embedded_atom: ...}``) from a checkpoint of the
    #: ``embedded_atom`` architecture with the same species and cutoff (the term trained alone, a
    #: recipe's first stage): its term, output scale and reference energies are copied and the model's
    #: final readout layer is zeroed, so training starts from exactly the fitted term's energies and
    #: trains the rest of the model on top of it. Not together with ``init_from``
    init_embedded_atom_from: Optional[str] = None
    #: keep the model's embedded-atom term (``terms: {embedded_atom: ...}``) fixed and train the rest: with
    #: ``init_embedded_atom_from`` the network then has to learn what the fitted term misses, which a
    #: trainable term, moving faster than a readout started at zero grows, would otherwise absorb
    freeze_embedded_atom: bool = False
    #: per-element reference energies: ``"least_squares"`` (fitted on the training set; with
    #: ``init_from`` or ``init_embedded_atom_from``, the checkpoint's are kept, isolated-atom ones included) or ``"isolated_atoms"``: the energies of the
    #: isolated-atom structures (one atom, no neighbour within the cutoff) of the training data, both
    #: sides of the validation split, one per element needed; the model's own output for an isolated
    #: atom is then subtracted, so isolated atoms are exact (:class:`mlip.Potential`). With
    #: ``init_from`` it switches a least-squares checkpoint over (only per-element constants move)
    reference_energies: str = "least_squares"
    #: run each training step (energy, forces and stress, the loss and its gradients in the weights)
    #: as one graph compiled by torch.compile (:mod:`mlip.training.compiled_step`): the same
    #: optimisation up to rounding, faster per step once compiled, but each new batch shape class costs
    #: minutes of compilation first; a compilation that fails falls back to eager steps with a warning.
    #: Validation stays eager. One process only (under torchrun the steps stay eager, with a warning)
    compile: bool = False

    @classmethod
    def from_dict(cls, data: Dict[str, Any], where: str = "config") -> "TrainConfig":
        if not isinstance(data, dict):
            raise ValueError(f"{where}: a training config is a mapping")
        _check_keys(data, cls, where)
        _check_types(data, cls, where)
        kwargs = dict(data)
        for key, sub in (("data", DataConfig), ("loss", LossConfig), ("optimizer", OptimizerConfig),
                         ("plateau", PlateauConfig)):
            if key in kwargs:
                value = kwargs[key] or {}
                if not isinstance(value, dict):
                    raise ValueError(f"{where}: {key} must be a mapping")
                _check_keys(value, sub, where, f"{key} key")
                _check_types(value, sub, where, prefix=f"{key}.")
                kwargs[key] = sub(**value)
        config = cls(**kwargs)
        config.validate(where)
        return config

    @classmethod
    def from_yaml(cls, path) -> "TrainConfig":
        from mlip.io import read_yaml

        return cls.from_dict(read_yaml(path, "training config"), where=str(path))

    def validate(self, where: str = "config") -> None:
        for key in ("name", "species", "cutoff"):
            if key not in self.model:
                raise ValueError(f"{where}: model needs {key!r}")
        self._check_model(where)
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError(f"{where}: epochs and batch_size must be >= 1")
        if self.loss.kind not in ("mse", "mae", "huber"):
            raise ValueError(f"{where}: loss.kind must be mse, mae or huber, got {self.loss.kind!r}")
        if self.dtype not in ("float32", "float64") or self.eval_dtype not in ("float32", "float64"):
            raise ValueError(f"{where}: dtype and eval_dtype must be float32 or float64")
        if not 0 <= self.data.valid_fraction < 1:
            raise ValueError(f"{where}: data.valid_fraction must be in [0, 1)")
        if not 0 <= self.optimizer.ema_decay < 1:
            raise ValueError(f"{where}: optimizer.ema_decay must be in [0, 1)")
        oc, pc = self.optimizer, self.plateau
        if oc.schedule not in SCHEDULES:
            raise ValueError(f"{where}: optimizer.schedule must be one of {', '.join(SCHEDULES)}, "
                             f"got {oc.schedule!r}")
        if oc.warmup_epochs < 0 or not 0 < oc.decay_fraction <= 1:
            raise ValueError(f"{where}: optimizer.warmup_epochs must be >= 0 and optimizer.decay_fraction "
                             "in (0, 1]")
        if pc.window < 1 or not 0 <= pc.smoothing < 1:
            raise ValueError(f"{where}: plateau.window must be >= 1 and plateau.smoothing in [0, 1)")
        if self.reference_energies not in ("least_squares", "isolated_atoms"):
            raise ValueError(f"{where}: reference_energies must be least_squares or isolated_atoms, "
                             f"got {self.reference_energies!r}")
        if self.init_embedded_atom_from and self.init_from:
            raise ValueError(f"{where}: init_embedded_atom_from and init_from exclude each other (one "
                             "starts a new model from a fitted term, the other continues a whole model)")
        if self.init_grow and not self.init_from:
            raise ValueError(f"{where}: init_grow needs init_from (the checkpoint to grow from)")

    def _check_model(self, where: str) -> None:
        """The architecture and hyperparameters of ``model`` before any data are read: the errors of
        :func:`mlip.models.check_hyperparameters`, naming the config."""
        import inspect

        from mlip.models import check_hyperparameters, create_model

        named = {k for k, p in inspect.signature(create_model).parameters.items() if p.kind != p.VAR_KEYWORD}
        hyperparameters = {k: v for k, v in self.model.items() if k not in named}
        try:
            check_hyperparameters(self.model["name"], hyperparameters)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{where}: model: {err}") from None

    def to_dict(self) -> Dict[str, Any]:
        out = asdict(self)
        out["optimizer"]["betas"] = list(self.optimizer.betas)
        return out
