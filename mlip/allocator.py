"""Keep glibc's malloc from returning large blocks to the OS after every force evaluation.

PyTorch on CPU allocates its big activation tensors with plain ``malloc``. glibc serves blocks above
a threshold (at most 32 MB) with ``mmap`` and unmaps them on ``free``, so every MD step page-faults
its whole working set in again; per-atom cost then grows with system size (docs/benchmarks.md,
"Notes from profiling"). Turning off ``mmap`` for malloc and raising the trim
threshold keeps freed memory in the heap for the next step, which restores linear scaling.

The setting is process-wide. :class:`mlip.MLIPCalculator` applies it once for CPU evaluation; set
``MLIP_TUNE_MALLOC=0`` to leave the allocator alone (e.g. when running under jemalloc/tcmalloc).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_applied = None


def tune_malloc(trim_threshold: int = -1) -> bool:
    """Apply the glibc settings once (``trim_threshold=-1``: never trim); True when in effect."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if os.environ.get("MLIP_TUNE_MALLOC", "1").strip() in ("0", "false", "no") or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, ...)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    _applied = bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, int(trim_threshold)))
    return _applied
