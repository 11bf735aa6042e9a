"""Radial bases: functions of an edge length r [E] → [E, num_basis]."""

from __future__ import annotations

import math

import torch

from mlip.derived_constants import DerivedConstants


class BesselBasis(DerivedConstants):
    """Radial Bessel functions sin(nπr/r_c)/r (n = 1..num_basis), normalised by sqrt(2/r_c).

    Smooth at r = 0 (the limit nπ/r_c is used), so self edges with r = 0 are allowed.
    Multiply by an envelope for smoothness at the cutoff.
    """

    def __init__(self, cutoff: float, num_basis: int = 8):
        super().__init__()
        self.cutoff = float(cutoff)
        self.num_basis = int(num_basis)
        freqs = torch.arange(1, num_basis + 1, dtype=torch.float64) * math.pi / cutoff
        self.register_constant("freqs", freqs)

    def forward(self, r: torch.Tensor) -> torch.Tensor:
        """r [...] → [..., num_basis]."""
        x = r.unsqueeze(-1) * self.freqs.to(r.dtype)
        small = x.abs() < 1e-6
        safe_r = torch.where(r.unsqueeze(-1).abs() < 1e-12, 1.0, r.unsqueeze(-1))  # broadcasts to x's shape
        val = torch.where(small, self.freqs.to(r.dtype).expand_as(x), torch.sin(x) / safe_r)
        return val * math.sqrt(2.0 / self.cutoff)

    def extra_repr(self) -> str:
        return f"cutoff={self.cutoff}, num_basis={self.num_basis}"


class GaussianBasis(DerivedConstants):
    """Gaussians exp(−(r − μ_k)² / (2 w²)) with centres μ_k evenly spaced on [0, r_c]."""

    def __init__(self, cutoff: float, num_basis: int = 10, width: float | None = None):
        super().__init__()
        self.cutoff = float(cutoff)
        self.num_basis = int(num_basis)
        centres = torch.linspace(0.0, cutoff, num_basis, dtype=torch.float64)
        self.register_constant("centres", centres)
        self.width = float(width) if width is not None else float(cutoff / max(num_basis - 1, 1))

    def forward(self, r: torch.Tensor) -> torch.Tensor:
        """r [...] → [..., num_basis]."""
        diff = r.unsqueeze(-1) - self.centres.to(r.dtype)
        return torch.exp(-0.5 * (diff / self.width) ** 2)
