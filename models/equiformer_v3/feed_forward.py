"""Node-wise feed-forward network of EquiformerV3 (SwiGLU-S² on a sphere grid, or gate)."""

from __future__ import annotations

import torch
from torch import nn

from mlip.so3 import S2Grid

from .activations import NodeGate
from .so3_linear import SO3Linear


class FeedForward(nn.Module):
    """x [N, K, C] → [N, K, C] with hidden width F.

    ``"swiglu_s2"``: h = SO3Linear(C→F)(x); a, b = split(Linear(F→2F)(h)); the grid product a·b
    (exact to degree L on a grid that integrates degree 3L), scaled by g = σ(Linear(C→F)(x₀)), then
    Linear(F→F); the degree-0 part gets SwiGLU(Linear(C→2F)(x₀)) added; SO3Linear(F→C) at the end.
    Channel-mixing maps commute with the grid projections, so they run on the (L+1)² coefficients
    rather than the grid points.

    ``"gate"``: SO3Linear(C→F) → SiLU on l = 0 and σ(Linear(C→L·F)(x₀)) gates on l > 0 → SO3Linear(F→C).
    """

    def __init__(self, lmax: int, channels: int, hidden_channels: int, activation: str = "swiglu_s2"):
        super().__init__()
        self.activation = activation
        self.hidden_channels = int(hidden_channels)
        self.linear_in = SO3Linear(channels, hidden_channels, lmax)
        if activation == "swiglu_s2":
            self.grid = S2Grid(lmax)
            self.grid_in = nn.Linear(hidden_channels, 2 * hidden_channels, bias=False)
            self.grid_gate = nn.Linear(channels, hidden_channels)
            self.grid_out = nn.Linear(hidden_channels, hidden_channels, bias=False)
            self.scalar_glu = nn.Linear(channels, 2 * hidden_channels)
        elif activation == "gate":
            self.gate_linear = nn.Linear(channels, lmax * hidden_channels)
            self.gate = NodeGate(lmax, hidden_channels)
        else:
            raise ValueError(f"unknown activation {activation!r}; use 'swiglu_s2' or 'gate'")
        self.linear_out = SO3Linear(hidden_channels, channels, lmax)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x0 = torch.split(x, [1, x.shape[1] - 1], dim=1)[0].squeeze(1)
        h = self.linear_in(x)
        if self.activation == "swiglu_s2":
            a, b = self.grid.to_grid(self.grid_in(h)).chunk(2, dim=-1)  # [N, G, F] each
            h = self.grid_out(self.grid.from_grid(a * b) * torch.sigmoid(self.grid_gate(x0))[:, None, :])
            a, b = self.scalar_glu(x0).chunk(2, dim=-1)
            h0, rest = torch.split(h, [1, h.shape[1] - 1], dim=1)
            h = torch.cat([h0 + (torch.nn.functional.silu(a) * b)[:, None, :], rest], dim=1)
        else:
            h = self.gate(h, self.gate_linear(x0))
        return self.linear_out(h)
