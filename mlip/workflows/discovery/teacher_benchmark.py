"""A miniature Matbench Discovery in which any ASE calculator (a teacher) plays DFT, over binary systems.

The EMT benchmark (:mod:`.emt_benchmark`) generalised: the truth is any calculator that
:func:`mlip.workflows.labelling.labeller` names (``emt``, ``chgnet``, ``package.module:Class``) or any
ASE calculator or calculator factory, and the chemistry is a list of binary systems ``A-B``
(:data:`DEFAULT_SYSTEMS`: one per family of :mod:`mlip.data.chemistries`). The machinery (cache, hull,
margin rule, files) is :mod:`.mini_benchmark`'s; this module is the recipe (:class:`TeacherRecipe`):

* elemental references: each element on the lattices of
  :data:`mlip.data.chemistries.UNARY_PROTOTYPES` (fcc, bcc, hcp, diamond) and, for the elements whose
  solids are molecular (:data:`mlip.data.chemistries.MOLECULAR`: H, He, N, O, F, Cl, Br, I), also
  the dimer in a :data:`DIMER_BOX` Å box; each relaxed, μ_el the lowest energy per atom;
* the known hull of each system A-B: the elements and the compounds of :data:`KNOWN_PROTOTYPES`
  (rocksalt, CsCl and zincblende AB; fluorite AB₂ and A₂B; L1₂ A₃B and AB₃), relaxed; one pymatgen
  ``PhaseDiagram`` per system;
* candidates: the decorations of :data:`CANDIDATE_PROTOTYPES` (wurtzite and L1₀ AB; rutile AB₂ and
  A₂B; ReO₃ AB₃ and A₃B; corundum A₂B₃ and A₃B₂), shuffled, at most a third of the candidates; then
  substitutions: a known-hull decoration of a random system (where the ground states are, so that
  some substitutions land below the hull), repeated to 8–16 atoms
  (:func:`mlip.data.structures.repeat_to`), with 1 to a quarter of its sites changed to the other
  element, and a quarter of those rattled (0.05 Å) and strained (±3 %). Every relaxation that fails
  (the calculator raises) or does not converge, and every candidate within ``margin`` of the hull,
  is replaced by the next, as in the EMT benchmark.

Structures are built by the prototype builders of :mod:`mlip.data.chemistries` and scaled by its
contact rule (:func:`mlip.data.chemistries.scale_to_contact`; the non-metal of a metal–non-metal pair
is its anion). The default systems and the family each stands for:

========  =====================================  ========  ====================================
``Mg-O``  oxide                                  ``Ti-N``  nitride (a transition metal)
``Na-Cl`` halide (chloride)                      ``Si-Ge`` group-IV covalent alloy
``Al-Ni`` intermetallic (sp–d metals)            ``Li-F``  halide (fluoride, light elements)
``Zn-S``  chalcogenide                           ``Cu-Au`` noble-metal alloy (EMT knows it)
========  =====================================  ========  ====================================

Files: those of :mod:`.mini_benchmark`, the summary with a ``system`` column; ``benchmark.json`` adds
the calculator's provenance and per-system counts. Ids: ``teacher-0001``, ``teacher-ref-...``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
from ase import Atoms

from mlip.workflows.discovery.mini_benchmark import MARGIN, Recipe, build_benchmark, perturbed

#: the default binary systems: one per family (module docstring)
DEFAULT_SYSTEMS = ("Mg-O", "Na-Cl", "Al-Ni", "Zn-S", "Ti-N", "Si-Ge", "Li-F", "Cu-Au")
#: prototypes of the known hull: (name in :data:`mlip.data.chemistries.PROTOTYPES`, both decorations)
KNOWN_PROTOTYPES = (("rocksalt", False), ("cesium_chloride", False), ("zincblende", False),
                    ("fluorite", True), ("L1_2", True))
#: prototypes of the candidates (same form); B2 is CsCl and the anti-structures are the swapped decorations
CANDIDATE_PROTOTYPES = (("wurtzite", False), ("L1_0", False), ("rutile", True), ("ReO3", True),
                        ("corundum", True))
#: edge (Å) of the box of the dimer phase of molecular elements
DIMER_BOX = 10.0
#: atoms per substituted candidate
SUBSTITUTION_SIZE = (8, 16)


def parse_systems(systems: Sequence[str]) -> List[Tuple[str, str]]:
    """[(A, B)] of systems written ``A-B``; ValueError (one line) for a malformed or repeated system
    or an unknown element."""
    from ase.data import atomic_numbers

    if isinstance(systems, str):
        systems = [systems]
    out: List[Tuple[str, str]] = []
    seen = set()
    for text in systems:
        parts = str(text).split("-")
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"unknown system {text!r}: give two elements as 'A-B' (e.g. Mg-O)")
        bad = [p for p in parts if p not in atomic_numbers or p == "X"]
        if bad:
            raise ValueError(f"unknown system {text!r}: {', '.join(bad)} is not an element")
        if parts[0] == parts[1]:
            raise ValueError(f"unknown system {text!r}: give two different elements")
        if frozenset(parts) in seen:
            raise ValueError(f"system {text!r} is given twice")
        seen.add(frozenset(parts))
        out.append((parts[0], parts[1]))
    if not out:
        raise ValueError("give at least one system (e.g. Mg-O)")
    return out


def truth_calculator(calculator, settings: Optional[Dict[str, Any]] = None
                     ) -> Tuple[Callable[[Atoms], Any], str, Dict[str, Any]]:
    """(``make(atoms)`` → ASE calculator, a label, the provenance recorded in the settings) of a
    :func:`mlip.workflows.labelling.labeller` spec (``emt``, ``chgnet``, ``package.module:Class``; with
    its keyword ``settings``), a :class:`mlip.workflows.labelling.Labeller`, an ASE calculator (shared
    by every structure) or a factory ``make(atoms)``."""
    from ase.calculators.calculator import BaseCalculator

    from mlip.workflows.labelling import Labeller, labeller

    if isinstance(calculator, str):
        calculator = labeller(calculator, settings)
    elif settings:
        raise ValueError("calculator settings go with a calculator name (emt, chgnet, package.module:Class)")
    if isinstance(calculator, Labeller):
        return calculator.make, calculator.name, calculator.provenance
    if isinstance(calculator, BaseCalculator):
        name = f"{type(calculator).__module__}.{type(calculator).__qualname__}"
        return (lambda atoms: calculator), type(calculator).__name__, {"calculator": name}
    if callable(calculator):
        name = getattr(calculator, "__qualname__", type(calculator).__qualname__)
        return calculator, name, {"calculator": f"{getattr(calculator, '__module__', '')}.{name}"}
    raise TypeError(f"calculator must be a name, a Labeller, an ASE calculator or a factory, "
                    f"got {type(calculator).__name__}")


class TeacherRecipe(Recipe):
    """The structures of the teacher benchmark over ``systems`` [(A, B)] (see the module docstring)."""

    name = "teacher"
    record_failures = True
    extra_columns = ("system",)

    def __init__(self, systems: Sequence[Tuple[str, str]], make: Callable[[Atoms], Any], label: str):
        from mlip.data.chemistries import BondLengths

        self.systems = [tuple(s) for s in systems]
        self.make = make
        self.label = label
        self.description = (f"miniature Matbench Discovery: {label} plays DFT over "
                            f"{', '.join(map('-'.join, self.systems))} (mlip discovery teacher-benchmark)")
        self.elements = tuple(dict.fromkeys(el for system in self.systems for el in system))
        self.lengths = BondLengths(self.elements)

    def calculator(self, atoms: Atoms):
        return self.make(atoms)

    def element_phases(self, element: str) -> Dict[str, Atoms]:
        from mlip.data.chemistries import MOLECULAR, UNARY_PROTOTYPES, Composition, covalent_sum

        phases = {}
        for name in UNARY_PROTOTYPES:
            atoms = Composition("unary", name, (element,), False).cell(self.lengths)
            atoms.info = {}
            phases[name] = atoms
        if element in MOLECULAR:
            d = covalent_sum(element, element)
            atoms = Atoms([element] * 2, positions=[[0, 0, 0], [d, 0, 0]], cell=np.eye(3) * DIMER_BOX,
                          pbc=True)
            atoms.center()
            phases["dimer"] = atoms
        return phases

    def decoration(self, system: Tuple[str, str], proto: str, order: Tuple[str, str]) -> Atoms:
        """The contact-scaled cell of ``proto`` with the elements ``order`` in its roles."""
        from mlip.data.chemistries import NON_METALS, Composition

        non_metals = tuple(el for el in system if el in NON_METALS)
        anions = non_metals if len(non_metals) == 1 else ()
        atoms = Composition("binary", proto, tuple(order), False, anions).cell(self.lengths)
        atoms.info = {}
        return atoms

    @staticmethod
    def _decorations(system: Tuple[str, str], prototypes) -> List[Tuple[str, Tuple[str, str]]]:
        a, b = system
        return [(proto, order) for proto, both in prototypes
                for order in ([(a, b), (b, a)] if both else [(a, b)])]

    def known_compounds(self, elements: Dict[str, Atoms]) -> List[Tuple[str, str, Atoms]]:
        from mlip.data.chemistries import Composition

        out = []
        for system in self.systems:
            for proto, order in self._decorations(system, KNOWN_PROTOTYPES):
                formula = Composition("binary", proto, order, False).formula
                key = f"{'-'.join(system)}-{proto}-{formula}"
                out.append((key, proto, self.decoration(system, proto, order)))
        return out

    def hull_groups(self) -> Dict[str, Tuple[str, ...]]:
        return {"-".join(system): system for system in self.systems}

    def candidates(self, rng: np.random.Generator, elements: Dict[str, Atoms],
                   n_candidates: int) -> Callable[[int], Tuple[str, Atoms]]:
        """Prototype decorations first (shuffled, at most a third of the candidates), then substitutions."""
        protos = [(system, proto, order) for system in self.systems
                  for proto, order in self._decorations(system, CANDIDATE_PROTOTYPES)]
        order = rng.permutation(len(protos))
        pool = [protos[k] for k in order[:min(len(protos), int(n_candidates) // 3)]]

        def next_candidate(k: int) -> Tuple[str, Atoms]:
            if k < len(pool):
                system, proto, roles = pool[k]
                return proto, self.decoration(system, proto, roles)
            return self._substituted(rng)

        return next_candidate

    def _substituted(self, rng: np.random.Generator) -> Tuple[str, Atoms]:
        from mlip.data.structures import repeat_to

        system = self.systems[int(rng.integers(len(self.systems)))]
        options = self._decorations(system, KNOWN_PROTOTYPES)
        proto, roles = options[int(rng.integers(len(options)))]
        atoms = repeat_to(self.decoration(system, proto, roles), rng, *SUBSTITUTION_SIZE)
        n = len(atoms)
        sites = rng.choice(n, size=int(rng.integers(1, max(1, n // 4) + 1)), replace=False)
        symbols = atoms.get_chemical_symbols()
        a, b = system
        for i in sites:
            symbols[i] = b if symbols[i] == a else a
        if len(set(symbols)) < 2:  # every site of one element was changed: keep one of them
            i = int(sites[0])
            symbols[i] = b if symbols[i] == a else a
        atoms.set_chemical_symbols(symbols)
        kind = f"substituted-{proto}"
        if rng.random() < 0.25:
            return kind + "-perturbed", perturbed(rng, atoms)
        return kind, atoms


def check_elements(recipe: TeacherRecipe) -> None:
    """One energy of each element (its first phase) by the truth calculator: ValueError (one line)
    naming an element the calculator cannot compute."""
    for element in recipe.elements:
        atoms = next(iter(recipe.element_phases(element).values()))
        try:
            atoms.calc = recipe.calculator(atoms)
            energy = atoms.get_potential_energy()
        except Exception as err:  # what the calculator raises for an element it lacks varies
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            system = next("-".join(s) for s in recipe.systems if element in s)
            raise ValueError(f"the {recipe.label} calculator cannot compute {element} (system {system}): "
                             f"{type(err).__name__}: {first}") from None
        if not np.isfinite(energy):
            raise ValueError(f"the {recipe.label} calculator gives a non-finite energy for {element}")


def generate_teacher_benchmark(
    out_dir: Union[str, Path],
    calculator: Any = "emt",
    systems: Sequence[str] = DEFAULT_SYSTEMS,
    seed: int = 0,
    n_candidates: int = 100,
    fmax: float = 0.02,
    steps: int = 500,
    margin: float = MARGIN,
    calculator_settings: Optional[Dict[str, Any]] = None,
    progress: bool = True,
) -> Dict[str, Any]:
    """Build the miniature benchmark of ``systems`` with ``calculator`` as the truth in ``out_dir``
    (see the module docstring) and return the contents of ``benchmark.json``.

    Args:
        out_dir: output folder (resumable; tied to these settings and the calculator's provenance).
        calculator: ``emt``, ``chgnet``, ``package.module:Class`` (see :func:`truth_calculator`), a
            Labeller, an ASE calculator or a factory ``make(atoms)``.
        systems: binary systems ``A-B``.
        seed: the random seed (same seed, systems and calculator: same benchmark).
        n_candidates: number of candidate materials (>= 1).
        fmax, steps: the relaxation protocol (eV/Å, FIRE steps): the defaults of ``mlip discovery relax``.
        margin: minimum |hull distance| of a candidate (eV/atom).
        calculator_settings: keyword settings of a named calculator.
        progress: progress bars.

    Raises:
        ValueError: a malformed system, an element the calculator cannot compute, n_candidates < 1, a
            folder built with other settings.
    """
    pairs = parse_systems(systems)
    if int(n_candidates) < 1:
        raise ValueError(f"n_candidates must be >= 1, got {n_candidates}")
    make, label, provenance = truth_calculator(calculator, calculator_settings)
    recipe = TeacherRecipe(pairs, make, label)
    check_elements(recipe)
    settings = {"seed": int(seed), "fmax": float(fmax), "steps": int(steps), "margin": float(margin),
                "systems": ["-".join(s) for s in pairs], "elements": list(recipe.elements),
                "calculator": provenance, "version": 1}
    return build_benchmark(recipe, Path(out_dir), settings, seed=seed, n_candidates=n_candidates, fmax=fmax,
                           steps=steps, margin=margin, progress=progress,
                           what=f"a teacher benchmark ({label})")


__all__ = ["CANDIDATE_PROTOTYPES", "DEFAULT_SYSTEMS", "DIMER_BOX", "KNOWN_PROTOTYPES", "SUBSTITUTION_SIZE",
           "TeacherRecipe", "check_elements", "generate_teacher_benchmark", "parse_systems",
           "truth_calculator"]
