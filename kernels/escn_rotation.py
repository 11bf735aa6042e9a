"""Fused eSCN rotations: the CUDA kernels of ``escn_rotation.cu`` as autograd functions.

Public operations (the model calls these; they dispatch):

* :func:`gather_rotate` (x [N, K, C], wigner [E, K_M, K], index [S, E]) → [E, K_M, S·C]:
  gather the source-node coefficients of every edge and rotate them into the edge frame;
* :func:`rotate_scatter` (wigner, msg [E, K_M, S·C], index [S, E], num_nodes) → [N, K, C]:
  rotate edge messages back and sum them into their nodes.

Both are defined by the PyTorch references of :mod:`mlip.kernels.escn_reference` (the CPU path).
The kernels run when every tensor is on a CUDA device, the dtype is float32 or float64, CuPy is
available and kernels are not disabled (``use_kernels=False``, ``MLIP_DISABLE_KERNELS=1`` or
:func:`mlip.kernels.disable_kernels`); otherwise the reference runs. CPU tensors never reach CuPy.

Backward passes use the kernels too (the adjoint of gather-rotate is rotate-scatter and vice
versa; the Wigner gradient is :func:`edge_outer`). When a second derivative is requested
(``create_graph=True``, training with a force loss), the backward is computed with the
differentiable PyTorch formulas instead, so double backward is exact.
"""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import torch

from . import cuda_kernels_available, kernels_disabled
from .escn_reference import (
    edge_outer_reference,
    gather_rotate_reference,
    layout_from_shape,
    rotate_scatter_reference,
)

_DTYPES = {torch.float32: "float", torch.float64: "double"}
_NAMES = tuple(f"{k}<{t}>" for k in ("gather_rotate", "rotate_scatter", "edge_outer") for t in ("float", "double"))


def _kernel(name: str, dtype: torch.dtype):
    from .cupy_module import module

    return module("escn_rotation", _NAMES).get_function(f"{name}<{_DTYPES[dtype]}>")


#: the kernels decode their task numbers (and rotate_scatter its slots s * E + e) with 32-bit
#: unsigned arithmetic, and keep 2l + 1 accumulators per lane in registers (l <= 8)
_MAX_TASKS = (1 << 31) - 1
_MAX_LMAX = 8


def kernels_fit(wigner: torch.Tensor, index: torch.Tensor, num_nodes: int = 0) -> bool:
    """True when the problem is within the kernels' index range (else the reference runs).

    The tasks are one per (edge, source, degree) in gather_rotate, per (node, degree) in
    rotate_scatter and per (edge, degree) in edge_outer; each must number fewer than 2^31, so the
    grid-stride loop cannot wrap. Shapes: wigner [E, K_M, K], index [S, E]."""
    s, e = index.shape
    lmax = int(round(wigner.shape[2] ** 0.5)) - 1
    degrees = lmax + 1
    return (lmax <= _MAX_LMAX and e * s * degrees <= _MAX_TASKS and s * e <= _MAX_TASKS
            and num_nodes * degrees <= _MAX_TASKS)


def should_use_kernels(use_kernels: Optional[bool], *tensors: torch.Tensor, fits: bool = True) -> bool:
    """Dispatch rule. ``use_kernels``: None (automatic), False (PyTorch) or True (kernels, or an error).
    ``fits``: :func:`kernels_fit` of the problem."""
    if use_kernels is False:
        return False
    eligible = fits and all(t.is_cuda for t in tensors) and tensors[0].dtype in _DTYPES and all(
        t.dtype == tensors[0].dtype for t in tensors if t.is_floating_point())
    if use_kernels is None:
        return eligible and cuda_kernels_available()
    if not eligible:
        raise ValueError("use_kernels=True needs CUDA tensors of one dtype, float32 or float64, lmax <= 8 "
                         "and fewer than 2^31 rows")
    if kernels_disabled() or not cuda_kernels_available():
        raise RuntimeError("use_kernels=True but the CUDA kernels are unavailable (CuPy / CUDA) or disabled")
    return True


def node_csr(index: torch.Tensor, num_nodes: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Slots s·E + e grouped by node: (perm [S·E], rowptr [num_nodes + 1]), int64, in increasing slot order."""
    flat = index.reshape(-1)
    sorted_nodes, perm = torch.sort(flat, stable=True)
    # searchsorted, not bincount: no device-to-host synchronisation on CUDA
    rowptr = torch.searchsorted(sorted_nodes, torch.arange(num_nodes + 1, device=index.device))
    return perm, rowptr


def _layout(wigner, index, channels_total):
    lmax, mmax = layout_from_shape(wigner)
    s, e = index.shape
    if wigner.shape[0] != e:
        raise ValueError(f"wigner has {wigner.shape[0]} edges, index {e}")
    if channels_total % s:
        raise ValueError(f"{channels_total} message channels do not split into {s} sources")
    return lmax, mmax, s, e, channels_total // s


def launch_gather_rotate(x: torch.Tensor, wigner: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Kernel of :func:`gather_rotate` (contiguous CUDA tensors, no autograd)."""
    n, k, c = x.shape
    lmax, mmax, s, e, _ = _layout(wigner, index, index.shape[0] * c)
    k_m = wigner.shape[1]
    x, wigner, index = x.contiguous(), wigner.contiguous(), index.contiguous().long()
    out = torch.empty((e, k_m, s * c), dtype=x.dtype, device=x.device)
    from .cupy_module import launch_rows

    launch_rows(_kernel("gather_rotate", x.dtype), e * s * (lmax + 1),
           (x, wigner, index, out, np.int64(e), np.int32(k), np.int32(k_m), np.int32(s), np.int32(c),
            np.int32(lmax), np.int32(mmax)))
    return out


def launch_rotate_scatter(wigner: torch.Tensor, msg: torch.Tensor, index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Kernel of :func:`rotate_scatter` (deterministic: a CSR table per node, no atomics)."""
    lmax, mmax, s, e, c = _layout(wigner, index, msg.shape[2])
    k_m, k = wigner.shape[1], wigner.shape[2]
    wigner, msg, index = wigner.contiguous(), msg.contiguous(), index.contiguous().long()
    perm, rowptr = node_csr(index, num_nodes)
    out = torch.empty((num_nodes, k, c), dtype=msg.dtype, device=msg.device)
    from .cupy_module import launch_rows

    launch_rows(_kernel("rotate_scatter", msg.dtype), num_nodes * (lmax + 1),
           (wigner, msg, perm, rowptr, out, np.int64(num_nodes), np.int64(e), np.int32(k), np.int32(k_m),
            np.int32(s), np.int32(c), np.int32(lmax), np.int32(mmax)))
    return out


def launch_edge_outer(a: torch.Tensor, b: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Kernel of :func:`mlip.kernels.escn_reference.edge_outer_reference` → [E, K_M, K]."""
    k_m, k = a.shape[1], b.shape[1]
    s, e = index.shape
    c = b.shape[2]
    lmax = int(round(k ** 0.5)) - 1
    mmax = layout_from_shape(a.new_empty((0, k_m, k)))[1]
    a, b, index = a.contiguous(), b.contiguous(), index.contiguous().long()
    out = torch.empty((e, k_m, k), dtype=a.dtype, device=a.device)
    from .cupy_module import launch_rows

    launch_rows(_kernel("edge_outer", a.dtype), e * (lmax + 1),
           (a, b, index, out, np.int64(e), np.int32(k), np.int32(k_m), np.int32(s), np.int32(c),
            np.int32(lmax), np.int32(mmax)))
    return out


class GatherRotate(torch.autograd.Function):
    """Autograd function of :func:`gather_rotate` on the kernels (double backward through PyTorch)."""

    @staticmethod
    def forward(ctx, x, wigner, index):
        ctx.save_for_backward(x, wigner, index)
        return launch_gather_rotate(x, wigner, index)

    @staticmethod
    def backward(ctx, grad):
        x, wigner, index = ctx.saved_tensors
        need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        gx = gw = None
        if torch.is_grad_enabled():  # create_graph=True: differentiable formulas
            if need_x:
                gx = rotate_scatter_reference(wigner, grad, index, x.shape[0])
            if need_w:
                gw = edge_outer_reference(grad, x, index)
        else:
            grad = grad.contiguous()
            if need_x:
                gx = launch_rotate_scatter(wigner, grad, index, x.shape[0])
            if need_w:
                gw = launch_edge_outer(grad, x, index)
        return gx, gw, None


class RotateScatter(torch.autograd.Function):
    """Autograd function of :func:`rotate_scatter` on the kernels (double backward through PyTorch)."""

    @staticmethod
    def forward(ctx, wigner, msg, index, num_nodes):
        ctx.save_for_backward(wigner, msg, index)
        return launch_rotate_scatter(wigner, msg, index, num_nodes)

    @staticmethod
    def backward(ctx, grad):
        wigner, msg, index = ctx.saved_tensors
        need_w, need_m = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        gw = gm = None
        if torch.is_grad_enabled():
            if need_m:
                gm = gather_rotate_reference(grad, wigner, index)
            if need_w:
                gw = edge_outer_reference(msg, grad, index)
        else:
            grad = grad.contiguous()
            if need_m:
                gm = launch_gather_rotate(grad, wigner, index)
            if need_w:
                gw = launch_edge_outer(msg, grad, index)
        return gw, gm, None, None


def gather_rotate(x: torch.Tensor, wigner: torch.Tensor, index: torch.Tensor,
                  use_kernels: Optional[bool] = None) -> torch.Tensor:
    """x [N, K, C], wigner [E, K_M, K] (block diagonal by degree), index [S, E] → [E, K_M, S·C].

    msg[e, :, sC:(s+1)C] = W_e · x[index[s, e]] (see :func:`mlip.kernels.escn_reference.gather_rotate_reference`).
    """
    if should_use_kernels(use_kernels, x, wigner, index, fits=kernels_fit(wigner, index, x.shape[0])):
        return GatherRotate.apply(x, wigner, index)
    return gather_rotate_reference(x, wigner, index)


def rotate_scatter(wigner: torch.Tensor, msg: torch.Tensor, index: torch.Tensor, num_nodes: int,
                   use_kernels: Optional[bool] = None) -> torch.Tensor:
    """wigner [E, K_M, K], msg [E, K_M, S·C], index [S, E] → [num_nodes, K, C].

    out[n] = Σ_{(s, e): index[s, e] = n} W_eᵀ · msg[e, :, sC:(s+1)C]
    (see :func:`mlip.kernels.escn_reference.rotate_scatter_reference`).
    """
    if should_use_kernels(use_kernels, wigner, msg, index, fits=kernels_fit(wigner, index, int(num_nodes))):
        return RotateScatter.apply(wigner, msg, index, int(num_nodes))
    return rotate_scatter_reference(wigner, msg, index, num_nodes)
