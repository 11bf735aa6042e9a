"""SO3Linear: a channel-mixing linear map per degree, shared over the orders m."""

from __future__ import annotations

import math

import torch
from torch import nn


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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = torch.split(x, [2 * l + 1 for l in range(self.lmax + 1)], dim=1)
        out = [torch.matmul(part, w.T) for part, w in zip(parts, self.weight.unbind(0))]
        if self.bias is not None:
            out[0] = out[0] + self.bias
        return torch.cat(out, dim=1)

    def extra_repr(self) -> str:
        return f"{self.in_channels} → {self.out_channels}, lmax={self.lmax}, bias={self.bias is not None}"
