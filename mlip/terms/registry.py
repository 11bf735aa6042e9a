"""Energy terms by name or import path: the declaration of a model config checked and completed
(:func:`term_specs`, what checkpoints store), and the term modules built from it (:func:`build_terms`).

A declaration is a mapping ``{name: {argument: value, ...}}`` (``None`` or ``{}`` for the defaults), or a
list of names and such single-entry mappings. A name is one of :data:`TERMS` or the import path
``package.module:Class`` of a subclass of :class:`mlip.terms.EnergyTerm`, which is imported to read its
arguments and to build it (a checkpoint naming one imports it when loaded, as ``--model module:Class``
does; only an installed module runs, never code from the file).
"""

from __future__ import annotations

import inspect
from typing import Any, Dict, List, Sequence, Tuple

from torch import nn

from mlip.import_paths import import_object, is_import_path
from mlip.keys import expected_type, matches_type, type_error_message, unknown_keys_message
from mlip.nn.embedded_atom import EmbeddedAtomEnergy
from mlip.repulsion import ZBLRepulsion
from mlip.terms.base import EnergyTerm
from mlip.terms.pair import Buckingham, LennardJones

#: the built-in terms: name → module class
TERMS = {"embedded_atom": EmbeddedAtomEnergy, "zbl": ZBLRepulsion, "lennard_jones": LennardJones,
         "buckingham": Buckingham}
#: what the potential passes to a term's ``__init__`` when it names them (never declared)
SUPPLIED = ("atomic_numbers", "num_species", "cutoff")


def term_class(name: str) -> type:
    """The class of term ``name`` (a key of :data:`TERMS` or an import path); ValueError naming what is
    wrong for an unknown name, a module that does not import or a class that is not an EnergyTerm."""
    if name in TERMS:
        return TERMS[name]
    if not is_import_path(name):
        raise ValueError(f"unknown energy term {name!r}; available: {', '.join(sorted(TERMS))}, or the "
                         f"import path 'package.module:Class' of an mlip.terms.EnergyTerm")
    cls = import_object(name, "energy term")
    if not (isinstance(cls, type) and issubclass(cls, EnergyTerm)):
        module_name, class_name = name.split(":")
        raise ValueError(f"energy term {name!r}: {class_name} in {module_name} is a {type(cls).__name__}, "
                         f"not an mlip.terms.EnergyTerm subclass")
    return cls


#: the default of an argument that has none (it must be declared)
REQUIRED = inspect.Parameter.empty


def term_arguments(name: str) -> Dict[str, Any]:
    """The declarable arguments of term ``name`` (those of its ``__init__`` but ``self``, :data:`SUPPLIED`
    and ``*args``/``**kwargs``), in order, with their defaults (:data:`REQUIRED` for none)."""
    params = inspect.signature(term_class(name).__init__).parameters
    return {k: p.default for k, p in params.items() if k != "self" and k not in SUPPLIED
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def term_defaults(name: str) -> Dict[str, Any]:
    """The arguments of term ``name`` that have a default, with it; ValueError for an unknown term."""
    return {k: v for k, v in term_arguments(name).items() if v is not REQUIRED}


def declared_items(spec) -> List[Tuple[str, Any]]:
    """``[(name, arguments or None), ...]`` of a declaration (see the module docstring)."""
    if spec is None:
        return []
    if isinstance(spec, dict):
        return [(str(name), arguments) for name, arguments in spec.items()]
    if not isinstance(spec, (list, tuple)):
        raise TypeError(f"terms must be a mapping {{name: arguments}} or a list of terms, got {spec!r}")
    items = []
    for entry in spec:
        if isinstance(entry, str):
            items.append((entry, None))
        elif isinstance(entry, dict) and len(entry) == 1:
            items.extend((str(name), arguments) for name, arguments in entry.items())
        else:
            raise TypeError(f"a term in a list is a name or a one-entry mapping {{name: arguments}}, "
                            f"got {entry!r}")
    return items


def term_specs(spec) -> Dict[str, Dict[str, Any]]:
    """The full declaration ``{name: {argument: value}}`` (every argument, defaults filled in, in the
    order given) of ``spec`` (see the module docstring); ValueError for an unknown term or a term named
    twice, TypeError for an unknown or missing argument or a value of the wrong type."""
    out: Dict[str, Dict[str, Any]] = {}
    for name, arguments in declared_items(spec):
        accepted = term_arguments(name)
        if name in out:
            raise ValueError(f"energy term {name!r} is declared twice")
        arguments = {} if arguments is None else arguments
        if not isinstance(arguments, dict):
            raise TypeError(f"the arguments of term {name!r} must be a mapping, got {arguments!r}")
        unknown = set(arguments) - set(accepted)
        if unknown:
            raise TypeError(unknown_keys_message(unknown, accepted, "argument", f" of term {name!r}"))
        missing = [key for key, default in accepted.items() if default is REQUIRED and key not in arguments]
        if missing:
            raise TypeError(f"term {name!r} needs the argument(s) {', '.join(missing)}")
        for key, value in arguments.items():
            kind = Any if accepted[key] in (None, REQUIRED) else type(accepted[key])
            if not matches_type(value, kind):
                raise TypeError(type_error_message(f"term {name} argument {key}", expected_type(kind), value))
        out[name] = {key: arguments.get(key, default) for key, default in accepted.items()}
    return out


def module_key(name: str) -> str:
    """The key of term ``name`` among the potential's modules (``terms.<key>.`` in checkpoints): the name,
    with the dots of an import path (which a module name cannot hold) as underscores."""
    return name.replace(".", "_")


def build_terms(specs: Dict[str, Dict[str, Any]], atomic_numbers: Sequence[int], cutoff: float
                ) -> nn.ModuleDict:
    """The term modules of the full declaration ``specs`` (:func:`term_specs`), in its order, keyed by
    :func:`module_key`; each gets the arguments of :data:`SUPPLIED` its ``__init__`` names. ValueError for
    two names with one key, or a term reaching (its ``max_range()``) beyond the cutoff."""
    numbers = [int(z) for z in atomic_numbers]
    supplied = {"atomic_numbers": numbers, "num_species": len(numbers), "cutoff": float(cutoff)}
    modules = nn.ModuleDict()
    for name, arguments in specs.items():
        cls = term_class(name)
        params = inspect.signature(cls.__init__).parameters
        term = cls(**{k: v for k, v in supplied.items() if k in params}, **arguments)
        key = module_key(name)
        if key in modules:
            raise ValueError(f"energy terms {name!r} and another declared term share the key {key!r}")
        reach = term.max_range() if hasattr(term, "max_range") else 0.0
        if reach > cutoff:
            raise ValueError(f"energy term {name!r} reaches {reach:.2f} Å, beyond the cutoff {cutoff} Å")
        modules[key] = term
    return modules


def scaled(term: nn.Module) -> bool:
    """Whether ``term``'s energies are added to the network's output, inside the potential's scale (see
    :class:`mlip.terms.EnergyTerm`)."""
    return bool(getattr(term, "scaled", False))


__all__ = ["REQUIRED", "SUPPLIED", "TERMS", "build_terms", "declared_items", "module_key", "scaled",
           "term_arguments", "term_class", "term_defaults", "term_specs"]
