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


def launch(kernel, n_threads: int, args: Sequence) -> None:
    """Run ``kernel`` with a grid-stride launch over ``n_threads`` on torch's current stream.

    Tensor arguments are passed by DLPack; every other argument must already be a numpy scalar
    of the C type (``np.int64`` for ``long long``, ``np.int32`` for ``int``, ``np.float64``).
    """
    import cupy

    if n_threads <= 0:
        return
    stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    with stream:
        cargs = tuple(to_cupy(a) if isinstance(a, torch.Tensor) else a for a in args)
        grid = min((n_threads + BLOCK - 1) // BLOCK, 1 << 20)
        kernel((grid,), (BLOCK,), cargs)
