"""Loading the ``.cu`` sources with CuPy and exchanging tensors with PyTorch (no copies).

CuPy is imported lazily, inside these functions only: importing :mod:`mlip.kernels` never needs
it. Modules are compiled by NVRTC at first use and cached per (source, device). Tensors cross
by DLPack (:func:`to_cupy`), and kernels run on PyTorch's current CUDA stream (:func:`launch`),
so they are ordered with the surrounding PyTorch work without synchronisation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Sequence, Tuple

import torch

SOURCE_DIR = Path(__file__).resolve().parent
NVRTC_OPTIONS = ("-std=c++17",)
BLOCK = 256
ROWS_PER_BLOCK = 8
_MODULES: Dict[Tuple[str, int], object] = {}


def source(name: str) -> str:
    """Text of ``kernels/<name>.cu``."""
    return (SOURCE_DIR / f"{name}.cu").read_text()


def module(name: str, name_expressions: Sequence[str] = ()):
    """The compiled ``cupy.RawModule`` of ``kernels/<name>.cu`` on the current device (cached)."""
    import cupy

    key = (name, torch.cuda.current_device())
    if key not in _MODULES:
        _MODULES[key] = cupy.RawModule(code=source(name), options=NVRTC_OPTIONS,
                                       name_expressions=tuple(name_expressions) or None)
    return _MODULES[key]


def to_cupy(t: torch.Tensor):
    """Zero-copy CuPy view of a contiguous CUDA tensor (DLPack)."""
    import cupy

    if not t.is_contiguous():
        raise ValueError("kernel arguments must be contiguous")
    return cupy.from_dlpack(t.detach())


_STREAMS: Dict[Tuple[int, int], object] = {}


def _torch_stream():
    """CuPy view of PyTorch's current CUDA stream (one wrapper per stream, created once)."""
    import warnings

    import cupy

    ptr = torch.cuda.current_stream().cuda_stream
    key = (ptr, torch.cuda.current_device())
    if key not in _STREAMS:
        with warnings.catch_warnings():  # CuPy 14 deprecates ExternalStream for a protocol torch lacks
            warnings.simplefilter("ignore", DeprecationWarning)
            _STREAMS[key] = cupy.cuda.ExternalStream(ptr)
    return _STREAMS[key]


def launch(kernel, n_threads: int, args: Sequence) -> None:
    """Run ``kernel`` with a grid-stride launch over ``n_threads`` on torch's current stream.

    Tensor arguments are passed by DLPack; every other argument must already be a numpy scalar
    of the C type (``np.int64`` for ``long long``, ``np.int32`` for ``int``, ``np.float64``).
    """
    if n_threads <= 0:
        return
    with _torch_stream():
        cargs = tuple(to_cupy(a) if isinstance(a, torch.Tensor) else a for a in args)
        grid = min((n_threads + BLOCK - 1) // BLOCK, 1 << 20)
        kernel((grid,), (BLOCK,), cargs)


def launch_rows(kernel, n_rows: int, args: Sequence, rows_per_block: int = ROWS_PER_BLOCK) -> None:
    """Run a row kernel (blocks of 32 lanes × ``rows_per_block`` rows, grid-stride over rows) on
    torch's current stream; arguments as for :func:`launch`."""
    if n_rows <= 0:
        return
    with _torch_stream():
        cargs = tuple(to_cupy(a) if isinstance(a, torch.Tensor) else a for a in args)
        grid = min((n_rows + rows_per_block - 1) // rows_per_block, 1 << 20)
        kernel((grid,), (32, rows_per_block), cargs)
