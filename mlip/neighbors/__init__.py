"""Neighbour lists for periodic, partially periodic and isolated structures.

:func:`neighbor_list` (one structure) and :func:`batched_neighbor_list` (many structures)
return full lists ``edge_index [2, n_edges]`` / ``shifts [n_edges, 3]`` (int64) with every
periodic image, such that ``pos[j] - pos[i] + shifts @ cell`` is shorter than the cutoff,
sorted by ``(i, j, S0, S1, S2)``. Three backends give identical tensors: ``"vesin"`` (CPU,
fast), ``"torch"`` (pure-PyTorch cell list, any device) and ``"cuda"`` (CUDA kernel through
CuPy, :mod:`mlip.kernels.neighbor_list`); ``"auto"`` picks vesin on CPU and the kernel on CUDA
when it is available (``MLIP_DISABLE_KERNELS=1`` or ``backend="torch"`` force PyTorch).
"""

from .cell_list import (
    batched_neighbor_list,
    batched_neighbor_list_torch,
    neighbor_list,
    neighbor_list_torch,
)
from .vesin_backend import batched_neighbor_list_vesin, neighbor_list_vesin

__all__ = [
    "neighbor_list",
    "batched_neighbor_list",
    "neighbor_list_torch",
    "batched_neighbor_list_torch",
    "neighbor_list_vesin",
    "batched_neighbor_list_vesin",
]
