"""The end of every neighbour search: the exact distance filter and the sort that make all backends
return identical tensors.

A backend finds candidate pairs ``(i, j, S)`` with a search radius slightly larger than the cutoff
(:func:`mlip.neighbors.inputs.search_cutoff`); :func:`finalize_edges` keeps those with
``|pos[j] - pos[i] + S @ cell| < cutoff``, evaluated in the input dtype with a fixed order of
operations, and sorts them by ``(i, j, S0, S1, S2)`` (:func:`lexsort_edges`). The CUDA kernels
evaluate the same filter themselves, with the same operations.
"""

from __future__ import annotations

from typing import Tuple

import torch

from mlip.neighbors.inputs import to_device_async

Tensor = torch.Tensor

#: Largest integer allowed in a packed int64 sort or bin key.
KEY_LIMIT = 1 << 62


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
            sorted_kept = filter_and_sort_device(i, j, shifts, within, n_atoms)
            if sorted_kept is not None:
                edge_index = torch.stack([i.index_select(0, sorted_kept), j.index_select(0, sorted_kept)])
                return edge_index, shifts.index_select(0, sorted_kept)
        keep = torch.nonzero(within).flatten()
        i, j, shifts = i.index_select(0, keep), j.index_select(0, keep), shifts.index_select(0, keep)
    order = lexsort_edges(i, j, shifts, n_atoms)
    edge_index = torch.stack([i.index_select(0, order), j.index_select(0, order)])
    return edge_index, shifts.index_select(0, order)


def filter_and_sort_device(i: Tensor, j: Tensor, shifts: Tensor, keep: Tensor, n_atoms: int):
    """Indices of the kept edges in (i, j, S0, S1, S2) order, with one device-to-host
    synchronisation (count and shift ranges together): dropped edges get a key past every kept
    one, so a single argsort both filters and orders. None when the packed key would overflow
    (the caller then uses the general path). Same result as nonzero + :func:`lexsort_edges`."""
    stats = torch.cat([keep.sum()[None], shifts.min(0).values, shifts.max(0).values]).tolist()
    count, smin, smax = int(stats[0]), stats[1:4], stats[4:7]
    ranges = [int(b - a + 1) for a, b in zip(smin, smax)]
    n = max(int(n_atoms), 1)
    if n * n * ranges[0] * ranges[1] * ranges[2] >= KEY_LIMIT:
        return None
    key = ((i * n + j) * ranges[0] + (shifts[:, 0] - int(smin[0]))) * ranges[1] \
        + (shifts[:, 1] - int(smin[1]))
    key = key * ranges[2] + (shifts[:, 2] - int(smin[2]))
    key = torch.where(keep, key, torch.full_like(key, KEY_LIMIT))
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
    if n * n * ranges[0] * ranges[1] * ranges[2] < KEY_LIMIT:
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


def empty_edges(device) -> Tuple[Tensor, Tensor]:
    """The result of a search without edges: edge_index [2, 0] and shifts [0, 3], int64 on ``device``."""
    return (
        torch.zeros((2, 0), dtype=torch.long, device=device),
        torch.zeros((0, 3), dtype=torch.long, device=device),
    )
