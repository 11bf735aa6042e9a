"""GPU neighbour search (cell list, and all pairs for small structures): ``backend="cuda"`` of
:func:`mlip.neighbors.neighbor_list`, whose kernels are ``kernels/neighbor_list.cu`` (compiled by CuPy
through :mod:`mlip.kernels.cupy_module`).

Same output as the CPU paths (edge set (i, j, integer shift S), sorted by (i, j, S0, S1, S2)):
the kernels apply the exact distance filter of :func:`mlip.neighbors.edges.finalize_edges`
themselves (same operations, same rounding) and write each atom's edges sorted, so no global
filter or sort follows.

Steps (all on the device of the positions; PyTorch except step 4):

1. validate, complete the cells of partially periodic structures (shared helpers);
2. wrap atoms into their cells along periodic directions, and replicate each atom with exactly
   the lattice translations that can bring it within the search radius ``rc`` of the cell
   (so cells smaller than the cutoff get every image, as in the torch backend);
3. per structure, bin the ghosts into a grid of bins at least ``rc / ns`` wide along x, y and z
   (``ns = 2``); the grid has at most ``4·n_ghosts + 27`` bins per structure (bins widen when a
   structure is spread over empty space), and ghosts are sorted by global bin id;
4. ``count_pairs`` (one thread per atom) counts the edges (i, j, S) whose ghost lies closer than
   ``rc`` in the (2ns + 1)³ stencil and which pass the exact filter, an exclusive scan gives the
   offsets, ``fill_pairs`` writes them and sorts each atom's segment: count first, then fill, so
   no pair is ever dropped.

Step 4 is a callable (``search``) so that the tests run steps 1–3 on the CPU with a PyTorch
emulation of the kernels (:func:`search_torch`) and with the kernel code itself compiled for the
host.

Batches of small structures (at most ``SMALL_MAX_ATOMS`` atoms each, as in batched relaxations)
take a shorter path, :func:`all_pairs`: one thread per atom visits every atom of its structure and
every lattice translation that can bring it within the search radius, applies the exact filter of
:func:`finalize_edges` itself (same operations, same rounding) and writes the edges already in
sorted order, so there is no grid and no ghost array: two kernels and one synchronisation for
the edge count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Tuple

import numpy as np
import torch

from mlip.kernels import cuda_kernels_available
from mlip.kernels.cupy_module import launch, module
from mlip.neighbors.edges import empty_edges, finalize_edges
from mlip.neighbors.images import mat_rows, periodic_images
from mlip.neighbors.inputs import inv3, prepare_batch, prepare_single, search_cutoff, to_device_async

Tensor = torch.Tensor
NS = 2  # bins are at least rc / NS wide; the stencil is (2 NS + 1)^3 bins
#: structures of at most this many atoms take the all-pairs kernels (:func:`all_pairs`); the work
#: per atom is (atoms of its structure) x (translations per pair), against ~(2 NS + 1)^3 bins of
#: ghosts in the cell list
SMALL_MAX_ATOMS = 256
_SUFFIX = {torch.float32: "f32", torch.float64: "f64"}


@dataclass
class SearchPlan:
    """Binned ghosts of a batch (inputs of the kernels, see ``neighbor_list.cu``).

    gx, gy, gz [n_ghost] float64 (bin order); bin_start [n_bins + 1] int64; home [N] int64 (bin-order
    position of each atom's own ghost); cbin [N, 3] int32; graph [N] int64; grid_offset [G] int64;
    grid_dims [G, 3] int32; order [n_ghost] int64 (bin order → ghost); gatom [n_ghost], gshift
    [n_ghost, 3] (ghost → atom, lattice translation); s0 [N, 3] int64 (wrapping translation);
    pos [N, 3] input positions (float32/64, detached, contiguous); cells [G, 9] float64 (device) and
    masked [G, 3, 3] float64 (CPU): the cells with non-periodic rows zeroed; cutoff (the exact
    filter's), rc (search radius), ns.
    """

    gx: Tensor
    gy: Tensor
    gz: Tensor
    bin_start: Tensor
    home: Tensor
    cbin: Tensor
    graph: Tensor
    grid_offset: Tensor
    grid_dims: Tensor
    order: Tensor
    gatom: Tensor
    gshift: Tensor
    s0: Tensor
    pos: Tensor
    cells: Tensor
    masked: Tensor
    cutoff: float
    rc: float
    ns: int = NS


def build_plan(positions: Tensor, batch: Tensor, n_graphs: int, full: Tensor, masked: Tensor, pbc: Tensor,
               cutoff: float, ns: int = NS) -> SearchPlan:
    """Steps 2–3. positions [N, 3] float32/64 (device), batch [N] int64 sorted, full and masked
    [G, 3, 3] float64 (CPU, :func:`complete_cells`), pbc [G, 3] bool (CPU), cutoff."""
    rc = search_cutoff(cutoff, positions, masked)
    pos64 = positions.detach().to(torch.float64)
    dev = pos64.device
    n_g = full.shape[0]
    inv = inv3(full)
    reach = torch.where(pbc, rc * inv.norm(dim=1), torch.zeros(()))  # [G, 3] fractional reach
    # the small host-side tables travel in one asynchronous copy (no synchronisation)
    packed = to_device_async(torch.cat([full.reshape(n_g, 9), inv.reshape(n_g, 9), reach,
                                        pbc.to(torch.float64), masked.to(torch.float64).reshape(n_g, 9)], 1), dev)
    full_d = packed[:, :9].reshape(n_g, 3, 3)
    inv_d = packed[:, 9:18].reshape(n_g, 3, 3)
    reach = packed[:, 18:21]
    pbc_d = packed[:, 21:24] > 0.5
    frac = mat_rows(pos64, inv_d[batch])
    per_atom_pbc = pbc_d[batch]
    s0f = torch.where(per_atom_pbc, torch.floor(frac), torch.zeros_like(frac))
    fw = frac - s0f
    pw = pos64 - mat_rows(s0f, full_d[batch])

    gatom, gshift, home_ghost = periodic_images(fw, batch, reach, pbc_d, with_home=True)
    gb = batch[gatom]
    gpos = pw[gatom] + mat_rows(gshift.to(torch.float64), full_d[gb])
    n_ghost = gpos.shape[0]

    # per-structure grids
    idx3 = gb[:, None].expand(-1, 3)
    lo = torch.full((n_graphs, 3), float("inf"), dtype=torch.float64, device=dev).scatter_reduce(
        0, idx3, gpos, reduce="amin", include_self=True)
    hi = torch.full((n_graphs, 3), float("-inf"), dtype=torch.float64, device=dev).scatter_reduce(
        0, idx3, gpos, reduce="amax", include_self=True)
    empty = ~torch.isfinite(lo[:, 0])
    lo = torch.where(empty[:, None], torch.zeros_like(lo), lo)
    ext = torch.where(empty[:, None], torch.zeros_like(hi), hi - lo).clamp_min(0.0)
    dims = torch.floor(ext * (ns / rc)).clamp_min(1.0)
    ghosts_per_graph = torch.zeros(n_graphs, dtype=torch.float64, device=dev).index_add_(
        0, gb, torch.ones(n_ghost, dtype=torch.float64, device=dev))
    cap = 4.0 * ghosts_per_graph + 27.0
    for _ in range(3):  # ≤ cap bins (widening keeps them ≥ rc / ns); axes already at 1 cannot shrink
        free = (dims > 1).sum(-1).clamp_min(1).to(torch.float64)
        shrink = (dims.prod(-1) / cap).clamp_min(1.0) ** (1.0 / free)
        dims = torch.where(dims > 1, torch.floor(dims / shrink[:, None]), dims).clamp_min(1.0)
    # guarantee (for the allocation below): a grid still over its cap becomes one bin (still exact)
    dims = torch.where((dims.prod(-1) > cap)[:, None], torch.ones_like(dims), dims)
    width = torch.where(ext > 0, ext / dims, torch.ones_like(ext))
    dims_l = dims.long()
    n_bins = dims_l.prod(-1)
    offset = torch.cumsum(n_bins, 0) - n_bins
    # room for the largest possible grids (sum of the caps, known on the host: no synchronisation);
    # bins past the real ones stay empty
    max_bins = 4 * n_ghost + 27 * n_graphs
    b = torch.floor((gpos - lo[gb]) / width[gb]).long()
    b = torch.minimum(b.clamp_min(0), dims_l[gb] - 1)
    key = offset[gb] + (b[:, 2] * dims_l[gb, 1] + b[:, 1]) * dims_l[gb, 0] + b[:, 0]
    _, order = torch.sort(key, stable=True)
    bin_start = torch.zeros(max_bins + 1, dtype=torch.long, device=dev)
    bin_start[1:] = torch.cumsum(torch.zeros(max_bins, dtype=torch.long, device=dev).index_add_(
        0, key, torch.ones_like(key)), 0)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(n_ghost, device=dev)
    gs = gpos[order]
    return SearchPlan(
        gx=gs[:, 0].contiguous(), gy=gs[:, 1].contiguous(), gz=gs[:, 2].contiguous(),
        bin_start=bin_start, home=rank[home_ghost], cbin=b[home_ghost].to(torch.int32).contiguous(),
        graph=batch.contiguous(), grid_offset=offset.contiguous(), grid_dims=dims_l.to(torch.int32).contiguous(),
        order=order, gatom=gatom, gshift=gshift.contiguous(), s0=s0f.long().contiguous(),
        pos=positions.detach().contiguous(), cells=packed[:, 24:33].contiguous(), masked=masked,
        cutoff=float(cutoff), rc=float(rc), ns=int(ns),
    )


def search_torch(plan: SearchPlan) -> Tuple[Tensor, Tensor]:
    """PyTorch emulation of ``count_pairs``/``fill_pairs``: the same stencil and candidates, then
    :func:`finalize_edges` (the filter the kernels evaluate). Returns edge_index [2, E], shifts [E, 3]."""
    dev = plan.gx.device
    n = plan.home.numel()
    ns = plan.ns
    g = plan.graph
    dims = plan.grid_dims.long()[g]  # [N, 3]
    cb = plan.cbin.long()
    out_i, out_p = [], []
    atoms = torch.arange(n, device=dev)
    for dz in range(-ns, ns + 1):
        for dy in range(-ns, ns + 1):
            z, y = cb[:, 2] + dz, cb[:, 1] + dy
            ok = (z >= 0) & (z < dims[:, 2]) & (y >= 0) & (y < dims[:, 1])
            x0 = (cb[:, 0] - ns).clamp_min(0)
            x1 = torch.minimum(cb[:, 0] + ns, dims[:, 0] - 1)
            row = plan.grid_offset[g] + (z * dims[:, 1] + y) * dims[:, 0]
            first = plan.bin_start[(row + x0).clamp(0, plan.bin_start.numel() - 1)]
            last = plan.bin_start[(row + x1 + 1).clamp(0, plan.bin_start.numel() - 1)]
            cnt = torch.where(ok, last - first, torch.zeros_like(first))
            a = torch.repeat_interleave(atoms, cnt)
            p = torch.arange(a.numel(), device=dev) - torch.repeat_interleave(torch.cumsum(cnt, 0) - cnt, cnt) \
                + torch.repeat_interleave(first, cnt)
            own = plan.home[a]
            dx = plan.gx[p] - plan.gx[own]
            d2 = dx * dx
            dyy = plan.gy[p] - plan.gy[own]
            d2 += dyy * dyy
            dzz = plan.gz[p] - plan.gz[own]
            d2 += dzz * dzz
            keep = (d2 < plan.rc * plan.rc) & (p != own)
            out_i.append(a[keep])
            out_p.append(p[keep])
    i, p = torch.cat(out_i), torch.cat(out_p)
    ghost = plan.order[p]
    j = plan.gatom[ghost]
    s = plan.gshift[ghost] - plan.s0[j] + plan.s0[i]
    return finalize_edges(plan.pos, plan.masked, plan.graph[i], i, j, s, plan.cutoff, n)


def search_cuda(plan: SearchPlan) -> Tuple[Tensor, Tensor]:
    """``count_pairs`` → exclusive scan → ``fill_pairs`` on the GPU (CuPy, torch's stream):
    edge_index [2, E], shifts [E, 3], filtered and sorted."""
    mod = module("neighbor_list")
    suffix = _SUFFIX[plan.pos.dtype]
    n = plan.home.numel()
    cut2 = plan.cutoff ** 2  # rounded to the dtype, as torch compares with a Python float
    common = (plan.gx, plan.gy, plan.gz, plan.bin_start, plan.home, plan.cbin, plan.graph, plan.grid_offset,
              plan.grid_dims, np.int32(plan.ns), np.float64(plan.rc * plan.rc), plan.order, plan.gatom,
              plan.gshift, plan.s0, plan.pos, plan.cells,
              np.float32(cut2) if plan.pos.dtype == torch.float32 else np.float64(cut2), np.int64(n))
    counts = torch.empty(n, dtype=torch.long, device=plan.gx.device)
    launch(mod.get_function(f"count_pairs_{suffix}"), n, common + (counts,))
    ends = torch.cumsum(counts, 0)
    total = int(ends[-1]) if n else 0
    edge_index = torch.empty((2, total), dtype=torch.long, device=plan.gx.device)
    shifts = torch.empty((total, 3), dtype=torch.long, device=plan.gx.device)
    if total:
        launch(mod.get_function(f"fill_pairs_{suffix}"), n,
               common + ((ends - counts).contiguous(), np.int64(total), edge_index, shifts))
    return edge_index, shifts


def small_tables(full: Tensor, masked: Tensor, pbc: Tensor, rc: float) -> Tensor:
    """[G, 21] float64 (CPU) per-structure table of the all-pairs kernels: inverse of the completed
    cell (9, row-major), fractional reach of the search radius ``rc`` per axis (3; -1 along
    non-periodic axes, which take no translation), the cell with non-periodic rows zeroed (9).

    full, masked [G, 3, 3] float64 and pbc [G, 3] bool, all CPU (:func:`complete_cells`)."""
    inv = inv3(full)
    reach = torch.where(pbc, rc * inv.norm(dim=1), torch.full((), -1.0, dtype=torch.float64))
    n_g = full.shape[0]
    return torch.cat([inv.reshape(n_g, 9), reach, masked.to(torch.float64).reshape(n_g, 9)], 1).contiguous()


def small_search_cuda(pos: Tensor, batch: Tensor, start: Tensor, tables: Tensor, cutoff: float
                      ) -> Tuple[Tensor, Tensor]:
    """``count_small`` → exclusive scan → ``fill_small`` on the GPU: the sorted, exactly filtered
    edge set. pos [N, 3] float32/64, batch [N] int64 (sorted), start [G + 1] int64 (atom ranges),
    tables [G, 21] float64 (:func:`small_tables`), all contiguous on one CUDA device."""
    mod = module("neighbor_list")
    suffix = _SUFFIX[pos.dtype]
    n = pos.shape[0]
    cut2 = float(cutoff) ** 2  # rounded to the dtype, as torch compares with a Python float
    common = (pos, batch, start, tables, np.float32(cut2) if pos.dtype == torch.float32 else np.float64(cut2),
              np.int64(n))
    counts = torch.empty(n, dtype=torch.long, device=pos.device)
    launch(mod.get_function(f"count_small_{suffix}"), n, common + (counts,))
    ends = torch.cumsum(counts, 0)
    total = int(ends[-1])
    edge_index = torch.empty((2, total), dtype=torch.long, device=pos.device)
    shifts = torch.empty((total, 3), dtype=torch.long, device=pos.device)
    if total:
        launch(mod.get_function(f"fill_small_{suffix}"), n,
               common + ((ends - counts).contiguous(), np.int64(total), edge_index, shifts))
    return edge_index, shifts


def all_pairs(positions: Tensor, batch: Tensor, n_graphs: int, full: Tensor, masked: Tensor, pbc: Tensor,
              cutoff: float, small_search: Callable) -> Tuple[Tensor, Tensor]:
    """Neighbour list of small structures by the all-pairs kernels (same output as the other
    backends: edge_index [2, E], shifts [E, 3], sorted by (i, j, S)). batch [N] sorted int64 on the
    device of positions; full, masked [G, 3, 3] and pbc [G, 3] on the CPU."""
    rc = search_cutoff(cutoff, positions, masked)
    dev = positions.device
    tables = to_device_async(small_tables(full, masked, pbc, rc), dev)
    start = torch.searchsorted(batch, torch.arange(n_graphs + 1, device=dev))
    return small_search(positions.detach().contiguous(), batch.contiguous(), start, tables, cutoff)


def _use_all_pairs(positions: Tensor, largest: int, small_max_atoms: int) -> bool:
    return positions.dtype in _SUFFIX and largest <= small_max_atoms


def _cell_list(positions, batch, full, masked, pbc, cutoff, search):
    plan = build_plan(positions, batch, full.shape[0], full, masked, pbc, cutoff)
    if search is None:
        search = search_cuda if positions.dtype in _SUFFIX else search_torch  # kernels: float32/64
    return search(plan)


def _require_cuda(positions: Tensor) -> None:
    if positions.device.type != "cuda" or not cuda_kernels_available():
        raise ValueError("backend='cuda' needs positions on a CUDA device and CuPy with CUDA "
                         "(and MLIP_DISABLE_KERNELS unset); use backend='torch' otherwise")


def batched_neighbor_list_cuda(positions, cell, pbc, batch, cutoff, search=None, small_search=None,
                               small_max_atoms=SMALL_MAX_ATOMS):
    """Kernel backend of :func:`mlip.neighbors.batched_neighbor_list` (same arguments and output).

    When no structure has more than ``small_max_atoms`` atoms the all-pairs kernels run
    (:func:`all_pairs`), otherwise the cell list. ``search`` and ``small_search`` replace the GPU
    pair searches of the two paths by other implementations with the same contracts (e.g.
    :func:`search_torch` or the host build of the kernels); they are meant for tests.
    """
    if search is None and small_search is None:
        _require_cuda(torch.as_tensor(positions))
    pbc_t, full, masked, batch, counts, cutoff = prepare_batch(positions, cell, pbc, batch, cutoff)
    n = positions.shape[0]
    if n == 0:
        return empty_edges(positions.device)
    if _use_all_pairs(positions, int(counts.max()), small_max_atoms):
        return all_pairs(positions, batch, full.shape[0], full, masked, pbc_t, cutoff,
                         small_search or small_search_cuda)
    return _cell_list(positions, batch, full, masked, pbc_t, cutoff, search)


def neighbor_list_cuda(positions, cell, pbc, cutoff, search=None, small_search=None,
                       small_max_atoms=SMALL_MAX_ATOMS):
    """Kernel backend of :func:`mlip.neighbors.neighbor_list` (same arguments and output; the
    all-pairs kernels for at most ``small_max_atoms`` atoms, see :func:`batched_neighbor_list_cuda`)."""
    if search is None and small_search is None:
        _require_cuda(torch.as_tensor(positions))
    pbc_t, full, masked, cutoff = prepare_single(positions, cell, pbc, cutoff)
    n = positions.shape[0]
    if n == 0:
        return empty_edges(positions.device)
    batch = torch.zeros(n, dtype=torch.long, device=positions.device)
    if _use_all_pairs(positions, n, small_max_atoms):
        return all_pairs(positions, batch, 1, full, masked, pbc_t, cutoff, small_search or small_search_cuda)
    return _cell_list(positions, batch, full, masked, pbc_t, cutoff, search)
