"""A miniature Matbench Discovery in which ASE's EMT plays the role of DFT.

Same protocol as the real benchmark, over Al, Cu, Ag, Au, Ni, Pd and Pt, built from a seed in a
few minutes on two cores:

* elemental references: fcc, bcc and hcp of each element relaxed with EMT (FIRE +
  FrechetCellFilter, the relaxation protocol of :mod:`.relax_campaign`); μ_el = the lowest energy
  per atom (eV/atom);
* the "known" hull (the role of the Materials Project): the elements and, for each of the 21
  pairs, the L1₂ compounds A₃B and AB₃, relaxed; the hull is pymatgen's ``PhaseDiagram`` of them;
* candidates (the role of WBM): ordered prototypes that are not on the known hull (L1₀ and B2 AB,
  D0₂₂ A₃B, B1 AB), random substitutions on fcc supercells of 8 or 16 atoms with two or three
  elements, and rattled (0.05 Å) and strained (±3 %) copies of some of them, each given unrelaxed;
  their reference relaxed structure, energy, formation energy and hull distance come from the
  same EMT relaxation. Most are unstable; those below the known hull are the "discoveries".
  Candidates whose reference relaxation did not converge, or whose hull distance lies within
  ``margin`` (1 meV/atom) of zero, are replaced by new ones, so that the stability labels do not
  hinge on the 4-decimal rounding of the submission file.

The machinery (files, cache, hull, margin rule) is :mod:`.mini_benchmark`'s; this module is its
recipe of EMT structures (:class:`EMTRecipe`). Files: see :mod:`.mini_benchmark`. Every reference
relaxation is cached in ``out_dir/work/`` as it finishes, so an interrupted generation resumes where
it stopped (the folder is tied to its seed and settings).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple, Union

import numpy as np
from ase import Atoms
from ase.build import bulk

from mlip.workflows.discovery.mini_benchmark import MARGIN, Recipe, build_benchmark, perturbed

ELEMENTS = ("Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt")


def _fcc_conventional(species: List[str], a: float) -> Atoms:
    """The 4-atom cubic fcc cell with ``species`` at (0,0,0), (0,½,½), (½,0,½), (½,½,0)."""
    frac = np.array([[0, 0, 0], [0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]])
    return Atoms(species, scaled_positions=frac, cell=np.eye(3) * a, pbc=True)


def prototype(name: str, a_el: str, b_el: str, a: float) -> Atoms:
    """An ordered binary prototype with fcc-like lattice constant ``a`` (Å) as a starting guess:
    ``L12`` (A₃B), ``L10`` (AB), ``B2`` (AB), ``D022`` (A₃B), ``B1`` (AB)."""
    if name == "L12":
        return _fcc_conventional([b_el, a_el, a_el, a_el], a)
    if name == "L10":
        atoms = _fcc_conventional([a_el, a_el, b_el, b_el], a)
        return atoms
    if name == "B2":
        ab = a / 2 ** (1 / 3)  # same volume per atom as fcc
        return Atoms([a_el, b_el], scaled_positions=[[0, 0, 0], [0.5, 0.5, 0.5]], cell=np.eye(3) * ab, pbc=True)
    if name == "D022":
        cell = np.diag([a, a, 2 * a])
        frac = np.array([[0, 0, 0], [0, 0.5, 0.25], [0.5, 0, 0.25], [0.5, 0.5, 0],
                         [0, 0, 0.5], [0, 0.5, 0.75], [0.5, 0, 0.75], [0.5, 0.5, 0.5]])
        species = [b_el, a_el, a_el, a_el, a_el, a_el, a_el, b_el]
        return Atoms(species, scaled_positions=frac, cell=cell, pbc=True)
    if name == "B1":
        ar = a * 2 ** (1 / 3)  # rock salt: 8 atoms per cube; same volume per atom as fcc
        frac = np.array([[0, 0, 0], [0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0],
                         [0.5, 0.5, 0.5], [0.5, 0, 0], [0, 0.5, 0], [0, 0, 0.5]])
        return Atoms([a_el] * 4 + [b_el] * 4, scaled_positions=frac, cell=np.eye(3) * ar, pbc=True)
    raise ValueError(f"unknown prototype {name!r}")


def _element_phases(el: str, a_fcc: float) -> Dict[str, Atoms]:
    return {
        "fcc": bulk(el, "fcc", a=a_fcc),
        "bcc": bulk(el, "bcc", a=a_fcc / 2 ** (1 / 3)),
        "hcp": bulk(el, "hcp", a=a_fcc / math.sqrt(2), c=a_fcc / math.sqrt(2) * math.sqrt(8 / 3)),
    }


def _random_candidate(rng: np.random.Generator, a_fcc: Dict[str, float]) -> Tuple[str, Atoms]:
    n_el = 2 if rng.random() < 0.7 else 3
    elements = list(rng.choice(ELEMENTS, size=n_el, replace=False))
    reps = [(2, 1, 1), (2, 2, 1)][int(rng.random() < 0.4)]
    n = 4 * int(np.prod(reps))
    species = list(elements) + list(rng.choice(elements, size=n - n_el))
    rng.shuffle(species)
    a = float(np.mean([a_fcc[el] for el in species]))  # Vegard's law as the starting guess
    atoms = _fcc_conventional(["X"] * 4, a).repeat(reps)
    atoms.set_chemical_symbols(species)
    return f"random-{n}", atoms



def _fcc_lattice_constant(atoms: Atoms) -> float:
    """The conventional fcc lattice constant (Å) with the volume per atom of ``atoms``."""
    return (4 * atoms.get_volume() / len(atoms)) ** (1 / 3)


class EMTRecipe(Recipe):
    """The structures of the EMT benchmark (see the module docstring)."""

    name = "emt"
    label = "EMT"
    description = "miniature Matbench Discovery: ASE EMT plays DFT (mlip discovery emt-benchmark)"
    elements = ELEMENTS
    min_candidates = 4
    require_both_classes = True

    def __init__(self):
        from ase.calculators.emt import EMT

        self._emt = EMT()

    def calculator(self, atoms: Atoms):
        return self._emt

    def element_phases(self, element: str) -> Dict[str, Atoms]:
        a_guess = bulk(element, "fcc").cell.cellpar()[0] * math.sqrt(2)  # conventional a
        return _element_phases(element, a_guess)

    def known_compounds(self, elements: Dict[str, Atoms]) -> List[Tuple[str, str, Atoms]]:
        a_fcc = {el: _fcc_lattice_constant(atoms) for el, atoms in elements.items()}
        out = []
        for a_el, b_el in itertools.combinations(ELEMENTS, 2):
            for maj, mino in ((a_el, b_el), (b_el, a_el)):
                a0 = 0.75 * a_fcc[maj] + 0.25 * a_fcc[mino]
                out.append((f"L12-{maj}3{mino}", "L12", prototype("L12", maj, mino, a0)))
        return out

    def hull_groups(self) -> Dict[str, Tuple[str, ...]]:
        return {"all": ELEMENTS}

    def candidates(self, rng: np.random.Generator, elements: Dict[str, Atoms],
                   n_candidates: int) -> Callable[[int], Tuple[str, Atoms]]:
        """Prototypes first (shuffled, at most a third of the candidates), then random substitutions."""
        a_fcc = {el: _fcc_lattice_constant(atoms) for el, atoms in elements.items()}
        protos = [(name, x, y) for x, y in itertools.permutations(ELEMENTS, 2)
                  for name in ("L10", "B2", "D022", "B1") if name == "D022" or x < y]
        order = rng.permutation(len(protos))
        n_protos = min(len(protos), int(n_candidates) // 3)
        pool_protos = [protos[k] for k in order[:n_protos]]

        def next_candidate(k: int) -> Tuple[str, Atoms]:
            if k < len(pool_protos):
                name, x, y = pool_protos[k]
                frac_x = 0.75 if name == "D022" else 0.5
                return name, prototype(name, x, y, frac_x * a_fcc[x] + (1 - frac_x) * a_fcc[y])
            kind, atoms = _random_candidate(rng, a_fcc)
            if rng.random() < 0.25:
                return kind + "-perturbed", perturbed(rng, atoms)
            return kind, atoms

        return next_candidate


def generate_emt_benchmark(
    out_dir: Union[str, Path],
    seed: int = 0,
    n_candidates: int = 300,
    fmax: float = 0.02,
    steps: int = 500,
    margin: float = MARGIN,
    progress: bool = True,
) -> Dict[str, Any]:
    """Build the miniature benchmark in ``out_dir`` (see the module docstring) and return the
    contents of ``benchmark.json``.

    Args:
        out_dir: output folder.
        seed: the random seed (same seed, same benchmark).
        n_candidates: number of candidate materials (>= 4).
        fmax, steps: reference relaxation protocol (eV/Å, FIRE steps): the defaults of
            ``mlip discovery relax``.
        margin: minimum |hull distance| of a candidate (eV/atom).
        progress: progress bars.
    """
    settings = {"seed": int(seed), "fmax": float(fmax), "steps": int(steps), "margin": float(margin),
                "elements": list(ELEMENTS), "version": 1}
    return build_benchmark(EMTRecipe(), Path(out_dir), settings, seed=seed, n_candidates=n_candidates,
                           fmax=fmax, steps=steps, margin=margin, progress=progress)


__all__ = ["ELEMENTS", "EMTRecipe", "MARGIN", "generate_emt_benchmark", "prototype"]
