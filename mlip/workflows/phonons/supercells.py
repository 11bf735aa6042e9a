"""Supercells for finite-displacement force constants: parsing, widths, choosing one, refusing small ones.

Shared by the phonon (:mod:`mlip.workflows.phonons.harmonic`) and κ (:mod:`mlip.workflows.phonons.kappa`)
workflows. A supercell is an integer 3×3 matrix M acting on the rows of the unit cell
(supercell = ``M @ atoms.cell``); its *widths* are the distances between opposite faces (Å).

The workflows refuse supercells narrower than a minimum width with :func:`check_supercell_width`,
but each sets its own minimum, on purpose:

* harmonic phonons: 2 × the model's cutoff (``harmonic.MIN_WIDTH_CUTOFF_FACTOR``), so that no atom
  sees two periodic images of a displaced atom (the force constants would alias them);
* κ: 1 × the cutoff (``kappa.MIN_WIDTH_CUTOFF_FACTOR``: Matbench Discovery's ≈ 7 Å fc3 supercells
  must pass with 6 Å models) and, for fc3, 2.5 × the nearest-neighbour distance
  (``kappa.MIN_WIDTH_NN_FACTOR``, the linewidth rule).
"""

from __future__ import annotations

import math
from typing import Callable, Iterator, Optional, Tuple, Union

import numpy as np
from ase import Atoms

from mlip.workflows.phonons.phonopy_bridge import perpendicular_widths, supercell_matrix


def parse_supercell(value, name: str = "supercell") -> np.ndarray:
    """The 3×3 integer matrix of a supercell argument ``value`` (``n``, ``(n1, n2, n3)`` or a 3×3
    matrix). ValueError, prefixed with the argument's ``name``, for a malformed, singular or
    left-handed (negative determinant) one."""
    try:
        matrix = supercell_matrix(value)
    except (TypeError, ValueError) as err:
        message = str(err)
        if "supercell" not in message:
            message = f"a supercell must be n, (n1, n2, n3) or an integer 3×3 matrix, got {value!r}"
        raise ValueError(message if message.startswith(name) else f"{name}: {message}") from None
    if np.linalg.det(matrix) < 0:
        raise ValueError(f"{name} matrix {matrix.tolist()} is left-handed (negative determinant)")
    return matrix


def format_supercell(value) -> str:
    """A supercell as one would pass it: a tuple ``(n1, n2, n3)`` as is, a diagonal matrix as
    ``[n1, n2, n3]``, any other as its nested list."""
    if isinstance(value, tuple):
        return str(tuple(int(x) for x in value))
    matrix = np.asarray(supercell_matrix(value), dtype=int)
    if np.count_nonzero(matrix - np.diag(np.diagonal(matrix))) == 0:
        return str([int(x) for x in np.diagonal(matrix)])
    return str(matrix.tolist())


def reduced_widths(cell) -> np.ndarray:
    """Perpendicular widths [3] (Å) of the Minkowski-reduced lattice of ``cell`` (rows): a property
    of the lattice, not of the basis chosen for it (skewed bases have misleadingly small widths)."""
    from ase.geometry import minkowski_reduce

    reduced, _ = minkowski_reduce(np.asarray(cell, dtype=float))
    return perpendicular_widths(reduced)


def diagonal_supercell(atoms: Atoms, min_width: float) -> Tuple[int, int, int]:
    """The smallest diagonal supercell ``(n1, n2, n3)`` of ``atoms.cell`` whose perpendicular
    widths, in the basis of ``atoms.cell``, are all ≥ ``min_width`` (Å)."""
    if not (min_width > 0 and math.isfinite(min_width)):
        raise ValueError(f"min_width must be a positive length in Å, got {min_width}")
    widths = perpendicular_widths(atoms.cell.array)
    return tuple(max(1, int(math.ceil(min_width / w - 1e-9))) for w in widths)  # type: ignore[return-value]


def _candidate_supercells(atoms: Atoms, min_width: float) -> Iterator[np.ndarray]:
    """Diagonal multiples of the cell and near-cubic supercells (rows ≈ L·I) for L ≥ min_width."""
    yield np.diag(diagonal_supercell(atoms, min_width)).astype(int)
    inverse = np.linalg.inv(atoms.cell.array)
    for length in np.linspace(min_width, 2.0 * min_width, 41):
        matrix = np.round(length * inverse.T).astype(int)
        det = round(np.linalg.det(matrix))
        if det == 0:
            continue
        if det < 0:
            matrix[0] *= -1
        yield matrix


def suggest_supercell(atoms: Atoms, min_width: float) -> np.ndarray:
    """A supercell matrix [3, 3] of ``atoms.cell`` with few atoms whose Minkowski-reduced
    perpendicular widths are all ≥ ``min_width`` (Å): the smallest among the diagonal multiples and
    near-cubic shapes (e.g. the conventional cell × 2 for a 1-atom fcc cell)."""
    if not (min_width > 0 and math.isfinite(min_width)):
        raise ValueError(f"min_width must be a positive length in Å, got {min_width}")
    best, best_det = None, None
    for matrix in _candidate_supercells(atoms, min_width):
        det = round(abs(np.linalg.det(matrix)))
        if best_det is not None and det >= best_det:
            continue
        if reduced_widths(matrix @ atoms.cell.array).min() >= min_width - 1e-9:
            best, best_det = matrix, det
    if best is None:  # cannot happen for the diagonal candidate, kept as a guard
        raise ValueError(f"no supercell found with widths >= {min_width:g} Å")
    return best


def check_supercell_width(
    atoms: Atoms,
    matrix,
    min_width: float,
    reason: str,
    *,
    name: str = "supercell",
    suggest: Callable[[Atoms, float], Union[np.ndarray, Tuple[int, int, int]]] = suggest_supercell,
    widths_of: Callable[[np.ndarray], np.ndarray] = reduced_widths,
) -> np.ndarray:
    """Refuse the supercell ``matrix`` of ``atoms`` when it is narrower than ``min_width`` (Å).

    Args:
        atoms: the unit cell.
        matrix: the supercell (anything :func:`parse_supercell` accepts).
        min_width: the smallest acceptable width (Å), e.g. a workflow's factor × the model's cutoff;
            0 (or less) accepts everything.
        reason: what ``min_width`` is and why, for the message (``"2 × the model's cutoff of 6 Å:
            ..."``).
        name: the argument's name in the message (``"supercell"``, ``"fc3_supercell"``).
        suggest: ``suggest(atoms, min_width)`` → a supercell wide enough, named in the message
            (:func:`suggest_supercell`, or :func:`diagonal_supercell` for diagonal ones).
        widths_of: the widths [3] (Å) of a supercell's cell (rows): :func:`reduced_widths`
            (a property of the lattice) or the perpendicular widths in the given basis
            (:func:`mlip.workflows.phonons.phonopy_bridge.perpendicular_widths`), which must be the measure
            ``suggest`` sizes its supercells by.

    Returns:
        the supercell's widths [3] (Å) by ``widths_of``.

    Raises:
        ValueError: "<name>=[...] (<n> atoms) is too small for <formula>: ... must be at least
            <min_width> Å = <reason>. Use <name>=<suggestion> (...) or any supercell at least ...".
    """
    matrix = supercell_matrix(matrix)
    widths = widths_of(matrix @ atoms.cell.array)
    if min_width <= 0 or widths.min() + 1e-6 >= min_width:  # 1e-6 Å: round-off
        return widths
    good = suggest(atoms, min_width)
    good_matrix = supercell_matrix(good)
    n_atoms = round(abs(np.linalg.det(matrix))) * len(atoms)
    n_good = round(abs(np.linalg.det(good_matrix))) * len(atoms)
    good_widths = widths_of(good_matrix @ atoms.cell.array)
    raise ValueError(
        f"{name}={format_supercell(matrix)} ({n_atoms} atoms) is too small for "
        f"{atoms.get_chemical_formula()}: the widths of the supercell are {np.round(widths, 2).tolist()} Å, "
        f"but must be at least {min_width:.2f} Å = {reason}. Use {name}={format_supercell(good)} "
        f"({n_good} atoms, widths {np.round(good_widths, 2).tolist()} Å) or any supercell at least "
        f"{min_width:.2f} Å wide"
    )


def cutoff_width(cutoff: Optional[float], factor: float) -> float:
    """The smallest supercell width (Å) a model with interaction ``cutoff`` (Å; None: a model
    without one, no requirement → 0) allows under a workflow's ``factor``."""
    return 0.0 if cutoff is None else float(factor) * float(cutoff)


__all__ = [
    "check_supercell_width",
    "cutoff_width",
    "diagonal_supercell",
    "format_supercell",
    "parse_supercell",
    "reduced_widths",
    "suggest_supercell",
]
