"""CUDA kernels launched through CuPy (optional extra ``mlip-torch[cuda]``).

Two families, each a ``.cu`` source shipped with the package and compiled at first use by NVRTC
(:mod:`mlip.kernels.cupy_module`):

* ``neighbor_list.cu``: a cell-list neighbour search for batches of structures
  (``backend="cuda"`` of :func:`mlip.neighbors.neighbor_list`, driven by
  :mod:`mlip.neighbors.cuda_backend`);
* :mod:`mlip.kernels.escn_rotation`: the fused gather-rotate and rotate-scatter steps of every
  EquiformerV3 layer, with backward passes, as ``torch.autograd.Function`` s.

They are used automatically when the data is on a CUDA device and CuPy imports; on CPU nothing
changes (CPU tensors never reach CuPy). The PyTorch path is forced by ``MLIP_DISABLE_KERNELS=1``,
by the context manager :func:`disable_kernels`, or per call (``use_kernels=False``,
``backend="torch"``). :func:`cuda_kernels_available` is the single guard.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading

_STATE = threading.local()


def kernels_disabled() -> bool:
    """True when ``MLIP_DISABLE_KERNELS`` is set (to anything but ``0``) or inside :func:`disable_kernels`."""
    if os.environ.get("MLIP_DISABLE_KERNELS", "").strip() not in ("", "0"):
        return True
    return getattr(_STATE, "depth", 0) > 0


@contextlib.contextmanager
def disable_kernels():
    """Context manager: every operation inside runs on the PyTorch path (this thread)."""
    _STATE.depth = getattr(_STATE, "depth", 0) + 1
    try:
        yield
    finally:
        _STATE.depth -= 1


@functools.lru_cache(maxsize=None)
def _cupy_has_cuda() -> bool:
    try:
        import cupy
    except Exception:
        return False
    try:
        return bool(cupy.cuda.is_available())
    except Exception:
        return False


def cuda_kernels_available() -> bool:
    """True when CuPy imports, a CUDA device is visible and the kernels are not disabled."""
    if kernels_disabled():
        return False
    return _cupy_has_cuda()
