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
    if energy is None:
        raise ValueError(f"{where}: no energy label")
    energy = float(energy)
    if not np.isfinite(energy):
        raise ValueError(f"{where}: energy label is not finite")
    if forces is not None:
        forces = np.asarray(forces, dtype=float)
        if forces.shape != (n, 3) or not np.all(np.isfinite(forces)):
            raise ValueError(f"{where}: forces must be finite with shape ({n}, 3), got {forces.shape}")
    if stress is not None:
        stress = np.asarray(stress, dtype=float).reshape(-1)
        if stress.size == 9:
            s = stress.reshape(3, 3)
            stress = np.array([s[0, 0], s[1, 1], s[2, 2], s[1, 2], s[0, 2], s[0, 1]])
        if stress.size != 6 or not np.all(np.isfinite(stress)):
            raise ValueError(f"{where}: stress must be 6 (Voigt) or 9 finite values")
    return Labels(energy, forces, stress)


def atoms_of(sample) -> Atoms:
    return sample if isinstance(sample, Atoms) else sample.atoms
