"""Neighbour lists for periodic, partially periodic and isolated structures.

:func:`neighbor_list` (one structure) and :func:`batched_neighbor_list` (many structures)
return full lists ``edge_index [2, n_edges]`` / ``shifts [n_edges, 3]`` (int64) with every
periodic image, such that ``pos[j] - pos[i] + shifts @ cell`` is shorter than the cutoff,
sorted by ``(i, j, S0, S1, S2)``. Two backends give identical tensors: ``"vesin"`` (CPU,
fast) and ``"torch"`` (pure-PyTorch cell list, any device); ``"auto"`` picks vesin on CPU.
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
