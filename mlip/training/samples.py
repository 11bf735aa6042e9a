"""Labelled structures as the trainer sees them: ASE Atoms whose calculator holds the labels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
from ase import Atoms


@dataclass
class Labels:
    """Reference values of one structure.

    energy: total energy (eV); forces: [n_atoms, 3] (eV/Å); stress: [6] Voigt xx yy zz yz xz xy
    (eV/Å³, ASE sign) or None (no stress label: molecules, clusters).
    """

    energy: float
    forces: Optional[np.ndarray]
    stress: Optional[np.ndarray]


def labels_of(sample, where: str = "") -> Labels:
    """Labels of ``sample``: an ASE Atoms with results in ``atoms.calc.results`` (as ASE's
    extxyz/db readers return them), or an object with ``atoms`` and ``energy``/``forces``/``stress``."""
    if isinstance(sample, Atoms):
        results = dict(getattr(sample.calc, "results", {}) or {})
        energy, forces, stress = results.get("energy"), results.get("forces"), results.get("stress")
        n = len(sample)
    else:
        energy, forces, stress = (getattr(sample, k, None) for k in ("energy", "forces", "stress"))
        n = len(sample.atoms)
    from mlip.data.sample import as_energy, as_forces, as_stress

    if energy is None:
        raise ValueError(f"{where}: no energy label")
    try:
        energy = as_energy(energy, "energy label")
        forces = None if forces is None else as_forces(forces, n, "forces label")
        stress = None if stress is None else as_stress(stress, "stress label")
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    return Labels(energy, forces, stress)


def atoms_of(sample) -> Atoms:
    return sample if isinstance(sample, Atoms) else sample.atoms
