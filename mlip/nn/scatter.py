"""Scatter reductions over edges with native PyTorch ops (no torch-scatter).

All functions reduce ``src`` over its first dimension into ``dim_size`` segments given by
``index``; trailing dimensions are kept.
"""

from __future__ import annotations

import torch


def scatter_sum(src: torch.Tensor, index: torch.Tensor, dim_size: int) -> torch.Tensor:
    """Sum of ``src`` [n, ...] into [dim_size, ...] by ``index`` [n].

    Traced by torch.compile, a sum into one segment (one structure's energy) is a plain sum over the
    first dimension: torch 2.13's inductor fails to generate the multi-threaded CPU kernel of an
    atomic-add scatter into a single row. Eagerly the scatter runs as always (bit for bit as before)."""
    if dim_size == 1 and torch.compiler.is_compiling():
        return src.sum(0, keepdim=True)
    out = src.new_zeros((dim_size,) + tuple(src.shape[1:]))
    return out.index_add_(0, index, src)


def scatter_max(src: torch.Tensor, index: torch.Tensor, dim_size: int) -> torch.Tensor:
    """Segment maximum of ``src`` [n, ...] into [dim_size, ...]; empty segments hold -inf."""
    shape = (dim_size,) + tuple(src.shape[1:])
    out = src.new_full(shape, float("-inf"))
    idx = index.view((-1,) + (1,) * (src.dim() - 1)).expand_as(src)
    return out.scatter_reduce(0, idx, src, reduce="amax", include_self=True)
