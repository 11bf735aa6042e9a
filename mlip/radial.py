"""Radial functions shared by the models: the smooth cutoff envelope and radial bases."""

from __future__ import annotations

import math

import torch
from torch import nn

from mlip.derived_constants import DerivedConstants


def safe_length(sq: torch.Tensor) -> torch.Tensor:
    """|r| [E] from |r|² [E]; 0 where |r|² = 0 (self edges, coinciding atoms), with a zero rather than NaN gradient."""
    nonzero = sq > 0
    length = torch.sqrt(torch.where(nonzero, sq, torch.ones_like(sq)))
    return torch.where(nonzero, length, torch.zeros_like(length))


class PolynomialEnvelope(nn.Module):
    """Smooth cutoff φ(d), d = r / r_c, from the polynomial family of DimeNet/eSEN.

    φ(d) = 1 − (p+1)(p+2)/2 · d^p + p(p+2) · d^(p+1) − p(p+1)/2 · d^(p+2) for d < 1, else 0.
    With the default p = 5: φ = 1 − 21 d⁵ + 35 d⁶ − 15 d⁷, and φ, φ′, φ″ all vanish at d = 1 (C²),
    so energies, forces and their first derivatives stay continuous as a neighbour crosses r_c.
    """

    def __init__(self, cutoff: float, exponent: int = 5):
        super().__init__()
        if cutoff <= 0:
            raise ValueError(f"cutoff must be positive, got {cutoff}")
        self.cutoff = float(cutoff)
        self.p = int(exponent)

    def forward(self, r: torch.Tensor) -> torch.Tensor:
        """r [...] (Å) → φ [...] in [0, 1].

        Evaluated in the factored form φ(d) = (1 − d)³ · Σ_{k<p} (k+1)(k+2)/2 · d^k (the same
        polynomial), which keeps its relative precision near the cutoff: the expanded form loses it
        to cancellation (in float32, φ ≈ 1e-6 came out with 10 % error), and attention can weight an
        edge near the cutoff by a large factor.
        """
        d = r / self.cutoff
        poly = torch.full_like(d, (self.p * (self.p + 1)) / 2.0)
        for k in range(self.p - 2, -1, -1):
            poly = poly * d + (k + 1) * (k + 2) / 2.0
        one_minus = 1.0 - d
        env = one_minus * one_minus * one_minus * poly
        return torch.where(d < 1.0, env, torch.zeros_like(env))

    def extra_repr(self) -> str:
        return f"cutoff={self.cutoff}, exponent={self.p}"


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
        safe_r = torch.where(r.unsqueeze(-1).abs() < 1e-12, torch.ones_like(x), r.unsqueeze(-1).expand_as(x))
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
