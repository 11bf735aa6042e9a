"""The neighbour-list backends by name, and the functions that pick one.

:data:`BACKENDS` maps each name to its pair of functions (one structure, a batch): ``"torch"``
(:mod:`mlip.neighbors.cell_list`), ``"vesin"`` (:mod:`mlip.neighbors.vesin_backend`) and ``"cuda"``
(:mod:`mlip.neighbors.cuda_backend`). :func:`resolve_backend` turns ``"auto"`` into one of them;
:func:`neighbor_list` and :func:`batched_neighbor_list` call the chosen backend. The backends share
only :mod:`mlip.neighbors.inputs`, :mod:`mlip.neighbors.images` and :mod:`mlip.neighbors.edges`,
never each other.
"""

from __future__ import annotations

import importlib
from typing import Callable, Dict, Tuple

import torch

from mlip.kernels import cuda_kernels_available
from mlip.neighbors.cell_list import batched_neighbor_list_torch, neighbor_list_torch
from mlip.neighbors.cuda_backend import batched_neighbor_list_cuda, neighbor_list_cuda
from mlip.neighbors.vesin_backend import batched_neighbor_list_vesin, neighbor_list_vesin

__all__ = ["BACKENDS", "resolve_backend", "neighbor_list", "batched_neighbor_list"]

#: backend name → the backend's ``(neighbor_list, batched_neighbor_list)``
BACKENDS: Dict[str, Tuple[Callable, Callable]] = {
    "vesin": (neighbor_list_vesin, batched_neighbor_list_vesin),
    "torch": (neighbor_list_torch, batched_neighbor_list_torch),
    "cuda": (neighbor_list_cuda, batched_neighbor_list_cuda),
}


def resolve_backend(backend: str, device: torch.device) -> str:
    """The backend ``backend`` names on ``device``: ``"auto"`` is vesin on CPU (torch when vesin
    is not installed), the CUDA kernel on a CUDA device when
    :func:`mlip.kernels.cuda_kernels_available`, else torch; any other name must be a key of
    :data:`BACKENDS` (ValueError otherwise)."""
    if backend != "auto" and backend not in BACKENDS:
        raise ValueError(f"unknown neighbour-list backend {backend!r}; use 'auto', 'vesin', 'torch' or 'cuda'")
    if backend == "auto":
        if device.type != "cpu":
            return "cuda" if device.type == "cuda" and cuda_kernels_available() else "torch"
        try:
            importlib.import_module("vesin")
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
            "cuda" (:mod:`mlip.neighbors.cuda_backend`, CUDA tensors only).

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
    single, _ = BACKENDS[resolve_backend(backend, positions.device)]
    return single(positions, cell, pbc, cutoff)


def batched_neighbor_list(positions, cell, pbc, batch, cutoff, backend="auto"):
    """Neighbour lists of many structures at once.

    Args:
        positions: [n_atoms, 3] (float32 or float64, any device).
        cell: [n_graphs, 3, 3] lattice vectors as rows.
        pbc: [n_graphs, 3] bool.
        batch: [n_atoms] int64 structure index of each atom (atoms of a structure
            contiguous and structures in order).
        cutoff: float (Å).
        backend: "auto", "vesin", "torch" or "cuda" (see :func:`neighbor_list`).

    Returns:
        edge_index [2, n_edges] int64 with global atom indices and shifts [n_edges, 3] int64;
        edges grouped by structure in order (and sorted by (i, j, S) within a structure),
        identical to concatenating the per-structure :func:`neighbor_list` results with atom
        offsets. A structure with zero atoms or one isolated atom gives no edges.
    """
    positions = torch.as_tensor(positions)
    _, batched = BACKENDS[resolve_backend(backend, positions.device)]
    return batched(positions, cell, pbc, batch, cutoff)
