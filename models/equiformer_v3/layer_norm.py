"""Equivariant layer norms for features [N, (L + 1)², C] in the e3nn layout."""

from __future__ import annotations

import torch
from torch import nn

from mlip.derived_constants import DerivedConstants
from mlip.so3 import degrees


class MergedLayerNorm(DerivedConstants):
    """One normaliser per node shared by all degrees (EquiformerV3's merged layer norm).

    x₀ ← x₀ − mean_c x₀ (scalars only); σ² = 1/(L+1) Σ_l 1/(2l+1) Σ_m mean_c x_lm²;
    y_lm,c = γ_l,c x_lm,c / √(σ² + ε); y₀ += β. Every degree is scaled by the same rotation-invariant
    number, so the map is equivariant. Computed in at least float32.
    """

    def __init__(self, lmax: int, channels: int, eps: float = 1e-5):
        super().__init__()
        self.lmax, self.channels, self.eps = int(lmax), int(channels), float(eps)
        self.weight = nn.Parameter(torch.ones(lmax + 1, channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        deg = degrees(lmax)
        self.register_buffer("degree", deg, persistent=False)
        self.register_constant("component_weight", 1.0 / ((2 * deg + 1) * (lmax + 1)).double())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        in_dtype = x.dtype
        x = x.to(torch.promote_types(in_dtype, torch.float32))
        x0, rest = torch.split(x, [1, x.shape[1] - 1], dim=1)
        x = torch.cat([x0 - x0.mean(dim=-1, keepdim=True), rest], dim=1)
        var = ((x * x).mean(dim=-1) * self.component_weight.to(x.dtype)).sum(dim=-1)  # [N]
        y = x * torch.rsqrt(var + self.eps)[:, None, None] * self.weight.index_select(0, self.degree).to(x.dtype)
        y0, rest = torch.split(y, [1, y.shape[1] - 1], dim=1)
        return torch.cat([y0 + self.bias.to(x.dtype), rest], dim=1).to(in_dtype)


class SeparateLayerNorm(nn.Module):
    """A normaliser per degree (EquiformerV2-style), the ablation of :class:`MergedLayerNorm`.

    l = 0: ordinary layer norm over channels. l > 0: x_l ← x_l / √(mean_c (1/(2l+1)) Σ_m x_lm² + ε).
    Affine weight per (l, channel), bias on l = 0.
    """

    def __init__(self, lmax: int, channels: int, eps: float = 1e-5):
        super().__init__()
        self.lmax, self.channels, self.eps = int(lmax), int(channels), float(eps)
        self.weight = nn.Parameter(torch.ones(lmax + 1, channels))
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        in_dtype = x.dtype
        x = x.to(torch.promote_types(in_dtype, torch.float32))
        out = []
        for l, xl in enumerate(torch.split(x, [2 * l + 1 for l in range(self.lmax + 1)], dim=1)):
            if l == 0:
                xl = xl - xl.mean(dim=-1, keepdim=True)
            var = (xl * xl).mean(dim=(1, 2), keepdim=True)  # mean over m (1/(2l+1) Σ_m) and channels
            y = xl * torch.rsqrt(var + self.eps) * self.weight[l].to(x.dtype)
            if l == 0:
                y = y + self.bias.to(x.dtype)
            out.append(y)
        return torch.cat(out, dim=1).to(in_dtype)


def make_norm(kind: str, lmax: int, channels: int) -> nn.Module:
    """``"merged"`` (default of the paper) or ``"separate"`` (per-degree ablation)."""
    if kind == "merged":
        return MergedLayerNorm(lmax, channels)
    if kind == "separate":
        return SeparateLayerNorm(lmax, channels)
    raise ValueError(f"unknown norm {kind!r}; use 'merged' or 'separate'")
