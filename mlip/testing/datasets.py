"""Small labelled data sets for tests of mlip and of code built on it."""

from __future__ import annotations

from typing import List

import numpy as np


def emt_cells(n: int, seed: int = 0, label: bool = True) -> List:
    """``n`` rattled 4-atom fcc cells of Cu with about 30 % Au (``ase.Atoms``), reproducible from ``seed``;
    with ``label`` their EMT energy, forces and stress are attached as a ``SinglePointCalculator``."""
    from ase.build import bulk
    from ase.calculators.emt import EMT
    from ase.calculators.singlepoint import SinglePointCalculator

    rng = np.random.default_rng(seed)
    cells = []
    for k in range(n):
        atoms = bulk("Cu", "fcc", a=3.6 + 0.1 * rng.random(), cubic=True)
        atoms.rattle(0.05, seed=seed * 1000 + k)
        atoms.numbers[rng.random(4) < 0.3] = 79
        if label:
            atoms.calc = EMT()
            e, f, s = atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()
            atoms.calc = SinglePointCalculator(atoms, energy=e, forces=f, stress=s)
        cells.append(atoms)
    return cells


def emt_isolated_atom(symbol: str):
    """One ``symbol`` atom in vacuum (no cell) with its EMT energy and zero forces attached as a
    ``SinglePointCalculator``: what ``reference_energies: isolated_atoms`` reads."""
    from ase import Atoms
    from ase.calculators.emt import EMT
    from ase.calculators.singlepoint import SinglePointCalculator

    atoms = Atoms(symbol, positions=[[0.0, 0.0, 0.0]])
    atoms.calc = EMT()
    energy = atoms.get_potential_energy()
    atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=np.zeros((1, 3)))
    return atoms
