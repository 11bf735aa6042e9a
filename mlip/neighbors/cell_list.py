"""Pure-PyTorch cell-list neighbour search, plus the helpers shared by all backends.

The torch backend works on any device (CPU or CUDA) with torch operations only: no numpy
on the hot path and no Python loop over atoms (only over the three lattice directions and
over chunks of candidate pairs, to bound peak memory).

Algorithm (all structures of a batch at once)
---------------------------------------------
``rc`` below is the search radius: the cutoff plus a tiny margin (:func:`search_cutoff`) that
covers rounding, so that the exact filter of step 6 never misses a pair.

1. *Validation and cell completion* (host, 3x3 per structure): periodic lattice vectors
   must be linearly independent; the rows of non-periodic directions are replaced by unit
   vectors orthogonal to the periodic ones (so a zero / arbitrary non-periodic vector is
   fine and coordinates along it are plain Cartesian distances).
2. *Wrapping*: fractional coordinates ``f = pos @ inv(cell)``; along periodic directions
   ``s0 = floor(f)`` and ``pos_w = pos - s0 @ cell`` lies inside the cell. A pair found
   between wrapped atoms with image ``S'`` has, for the original positions, the shift
   ``S = S' - s0[j] + s0[i]``.
3. *Ghosts*: along each periodic direction ``k`` the lattice planes are ``1 / |b_k|`` apart
   (``b_k`` reciprocal vectors), so a neighbour of an atom of the cell lies within
   fractional distance ``r_k = rc * |b_k|`` of ``[0, 1)``. Each atom is replicated with
   exactly the integer translations ``t`` that keep ``f_k + t`` inside
   ``[-r_k, 1 + r_k]`` (per-atom ranges + ``repeat_interleave``, direction by direction),
   which covers cells smaller than the cutoff (many images) without over-allocation.
4. *Binning*: Cartesian coordinates relative to each structure's bounding-box corner are
   binned with edge ``rc / 2`` in x and y and ``rc / 8`` in z, keyed by a single int64 id
   ``((graph * R0 + bx) * R1 + by) * R2 + bz``; ghosts are sorted by key once. No dense
   grid over the bounding box is needed: a table of bin starts is used only when the key
   range is at most ~8x the number of ghosts, otherwise ``searchsorted`` on the sorted keys.
   If the key range would overflow int64 (structures spread over huge empty space), empty
   gaps wider than ``rc`` along x, y and z are first shrunk (:func:`_compact_axis`), which
   keeps every pair closer than ``rc`` and bounds the extent by ``1.5 rc`` per ghost.
5. *Candidates*: for every atom, the 25 "rows" ``(bx + dx, by + dy)``, ``|dx|, |dy| <= 2``,
   whose distance to the atom is below ``rc`` are queried; in a row the bins hit by the
   sphere form one contiguous key range ``[z - h, z + h]`` (``h`` from the row distance), so
   a query is two lookups. Ranges are expanded into candidate pairs (scatter + cumsum) in
   chunks of at most ``_CHUNK`` pairs and kept when closer than ``rc`` (float64); the
   trivial self pair is dropped. About two candidates are examined per neighbour found.
6. *Finalisation* (shared with the vesin backend, see :func:`finalize_edges`): the exact
   filter ``|pos[j] - pos[i] + S @ cell| < cutoff`` evaluated in the input dtype, then a
   lexicographic sort by ``(i, j, S0, S1, S2)``. Because both backends search with the same
   margin and finish with this identical filter, they return identical tensors.

Memory is ``O(n_ghosts + 25 * n_atoms + _CHUNK)`` on top of the output (``n_ghosts`` is
about ``n_atoms`` times the volume ratio of the cell padded by ``rc`` to the cell).
"""

from __future__ import annotations

import math
from typing import Sequence, Tuple, Union

import torch

__all__ = [
    "neighbor_list",
    "batched_neighbor_list",
    "neighbor_list_torch",
    "batched_neighbor_list_torch",
]

Tensor = torch.Tensor
PbcLike = Union[Tensor, Sequence[bool], bool]

# Maximum number of candidate pairs materialised at once in the torch backend.
_CHUNK = 1 << 20
# Maximum number of centre atoms whose bin queries are built at once.
_QBLOCK = 1 << 15
# Largest integer allowed in a packed int64 sort/bin key.
_KEY_LIMIT = 1 << 62
# Relative squared-volume threshold below which periodic lattice vectors count as dependent.
_DEGENERATE_TOL = 1e-12


# ----------------------------------------------------------------------------------------
# Shared helpers (used by both backends)
# ----------------------------------------------------------------------------------------


def _as_pbc(pbc: PbcLike, n_graphs: int | None) -> Tensor:
    """Convert ``pbc`` to a CPU bool tensor of shape [3] (``n_graphs`` None) or [n_graphs, 3]."""
    t = torch.as_tensor(pbc).detach().to("cpu")
    if t.dtype != torch.bool:
        t = t != 0
    if n_graphs is None:
        if t.dim() == 0:
            t = t.expand(3)
        if t.shape != (3,):
            raise ValueError(f"pbc must have shape [3], got {tuple(t.shape)}")
    else:
        if t.dim() == 0:
            t = t.expand(n_graphs, 3)
        elif t.dim() == 1 and t.shape[0] == 3:
            t = t.expand(n_graphs, 3)
        if t.shape != (n_graphs, 3):
            raise ValueError(f"pbc must have shape [{n_graphs}, 3], got {tuple(t.shape)}")
    return t.clone()


def _check_positions(positions: Tensor) -> None:
    if not isinstance(positions, torch.Tensor):
        raise TypeError("positions must be a torch.Tensor")
    if positions.dim() != 2 or positions.shape[1] != 3:
        raise ValueError(f"positions must have shape [n_atoms, 3], got {tuple(positions.shape)}")
    if not positions.dtype.is_floating_point:
        raise ValueError(f"positions must be floating point, got {positions.dtype}")
    if positions.numel() > 0 and not bool(torch.isfinite(positions).all()):
        raise ValueError("positions contain NaN or inf")


def _check_cutoff(cutoff) -> float:
    cutoff = float(cutoff)
    if not math.isfinite(cutoff) or cutoff <= 0.0:
        raise ValueError(f"cutoff must be a positive finite number, got {cutoff}")
    return cutoff


def det3(m: Tensor) -> Tensor:
    """Determinants of [..., 3, 3] matrices by the rule of Sarrus (elementwise: for a batch of many
    small matrices on the CPU, far cheaper than one LAPACK call per matrix)."""
    a, b, c = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    d, e, f = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
    g, h, i = m[..., 2, 0], m[..., 2, 1], m[..., 2, 2]
    return a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)


def inv3(m: Tensor) -> Tensor:
    """Inverses of invertible [..., 3, 3] matrices (adjugate over determinant, elementwise)."""
    r0, r1, r2 = m[..., 0, :], m[..., 1, :], m[..., 2, :]
    # columns of the inverse are the cross products of the rows, over the determinant
    adj = torch.stack([torch.cross(r1, r2, dim=-1), torch.cross(r2, r0, dim=-1), torch.cross(r0, r1, dim=-1)], -1)
    return adj / det3(m)[..., None, None]


def complete_cells(cell: Tensor, pbc: Tensor) -> Tuple[Tensor, Tensor]:
    """Validate cells and replace the rows of non-periodic directions.

    Args:
        cell: [n_graphs, 3, 3] lattice vectors as rows (any dtype/device).
        pbc: [n_graphs, 3] bool (CPU).

    Returns:
        ``(full, masked)``, both [n_graphs, 3, 3] float64 on CPU. ``full`` keeps the periodic
        rows and has unit vectors orthogonal to the periodic ones (positively oriented when
        some direction is non-periodic) in the non-periodic rows; it is always invertible.
        ``masked`` is ``cell`` with the non-periodic rows set to zero (used in the exact
        distance filter, so anything stored in non-periodic rows is ignored).

    Raises:
        ValueError: periodic lattice vectors that are zero, non-finite or linearly dependent.
    """
    c = cell.detach().to("cpu", torch.float64)
    if c.dim() != 3 or c.shape[1:] != (3, 3):
        raise ValueError(f"cell must have shape [3, 3] (or [n_graphs, 3, 3]), got {tuple(cell.shape)}")
    if c.shape[0] == 0:
        return c.clone(), c.clone()
    pm = pbc[:, :, None]
    masked = torch.where(pm, c, torch.zeros_like(c))
    if not bool(torch.isfinite(masked).all()):
        raise ValueError("periodic cell vectors contain NaN or inf")
    norms2 = (masked * masked).sum(-1)  # [G, 3]
    if bool((pbc & (norms2 == 0)).any()):
        raise ValueError("periodic cell has zero volume: a periodic lattice vector is zero")
    # Gram determinant of the periodic rows, normalised by their squared lengths (1 = orthogonal).
    gram = masked @ masked.transpose(1, 2) + torch.diag_embed((~pbc).to(torch.float64))
    ratio = det3(gram) / torch.where(pbc, norms2, torch.ones_like(norms2)).prod(-1)
    if bool((pbc.any(-1) & ~(ratio > _DEGENERATE_TOL)).any()):
        raise ValueError(
            "periodic cell has zero volume: the lattice vectors of the periodic directions "
            "are linearly dependent"
        )
    if bool(pbc.all()):  # nothing to complete (and no SVD, which is costly for a batch)
        return c.clone(), masked
    # Orthonormal complement of the periodic span: right singular vectors of the smallest
    # singular values (exactly zero for the masked rows).
    _, _, vh = torch.linalg.svd(masked)
    npbc = ~pbc
    m = npbc.sum(-1, keepdim=True)  # [G, 1]
    src = (3 - m + torch.cumsum(npbc.long(), -1) - 1).clamp(0, 2)  # [G, 3]
    comp = torch.gather(vh, 1, src[:, :, None].expand(-1, -1, 3))
    full = torch.where(pm, c, comp)
    # Make the completed cell right-handed by flipping the last non-periodic row if needed
    # (irrelevant for correctness, some codes dislike left-handed boxes).
    det = det3(full)
    last_np = torch.where(npbc, torch.arange(3).expand_as(npbc), torch.full_like(npbc, -1, dtype=torch.long))
    last_np = last_np.max(-1).values  # [G], -1 when fully periodic
    flip = (det < 0) & (last_np >= 0)
    if bool(flip.any()):
        sign = torch.ones_like(norms2)
        gi = torch.nonzero(flip).flatten()
        sign[gi, last_np[gi]] = -1.0
        full = full * sign[:, :, None]
    return full, masked


def to_device_async(t: Tensor, device) -> Tensor:
    """Copy a small CPU tensor to ``device`` without a host synchronisation (pinned memory,
    non-blocking; stream-ordered, so later kernels see the data). Identity on CPU."""
    device = torch.device(device)
    if device.type != "cuda":
        return t.to(device)
    return t.contiguous().pin_memory().to(device, non_blocking=True)


def search_cutoff(cutoff: float, positions: Tensor, masked_cells: Tensor) -> float:
    """Cutoff used for the candidate search, slightly larger than ``cutoff``.

    The margin covers the rounding errors of the final filter evaluated in the input dtype
    (and of the float64 search), so that no pair with ``d < cutoff`` is ever missed.

    Args:
        cutoff: requested cutoff.
        positions: [n_atoms, 3] input positions (their dtype sets the rounding unit).
        masked_cells: [n_graphs, 3, 3] float64 cells with non-periodic rows zeroed.
    """
    eps = torch.finfo(positions.dtype).eps
    scale = cutoff
    if positions.numel() > 0:
        scale += 3.0 * float(positions.detach().abs().max())
    if masked_cells.numel() > 0:
        scale += float(masked_cells.norm(dim=-1).sum(-1).max())
    return cutoff * (1.0 + 1e-6) + 64.0 * eps * scale + 1e-12


def finalize_edges(
    positions: Tensor,
    masked_cells: Tensor,
    edge_graph: Tensor | None,
    i: Tensor,
    j: Tensor,
    shifts: Tensor,
    cutoff: float,
    n_atoms: int,
) -> Tuple[Tensor, Tensor]:
    """Exact distance filter in the input dtype, then lexicographic sort.

    Args:
        positions: [n_atoms, 3] input positions (dtype/device of the output computation).
        masked_cells: [n_graphs, 3, 3] cells (non-periodic rows zeroed), any dtype/device.
        edge_graph: [n_edges] int64 structure index of each candidate, or None (one structure).
        i, j: [n_edges] int64 candidate pairs (global atom indices).
        shifts: [n_edges, 3] int64 candidate shifts.
        cutoff: the requested cutoff; kept pairs satisfy ``d² < cutoff²`` strictly, d² evaluated
            in the input dtype and cutoff² rounded to it.
        n_atoms: number of atoms (for the sort key).

    Returns:
        edge_index [2, n_kept] int64 and shifts [n_kept, 3] int64, sorted by
        ``(i, j, S0, S1, S2)``, on the device of ``positions``.
    """
    dev = positions.device
    i = i.to(dev)
    j = j.to(dev)
    shifts = shifts.to(dev)
    if i.numel() > 0:
        dt = positions.dtype
        cells = to_device_async(masked_cells.to(dtype=dt), dev) if masked_cells.device.type == "cpu" \
            else masked_cells.to(device=dev, dtype=dt)
        if edge_graph is not None:
            cells = cells[edge_graph.to(dev)]  # [E, 3, 3]
        else:
            cells = cells[0]  # [3, 3]: 0-dim entries broadcast, same arithmetic
        post = positions.detach().t().contiguous()  # [3, N]
        s_0, s_1, s_2 = (shifts[:, k].to(dt) for k in range(3))
        # Edge vector pos[j] - pos[i] + S @ cell, component by component with a fixed
        # operation order (no fused multiply-add), so that the result of every edge is the same
        # whichever backend, batch or chunk it comes from.
        d2 = None
        for k in range(3):
            vk = post[k].index_select(0, j)
            vk -= post[k].index_select(0, i)
            sc = s_0 * cells[..., 0, k]
            sc += s_1 * cells[..., 1, k]
            sc += s_2 * cells[..., 2, k]
            vk += sc
            vk *= vk
            if d2 is None:
                d2 = vk
            else:
                d2 += vk
        # squared, against cutoff^2 rounded to the dtype: only correctly rounded operations, so that
        # every backend and device keeps the same pairs (PyTorch's CPU sqrt is not correctly
        # rounded: sqrt(1.8² + 1.8²) in float32 comes out one unit in the last place low)
        within = d2 < cutoff * cutoff
        if dev.type == "cuda":
            sorted_kept = _filter_and_sort_device(i, j, shifts, within, n_atoms)
            if sorted_kept is not None:
                edge_index = torch.stack([i.index_select(0, sorted_kept), j.index_select(0, sorted_kept)])
                return edge_index, shifts.index_select(0, sorted_kept)
        keep = torch.nonzero(within).flatten()
        i, j, shifts = i.index_select(0, keep), j.index_select(0, keep), shifts.index_select(0, keep)
    order = lexsort_edges(i, j, shifts, n_atoms)
    edge_index = torch.stack([i.index_select(0, order), j.index_select(0, order)])
    return edge_index, shifts.index_select(0, order)


def _filter_and_sort_device(i: Tensor, j: Tensor, shifts: Tensor, keep: Tensor, n_atoms: int):
    """Indices of the kept edges in (i, j, S0, S1, S2) order, with one device-to-host
    synchronisation (count and shift ranges together): dropped edges get a key past every kept
    one, so a single argsort both filters and orders. None when the packed key would overflow
    (the caller then uses the general path). Same result as nonzero + :func:`lexsort_edges`."""
    stats = torch.cat([keep.sum()[None], shifts.min(0).values, shifts.max(0).values]).tolist()
    count, smin, smax = int(stats[0]), stats[1:4], stats[4:7]
    ranges = [int(b - a + 1) for a, b in zip(smin, smax)]
    n = max(int(n_atoms), 1)
    if n * n * ranges[0] * ranges[1] * ranges[2] >= _KEY_LIMIT:
        return None
    key = ((i * n + j) * ranges[0] + (shifts[:, 0] - int(smin[0]))) * ranges[1] + (shifts[:, 1] - int(smin[1]))
    key = key * ranges[2] + (shifts[:, 2] - int(smin[2]))
    key = torch.where(keep, key, torch.full_like(key, _KEY_LIMIT))
    return torch.argsort(key)[:count]


def lexsort_edges(i: Tensor, j: Tensor, shifts: Tensor, n_atoms: int) -> Tensor:
    """Permutation sorting edges lexicographically by ``(i, j, S0, S1, S2)``.

    Args:
        i, j: [n_edges] int64; shifts: [n_edges, 3] int64; n_atoms: bound on i and j.

    Returns:
        [n_edges] int64 permutation (edges are assumed distinct, so it is unique).
    """
    n_edges = i.numel()
    if n_edges <= 1:
        return torch.arange(n_edges, device=i.device)
    smin = shifts.min(0).values
    smax = shifts.max(0).values
    ranges = [int(v) for v in (smax - smin + 1).tolist()]
    n = max(int(n_atoms), 1)
    if n * n * ranges[0] * ranges[1] * ranges[2] < _KEY_LIMIT:
        s = shifts - smin
        key = ((i * n + j) * ranges[0] + s[:, 0]) * ranges[1] + s[:, 1]
        key = key * ranges[2] + s[:, 2]
        if key.device.type == "cpu":
            # numpy's introsort is several times faster than torch.sort on CPU; the keys are
            # distinct so the permutation does not depend on the algorithm.
            return torch.from_numpy(key.numpy().argsort())
        return torch.argsort(key)
    # Fallback: successive stable sorts from the least significant key.
    order = torch.arange(n_edges, device=i.device)
    for col in (shifts[:, 2], shifts[:, 1], shifts[:, 0], j, i):
        order = order[torch.sort(col[order], stable=True).indices]
    return order


def _empty(device) -> Tuple[Tensor, Tensor]:
    return (
        torch.zeros((2, 0), dtype=torch.long, device=device),
        torch.zeros((0, 3), dtype=torch.long, device=device),
    )


def _prepare_single(positions, cell, pbc, cutoff):
    """Validate the single-structure arguments; return (pbc [1,3], full, masked, cutoff)."""
    _check_positions(positions)
    cutoff = _check_cutoff(cutoff)
    cell = torch.as_tensor(cell)
    if cell.shape != (3, 3):
        raise ValueError(f"cell must have shape [3, 3], got {tuple(cell.shape)}")
    pbc_t = _as_pbc(pbc, None)[None]
    full, masked = complete_cells(cell[None], pbc_t)
    return pbc_t, full, masked, cutoff


def _prepare_batch(positions, cell, pbc, batch, cutoff):
    """Validate batched arguments; return (pbc [G,3], full, masked, batch, counts, cutoff)."""
    _check_positions(positions)
    cutoff = _check_cutoff(cutoff)
    cell = torch.as_tensor(cell)
    if cell.dim() == 2:
        cell = cell[None]
    if cell.dim() != 3 or cell.shape[1:] != (3, 3):
        raise ValueError(f"cell must have shape [n_graphs, 3, 3], got {tuple(cell.shape)}")
    n_graphs = cell.shape[0]
    pbc_t = _as_pbc(pbc, n_graphs)
    batch = torch.as_tensor(batch, device=positions.device).long()
    if batch.shape != (positions.shape[0],):
        raise ValueError(f"batch must have shape [{positions.shape[0]}], got {tuple(batch.shape)}")
    if batch.numel() > 0:
        bad = (batch[1:] < batch[:-1]).any() | (batch[0] < 0) | (batch[-1] >= n_graphs)  # one sync
        if bool(bad):
            raise ValueError("batch must be sorted (atoms of a structure contiguous) with values in "
                             "[0, n_graphs)")
    # atoms per structure from the sorted batch (searchsorted: no device-to-host sync, unlike bincount)
    bounds = torch.searchsorted(batch, torch.arange(n_graphs + 1, device=batch.device))
    counts = bounds[1:] - bounds[:-1]
    full, masked = complete_cells(cell, pbc_t)
    return pbc_t, full, masked, batch, counts, cutoff


# ----------------------------------------------------------------------------------------
# Torch cell list
# ----------------------------------------------------------------------------------------


def _compact_axis(x: Tensor, rc: float) -> Tensor:
    """Shrink every empty gap wider than ``rc`` between sorted values of ``x`` to ``1.5 rc``.

    Whole runs of points (consecutive gaps <= rc) move by the same amount, so all differences
    smaller than ``rc`` are kept (up to rounding) and all differences >= rc stay >= rc: the set
    of pairs closer than ``rc`` is unchanged, while the extent becomes <= 1.5 rc * len(x).

    Args:
        x: [M] float64 coordinates. Returns: [M] float64 translated coordinates.
    """
    xs, order = torch.sort(x)
    excess = torch.clamp(xs[1:] - xs[:-1] - 1.5 * rc, min=0.0)
    shift_sorted = torch.cat([xs[:1], xs[:1] + torch.cumsum(excess, 0)])
    shift = torch.empty_like(x)
    shift[order] = shift_sorted
    return x - shift


def _expand_segments(cnt: Tensor, first: Tensor, per_row: int, total: int) -> Tuple[Tensor, Tensor]:
    """Expand query ranges into candidate indices without ``repeat_interleave``.

    Query ``q`` (row-major [n_centres, per_row]) covers sorted ghosts
    ``first[q] .. first[q] + cnt[q] - 1``. Returns ``gi`` [total] (sorted-ghost index) and
    ``ci`` [total] (local centre index ``q // per_row``) built with one scatter and one cumsum
    each (increments that jump at the start of every non-empty range).

    Args:
        cnt, first: [n_queries] int64; per_row: queries per centre; total: cnt.sum().
    """
    dev = cnt.device
    nz = torch.nonzero(cnt).flatten()
    c = cnt.index_select(0, nz)
    f = first.index_select(0, nz)
    centre = torch.div(nz, per_row, rounding_mode="floor")
    starts = torch.cumsum(c, 0) - c
    # ghost index: +1 inside a range, jump to first[q] at its start
    prev_last = torch.cat([f.new_zeros(1), (f + c - 1)[:-1]])
    inc = torch.ones(total, dtype=torch.long, device=dev)
    inc.index_copy_(0, starts, f - prev_last)
    gi = torch.cumsum(inc, 0)
    # centre index: constant inside a range, jump at its start
    prev_centre = torch.cat([centre.new_zeros(1), centre[:-1]])
    inc.zero_()
    inc.index_copy_(0, starts, centre - prev_centre)
    ci = torch.cumsum(inc, 0)
    return gi, ci


def _mat_rows(v: Tensor, m: Tensor) -> Tensor:
    """``v @ m`` per row, elementwise: v [M, 3], m [M, 3, 3] or [3, 3] -> [M, 3]."""
    if m.dim() == 2:
        return (v[:, 0:1] * m[0] + v[:, 1:2] * m[1]) + v[:, 2:3] * m[2]
    return (v[:, 0:1] * m[:, 0] + v[:, 1:2] * m[:, 1]) + v[:, 2:3] * m[:, 2]


# Bin layout of the torch cell list: x and y bins of edge rc / _NSUB (a centre looks at
# (2 * _NSUB + 1)^2 "rows" of bins, pruned by their distance to the centre); z bins of edge
# rc / _NZ, so that each row query is one contiguous key range trimmed to the sphere.
_NSUB = 2
_NZ = 8


def periodic_images(fw: Tensor, batch: Tensor, reach: Tensor, pbc_d: Tensor, single: bool = False,
                    with_home: bool = False):
    """Every periodic image ("ghost") of every atom that can lie within the search radius of the
    home cell: atom gatom[m] translated by the integer cell shift gshift[m].

    fw [N, 3] wrapped fractional coordinates; batch [N] structure of each atom; reach [G, 3]
    fractional reach r_c·|b_k| (0 along non-periodic axes); pbc_d [G, 3] bool (device);
    ``single``: one structure (scalar reach, faster). Returns (gatom [M] int64, gshift [M, 3] int64),
    ordered by atom, then by shift (S0, S1, S2) lexicographically; with ``with_home`` also
    home [N] int64, the position of each atom's untranslated ghost (S = 0).

    Each atom gets the box of translations t_k in [tmin_k, tmax_k] (a single 0 along non-periodic
    axes), so its ghosts are counted, laid out and decoded with one device-to-host
    synchronisation (the total count) whatever the number of periodic axes.
    """
    dev = fw.device
    n = fw.shape[0]
    if single:
        r = reach[0].to(fw.dtype)
        per = pbc_d[0].expand(n, 3)
    else:
        r = reach[batch].to(fw.dtype)
        per = pbc_d[batch]
    tmin = torch.where(per, torch.ceil(-r - fw), torch.zeros_like(fw)).long()  # [N, 3]
    tmax = torch.where(per, torch.floor((1.0 + r) - fw), torch.zeros_like(fw)).long()
    cnt = (tmax - tmin + 1).clamp_min(0)  # [N, 3]
    per_atom = cnt.prod(1)
    ends = torch.cumsum(per_atom, 0)
    total = int(ends[-1]) if n else 0
    start = ends - per_atom
    gatom = torch.repeat_interleave(torch.arange(n, device=dev), per_atom, output_size=total)
    u = torch.arange(total, device=dev) - start[gatom]  # local index, S2 fastest
    c1, c2 = cnt[gatom, 1], cnt[gatom, 2]
    t2 = u % c2
    u = torch.div(u, c2, rounding_mode="floor")
    t1 = u % c1
    t0 = torch.div(u, c1, rounding_mode="floor")
    gshift = torch.stack([t0, t1, t2], 1) + tmin[gatom]
    if not with_home:
        return gatom, gshift
    home = start + ((-tmin[:, 0]) * cnt[:, 1] - tmin[:, 1]) * cnt[:, 2] - tmin[:, 2]
    return gatom, gshift, home


def _torch_candidates(
    pos64: Tensor, batch: Tensor, n_graphs: int, full: Tensor, pbc: Tensor, rc: float
) -> Tuple[Tensor, Tensor, Tensor]:
    """All pairs closer than ``rc`` (float64 geometry), trivial self pairs excluded.

    Args:
        pos64: [N, 3] float64 positions on the compute device.
        batch: [N] int64 structure index (sorted).
        n_graphs: number of structures G.
        full: [G, 3, 3] float64 completed cells (CPU).
        pbc: [G, 3] bool (CPU).
        rc: search radius.

    Returns:
        i [E], j [E] (int64 atom indices) and S [E, 3] int64 shifts for the input positions.
    """
    dev = pos64.device
    n = pos64.shape[0]
    single = n_graphs == 1
    full_d = full.to(dev)
    inv = inv3(full)  # CPU, tiny
    reach = rc * inv.norm(dim=1)  # [G, 3]: rc * |b_k|, b_k = column k of inv(cell)
    reach = torch.where(pbc, reach, torch.zeros_like(reach)).to(dev)
    pbc_d = pbc.to(dev)
    inv_d = inv.to(dev)

    # 1. wrap into the cell along periodic directions
    frac = _mat_rows(pos64, inv_d[0] if single else inv_d[batch])
    per_atom_pbc = pbc_d[0].expand(n, 3) if single else pbc_d[batch]
    s0f = torch.where(per_atom_pbc, torch.floor(frac), torch.zeros_like(frac))
    fw = frac - s0f
    s0 = s0f.long()
    pw = pos64 - _mat_rows(s0f, full_d[0] if single else full_d[batch])

    # 2. ghosts: per-atom integer translation ranges, one direction at a time
    # (centre_ghost: index of the T=0 ghost of every atom; its coordinates are exactly pw)
    gatom, gshift, centre_ghost = periodic_images(fw, batch, reach, pbc_d, single, with_home=True)
    gb = batch[gatom]
    gpos = pw[gatom] + _mat_rows(gshift.to(torch.float64), full_d[0] if single else full_d[gb])
    n_ghost = gpos.shape[0]

    # 3. bins (x, y: edge rc / _NSUB; z: edge rc / _NZ) relative to each structure's corner
    lx = rc / _NSUB
    lz = rc / _NZ

    def _bins(coords: Tensor):
        lo = torch.full((n_graphs, 3), float("inf"), dtype=torch.float64, device=dev)
        lo = lo.scatter_reduce(0, gb[:, None].expand(-1, 3), coords, reduce="amin", include_self=True)
        rel = coords - lo[gb]
        bxy = torch.floor(rel[:, :2] / lx)
        bz = torch.floor(rel[:, 2] / lz)
        ranges = [int(v) + 2 * _NSUB + 1 for v in bxy.max(0).values.tolist()]
        ranges.append(int(bz.max()) + 2 * _NZ + 1)
        return rel, bxy, ranges

    rel, bxy, ranges = _bins(gpos)
    if n_graphs * ranges[0] * ranges[1] * ranges[2] >= _KEY_LIMIT:
        # huge empty spaces (spread-out non-periodic structures): shrink the gaps
        gpos_c = torch.stack([_compact_axis(gpos[:, k], rc) for k in range(3)], 1)
        rel, bxy, ranges = _bins(gpos_c)
        if n_graphs * ranges[0] * ranges[1] * ranges[2] >= _KEY_LIMIT:
            raise _KeyOverflow()
    r0, r1, r2 = ranges
    bxy_l = bxy.long() + _NSUB
    gkey = ((gb * r0 + bxy_l[:, 0]) * r1 + bxy_l[:, 1]) * r2 + (torch.floor(rel[:, 2] / lz).long() + _NZ)
    skey, order = torch.sort(gkey)
    # ghost data in bin order, coordinates as contiguous columns
    rel_s = rel[order]
    gx, gy, gz = rel_s[:, 0].contiguous(), rel_s[:, 1].contiguous(), rel_s[:, 2].contiguous()

    # 4. row queries: for each centre and each (dx, dy), the z range of bins hit by the sphere
    crel = rel.index_select(0, centre_ghost)  # [N, 3]
    cb = bxy_l.index_select(0, centre_ghost)  # [N, 2] (shifted)
    u = crel[:, :2] / lx - (cb - _NSUB).to(torch.float64)  # position inside the own bin, [0, 1)
    cxr, cyr, czr = crel[:, 0].contiguous(), crel[:, 1].contiguous(), crel[:, 2].contiguous()
    base = ((batch * r0 + cb[:, 0]) * r1 + cb[:, 1]) * r2  # [N] key of the own row, z = 0
    d = torch.arange(-_NSUB, _NSUB + 1, device=dev)
    q_rows = d.numel() ** 2
    df = d.to(torch.float64)[None, :]
    offs = ((d[:, None] * r1 + d[None, :]) * r2).reshape(1, -1)  # [1, Q]
    rc2 = rc * rc
    n_keys = n_graphs * r0 * r1 * r2
    start = None
    if n_keys <= 8 * n_ghost + 4096:
        # moderate key range: dense table of bin starts (memory bounded by the ghost count)
        start = torch.zeros(n_keys + 1, dtype=torch.long, device=dev)
        start[1:] = torch.cumsum(torch.bincount(skey, minlength=n_keys), 0)

    def _gap2(uu: Tensor) -> Tensor:  # [B] -> [B, nd]: squared distance to the bin slabs
        uu = uu[:, None]
        e = torch.where(df > 0, df - uu, torch.where(df < 0, uu - df - 1.0, torch.zeros_like(uu)))
        e = e.clamp_min(0.0) * lx
        return e * e

    def _queries(b0: int, b1: int) -> Tuple[Tensor, Tensor]:
        """first [B, Q], cnt [B, Q]: sorted-ghost ranges of the rows of centres b0..b1-1."""
        h2 = rc2 - (_gap2(u[b0:b1, 0])[:, :, None] + _gap2(u[b0:b1, 1])[:, None, :])
        h2 = h2.reshape(b1 - b0, q_rows)
        h = torch.sqrt(h2.clamp_min(0.0))
        cz = czr[b0:b1, None]
        zlo = (torch.floor((cz - h) / lz).long() + _NZ).clamp(0, r2 - 1)
        zhi = (torch.floor((cz + h) / lz).long() + _NZ).clamp(0, r2 - 1)
        rowkey = base[b0:b1, None] + offs
        if start is not None:
            first = start[rowkey + zlo]
            cnt = start[rowkey + zhi + 1] - first
        else:
            first = torch.searchsorted(skey, rowkey + zlo, side="left")
            cnt = torch.searchsorted(skey, rowkey + zhi, side="right") - first
        return first, torch.where(h2 > 0, cnt, torch.zeros_like(cnt))

    # 5. expand candidates chunk by chunk and keep those closer than rc; centres are taken in
    # blocks of _QBLOCK (bounds the query arrays), candidates in chunks of <= _CHUNK pairs
    out_c, out_g = [], []
    for b0 in range(0, n, _QBLOCK):
        b1 = min(n, b0 + _QBLOCK)
        first, cnt = _queries(b0, b1)
        csum_host = torch.cumsum(cnt.sum(1), 0).cpu()
        a0, done = 0, 0
        while a0 < b1 - b0:
            a1 = int(torch.searchsorted(csum_host, torch.tensor([done + _CHUNK]), side="right")[0])
            a1 = min(max(a1, a0 + 1), b1 - b0)
            total = int(csum_host[a1 - 1]) - done
            done = int(csum_host[a1 - 1])
            if total > 0:
                gi, ci = _expand_segments(cnt[a0:a1].reshape(-1), first[a0:a1].reshape(-1), q_rows, total)
                ci += b0 + a0
                vx = gx.index_select(0, gi) - cxr.index_select(0, ci)
                d2 = vx * vx
                vy = gy.index_select(0, gi) - cyr.index_select(0, ci)
                d2 += vy * vy
                vz = gz.index_select(0, gi) - czr.index_select(0, ci)
                d2 += vz * vz
                keep = torch.nonzero(d2 < rc2).flatten()
                out_c.append(ci.index_select(0, keep))
                out_g.append(gi.index_select(0, keep))
            a0 = a1
    if not out_c:
        e = torch.zeros(0, dtype=torch.long, device=dev)
        return e, e, torch.zeros((0, 3), dtype=torch.long, device=dev)
    i = torch.cat(out_c)
    g = order[torch.cat(out_g)]
    j = gatom[g]
    s = gshift[g]
    not_self = (j != i) | (s != 0).any(1)
    i, j, s = i[not_self], j[not_self], s[not_self]
    s = s - s0[j] + s0[i]
    return i, j, s


class _KeyOverflow(RuntimeError):
    """Raised internally when the packed int64 bin key would overflow."""


def _torch_batched_raw(positions, batch, counts, full, masked, pbc, cutoff):
    """Candidate search of the torch backend; returns i, j, S, edge_graph (unfiltered)."""
    dev = positions.device
    n_graphs = full.shape[0]
    rc = search_cutoff(cutoff, positions, masked)
    pos64 = positions.detach().to(torch.float64)
    try:
        i, j, s = _torch_candidates(pos64, batch, n_graphs, full, pbc, rc)
    except _KeyOverflow:
        if n_graphs == 1:
            raise ValueError(
                "system too large / too spread out for the torch cell list (bin key overflow)"
            ) from None
        # structure by structure (each one has its own, much smaller, key range)
        ptr = [0] + torch.cumsum(counts, 0).tolist()
        ii, jj, ss = [], [], []
        for g in range(n_graphs):
            a, b = ptr[g], ptr[g + 1]
            if b - a < 1:
                continue
            try:
                i1, j1, s1 = _torch_candidates(
                    pos64[a:b], torch.zeros(b - a, dtype=torch.long, device=dev), 1,
                    full[g:g + 1], pbc[g:g + 1], rc)
            except _KeyOverflow:
                raise ValueError(
                    "system too large / too spread out for the torch cell list (bin key overflow)"
                ) from None
            ii.append(i1 + a)
            jj.append(j1 + a)
            ss.append(s1)
        if not ii:
            e = torch.zeros(0, dtype=torch.long, device=dev)
            return e, e, torch.zeros((0, 3), dtype=torch.long, device=dev), e
        i, j, s = torch.cat(ii), torch.cat(jj), torch.cat(ss)
    return i, j, s, batch[i]


def neighbor_list_torch(positions: Tensor, cell: Tensor, pbc: PbcLike, cutoff: float):
    """Torch cell-list backend of :func:`neighbor_list` (any device).

    Args:
        positions: [n_atoms, 3] float32/float64; cell: [3, 3] (rows = lattice vectors);
        pbc: [3] bool; cutoff: float.

    Returns:
        edge_index [2, n_edges] int64, shifts [n_edges, 3] int64 (sorted, on positions.device).
    """
    pbc_t, full, masked, cutoff = _prepare_single(positions, cell, pbc, cutoff)
    n = positions.shape[0]
    if n == 0:
        return _empty(positions.device)
    batch = torch.zeros(n, dtype=torch.long, device=positions.device)
    counts = torch.tensor([n])
    i, j, s, _ = _torch_batched_raw(positions, batch, counts, full, masked, pbc_t, cutoff)
    return finalize_edges(positions, masked, None, i, j, s, cutoff, n)


def batched_neighbor_list_torch(positions, cell, pbc, batch, cutoff):
    """Torch cell-list backend of :func:`batched_neighbor_list` (all structures at once).

    Args:
        positions: [n_atoms, 3]; cell: [n_graphs, 3, 3]; pbc: [n_graphs, 3] bool;
        batch: [n_atoms] int64 sorted structure index; cutoff: float.

    Returns:
        edge_index [2, n_edges] int64 (global indices), shifts [n_edges, 3] int64.
    """
    pbc_t, full, masked, batch, counts, cutoff = _prepare_batch(positions, cell, pbc, batch, cutoff)
    n = positions.shape[0]
    if n == 0:
        return _empty(positions.device)
    i, j, s, eg = _torch_batched_raw(positions, batch, counts, full, masked, pbc_t, cutoff)
    return finalize_edges(positions, masked, eg, i, j, s, cutoff, n)


# ----------------------------------------------------------------------------------------
# Public dispatch
# ----------------------------------------------------------------------------------------


def _resolve_backend(backend: str, device: torch.device) -> str:
    if backend not in ("auto", "vesin", "torch", "cuda"):
        raise ValueError(f"unknown neighbour-list backend {backend!r}; use 'auto', 'vesin', 'torch' or 'cuda'")
    if backend == "auto":
        if device.type != "cpu":
            from mlip.kernels import cuda_kernels_available

            return "cuda" if device.type == "cuda" and cuda_kernels_available() else "torch"
        try:
            import vesin  # noqa: F401
        except ImportError:
            return "torch"
        return "vesin"
    return backend


def neighbor_list(positions, cell, pbc, cutoff, backend="auto"):
    """Full neighbour list of one structure.

    Args:
        positions: torch.Tensor [n_atoms, 3] (float32 or float64, any device).
        cell: torch.Tensor [3, 3], rows are the lattice vectors (ASE convention). Rows of
            non-periodic directions are ignored (may be zero).
        pbc: torch.Tensor [3] bool (or a sequence of 3 bools).
        cutoff: float (Å).
        backend: "auto" (vesin when the tensors are on CPU; on CUDA the "cuda" kernel when
            :func:`mlip.kernels.cuda_kernels_available`, else "torch"), "vesin", "torch" or
            "cuda" (:mod:`mlip.kernels.neighbor_list`, CUDA tensors only).

    Returns:
        ``(edge_index, shifts)``: edge_index [2, n_edges] int64 with rows (i, j), shifts
        [n_edges, 3] int64, such that the edge vector ``pos[j] - pos[i] + shifts @ cell`` has
        length < cutoff (evaluated in the input dtype). Every periodic image is included
        (cells smaller than the cutoff give many images of the same j and self images
        (i, i, S != 0)); the trivial self pair (i, i, 0) is excluded; only periodic
        directions get non-zero shifts. Sorted lexicographically by (i, j, S0, S1, S2), so
        both backends return identical tensors. Output on the device of ``positions``.

    Raises:
        ValueError: NaN/inf positions, non-positive cutoff, or periodic lattice vectors that
            are zero or linearly dependent ("periodic cell has zero volume").
    """
    positions = torch.as_tensor(positions)
    be = _resolve_backend(backend, positions.device)
    if be == "vesin":
        from .vesin_backend import neighbor_list_vesin

        return neighbor_list_vesin(positions, cell, pbc, cutoff)
    if be == "cuda":
        from mlip.kernels.neighbor_list import neighbor_list_cuda

        return neighbor_list_cuda(positions, cell, pbc, cutoff)
    return neighbor_list_torch(positions, cell, pbc, cutoff)


def batched_neighbor_list(positions, cell, pbc, batch, cutoff, backend="auto"):
    """Neighbour lists of many structures at once.

    Args:
        positions: [n_atoms, 3] (float32 or float64, any device).
        cell: [n_graphs, 3, 3] lattice vectors as rows.
        pbc: [n_graphs, 3] bool.
        batch: [n_atoms] int64 structure index of each atom (atoms of a structure
            contiguous and structures in order).
        cutoff: float (Å).
        backend: "auto", "vesin" or "torch" (see :func:`neighbor_list`).

    Returns:
        edge_index [2, n_edges] int64 with global atom indices and shifts [n_edges, 3] int64;
        edges grouped by structure in order (and sorted by (i, j, S) within a structure),
        identical to concatenating the per-structure :func:`neighbor_list` results with atom
        offsets. A structure with zero atoms or one isolated atom gives no edges.
    """
    positions = torch.as_tensor(positions)
    be = _resolve_backend(backend, positions.device)
    if be == "vesin":
        from .vesin_backend import batched_neighbor_list_vesin

        return batched_neighbor_list_vesin(positions, cell, pbc, batch, cutoff)
    if be == "cuda":
        from mlip.kernels.neighbor_list import batched_neighbor_list_cuda

        return batched_neighbor_list_cuda(positions, cell, pbc, batch, cutoff)
    return batched_neighbor_list_torch(positions, cell, pbc, batch, cutoff)
