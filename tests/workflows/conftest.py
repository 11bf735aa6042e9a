"""Fixtures of the workflow tests: ``offset_emt``, a calculator class whose perfect crystals carry forces."""

from __future__ import annotations

import numpy as np
import pytest
from ase import Atoms
from ase.calculators.calculator import Calculator, all_changes
from ase.calculators.emt import EMT


class OffsetEMT(Calculator):
    """EMT plus a fixed force on each atom, the same in every structure of a size: the residual forces
    of a model that is invariant only approximately, on top of force constants that are EMT's."""

    implemented_properties = ["energy", "free_energy", "forces", "stress"]

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        a = Atoms(self.atoms.numbers, positions=self.atoms.positions, cell=self.atoms.cell,
                  pbc=self.atoms.pbc)
        a.calc = EMT()
        energy = a.get_potential_energy()
        self.results = {"energy": energy, "free_energy": energy,
                        "forces": a.get_forces() + self.offset(len(a)), "stress": a.get_stress()}

    @staticmethod
    def offset(n_atoms: int) -> np.ndarray:
        """The added forces [n_atoms, 3] (eV/Å)."""
        return np.random.default_rng(n_atoms).normal(scale=0.03, size=(n_atoms, 3))


@pytest.fixture
def offset_emt():
    """The class :class:`OffsetEMT` (tests make their own instances)."""
    return OffsetEMT
