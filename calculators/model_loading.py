"""One road from whatever a user calls "the model" to an ASE calculator.

The command line (``--model``), every workflow (relaxation, MD, phonons, κ, Matbench Discovery) and
:func:`mlip.load_calculator` resolve a model here, by :func:`resolve_calculator`, which accepts:

* the name of a shipped model (``"default"``, ``"platonic-untrained"``, ... see
  :func:`mlip.pretrained.available`);
* the path of an mlip checkpoint (``.safetensors``);
* an :class:`mlip.Potential` object;
* an ASE calculator instance (returned as is), or an ASE calculator class (instantiated with no
  arguments);
* an import path ``"package.module:ClassName"`` of an ASE calculator class, instantiated with no
  arguments, e.g. ``"ase.calculators.emt:EMT"`` (handy to compare against a reference potential).

Names and checkpoint files are read by :mod:`mlip.pretrained` and :mod:`mlip.checkpoint`; the
helpers below tell what a resolved calculator serves (its potential, cutoff, label, whether it is
untrained).
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from typing import Callable, Optional, Union

import torch
from ase.calculators.calculator import BaseCalculator

from mlip import pretrained
from mlip.calculators.mlip_calculator import MLIPCalculator
from mlip.potential import Potential

ModelSpec = Union[str, os.PathLike, Potential, BaseCalculator, type]

#: ``package.module:ClassName`` (dotted module path, a colon, a Python identifier)
_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")

#: file suffixes that make an unknown string look like a (missing) checkpoint path
_CHECKPOINT_SUFFIXES = (".safetensors", ".pt", ".pth", ".ckpt", ".model")


def accepted_forms() -> str:
    """One paragraph describing what ``model`` may be (used in error messages and CLI help)."""
    names = ", ".join(["default"] + pretrained.available())
    return (
        "a shipped model name (" + names + "), the path of an mlip checkpoint (.safetensors), "
        "an mlip.Potential, an ASE calculator instance or class, or the import path of an ASE "
        "calculator class as 'package.module:ClassName' (e.g. 'ase.calculators.emt:EMT')"
    )


def _calculator_from_import_path(spec: str) -> BaseCalculator:
    from mlip.import_paths import import_object

    return _calculator_from_class(import_object(spec, "model"), spec)


def _calculator_from_class(cls, label: str) -> BaseCalculator:
    if not isinstance(cls, type) or not issubclass(cls, BaseCalculator):
        raise ValueError(f"model {label!r} is not an ASE calculator class (got {cls!r})")
    try:
        calc = cls()
    except TypeError as err:
        raise ValueError(
            f"model {label!r}: calculator class cannot be created without arguments ({err}); "
            "create the calculator yourself and pass the instance"
        ) from None
    return calc


def resolve_calculator(
    model: ModelSpec = "default",
    device: str = "auto",
    dtype: str = "float32",
    *,
    note: Optional[Callable[[str], None]] = None,
    **calculator_kwargs,
) -> BaseCalculator:
    """An ASE calculator for ``model`` (see the module docstring for the accepted forms).

    Args:
        model: shipped model name, checkpoint path, :class:`mlip.Potential`, ASE calculator
            (instance or class) or ``"package.module:ClassName"``.
        device: for mlip potentials: ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"``, ...
        dtype: for mlip potentials: ``"float32"`` (MD) or ``"float64"`` (relaxations, phonons).
        note: where a person reads about the model (the command line passes its stderr printer):
            given, an untrained model is announced there by one ``NOTE:`` line instead of an
            :class:`mlip.pretrained.UntrainedModelWarning`.
        **calculator_kwargs: passed on to :class:`mlip.MLIPCalculator` (e.g. ``neighbor_backend``).

    ``device``, ``dtype`` and ``calculator_kwargs`` only apply to mlip potentials; foreign ASE
    calculators are used as they are.

    Raises:
        FileNotFoundError: ``model`` looks like a checkpoint path that does not exist.
        ValueError: ``model`` is an unknown string (the message lists the accepted forms and the
            shipped models), an import path that cannot be imported, or not a calculator class;
            also for a corrupted checkpoint (:class:`mlip.CheckpointError`).
        TypeError: ``model`` has an unsupported type.

    Loading an untrained shipped model emits :class:`mlip.pretrained.UntrainedModelWarning` (unless
    ``note``); :func:`is_untrained` tells whether a calculator serves such a model.
    """
    if note is None:
        return _resolve(model, device, dtype, calculator_kwargs)
    with warnings.catch_warnings():
        # Replaced by the NOTE line below, which says the same thing more visibly.
        warnings.simplefilter("ignore", pretrained.UntrainedModelWarning)
        calc = _resolve(model, device, dtype, calculator_kwargs)
    if is_untrained(calc):
        label = describe_model(calc, model)
        note(f"NOTE: model {label!r} is UNTRAINED (random weights): results are not physical")
    return calc


def _resolve(model: ModelSpec, device: str, dtype: str, calculator_kwargs: dict) -> BaseCalculator:
    """:func:`resolve_calculator` without its notes."""
    if isinstance(model, BaseCalculator):
        return model
    if isinstance(model, Potential):
        return MLIPCalculator(model, device=device, dtype=dtype, **calculator_kwargs)
    if isinstance(model, type):
        return _calculator_from_class(model, getattr(model, "__qualname__", repr(model)))
    if isinstance(model, os.PathLike):
        model = os.fspath(model)
    if not isinstance(model, str):
        raise TypeError(
            f"model must be a name, path, Potential or ASE calculator, got {type(model).__name__}"
        )
    spec = model.strip()
    if not spec:
        raise ValueError(f"empty model name; expected {accepted_forms()}")
    # An existing file always wins (a checkpoint named like a shipped model is still a file).
    if os.path.exists(spec):
        if os.path.isdir(spec):
            raise ValueError(
                f"model {spec!r} is a directory, not a checkpoint file; expected {accepted_forms()}"
            )
        return load_calculator(spec, device=device, dtype=dtype, **calculator_kwargs)
    if pretrained.is_known(spec):
        return load_calculator(spec, device=device, dtype=dtype, **calculator_kwargs)
    if _IMPORT_PATH.match(spec):
        return _calculator_from_import_path(spec)
    if os.sep in spec or "/" in spec or spec.lower().endswith(_CHECKPOINT_SUFFIXES):
        raise FileNotFoundError(f"model checkpoint {spec!r} does not exist; expected {accepted_forms()}")
    raise ValueError(f"unknown model {spec!r}; expected {accepted_forms()}")


def load_calculator(
    path_or_name: Union[str, os.PathLike] = "default",
    device: Union[str, torch.device] = "auto",
    dtype: Union[str, torch.dtype] = "float32",
    **kwargs,
) -> MLIPCalculator:
    """One-liner (:func:`mlip.load_calculator`): an :class:`MLIPCalculator` for a checkpoint path or a
    shipped model's name, read by :func:`mlip.pretrained.load_potential` (whose errors it raises);
    :func:`resolve_calculator` takes every form of a model."""
    return MLIPCalculator(pretrained.load_potential(path_or_name), device=device, dtype=dtype, **kwargs)


def potential_of(calculator) -> Optional[Potential]:
    """The :class:`mlip.Potential` behind ``calculator``, or None for a foreign calculator."""
    potential = getattr(calculator, "potential", None)
    return potential if isinstance(potential, Potential) else None


def calculator_cutoff(calculator) -> Optional[float]:
    """The interaction cutoff radius (Å) of an mlip calculator (its potential's ``cutoff``); None
    for calculators that do not expose one (most foreign ASE calculators) and for a non-positive
    cutoff. The phonon and κ workflows size their supercells from it."""
    potential = potential_of(calculator)
    cutoff = getattr(potential, "cutoff", None) if potential is not None else None
    return float(cutoff) if cutoff is not None and float(cutoff) > 0 else None


def is_untrained(calculator) -> bool:
    """True when ``calculator`` serves an mlip potential marked untrained (random weights)."""
    potential = potential_of(calculator)
    return potential is not None and potential.metadata.get("trained") is False


def describe_model(calculator, spec: Optional[ModelSpec] = None) -> str:
    """A short human-readable label: the shipped name, checkpoint path or calculator class."""
    potential = potential_of(calculator)
    if potential is not None:
        name = potential.metadata.get("name")
        if name:
            return str(name)
        if isinstance(spec, (str, os.PathLike)):
            return str(Path(spec))
        return f"{potential.architecture} potential"
    if isinstance(spec, str):
        return spec
    return type(calculator).__name__


__all__ = [
    "accepted_forms",
    "calculator_cutoff",
    "describe_model",
    "is_untrained",
    "load_calculator",
    "potential_of",
    "resolve_calculator",
]
