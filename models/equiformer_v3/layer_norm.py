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
        self.register_buffer("scalar_row", (deg == 0).to(torch.float64)[:, None], persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        in_dtype = x.dtype
        dtype = torch.promote_types(in_dtype, torch.float32)
        if dtype != in_dtype:
            x = x.to(dtype)
        # The l = 0 row centred and the bias added through the 0/1 column ``scalar_row`` [K, 1] rather
        # than split and concatenated: the other rows get − 0 and + 0, which leaves them unchanged
        # (the same numbers as before, in fewer operations).
        e0 = self.scalar_row.to(dtype)
        x = x - x[:, :1, :].mean(dim=-1, keepdim=True) * e0
        var = ((x * x).mean(dim=-1) * self.component_weight.to(dtype)).sum(dim=-1)  # [N]
        weight = self.weight.index_select(0, self.degree).to(dtype)
        y = x * torch.rsqrt(var + self.eps)[:, None, None] * weight
        y = y + e0 * self.bias.to(dtype)
        return y if dtype == in_dtype else y.to(in_dtype)


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
