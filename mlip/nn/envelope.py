"""The smooth cutoff envelope φ(r / r_c) of the models' edge sums."""

from __future__ import annotations

import torch
from torch import nn


class PolynomialEnvelope(nn.Module):
    """Smooth cutoff φ(d), d = r / r_c, from the polynomial family of DimeNet/eSEN.

    φ(d) = 1 − (p+1)(p+2)/2 · d^p + p(p+2) · d^(p+1) − p(p+1)/2 · d^(p+2) for d < 1, else 0.
    With the default p = 5: φ = 1 − 21 d⁵ + 35 d⁶ − 15 d⁷, and φ, φ′, φ″ all vanish at d = 1 (C²),
    so energies, forces and their first derivatives stay continuous as a neighbor crosses r_c.
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
        to cancellation between O(1) terms (badly so in float32), and attention can weight an edge
        near the cutoff by a large factor.
        """
        d = r / self.cutoff
        # Horner's scheme, the leading coefficient multiplied in first (c·d, not a tensor of c times d:
        # the same numbers, one operation fewer)
        poly = d * ((self.p * (self.p + 1)) / 2.0) + (self.p - 1) * self.p / 2.0 if self.p > 1 else None
        if poly is None:
            poly = torch.full_like(d, (self.p * (self.p + 1)) / 2.0)
        for k in range(self.p - 3, -1, -1):
            poly = poly * d + (k + 1) * (k + 2) / 2.0
        one_minus = 1.0 - d
        env = one_minus * one_minus * one_minus * poly
        return torch.where(d < 1.0, env, 0.0)

    def extra_repr(self) -> str:
        return f"cutoff={self.cutoff}, exponent={self.p}"
