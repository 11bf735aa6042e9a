"""Neighbour lists for periodic, partially periodic and isolated structures.

:func:`neighbor_list` (one structure) and :func:`batched_neighbor_list` (many structures)
return full lists ``edge_index [2, n_edges]`` / ``shifts [n_edges, 3]`` (int64) with every
periodic image, such that ``pos[j] - pos[i] + shifts @ cell`` is shorter than the cutoff,
sorted by ``(i, j, S0, S1, S2)``. Three backends give identical tensors: ``"vesin"`` (CPU,
fast), ``"torch"`` (pure-PyTorch cell list, any device) and ``"cuda"`` (CUDA kernel through
CuPy, :mod:`mlip.kernels.neighbor_list`); ``"auto"`` picks vesin on CPU and the kernel on CUDA
when it is available (``MLIP_DISABLE_KERNELS=1`` or ``backend="torch"`` force PyTorch).

The backends share :mod:`~mlip.neighbors.inputs` (validation, cell completion, search radius),
:mod:`~mlip.neighbors.images` (periodic images) and :mod:`~mlip.neighbors.edges` (the exact filter
and sort); :mod:`~mlip.neighbors.backends` holds the table of backends and picks one.
"""

from mlip.neighbors.backends import batched_neighbor_list, neighbor_list
from mlip.neighbors.cell_list import batched_neighbor_list_torch, neighbor_list_torch
from mlip.neighbors.vesin_backend import batched_neighbor_list_vesin, neighbor_list_vesin

__all__ = [
    "neighbor_list",
    "batched_neighbor_list",
    "neighbor_list_torch",
    "batched_neighbor_list_torch",
    "neighbor_list_vesin",
    "batched_neighbor_list_vesin",
]
