"""Neighbour lists for periodic, partially periodic and isolated structures.

:func:`neighbor_list` (one structure) and :func:`batched_neighbor_list` (many structures)
return full lists ``edge_index [2, n_edges]`` / ``shifts [n_edges, 3]`` (int64) with every
periodic image, such that ``pos[j] - pos[i] + shifts @ cell`` is shorter than the cutoff,
sorted by ``(i, j, S0, S1, S2)``. The ``backend`` option picks who computes them; all give
identical tensors: ``"vesin"`` (CPU, fast; :mod:`~mlip.neighbors.vesin_backend`), ``"torch"``
(pure-PyTorch cell list, any device; :mod:`~mlip.neighbors.cell_list`) and ``"cuda"`` (CUDA kernels
through CuPy; :mod:`~mlip.neighbors.cuda_backend`); ``"auto"`` (:func:`resolve_backend`) picks vesin on
CPU and the kernels on CUDA when they are available (``MLIP_DISABLE_KERNELS=1`` or ``backend="torch"``
force PyTorch). :data:`BACKENDS` holds each backend's pair of functions, which stay reachable in
their submodules.

The backends share :mod:`~mlip.neighbors.inputs` (validation, cell completion, search radius),
:mod:`~mlip.neighbors.images` (periodic images) and :mod:`~mlip.neighbors.edges` (the exact filter
and sort); :mod:`~mlip.neighbors.backends` holds the table of backends and picks one.
"""

from mlip.neighbors.backends import BACKENDS, batched_neighbor_list, neighbor_list, resolve_backend

__all__ = ["neighbor_list", "batched_neighbor_list", "BACKENDS", "resolve_backend"]
