"""Pure-PyTorch cell-list neighbour search: ``backend="torch"`` of :func:`mlip.neighbors.neighbor_list`.

The torch backend works on any device (CPU or CUDA) with torch operations only: no numpy
on the hot path and no Python loop over atoms (only over the three lattice directions and
over chunks of candidate pairs, to bound peak memory).

Algorithm (all structures of a batch at once)
---------------------------------------------
``rc`` below is the search radius: the cutoff plus a tiny margin
(:func:`mlip.neighbors.inputs.search_cutoff`) that covers rounding, so that the exact filter of
step 6 never misses a pair.

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
   chunks of at most ``CANDIDATE_CHUNK`` pairs and kept when closer than ``rc`` (float64); the
   trivial self pair is dropped. About two candidates are examined per neighbour found.
6. *Finalisation* (shared with the other backends, :func:`mlip.neighbors.edges.finalize_edges`):
   the exact filter ``|pos[j] - pos[i] + S @ cell| < cutoff`` evaluated in the input dtype, then a
   lexicographic sort by ``(i, j, S0, S1, S2)``. Because both backends search with the same
   margin and finish with this identical filter, they return identical tensors.

Memory is ``O(n_ghosts + 25 * n_atoms + CANDIDATE_CHUNK)`` on top of the output (``n_ghosts``
is about ``n_atoms`` times the volume ratio of the cell padded by ``rc`` to the cell).
"""

from __future__ import annotations

from typing import Tuple

import torch

from mlip.neighbors.edges import KEY_LIMIT, empty_edges, finalize_edges
from mlip.neighbors.images import mat_rows, periodic_images
from mlip.neighbors.inputs import PbcLike, inv3, prepare_batch, prepare_single, search_cutoff

__all__ = ["neighbor_list_torch", "batched_neighbor_list_torch"]

Tensor = torch.Tensor

#: Maximum number of candidate pairs materialised at once.
CANDIDATE_CHUNK = 1 << 20
#: Maximum number of centre atoms whose bin queries are built at once.
QUERY_BLOCK = 1 << 15


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


# Bin layout of the torch cell list: x and y bins of edge rc / _NSUB (a centre looks at
# (2 * _NSUB + 1)^2 "rows" of bins, pruned by their distance to the centre); z bins of edge
# rc / _NZ, so that each row query is one contiguous key range trimmed to the sphere.
_NSUB = 2
_NZ = 8


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
    frac = mat_rows(pos64, inv_d[0] if single else inv_d[batch])
    per_atom_pbc = pbc_d[0].expand(n, 3) if single else pbc_d[batch]
    s0f = torch.where(per_atom_pbc, torch.floor(frac), torch.zeros_like(frac))
    fw = frac - s0f
    s0 = s0f.long()
    pw = pos64 - mat_rows(s0f, full_d[0] if single else full_d[batch])

    # 2. ghosts: per-atom integer translation ranges, one direction at a time
    # (centre_ghost: index of the T=0 ghost of every atom; its coordinates are exactly pw)
    gatom, gshift, centre_ghost = periodic_images(fw, batch, reach, pbc_d, single, with_home=True)
    gb = batch[gatom]
    gpos = pw[gatom] + mat_rows(gshift.to(torch.float64), full_d[0] if single else full_d[gb])
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
    if n_graphs * ranges[0] * ranges[1] * ranges[2] >= KEY_LIMIT:
        # huge empty spaces (spread-out non-periodic structures): shrink the gaps
        gpos_c = torch.stack([_compact_axis(gpos[:, k], rc) for k in range(3)], 1)
        rel, bxy, ranges = _bins(gpos_c)
        if n_graphs * ranges[0] * ranges[1] * ranges[2] >= KEY_LIMIT:
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
    # blocks of QUERY_BLOCK (bounds the query arrays), candidates in chunks of <= CANDIDATE_CHUNK
    # pairs
    out_c, out_g = [], []
    for b0 in range(0, n, QUERY_BLOCK):
        b1 = min(n, b0 + QUERY_BLOCK)
        first, cnt = _queries(b0, b1)
        csum_host = torch.cumsum(cnt.sum(1), 0).cpu()
        a0, done = 0, 0
        while a0 < b1 - b0:
            a1 = int(torch.searchsorted(csum_host, torch.tensor([done + CANDIDATE_CHUNK]), side="right")[0])
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
    """Torch cell-list backend of :func:`mlip.neighbors.neighbor_list` (any device).

    Args:
        positions: [n_atoms, 3] float32/float64; cell: [3, 3] (rows = lattice vectors);
        pbc: [3] bool; cutoff: float.

    Returns:
        edge_index [2, n_edges] int64, shifts [n_edges, 3] int64 (sorted, on positions.device).
    """
    pbc_t, full, masked, cutoff = prepare_single(positions, cell, pbc, cutoff)
    n = positions.shape[0]
    if n == 0:
        return empty_edges(positions.device)
    batch = torch.zeros(n, dtype=torch.long, device=positions.device)
    counts = torch.tensor([n])
    i, j, s, _ = _torch_batched_raw(positions, batch, counts, full, masked, pbc_t, cutoff)
    return finalize_edges(positions, masked, None, i, j, s, cutoff, n)


def batched_neighbor_list_torch(positions, cell, pbc, batch, cutoff):
    """Torch cell-list backend of :func:`mlip.neighbors.batched_neighbor_list` (all structures at once).

    Args:
        positions: [n_atoms, 3]; cell: [n_graphs, 3, 3]; pbc: [n_graphs, 3] bool;
        batch: [n_atoms] int64 sorted structure index; cutoff: float.

    Returns:
        edge_index [2, n_edges] int64 (global indices), shifts [n_edges, 3] int64.
    """
    pbc_t, full, masked, batch, counts, cutoff = prepare_batch(positions, cell, pbc, batch, cutoff)
    n = positions.shape[0]
    if n == 0:
        return empty_edges(positions.device)
    i, j, s, eg = _torch_batched_raw(positions, batch, counts, full, masked, pbc_t, cutoff)
    return finalize_edges(positions, masked, eg, i, j, s, cutoff, n)
