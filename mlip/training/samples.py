"""Labelled structures as the trainer sees them: ASE Atoms whose calculator holds the labels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence

import numpy as np
import torch
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


def config_type_of(sample) -> str:
    """The ``config_type`` in the structure's info ("" when it has none)."""
    return str(atoms_of(sample).info.get("config_type", ""))


def without_config_types(samples: Sequence, names: Sequence[str]) -> list:
    """``samples`` less those whose ``config_type`` is one of ``names`` (``data.exclude_config_types``)."""
    names = {str(n) for n in names}
    return [s for s in samples if config_type_of(s) not in names]


def batch_targets(samples: Sequence, dtype: torch.dtype, device) -> Dict[str, torch.Tensor]:
    """The labels of ``samples`` as the loss takes them: ``energy`` [n] (eV), ``n_atoms`` [n],
    ``forces`` [n_atoms_total, 3] (eV/Å; only when every sample has forces), ``stress`` [n, 6]
    (eV/Å³, NaN rows for samples without one) and ``volume_per_atom`` [n] (Å³; NaN unless the
    cell is 3-dimensional), all of ``dtype`` on ``device``."""
    labels = [labels_of(s) for s in samples]
    n_atoms = torch.tensor([len(atoms_of(s)) for s in samples], dtype=dtype, device=device)
    out = {"energy": torch.tensor([lab.energy for lab in labels], dtype=dtype, device=device),
           "n_atoms": n_atoms}
    if all(lab.forces is not None for lab in labels):
        out["forces"] = torch.tensor(np.concatenate([lab.forces for lab in labels]), dtype=dtype,
                                     device=device)
    stress = [lab.stress if lab.stress is not None else np.full(6, np.nan) for lab in labels]
    out["stress"] = torch.tensor(np.stack(stress), dtype=dtype, device=device)
    out["volume_per_atom"] = torch.tensor(
        [abs(atoms_of(s).cell.volume) / len(atoms_of(s)) if atoms_of(s).cell.rank == 3 else np.nan
         for s in samples],
        dtype=dtype, device=device)
    return out
