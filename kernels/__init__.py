"""CUDA kernels launched through CuPy (optional extra ``mlip-torch[cuda]``).

The kernels themselves arrive with the CUDA-kernel work; until then every computation runs on the
pure-PyTorch paths, which work on any device. :func:`cuda_kernels_available` is the single guard
the rest of the package uses to decide.
"""

from __future__ import annotations

import os


def cuda_kernels_available() -> bool:
    """True when CuPy imports, a CUDA device is visible and ``MLIP_DISABLE_KERNELS`` is not set.

    No kernels are registered yet, so callers fall back to PyTorch regardless; this only reports
    whether the runtime could launch them.
    """
    if os.environ.get("MLIP_DISABLE_KERNELS", "").strip() not in ("", "0"):
        return False
    try:
        import cupy  # noqa: F401
    except Exception:
        return False
    try:
        return bool(cupy.cuda.is_available())
    except Exception:
        return False
