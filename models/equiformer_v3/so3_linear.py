"""SO3Linear: a channel-mixing linear map per degree, shared over the orders m."""

from __future__ import annotations

import math

import torch
from torch import nn

from mlip.so3 import degrees


class SO3Linear(nn.Module):
    """y_lm = W_l x_lm (+ b on l = 0): one [C_out, C_in] matrix per degree l, shared over m.

    Equivariant because it mixes channels only, never components. Input and output are in the
    e3nn layout: x [N, (L + 1)², C_in] → y [N, (L + 1)², C_out].
    """

    def __init__(self, in_channels: int, out_channels: int, lmax: int, bias: bool = True):
        super().__init__()
        self.lmax = int(lmax)
        self.in_channels = int(in_channels)
        self.out_channels = int(out_channels)
        bound = 1.0 / math.sqrt(in_channels)
        self.weight = nn.Parameter(torch.empty(lmax + 1, out_channels, in_channels).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        self.register_buffer("degree", degrees(lmax), persistent=False)
        self.register_buffer("scalar_row", (degrees(lmax) == 0).to(torch.float64)[:, None], persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # One batched matmul over the components (each with its degree's matrix) rather than one matmul
        # per degree and a concatenation: fewer operations, which is what a small structure pays for.
        weight = self.weight.index_select(0, self.degree).transpose(1, 2)  # [K, C_in, C_out]
        y = torch.bmm(x.transpose(0, 1), weight).transpose(0, 1)  # [N, K, C_out]
        if self.bias is not None:
            # + b on the l = 0 row only (the other rows get + 0, which leaves them unchanged)
            y = y + self.scalar_row.to(y.dtype) * self.bias
        return y

    def extra_repr(self) -> str:
        return f"{self.in_channels} → {self.out_channels}, lmax={self.lmax}, bias={self.bias is not None}"
