"""Labelled structures as the trainer sees them: ASE Atoms whose calculator holds the labels."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

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


#: per-frame loss weights in ``atoms.info`` (MACE's names): ``config_weight`` scales the frame's three
#: terms, ``config_energy_weight``, ``config_forces_weight`` and ``config_stress_weight`` one each
WEIGHT_KEYS = ("config_weight", "config_energy_weight", "config_forces_weight", "config_stress_weight")


def loss_weights(sample, where: str = "") -> Tuple[float, float, float]:
    """The frame's loss weights of energy, forces and stress (:data:`WEIGHT_KEYS` in its info, each 1 when
    absent): e.g. 0 for the energy and stress of a label made on a coarser k-point mesh, which carry the
    mesh's cell-dependent error, while its forces are good. ValueError for a weight that is not a finite number ≥ 0."""
    info = atoms_of(sample).info
    values = []
    for key in WEIGHT_KEYS:
        value = info.get(key, 1.0)
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if isinstance(value, bool) or not math.isfinite(number) or number < 0:
            raise ValueError(f"{where}: {key} {value!r} is not a finite number ≥ 0")
        values.append(number)
    frame = values[0]
    return frame * values[1], frame * values[2], frame * values[3]


def batch_targets(samples: Sequence, dtype: torch.dtype, device) -> Dict[str, torch.Tensor]:
    """The labels of ``samples`` as the loss takes them: ``energy`` [n] (eV), ``n_atoms`` [n],
    ``forces`` [n_atoms_total, 3] (eV/Å; only when every sample has forces), ``stress`` [n, 6]
    (eV/Å³, NaN rows for samples without one) and ``volume_per_atom`` [n] (Å³; NaN unless the
    cell is 3-dimensional), and the loss weights (:func:`loss_weights`) ``energy_weight`` [n],
    ``forces_weight`` [n_atoms_total] (with forces) and ``stress_weight`` [n], all of ``dtype`` on
    ``device``."""
    labels = [labels_of(s) for s in samples]
    sizes = [len(atoms_of(s)) for s in samples]
    weights = np.array([loss_weights(s) for s in samples], dtype=np.float64).reshape(len(samples), 3)
    n_atoms = torch.tensor(sizes, dtype=dtype, device=device)
    out = {"energy": torch.tensor([lab.energy for lab in labels], dtype=dtype, device=device),
           "n_atoms": n_atoms, "energy_weight": torch.tensor(weights[:, 0], dtype=dtype, device=device),
           "stress_weight": torch.tensor(weights[:, 2], dtype=dtype, device=device)}
    if all(lab.forces is not None for lab in labels):
        out["forces"] = torch.tensor(np.concatenate([lab.forces for lab in labels]), dtype=dtype,
                                     device=device)
        out["forces_weight"] = torch.tensor(np.repeat(weights[:, 1], sizes), dtype=dtype, device=device)
    stress = [lab.stress if lab.stress is not None else np.full(6, np.nan) for lab in labels]
    out["stress"] = torch.tensor(np.stack(stress), dtype=dtype, device=device)
    out["volume_per_atom"] = torch.tensor(
        [abs(atoms_of(s).cell.volume) / len(atoms_of(s)) if atoms_of(s).cell.rank == 3 else np.nan
         for s in samples],
        dtype=dtype, device=device)
    return out
