"""One labelled structure (:class:`Sample`), label checks and an extxyz writer.

Units and conventions (the same as every ASE calculator):

* ``energy``: total energy, float, eV.
* ``forces``: float64 array [n_atoms, 3], eV/Å.
* ``stress``: float64 array [6] in Voigt order (xx, yy, zz, yz, xz, xy), eV/Å³, ASE sign
  (σ = (1/V) ∂E/∂ε: a compressed cell has a *negative* diagonal, pressure = −trace/3).
  ``None`` when the structure has no stress label (molecules, clusters, or data without stress).
  3×3 (or 9 flat values) inputs are converted to Voigt from their symmetric part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Sequence, Union

import numpy as np

from mlip.structure_checks import validate_atoms

__all__ = ["Sample", "write_extxyz"]


@dataclass
class Sample:
    """A structure with its reference labels.

    Attributes:
        atoms: ``ase.Atoms`` (positions Å, cell, pbc, numbers; no calculator attached). ``atoms.info``
            keeps the file's other per-frame metadata (e.g. ``config_type``), without the label keys.
        energy: total energy (eV).
        forces: [n_atoms, 3] forces (eV/Å).
        stress: [6] Voigt stress (xx, yy, zz, yz, xz, xy), eV/Å³, ASE sign; ``None`` if unlabelled.
        source: the file the sample was read from ("" when built in memory).
        index: 0-based position of the frame in that file (the order it was read in).
        group: correlation group for grouped splits (MPtrj: the mp_id; extxyz/db: ``info["group"]``;
            ``None`` when absent: the frame is its own group).
        frame_id: the frame's identifier in the file where it has one (MPtrj frame key, ``id=N`` for
            an ASE database row); ``None`` otherwise.
    """

    atoms: object
    energy: float
    forces: np.ndarray
    stress: Optional[np.ndarray] = None
    source: str = ""
    index: int = 0
    group: Optional[str] = None
    frame_id: Optional[str] = None

    @property
    def n_atoms(self) -> int:
        return len(self.atoms)

    def to_atoms(self):
        """A copy of the structure with the labels in a ``SinglePointCalculator`` (ASE's usual carrier)."""
        from ase.calculators.singlepoint import SinglePointCalculator

        atoms = self.atoms.copy()
        results = {"energy": float(self.energy), "forces": np.array(self.forces, dtype=np.float64)}
        if self.stress is not None:
            results["stress"] = np.array(self.stress, dtype=np.float64)
        atoms.calc = SinglePointCalculator(atoms, **results)
        return atoms

    def where(self) -> str:
        """Human-readable location, used in error messages."""
        return frame_location(self.source, self.index, group=self.group, id=self.frame_id)


def frame_location(source, index, **ids) -> str:
    """``"<file>: frame <index> (key=value, ...)"`` for error messages; ids that are None are left out."""
    where = f"{source or '<memory>'}: frame {index}"
    parts = [f"{k}={v}" for k, v in ids.items() if v is not None]
    return where + (f" ({', '.join(parts)})" if parts else "")


# ----------------------------------------------------------------------------------- label checks
def as_energy(value, name: str = "energy") -> float:
    """A finite float, or ValueError naming what is wrong."""
    if isinstance(value, (str, bytes, bool, np.bool_)) or value is None:
        raise ValueError(f"{name} must be a number, got {value!r}")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if arr.size != 1:
        raise ValueError(f"{name} must be a single number, got shape {list(arr.shape)}")
    energy = float(arr.reshape(()))
    if not math.isfinite(energy):
        raise ValueError(f"{name} is not finite ({energy})")
    return energy


def as_forces(value, n_atoms: int, name: str = "forces") -> np.ndarray:
    """[n_atoms, 3] finite float64 array, or ValueError."""
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an [n_atoms, 3] array of numbers") from None
    if arr.shape != (n_atoms, 3):
        raise ValueError(f"{name} has shape {list(arr.shape)}, expected [{n_atoms}, 3] (n_atoms = {n_atoms})")
    if not np.all(np.isfinite(arr)):
        bad = np.where(~np.all(np.isfinite(arr), axis=1))[0]
        raise ValueError(f"{name} contains NaN or inf (atoms {bad[:10].tolist()})")
    return arr


def as_stress(value, name: str = "stress") -> np.ndarray:
    """Voigt-6 (xx, yy, zz, yz, xz, xy) float64 from 6 values, a 3×3 matrix or 9 flat values.

    A 3×3 input contributes its symmetric part (so row- or column-major order of 9 values gives the same
    result). No sign or unit change happens here.
    """
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be 6 (Voigt) or 9 (3×3) numbers") from None
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    if arr.size == 6 and arr.ndim == 1:
        return arr
    if arr.size == 9 and (arr.shape == (9,) or arr.shape == (3, 3)):
        m = arr.reshape(3, 3)
        m = 0.5 * (m + m.T)
        return np.array([m[0, 0], m[1, 1], m[2, 2], m[1, 2], m[0, 2], m[0, 1]])
    raise ValueError(f"{name} has shape {list(arr.shape)}: expected 6 Voigt values, 9 values or a 3×3 matrix")


def check_structure(atoms, allowed_numbers: Optional[Sequence[int]] = None) -> None:
    """Geometry checks of :func:`mlip.structure_checks.validate_atoms` plus known elements (and ``allowed_numbers``)."""
    from ase.data import chemical_symbols

    numbers = np.asarray(atoms.numbers)
    bad = sorted(set(int(z) for z in numbers if not 1 <= int(z) < len(chemical_symbols)))
    if bad:
        raise ValueError(f"unknown element(s) with atomic number(s) {bad}")
    if allowed_numbers is not None:
        allowed = set(int(z) for z in allowed_numbers)
        unknown = sorted(set(int(z) for z in numbers) - allowed)
        if unknown:
            raise ValueError(
                f"element(s) {', '.join(chemical_symbols[z] for z in unknown)} not among the allowed species "
                f"({', '.join(chemical_symbols[z] for z in sorted(allowed))})"
            )
    validate_atoms(atoms)


def make_sample(atoms, energy, forces, stress, *, source="", index=0, group=None, frame_id=None,
                allowed_numbers=None, names=("energy", "forces", "stress")) -> Sample:
    """Check a structure and its raw labels, convert them, and build a :class:`Sample` (ValueError without location)."""
    check_structure(atoms, allowed_numbers)
    e = as_energy(energy, names[0])
    f = as_forces(forces, len(atoms), names[1])
    s = None
    if stress is not None:
        s = as_stress(stress, names[2])
        if atoms.cell.rank != 3:
            raise ValueError(
                f"{names[2]} given for a structure without a 3-D cell (volume undefined); "
                "drop it (read_stress=False) or give the structure a cell"
            )
    atoms.calc = None
    return Sample(atoms=atoms, energy=e, forces=f, stress=s, source=str(source), index=int(index),
                  group=None if group is None else str(group), frame_id=frame_id)


# ------------------------------------------------------------------------------------------ writing
def write_extxyz(samples: Iterable[Union[Sample, object]], path: Union[str, Path], atomic: bool = True) -> Path:
    """Write samples (or ``ase.Atoms`` with a calculator holding results) as extended XYZ.

    Labels go under ASE's standard keys (``energy``, ``forces``, ``stress``), so ASE, MACE, NequIP and
    this package's :func:`mlip.data.read_dataset` read them directly. Positions and forces are written by
    ASE with 8 decimals; energy, stress and cell with full precision. With ``atomic=True`` the file is
    written through :func:`mlip.io.atomic_write` (no half-written file on interruption).
    """
    import ase.io

    frames = []
    for s in samples:
        frames.append(s.to_atoms() if isinstance(s, Sample) else s)
    path = Path(path)

    def write(target):
        ase.io.write(str(target), frames, format="extxyz")

    if atomic:
        from mlip.io import atomic_write

        atomic_write(path, write)
    else:
        write(path)
    return path
