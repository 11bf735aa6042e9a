"""Learned energy terms a potential declares beside its network (``terms=`` of
:func:`mlip.models.create_model`, ``terms:`` of a model config), as it declares its repulsion.

A term is a module called as ``term(species, edge_index, edge_vectors)`` (species [N] indices into the
potential's species, edge_index [2, E] (i ← j), edge_vectors [E, 3]) → per-atom energies [N], added to the
network's output before the output scale. The terms:

* ``embedded_atom``: :class:`mlip.nn.EmbeddedAtomEnergy`, a learned function of each atom's element
  and its element-resolved neighbor densities, over every edge of the graph (to the cutoff).

A declaration is a mapping ``{name: {argument: value, ...}}`` (``None`` or ``{}`` for the defaults), or a
list of names and such single-entry mappings; :func:`term_specs` turns it into the full form stored in
checkpoints (every argument with its value).
"""

from __future__ import annotations

import inspect
from typing import Any, Dict

from torch import nn

from mlip.keys import expected_type, matches_type, type_error_message, unknown_keys_message
from mlip.nn.embedded_atom import EmbeddedAtomEnergy

#: the declarable terms: name → module class (built as ``cls(num_species, cutoff, **arguments)``)
TERMS = {"embedded_atom": EmbeddedAtomEnergy}


def term_defaults(name: str) -> Dict[str, Any]:
    """The arguments of term ``name`` with their defaults; ValueError for an unknown term."""
    if name not in TERMS:
        raise ValueError(f"unknown energy term {name!r}; available: {', '.join(sorted(TERMS))}")
    params = inspect.signature(TERMS[name].__init__).parameters
    return {k: p.default for k, p in params.items()
            if k not in ("self", "num_species", "cutoff") and p.default is not inspect.Parameter.empty}


def term_specs(spec) -> Dict[str, Dict[str, Any]]:
    """The full declaration ``{name: {argument: value}}`` (every argument, defaults filled in, in the
    order given) of ``spec`` (see the module docstring); ValueError for an unknown term or a term named
    twice, TypeError for an unknown argument or a value of the wrong type."""
    if spec is None:
        return {}
    if isinstance(spec, dict):
        items = list(spec.items())
    elif isinstance(spec, (list, tuple)):
        items = []
        for entry in spec:
            if isinstance(entry, str):
                items.append((entry, None))
            elif isinstance(entry, dict) and len(entry) == 1:
                items.extend(entry.items())
            else:
                raise TypeError(f"a term in a list is a name or a one-entry mapping {{name: arguments}}, got {entry!r}")
    else:
        raise TypeError(f"terms must be a mapping {{name: arguments}} or a list of terms, got {spec!r}")
    out: Dict[str, Dict[str, Any]] = {}
    for name, arguments in items:
        defaults = term_defaults(str(name))
        if name in out:
            raise ValueError(f"energy term {name!r} is declared twice")
        arguments = {} if arguments is None else arguments
        if not isinstance(arguments, dict):
            raise TypeError(f"the arguments of term {name!r} must be a mapping, got {arguments!r}")
        unknown = set(arguments) - set(defaults)
        if unknown:
            raise TypeError(unknown_keys_message(unknown, defaults, "argument", f" of term {name!r}"))
        for key, value in arguments.items():
            kind = Any if defaults[key] is None else type(defaults[key])
            if not matches_type(value, kind):
                raise TypeError(type_error_message(f"term {name} argument {key}", expected_type(kind), value))
        out[str(name)] = {**defaults, **arguments}
    return out


def build_terms(specs: Dict[str, Dict[str, Any]], num_species: int, cutoff: float) -> nn.ModuleDict:
    """The term modules of the full declaration ``specs`` (:func:`term_specs`), in its order."""
    return nn.ModuleDict({name: TERMS[name](num_species, cutoff, **arguments) for name, arguments in specs.items()})
