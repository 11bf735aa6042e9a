"""Checks of a structure before any neighbour list or model sees it: :func:`validate_atoms`
rejects what no model can evaluate (empty, non-finite, a degenerate periodic cell, unknown
elements, a periodic cell so small for the cutoff that the neighbour list would explode,
:func:`estimate_neighbors_per_atom`), with a ValueError that names the problem."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

__all__ = ["MAX_NEIGHBORS_PER_ATOM", "estimate_edges", "estimate_neighbors_per_atom", "validate_atoms"]

# Refusal bound for the estimated number of neighbours of an atom within the cutoff (periodic
# images included). The densest solids hold about 0.2 atoms/Å³ (diamond 0.18, Be 0.12, Cu 0.085),
# i.e. 100-200 neighbours within 6 Å, and a few hundred when compressed to half their volume; 2000
# is several times that at the cutoffs in use. A periodic cell much smaller than any bond (a 0.1 Å
# cube, a cell given in nm or Bohr mistaken for Å, a lattice vector of 0.01 Å) gives thousands to
# millions of images per atom, whose neighbour list would need gigabytes before any model runs.
MAX_NEIGHBORS_PER_ATOM = 2000

# Enumerating lattice points within the cutoff stops after this many candidate base points
# (the average count is then used instead: such a lattice is absurdly dense anyway).
_MAX_LATTICE_ENUMERATION = 1 << 24

# Bins per cutoff length when bounding the atoms within reach across non-periodic directions
# (finer bins: a tighter bound, more bins to visit).
_SUBDIVISIONS = 4


def _ball_volume(k: int, r: float) -> float:
    """Volume of a k-dimensional ball of radius r (k = 1, 2, 3)."""
    return (2.0 * r, np.pi * r * r, 4.0 / 3.0 * np.pi * r**3)[k - 1]


def _lattice_points_in_ball(lattice: np.ndarray, r: float, stop: float) -> float:
    """Number of lattice vectors T = Σ n_p·lattice[p] with |T| < r (T = 0 included).

    ``lattice`` is [k, 3] with independent rows. The integer coefficients obey |n_p| < r / h_p,
    h_p the height of the lattice cell along the reciprocal vector p (within the lattice's span);
    the points are enumerated over all rows but the one with the widest range, along which the
    count is solved exactly (a quadratic inequality). Counting stops once it exceeds ``stop``, and
    returns ``inf`` if the enumeration would exceed ``_MAX_LATTICE_ENUMERATION`` base points.
    """
    k = lattice.shape[0]
    recip = np.linalg.solve(lattice @ lattice.T, lattice)  # rows b_p with a_q · b_p = δ_qp
    span = r * np.linalg.norm(recip, axis=1)  # r / h_p
    q = int(np.argmax(span))
    others = [p for p in range(k) if p != q]
    n_max = [int(np.floor(span[p])) for p in others]
    n_base = float(np.prod([2.0 * n + 1.0 for n in n_max]))
    if n_base > _MAX_LATTICE_ENUMERATION:
        return float("inf")
    n_base = int(n_base)
    a = lattice[q]
    aa = float(a @ a)
    count = 0.0
    chunk = 1 << 20
    for start in range(0, n_base, chunk):
        flat = np.arange(start, min(start + chunk, n_base))
        v = np.zeros((flat.size, 3))
        for p, n in zip(others, n_max):
            flat, digit = np.divmod(flat, 2 * n + 1)
            v += (digit - n)[:, None].astype(np.float64) * lattice[p][None, :]
        # integers m with |v + m·a|² < r²: aa·m² + 2(v·a)·m + (|v|² − r²) < 0
        va = v @ a
        disc = va * va - aa * (np.einsum("ij,ij->i", v, v) - r * r)
        ok = disc > 0
        root = np.sqrt(disc[ok])
        lo = (-va[ok] - root) / aa
        hi = (-va[ok] + root) / aa
        count += float(np.maximum(np.ceil(hi) - np.floor(lo) - 1.0, 0.0).sum())
        if count > stop:
            break
    return count


def _max_weighted_atoms_within(proj: np.ndarray, r: float, k: int) -> float:
    """Upper bound on max_i Σ_j (1 − d_ij²/r²)^(k/2), j over the points of ``proj`` [n, m ≤ 2]
    within r.

    The sum is the number of points within reach of point i, each weighted by the fraction of a
    k-dimensional ball of radius r left at distance d_ij from its centre. Points are binned in
    cubes of side r/s (s = _SUBDIVISIONS); the (2s+1)^m cubes around a point's cube contain every
    point within r of it, and each cube is weighted with the smallest distance possible between
    points of the two cubes. Bin indices are capped at 2^30 (points farther than 2^30·r/s apart
    may share a bin, which can only raise the bound).
    """
    m = proj.shape[1]
    side = r / _SUBDIVISIONS
    bins = np.floor(np.minimum((proj - proj.min(axis=0)) / side, 2.0**30)).astype(np.int64) + _SUBDIVISIONS
    stride = np.int64(2**31 + 2 * _SUBDIVISIONS)
    key = bins[:, 0] if m == 1 else bins[:, 0] * stride + bins[:, 1]
    uniq, counts = np.unique(key, return_counts=True)
    around = np.zeros(len(uniq))
    steps = range(-_SUBDIVISIONS, _SUBDIVISIONS + 1)
    for offset in ([(a,) for a in steps] if m == 1 else [(a, b) for a in steps for b in steps]):
        d_min2 = sum((side * max(abs(o) - 1, 0)) ** 2 for o in offset)
        if d_min2 >= r * r:
            continue
        weight = (1.0 - d_min2 / (r * r)) ** (0.5 * k)
        off = offset[0] if m == 1 else offset[0] * stride + offset[1]
        idx = np.minimum(np.searchsorted(uniq, uniq + off), len(uniq) - 1)
        around += weight * np.where(uniq[idx] == uniq + off, counts[idx], 0)
    return float(around.max())


def estimate_neighbors_per_atom(atoms, cutoff: float) -> float:
    """Estimated largest number of neighbours (periodic images included) of an atom within ``cutoff``.

    Computed from the cell and positions alone, before any neighbour list: the larger of (a) the
    number of an atom's own periodic images within the cutoff, counted exactly on the lattice of
    the periodic directions (it catches a single short lattice vector), and (b) the average number
    of lattice points of the periodic directions in a ball of radius ``cutoff`` times the number
    of atoms within reach. For a fully periodic cell, (b) is the atom density times the sphere's
    volume. For mixed periodicity, atoms within reach are those whose distance d perpendicular to
    the periodic directions is below the cutoff, each weighted by the part of the ball left at d
    (an upper bound from binning, computed only when counting all atoms would exceed
    :data:`MAX_NEIGHBORS_PER_ATOM`). Zero for a non-periodic structure (no images). Needs a cell
    that passes :func:`validate_atoms`.
    """
    pbc = np.asarray(atoms.pbc, dtype=bool)
    k = int(pbc.sum())
    if k == 0:
        return 0.0
    rc = float(cutoff)
    lattice = np.asarray(atoms.cell.array, dtype=np.float64)[pbc]
    volume = float(np.sqrt(max(np.linalg.det(lattice @ lattice.T), 0.0)))
    per_atom = _ball_volume(k, rc) / volume  # average lattice points in a ball of radius rc
    n = len(atoms)
    if k < 3 and n * per_atom > MAX_NEIGHBORS_PER_ATOM:
        normal = np.linalg.svd(lattice)[2][k:]  # orthonormal rows spanning the non-periodic directions
        n = _max_weighted_atoms_within(np.asarray(atoms.get_positions(), dtype=np.float64) @ normal.T, rc, k)
    own_images = _lattice_points_in_ball(lattice, rc, stop=MAX_NEIGHBORS_PER_ATOM + 1.0) - 1.0
    if not np.isfinite(own_images):  # too many to enumerate: the average count stands for it
        own_images = per_atom
    return max(n * per_atom, own_images)


def estimate_edges(atoms, cutoff: float) -> float:
    """Estimated number of directed edges (i, j, image) within ``cutoff`` of a neighbour list of
    ``atoms``, from the cell and positions alone (a structure that passes :func:`validate_atoms`).

    Fully periodic: atoms × the average neighbours of an atom, density × sphere volume. Mixed
    periodicity: atoms × :func:`estimate_neighbors_per_atom` (an upper bound). Not periodic: each atom
    with the atoms in the 5³ cubes of side ``cutoff`` / 2 around its own, weighted by the sphere's part
    of them ((4π/3) / (5/2)³), at most n − 1 per atom.
    """
    n = len(atoms)
    pbc = np.asarray(atoms.pbc, dtype=bool)
    if pbc.any():
        return float(n) * estimate_neighbors_per_atom(atoms, cutoff)
    if n < 2:
        return 0.0
    cells = np.floor(np.asarray(atoms.get_positions(), dtype=np.float64) / (0.5 * cutoff)).astype(np.int64)
    cells -= cells.min(axis=0)
    keys, counts = np.unique(cells, axis=0, return_counts=True)
    index = {tuple(k): c for k, c in zip(keys.tolist(), counts.tolist())}
    around = 0.0
    for key, count in index.items():
        near = sum(index.get((key[0] + a, key[1] + b, key[2] + c), 0)
                   for a in range(-2, 3) for b in range(-2, 3) for c in range(-2, 3))
        around += count * near
    return float(min(around * (4.0 / 3.0 * np.pi) / 2.5**3, n * (n - 1.0)))


def _format_count(x: float) -> str:
    return f"{x:,.0f}" if x < 1e9 else f"{x:.2e}"


def validate_atoms(
    atoms, allowed_numbers: Optional[Sequence[int]] = None, cutoff: Optional[float] = None
) -> None:
    """Reject what no model can evaluate, with a ValueError that names the problem.

    Empty structures, NaN/inf coordinates or cells, a periodic direction whose cell vector is zero or
    a periodic cell with zero volume, (when ``allowed_numbers`` is given) elements outside it, and
    (when ``cutoff`` is given) a periodic cell so small that an atom would have more than
    :data:`MAX_NEIGHBORS_PER_ATOM` neighbours within the cutoff
    (:func:`estimate_neighbors_per_atom`), which is checked before any neighbour list is built.
    """
    from ase.data import chemical_symbols

    n = len(atoms)
    if n == 0:
        raise ValueError("empty structure: the Atoms object has no atoms")
    pos = atoms.get_positions()
    if not np.all(np.isfinite(pos)):
        bad = np.where(~np.all(np.isfinite(pos), axis=1))[0]
        raise ValueError(f"positions contain NaN or inf (atoms {bad[:10].tolist()})")
    cell = np.asarray(atoms.cell.array, dtype=np.float64)
    if not np.all(np.isfinite(cell)):
        raise ValueError("cell contains NaN or inf")
    pbc = np.asarray(atoms.pbc, dtype=bool)
    if pbc.any():
        periodic = cell[pbc]
        # Gram determinant: squared volume spanned by the periodic lattice vectors.
        gram = np.linalg.det(periodic @ periodic.T)
        scale = float(np.prod(np.sum(periodic**2, axis=1)))
        if scale == 0.0 or gram <= 1e-12 * scale:
            if pbc.all():
                raise ValueError(
                    f"periodic cell has zero volume (cell={cell.tolist()}, pbc={pbc.tolist()}); "
                    "set a cell with non-zero volume or pbc=False"
                )
            raise ValueError(
                f"periodic cell vectors are zero or linearly dependent (cell={cell.tolist()}, "
                f"pbc={pbc.tolist()}); set non-zero, independent lattice vectors along periodic directions"
            )
    if allowed_numbers is not None:
        allowed = set(int(z) for z in allowed_numbers)
        unknown = sorted(set(int(z) for z in atoms.numbers) - allowed)
        if unknown:
            names = ", ".join(chemical_symbols[z] if 0 <= z < len(chemical_symbols) else str(z)
                              for z in unknown)
            known = ", ".join(chemical_symbols[z] for z in sorted(allowed))
            raise ValueError(f"element(s) {names} not supported by this potential (it was built for {known})")
    if cutoff is not None and pbc.any() and np.isfinite(cutoff) and cutoff > 0:
        estimate = estimate_neighbors_per_atom(atoms, cutoff)
        if estimate > MAX_NEIGHBORS_PER_ATOM:
            lengths = ", ".join(f"{x:.4g}" for x in atoms.cell.lengths())
            raise ValueError(
                f"periodic cell too small for the cutoff: cell lengths [{lengths}] Å (pbc={pbc.tolist()}) "
                f"with cutoff {cutoff:g} Å give each atom about {_format_count(estimate)} neighbours "
                f"within the cutoff, above the bound of {MAX_NEIGHBORS_PER_ATOM} (dense solids have a "
                "few hundred); check the cell (its units are Å) and pbc"
            )
