"""CPU neighbour-list backend built on `vesin <https://github.com/Luthaf/vesin>`_.

``vesin.NeighborList(cutoff, full_list=True).compute(points, box, periodic, "ijS")`` does the
search (in float64); this module only prepares a box and positions vesin handles well and
then applies the same exact filter and sort as the torch backend
(:func:`mlip.neighbors.edges.finalize_edges`), so both backends return identical tensors.

Things worth knowing about vesin (checked with vesin 0.6.2):

* It computes in float64 (``points`` and ``box`` must share a dtype), returns pairs as uint64
  and shifts as int32, and its shifts refer to the positions as given (atoms far outside
  the cell are wrapped internally). A singular box raises ``RuntimeError: the box matrix is
  not invertible``.
* Mixed periodicity (``periodic=[True, True, False]``) with a zero / arbitrary non-periodic
  box vector gives correct pairs, but its cost grows with the *square* of the atoms' extent
  along the non-periodic direction (docs/benchmarks.md, "Notes from profiling"), and an extent of
  ~1e4-1e6 Å (slab or wire) kills the whole process with SIGFPE. Fully periodic and fully
  non-periodic systems are fast at any extent or distance from the origin.

Hence, before calling vesin: the periodic directions are validated here (``ValueError``), the
non-periodic box rows are replaced by unit vectors orthogonal to the periodic ones, and along
each non-periodic direction the atoms are translated so that every empty gap wider than the
search radius ``rc`` is shrunk to ``1.5 rc`` (and the lowest atom sits at ``rc / 2``).
Translating whole runs of atoms along a direction orthogonal to the lattice changes neither
the periodic fractional coordinates (hence the shifts) nor any distance shorter than ``rc``,
and bounds the extent by ``1.5 rc * n_atoms``. For mixed periodicity the structure is then
passed as *fully periodic*, with the non-periodic box vectors made ``extent + 3 rc`` long, so
images along them are more than ``rc`` away (any shift vesin reports along them is dropped).
vesin searches with a radius slightly larger than the cutoff; the exact filter on the
original positions and the sort follow.
"""

from __future__ import annotations

from typing import List, Tuple

import numpy as np
import torch

from mlip.neighbors.edges import empty_edges, finalize_edges
from mlip.neighbors.inputs import prepare_batch, prepare_single, search_cutoff

__all__ = ["neighbor_list_vesin", "batched_neighbor_list_vesin"]

Tensor = torch.Tensor


def _compact_nonperiodic(p: np.ndarray, full: np.ndarray, pbc: List[bool], rc: float):
    """Shrink empty gaps along non-periodic directions (see module docstring).

    Args:
        p: [n, 3] float64 positions; full: [3, 3] completed cell whose non-periodic rows are
        orthonormal and orthogonal to the periodic rows; pbc: 3 bools; rc: search radius.

    Returns:
        ``(p_new [n, 3], extent [3])``: translated positions, whose coordinate along every
        non-periodic row lies in ``[rc / 2, extent + rc / 2]`` (``extent`` 0 for periodic rows).
    """
    extent = np.zeros(3)
    if p.shape[0] == 0:
        return p, extent
    gap = 1.5 * rc
    p = p.copy()
    for k in range(3):
        if pbc[k]:
            continue
        u = full[k]
        z = p @ u
        order = np.argsort(z, kind="stable")
        zs = z[order]
        excess = np.maximum(np.diff(zs) - gap, 0.0)
        shift_sorted = (zs[0] - 0.5 * rc) + np.concatenate([[0.0], np.cumsum(excess)])
        shift = np.empty_like(z)
        shift[order] = shift_sorted
        extent[k] = (zs[-1] - zs[0]) - float(excess.sum())
        p -= shift[:, None] * u[None, :]
    return p, extent


def _vesin_raw(p: np.ndarray, full: np.ndarray, pbc: List[bool], rc: float):
    """Run vesin on one structure. Returns i, j (int64 [E]) and S (int64 [E, 3]) tensors.

    Args:
        p: [n, 3] float64 positions; full: [3, 3] completed cell (see
        :func:`mlip.neighbors.inputs.complete_cells`); pbc: 3 bools; rc: search radius.
    """
    from vesin import NeighborList

    if p.shape[0] < 2 and not any(pbc):
        e = torch.zeros(0, dtype=torch.long)
        return e, e, torch.zeros((0, 3), dtype=torch.long)
    p, extent = _compact_nonperiodic(p, full, pbc, rc)
    box = full.copy()
    periodic = list(pbc)
    if any(pbc) and not all(pbc):
        # vesin's mixed-periodicity mode scales with the square of the non-periodic extent;
        # a fully periodic box that is long enough along the non-periodic directions
        # (gap of 3 rc between the atoms and their images) gives the same pairs, fast.
        for k in range(3):
            if not pbc[k]:
                box[k] = full[k] * (extent[k] + 3.0 * rc)
        periodic = [True, True, True]
    nl = NeighborList(cutoff=rc, full_list=True)
    i, j, s = nl.compute(np.ascontiguousarray(p), np.ascontiguousarray(box), periodic, quantities="ijS")
    i = torch.from_numpy(np.asarray(i).astype(np.int64, copy=False))
    j = torch.from_numpy(np.asarray(j).astype(np.int64, copy=False))
    s = torch.from_numpy(np.asarray(s).astype(np.int64, copy=False).reshape(-1, 3))
    # Only periodic directions may carry a shift (pairs through the artificial images along a
    # non-periodic direction are more than rc apart, this is purely defensive).
    npbc = torch.tensor([not b for b in pbc])
    if bool(npbc.any()) and s.numel():
        ok = (s[:, npbc] == 0).all(1)
        i, j, s = i[ok], j[ok], s[ok]
    return i, j, s


def neighbor_list_vesin(positions: Tensor, cell: Tensor, pbc, cutoff: float) -> Tuple[Tensor, Tensor]:
    """vesin backend of :func:`mlip.neighbors.neighbor_list` (computes on CPU).

    Args:
        positions: [n_atoms, 3] float32/float64 (any device; copied to CPU for vesin).
        cell: [3, 3] lattice vectors as rows; pbc: [3] bool; cutoff: float.

    Returns:
        edge_index [2, n_edges] int64 and shifts [n_edges, 3] int64, sorted by
        (i, j, S0, S1, S2), on the device of ``positions``.
    """
    pbc_t, full, masked, cutoff = prepare_single(positions, cell, pbc, cutoff)
    n = positions.shape[0]
    if n == 0:
        return empty_edges(positions.device)
    rc = search_cutoff(cutoff, positions, masked)
    p = positions.detach().to("cpu", torch.float64).numpy()
    i, j, s = _vesin_raw(p, full[0].numpy(), pbc_t[0].tolist(), rc)
    return finalize_edges(positions, masked, None, i, j, s, cutoff, n)


def batched_neighbor_list_vesin(positions, cell, pbc, batch, cutoff) -> Tuple[Tensor, Tensor]:
    """vesin backend of :func:`mlip.neighbors.batched_neighbor_list` (one vesin call per structure).

    Args:
        positions: [n_atoms, 3]; cell: [n_graphs, 3, 3]; pbc: [n_graphs, 3] bool;
        batch: [n_atoms] int64 sorted structure index; cutoff: float.

    Returns:
        edge_index [2, n_edges] int64 (global indices) and shifts [n_edges, 3] int64, grouped
        by structure in order, on the device of ``positions``.
    """
    pbc_t, full, masked, batch, counts, cutoff = prepare_batch(positions, cell, pbc, batch, cutoff)
    n = positions.shape[0]
    if n == 0:
        return empty_edges(positions.device)
    rc = search_cutoff(cutoff, positions, masked)
    p_all = positions.detach().to("cpu", torch.float64).numpy()
    ptr = [0] + torch.cumsum(counts.cpu(), 0).tolist()
    ii, jj, ss, gg = [], [], [], []
    for g in range(full.shape[0]):
        a, b = ptr[g], ptr[g + 1]
        if b - a == 0:
            continue
        i, j, s = _vesin_raw(p_all[a:b], full[g].numpy(), pbc_t[g].tolist(), rc)
        if i.numel() == 0:
            continue
        ii.append(i + a)
        jj.append(j + a)
        ss.append(s)
        gg.append(torch.full_like(i, g))
    if not ii:
        return empty_edges(positions.device)
    i, j, s, eg = torch.cat(ii), torch.cat(jj), torch.cat(ss), torch.cat(gg)
    return finalize_edges(positions, masked, eg, i, j, s, cutoff, n)
