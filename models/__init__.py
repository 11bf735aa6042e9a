"""Model architectures and :func:`create_model`, the one way to build a potential.

Architectures are registered by name with the import path of their energy-model class; the class
is imported only when used. Every hyperparameter is a keyword argument of that class's
``__init__`` (besides ``num_species`` and ``cutoff``) with a default, so
``create_model("platonic", species=["Cu", "Au"], cutoff=4.5)`` works.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Dict, Optional, Sequence

import torch

from mlip.keys import expected_type, matches_type, type_error_message, unknown_keys_message
from mlip.models.base import check_energy_model
from mlip.nn.attention_cutoff import require_edges_beyond_attention
from mlip.potential import Potential

_REGISTRY: Dict[str, str] = {
    "platonic": "mlip.models.platonic.model:PlatonicTransformer",
    "equiformer_v3": "mlip.models.equiformer_v3.model:EquiformerV3",
    "embedded_atom": "mlip.models.embedded_atom:EmbeddedAtomModel",
}


_CHECKED: Dict[str, Any] = {}  # name → the class, once checked against the interface


def register_architecture(name: str, target: str) -> None:
    """Register an energy-model class (``"package.module:Class"``, the interface of
    :mod:`mlip.models.base`, checked when it is first used) under ``name``."""
    _REGISTRY[name] = target
    _CHECKED.pop(name, None)


def available_architectures() -> list:
    """Names accepted by :func:`create_model`."""
    return sorted(_REGISTRY)


def get_architecture(name: str):
    """The energy-model class registered under ``name``; ValueError for unknown names, TypeError for a
    class without the interface of :mod:`mlip.models.base` (naming what it lacks)."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown architecture {name!r}; available: {', '.join(available_architectures())}")
    if name not in _CHECKED:
        module, attr = _REGISTRY[name].split(":")
        cls = getattr(importlib.import_module(module), attr)
        check_energy_model(cls, name)
        _CHECKED[name] = cls
    return _CHECKED[name]


def default_hyperparameters(name: str) -> dict:
    """All hyperparameters of an architecture with their default values."""
    cls = get_architecture(name)
    params = inspect.signature(cls.__init__).parameters
    return {
        k: p.default
        for k, p in params.items()
        if k not in ("self", "num_species", "cutoff") and p.default is not inspect.Parameter.empty
    }


def check_hyperparameters(name: str, hyperparameters: dict) -> dict:
    """Check ``hyperparameters`` against architecture ``name``'s and return all its defaults.

    ``TypeError`` for a name the architecture does not have (the message lists the accepted ones,
    closest match first) or a value of another type than the default's (bool, integer, number, string
    or list; an integer is accepted for a number, anything where the default is None).
    """
    defaults = default_hyperparameters(name)
    unknown = set(hyperparameters) - set(defaults)
    if unknown:
        context = f" for architecture {name!r}"
        raise TypeError(unknown_keys_message(unknown, defaults, "hyperparameter", context))
    for key, value in hyperparameters.items():
        kind = Any if defaults[key] is None else type(defaults[key])  # a None default accepts anything
        if not matches_type(value, kind):
            raise TypeError(type_error_message(f"{name} hyperparameter {key}", expected_type(kind), value))
    return defaults


def create_model(
    name: str,
    species: Sequence,
    cutoff: float,
    reference_energies: Optional[Sequence[float]] = None,
    scale: float = 1.0,
    seed: Optional[int] = None,
    repulsion="zbl",
    terms=None,
    **hyperparameters,
) -> Potential:
    """Build a :class:`mlip.Potential` around a freshly initialised model.

    Args:
        name: architecture (see :func:`available_architectures`).
        species: elements the potential handles (symbols or atomic numbers), in embedding order.
        cutoff: neighbor cutoff (Å).
        reference_energies: per-element energies (eV) added to every atom, in ``species`` order.
        scale: factor on the model's per-atom output (eV).
        seed: if given, initialise the weights from this seed (same seed → same weights).
        repulsion: the short-range repulsion term added to every model (``"zbl"``: the switched
            ZBL screened nuclear repulsion of :mod:`mlip.repulsion`; a mapping ``{kind: zbl, inner:
            ..., outer: ...}`` for other switch radii; ``None`` for none).
        terms: learned energy terms added to the network's output (:mod:`mlip.terms`), e.g.
            ``{"embedded_atom": {"log_densities": True}}``; ``None`` for none.
        **hyperparameters: architecture hyperparameters; unknown names and values of the wrong
            type raise ``TypeError`` (see :func:`check_hyperparameters`).
    """
    defaults = check_hyperparameters(name, hyperparameters)
    if not cutoff or float(cutoff) <= 0:
        raise ValueError(f"cutoff must be a positive number of Å, got {cutoff!r}")
    hp = {**defaults, **hyperparameters}
    cls = get_architecture(name)
    species = list(species)

    def build() -> Potential:
        model = cls(num_species=len(species), cutoff=float(cutoff), **hp)
        potential = Potential(model, species=species, cutoff=float(cutoff), architecture=name,
                              hyperparameters=hp, reference_energies=reference_energies, scale=scale,
                              repulsion=repulsion, terms=terms)
        # a radius of attention shorter than the cutoff needs something that uses the edges beyond it
        option = getattr(model, "FAR_EDGES_OPTION", None)
        require_edges_beyond_attention(getattr(model, "attention_cutoff", float(cutoff)), float(cutoff),
                                       getattr(model, "uses_far_edges", False) or len(potential.terms) > 0,
                                       f"{option} or an energy term (terms)" if option else "an energy term (terms)")
        return potential

    if seed is None:
        return build()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return build()


def load_model_config(path) -> dict:
    """Read a model configuration file (YAML): ``create_model``'s arguments, ``name`` included.

    Shipped configurations live in ``mlip/models/configs`` (see :func:`config_path`). Raises
    ValueError naming the file and the problem for a malformed file.
    """
    from mlip.io import read_yaml

    path = str(path)
    config = read_yaml(path, "model config")
    if not isinstance(config, dict):
        raise ValueError(f"model config {path!r} must be a mapping of create_model arguments")
    missing = [key for key in ("name", "species", "cutoff") if key not in config]
    if missing:
        raise ValueError(f"model config {path!r} lacks {', '.join(missing)}")
    species = config["species"]
    if not isinstance(species, list) or not all(isinstance(s, (str, int)) and not isinstance(s, bool)
                                                for s in species):
        raise ValueError(f"model config {path!r}: species must be a list of element symbols or numbers")
    return config


def config_path(name: str) -> str:
    """Path of a configuration shipped with the package, e.g. ``config_path("equiformer_v3_mp")``."""
    import os

    path = os.path.join(os.path.dirname(__file__), "configs", f"{name}.yaml")
    if not os.path.exists(path):
        shipped = sorted(f[:-5] for f in os.listdir(os.path.dirname(path)) if f.endswith(".yaml"))
        raise ValueError(f"no shipped model config {name!r}; available: {', '.join(shipped)}")
    return path


def create_model_from_config(path, seed: Optional[int] = None, **overrides) -> Potential:
    """:func:`create_model` with the arguments of a config file (see :func:`load_model_config`)."""
    config = {**load_model_config(path), **overrides}
    return create_model(config.pop("name"), seed=seed, **config)


__all__ = [
    "available_architectures",
    "check_hyperparameters",
    "config_path",
    "create_model",
    "create_model_from_config",
    "load_model_config",
    "default_hyperparameters",
    "get_architecture",
    "register_architecture",
]
