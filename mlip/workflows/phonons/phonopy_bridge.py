"""Small bridges between ASE and phonopy/phono3py shared by the phonon and κ workflows."""

from __future__ import annotations

from typing import Sequence, Union

import numpy as np
from ase import Atoms

from mlip.extras import require


def import_phonopy():
    """``phonopy`` (extra ``phonons``); :class:`mlip.extras.MissingExtraError` when missing."""
    return require("phonopy", "phonons", "phonon calculations")


def import_phono3py():
    """``phono3py`` (extra ``phonons``); :class:`mlip.extras.MissingExtraError` when missing."""
    return require("phono3py", "phonons", "thermal conductivity")


def to_phonopy_atoms(atoms: Atoms):
    """ASE Atoms → ``phonopy.structure.atoms.PhonopyAtoms`` (cell, scaled positions, symbols, masses)."""
    import_phonopy()
    from phonopy.structure.atoms import PhonopyAtoms

    return PhonopyAtoms(
        symbols=atoms.get_chemical_symbols(),
        cell=np.array(atoms.cell.array, dtype=float),
        scaled_positions=atoms.get_scaled_positions(wrap=False),
        masses=atoms.get_masses(),
    )


def to_ase_atoms(phonopy_atoms) -> Atoms:
    """``PhonopyAtoms`` → periodic ASE Atoms."""
    return Atoms(
        symbols=phonopy_atoms.symbols,
        cell=np.array(phonopy_atoms.cell, dtype=float),
        scaled_positions=np.array(phonopy_atoms.scaled_positions, dtype=float),
        masses=np.array(phonopy_atoms.masses, dtype=float),
        pbc=True,
    )


def supercell_matrix(value: Union[int, Sequence[int], Sequence[Sequence[int]], np.ndarray]) -> np.ndarray:
    """A 3×3 integer supercell matrix from ``n``, ``(n1, n2, n3)`` or a 3×3 matrix; ValueError otherwise."""
    message = f"a supercell must be n, (n1, n2, n3) or an integer 3×3 matrix, got {value!r}"
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(message)
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(message) from None
    if not np.all(np.isfinite(arr)) or not np.allclose(arr, np.round(arr)):
        raise ValueError(message)
    if arr.ndim == 0:
        arr = np.eye(3) * arr
    elif arr.shape == (3,):
        arr = np.diag(arr)
    elif arr.shape == (9,):
        arr = arr.reshape(3, 3)
    if arr.shape != (3, 3) or not np.allclose(arr, np.round(arr)):
        raise ValueError(f"a supercell must be n, (n1, n2, n3) or an integer 3×3 matrix, got {value!r}")
    arr = np.round(arr).astype(int)
    if round(abs(np.linalg.det(arr))) < 1:
        raise ValueError(f"supercell matrix {arr.tolist()} is singular")
    return arr


def perpendicular_widths(cell: np.ndarray) -> np.ndarray:
    """Distances between opposite faces of the cell spanned by the rows of ``cell`` [3] (Å)."""
    cell = np.asarray(cell, dtype=float)
    volume = abs(np.linalg.det(cell))
    return np.array([volume / np.linalg.norm(np.cross(cell[(k + 1) % 3], cell[(k + 2) % 3])) for k in range(3)])


__all__ = [
    "import_phono3py",
    "import_phonopy",
    "perpendicular_widths",
    "supercell_matrix",
    "to_ase_atoms",
    "to_phonopy_atoms",
]
