"""Atomic graphs: one or many structures batched together, built from ``ase.Atoms``.

A graph stores what the models need and nothing they could derive: positions, atomic numbers,
cells, periodicity, the structure index of every atom and the neighbour list as atom pairs plus
*integer* cell shifts. Edge vectors are formed in torch, ``pos[j] − pos[i] + S·cell``, by
:func:`edge_vectors`, so autograd reaches both positions and cell (forces and stress).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Optional, Sequence

import numpy as np
import torch

from mlip.neighbors import batched_neighbor_list


@dataclass
class AtomicGraph:
    """A batch of ``n_graphs`` structures with ``n_atoms`` atoms and ``n_edges`` directed edges.

    Attributes:
        positions: [n_atoms, 3] Cartesian positions (Å).
        numbers: [n_atoms] int64 atomic numbers.
        cell: [n_graphs, 3, 3] lattice vectors as rows (Å); rows of non-periodic directions are ignored.
        pbc: [n_graphs, 3] bool periodicity.
        batch: [n_atoms] int64 structure index of every atom (atoms of a structure are contiguous).
        edge_index: [2, n_edges] int64 pairs (i, j): atom i (the centre) receives from neighbour j.
        shifts: [n_edges, 3] integer cell shifts S (stored in the positions' dtype) with
            edge vector r_ij = pos[j] − pos[i] + S·cell.
        cutoff: the neighbour-list cutoff (Å).
    """

    positions: torch.Tensor
    numbers: torch.Tensor
    cell: torch.Tensor
    pbc: torch.Tensor
    batch: torch.Tensor
    edge_index: torch.Tensor
    shifts: torch.Tensor
    cutoff: float

    @property
    def n_atoms(self) -> int:
        return int(self.positions.shape[0])

    @property
    def n_graphs(self) -> int:
        return int(self.cell.shape[0])

    @property
    def n_edges(self) -> int:
        return int(self.edge_index.shape[1])

    def atoms_per_graph(self) -> torch.Tensor:
        """[n_graphs] number of atoms in each structure."""
        return torch.bincount(self.batch, minlength=self.n_graphs)

    def to(self, device=None, dtype: Optional[torch.dtype] = None) -> "AtomicGraph":
        """Copy to a device and/or floating dtype (integer tensors keep their dtype)."""
        kw = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, torch.Tensor):
                if v.is_floating_point() and dtype is not None:
                    v = v.to(device=device, dtype=dtype)
                else:
                    v = v.to(device=device)
            kw[f.name] = v
        return replace(self, **kw)

    @classmethod
    def from_atoms(
        cls,
        atoms,
        cutoff: float,
        dtype: torch.dtype = torch.float64,
        device=None,
        neighbor_backend: str = "auto",
    ) -> "AtomicGraph":
        """Graph of one ``ase.Atoms`` (see :func:`batch_atoms`)."""
        return batch_atoms([atoms], cutoff, dtype=dtype, device=device, neighbor_backend=neighbor_backend)


# Refusal bound for the estimated number of neighbours of an atom within the cutoff (periodic
# images included). The densest solids hold about 0.2 atoms/Å³ (diamond 0.18, Be 0.12, Cu 0.085),
# i.e. 100-200 neighbours within 6 Å, and a few hundred when compressed to half their volume; 2000
# is several times that at the cutoffs in use. A periodic cell much smaller than any bond (a 0.1 Å
# cube, a cell given in nm or Bohr mistaken for Å, a lattice vector of 0.01 Å) gives thousands to
# millions of images per atom, whose neighbour list would need gigabytes before any model runs.
MAX_NEIGHBORS_PER_ATOM = 2000

# Two atoms (or an atom and a periodic image of another) closer than this are the same position
# given twice. No physical structure comes near it, and it stays above the resolution of float32
# coordinates a few hundred Å from the origin, where a smaller separation would round to zero.
COINCIDENT_DISTANCE = 1e-4

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
    """Upper bound on max_i Σ_j (1 − d_ij²/r²)^(k/2), j over the points of ``proj`` [n, m ≤ 2] within r.

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
            names = ", ".join(chemical_symbols[z] if 0 <= z < len(chemical_symbols) else str(z) for z in unknown)
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


def batch_atoms(
    atoms_list: Sequence,
    cutoff: float,
    dtype: torch.dtype = torch.float64,
    device=None,
    neighbor_backend: str = "auto",
    recenter: bool = False,
    allowed_numbers: Optional[Sequence[int]] = None,
) -> AtomicGraph:
    """Build one :class:`AtomicGraph` from several ``ase.Atoms``.

    The neighbour list is computed in float64 on the CPU (or with the torch backend on ``device``).
    With ``recenter=True`` every structure is translated so that its centroid is at the origin
    (done in float64 before casting), which keeps float32 evaluations of structures far from the
    origin as accurate as near it; energies, forces and stress are translation invariant, so
    results are unchanged. Every structure is checked by :func:`validate_atoms` (with
    ``allowed_numbers``, when given, as the elements a potential supports, and the cutoff, so a
    cell too small for it is refused before its neighbour list is built), and the neighbour list
    by :func:`check_coincident_atoms`.
    """
    if len(atoms_list) == 0:
        raise ValueError("no structures given")
    for k, atoms in enumerate(atoms_list):
        try:
            validate_atoms(atoms, allowed_numbers, cutoff=cutoff)
        except ValueError as err:
            if len(atoms_list) == 1:
                raise
            raise ValueError(f"structure {k}: {err}") from None
    pos_np = []
    for atoms in atoms_list:
        p = np.asarray(atoms.get_positions(), dtype=np.float64)
        if recenter:
            p = p - p.mean(axis=0, keepdims=True)
        pos_np.append(p)
    positions = torch.from_numpy(np.concatenate(pos_np, axis=0))
    numbers = torch.from_numpy(np.concatenate([np.asarray(a.numbers, dtype=np.int64) for a in atoms_list]))
    cell = torch.from_numpy(np.stack([np.asarray(a.cell.array, dtype=np.float64) for a in atoms_list]))
    pbc = torch.from_numpy(np.stack([np.asarray(a.pbc, dtype=bool) for a in atoms_list]))
    counts = torch.tensor([len(a) for a in atoms_list], dtype=torch.int64)
    batch = torch.repeat_interleave(torch.arange(len(atoms_list), dtype=torch.int64), counts)

    nl_device = None
    if neighbor_backend in ("torch", "cuda") and device is not None:
        nl_device = device
    edge_index, shifts = batched_neighbor_list(
        positions.to(nl_device) if nl_device is not None else positions,
        cell.to(nl_device) if nl_device is not None else cell,
        pbc.to(nl_device) if nl_device is not None else pbc,
        batch.to(nl_device) if nl_device is not None else batch,
        float(cutoff),
        backend=neighbor_backend,
    )
    check_coincident_atoms(atoms_list, positions, cell, batch, edge_index, shifts)
    graph = AtomicGraph(
        positions=positions,
        numbers=numbers,
        cell=cell,
        pbc=pbc,
        batch=batch,
        edge_index=edge_index.to(torch.int64),
        shifts=shifts.to(torch.float64),
        cutoff=float(cutoff),
    )
    return graph.to(device=device, dtype=dtype)


def check_coincident_atoms(atoms_list, positions, cell, batch, edge_index, shifts) -> None:
    """Refuse two atoms, or an atom and a periodic image of another, closer than COINCIDENT_DISTANCE.

    Works on the neighbour list (``edge_index``, ``shifts`` on any device) of the float64
    ``positions``, ``cell`` and ``batch`` built from ``atoms_list``; the ValueError names the
    atoms by their index within their structure and their symbol (and the structure, in a batch).
    """
    if edge_index.shape[1] == 0:
        return
    dev = edge_index.device
    i, j = edge_index[0], edge_index[1]
    shifts = shifts.to(device=dev, dtype=torch.float64)
    post = positions.to(dev).t().contiguous()  # [3, N]
    cells = cell.to(dev)
    cells = cells[0] if cells.shape[0] == 1 else cells.index_select(0, batch.to(dev).index_select(0, i))
    d2 = torch.zeros_like(shifts[:, 0])
    for k in range(3):  # component by component, in place: a fraction of the neighbour search's cost
        vk = post[k].index_select(0, j)
        vk -= post[k].index_select(0, i)
        for c in range(3):
            vk += shifts[:, c] * cells[..., c, k]
        d2 += vk * vk
    close = torch.nonzero(d2 < COINCIDENT_DISTANCE**2)
    if close.numel() == 0:
        return
    e = int(close[0, 0])
    i, j = (int(x) for x in edge_index[:, e].cpu())  # global indices
    shift = [int(x) for x in shifts[e].cpu()]
    distance = float(d2[e].sqrt())
    g = int(batch[i])
    first = int(np.searchsorted(batch.cpu().numpy(), g))
    atoms = atoms_list[g]
    i, j = i - first, j - first
    sym = atoms.get_chemical_symbols()
    if any(shift):  # (an atom's own image this close needs a lattice vector that short: refused earlier)
        what = (f"atom {i} ({sym[i]}) and the periodic image of atom {j} ({sym[j]}) shifted by cell vectors "
                f"{shift} are at the same position")
    else:
        what = f"atoms {i} ({sym[i]}) and {j} ({sym[j]}) are at the same position"
    prefix = f"structure {g}: " if len(atoms_list) > 1 else ""
    raise ValueError(f"{prefix}{what} (distance {distance:.2g} Å, below {COINCIDENT_DISTANCE:g} Å); "
                     "remove the duplicate atom")


def edge_vectors(
    positions: torch.Tensor, cell: torch.Tensor, batch: torch.Tensor, edge_index: torch.Tensor, shifts: torch.Tensor
) -> torch.Tensor:
    """Edge vectors r_ij = pos[j] − pos[i] + S·cell[batch[i]].

    positions [n_atoms, 3], cell [n_graphs, 3, 3], batch [n_atoms], edge_index [2, n_edges],
    shifts [n_edges, 3] → [n_edges, 3]. Differentiable with respect to positions and cell.
    """
    i, j = edge_index[0], edge_index[1]
    shift_vec = vector_times_matrix(shifts.to(positions.dtype), cell, batch.index_select(0, i))
    # index_select, not positions[j]: the backward of advanced indexing (index_put with
    # accumulate) dominated a whole MD step on the GPU at large sizes; index_select's is index_add
    return positions.index_select(0, j) - positions.index_select(0, i) + shift_vec


def vector_times_matrix(v: torch.Tensor, matrices: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Row m of the result is v[m] @ matrices[index[m]]: v [M, 3], matrices [G, 3, 3], index [M] → [M, 3].

    Written elementwise, so one structure (G = 1, broadcast, its gradient a plain reduction) and a
    batch (gathered matrices) give bit-identical rows, and no [M, 3, 3] gather is made for G = 1.
    """
    m = matrices[0] if matrices.shape[0] == 1 else matrices.index_select(0, index)  # [3, 3] or [M, 3, 3]
    return (v[:, 0:1] * m[..., 0, :] + v[:, 1:2] * m[..., 1, :]) + v[:, 2:3] * m[..., 2, :]
