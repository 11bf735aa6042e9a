"""Nonlinearities of EquiformerV3: SwiGLU-S² on edges and nodes, the gate ablation, SmoothLeakyReLU."""

from __future__ import annotations

import torch
from torch import nn

from mlip.so3 import S2Grid, degrees, degrees_m_primary


def smooth_leaky_relu(x: torch.Tensor, negative_slope: float = 0.2) -> torch.Tensor:
    """(1+a)/2 · x + (1−a)/2 · x · (2σ(x) − 1) = x · (a + (1 − a) σ(x)); a = 0.2: 0.6x + 0.4x(2σ(x) − 1)."""
    return x * (negative_slope + (1 - negative_slope) * torch.sigmoid(x))


class EdgeSwiGLUS2(nn.Module):
    """SwiGLU-S² on m-truncated edge messages (attention of EquiformerV3).

    Input u [E, K_M, 2h] and invariant scalars s [E, 3h]. The two halves of u are multiplied as
    functions on the sphere — an exact Gaunt self-product on a grid that integrates degree 3L —
    then gated per channel by σ(s[2h:3h]); the degree-0 part gets SiLU(s[:h]) ⊙ s[h:2h] added.
    Output [E, K_M, h]. Exactly equivariant under rotations about the edge.
    """

    def __init__(self, lmax: int, mmax: int, channels: int):
        super().__init__()
        self.channels = int(channels)
        self.grid = S2Grid(lmax, mmax)

    @staticmethod
    def num_scalars(lmax: int, channels: int) -> int:
        return 3 * channels

    def forward(self, u: torch.Tensor, scalars: torch.Tensor) -> torch.Tensor:
        a, b = self.grid.to_grid(u).chunk(2, dim=-1)  # [E, G, h] each
        s_act, s_lin, s_gate = scalars.chunk(3, dim=-1)
        out = self.grid.from_grid(a * b) * torch.sigmoid(s_gate)[:, None, :]
        out0, rest = torch.split(out, [1, out.shape[1] - 1], dim=1)
        return torch.cat([out0 + (torch.nn.functional.silu(s_act) * s_lin)[:, None, :], rest], dim=1)


class EdgeGate(nn.Module):
    """Gate activation on edge messages (ablation): SiLU on l = 0, σ(gate_l,c) on each l > 0.

    Input u [E, K_M, h] (m-primary) and scalars [E, L·h] → [E, K_M, h].
    """

    def __init__(self, lmax: int, mmax: int, channels: int):
        super().__init__()
        self.lmax, self.channels = int(lmax), int(channels)
        deg = degrees_m_primary(lmax, mmax)
        self.register_buffer("gate_index", (deg[1:] - 1).clamp(min=0), persistent=False)

    @staticmethod
    def num_scalars(lmax: int, channels: int) -> int:
        return lmax * channels

    def forward(self, u: torch.Tensor, scalars: torch.Tensor) -> torch.Tensor:
        gates = torch.sigmoid(scalars).view(u.shape[0], self.lmax, self.channels).index_select(1, self.gate_index)
        u0, rest = torch.split(u, [1, u.shape[1] - 1], dim=1)
        return torch.cat([torch.nn.functional.silu(u0), rest * gates], dim=1)


class NodeGate(nn.Module):
    """Gate activation on node features [N, (L + 1)², F] with gates [N, L·F] (feed-forward ablation)."""

    def __init__(self, lmax: int, channels: int):
        super().__init__()
        self.lmax, self.channels = int(lmax), int(channels)
        self.register_buffer("gate_index", (degrees(lmax)[1:] - 1), persistent=False)

    def forward(self, x: torch.Tensor, scalars: torch.Tensor) -> torch.Tensor:
        gates = torch.sigmoid(scalars).view(x.shape[0], self.lmax, self.channels).index_select(1, self.gate_index)
        x0, rest = torch.split(x, [1, x.shape[1] - 1], dim=1)
        return torch.cat([torch.nn.functional.silu(x0), rest * gates], dim=1)
