"""Quadrature grids on the sphere S², and the projections between coefficients and grid values.

The grid is a product of Gauss–Legendre nodes in cos β (β: angle from the polar axis y) and
equally spaced azimuths α. With B latitudes and A azimuths it integrates exactly every product
Y_l1m1 · Y_l2m2 · … whose total degree D satisfies D ≤ 2B − 1 and whose total order |Σm| < A
(the azimuthal sum is exact for trigonometric polynomials of degree < A; the azimuthal average of
a polynomial of degree D is a polynomial of degree ≤ D in cos β).

Multiplying two band-limited functions on the grid and projecting back,
``from_grid(to_grid(a) * to_grid(b))``, is then the *exact* projection of the product a·b onto
degrees ≤ L (the Gaunt tensor product), and so exactly equivariant, when the grid integrates
degree 3L exactly: B ≥ (3L + 1) / 2 and A ≥ 3L + 1 (A ≥ 3M + 1 when every factor is m-truncated
to |m| ≤ M and only |m| ≤ M is kept). :func:`product_resolution` returns these sizes.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np
import torch

from mlip.derived_constants import DerivedConstants

from .m_layout import m_primary_order
from .spherical_harmonics import num_coefficients, spherical_harmonics


def product_resolution(lmax: int, mmax: Optional[int] = None) -> Tuple[int, int]:
    """Smallest (B, A) for which the grid product of two degree-``lmax`` functions is exact.

    With ``mmax`` the functions are m-truncated (edge frames), which only lowers A.
    """
    mmax = lmax if mmax is None else mmax
    return quadrature_resolution(3 * lmax, 3 * mmax)


def quadrature_resolution(degree: int, order: Optional[int] = None) -> Tuple[int, int]:
    """Smallest (B, A) integrating products of total degree ``degree`` (and |Σm| ≤ ``order``) exactly."""
    order = degree if order is None else order
    return max(1, math.ceil((degree + 1) / 2)), order + 1


def grid_points(res_beta: int, res_alpha: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Unit vectors [B·A, 3] and quadrature weights [B·A] (summing to 4π), float64.

    The point at (β, α) is (sin β sin α, cos β, sin β cos α): y is the polar axis and the azimuth
    runs from z towards x, as in e3nn's spherical harmonics.
    """
    if res_beta < 1 or res_alpha < 1:
        raise ValueError(f"grid resolution must be positive, got ({res_beta}, {res_alpha})")
    cos_beta, w_beta = np.polynomial.legendre.leggauss(res_beta)
    alpha = 2 * math.pi * np.arange(res_alpha) / res_alpha
    cb = torch.tensor(cos_beta, dtype=torch.float64)[:, None].expand(res_beta, res_alpha)
    sb = torch.sqrt(torch.clamp(1 - cb * cb, min=0.0))
    a = torch.tensor(alpha, dtype=torch.float64)[None, :].expand(res_beta, res_alpha)
    points = torch.stack([sb * torch.sin(a), cb, sb * torch.cos(a)], dim=-1).reshape(-1, 3)
    weights = (torch.tensor(w_beta, dtype=torch.float64)[:, None] * (2 * math.pi / res_alpha)).expand(
        res_beta, res_alpha
    )
    return points, weights.reshape(-1).clone()


def grid_projections(
    lmax: int, res_beta: int, res_alpha: int, mmax: Optional[int] = None
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Matrices that take coefficients to grid values and back (component normalisation), float64.

    Returns ``to_grid`` [G, K] and ``from_grid`` [K, G], G = B·A. Without ``mmax``, K = (L + 1)²
    in e3nn order; with ``mmax``, K = K_M in the m-primary layout (:mod:`mlip.so3.m_layout`).
    ``from_grid @ to_grid`` is the identity whenever the grid integrates degree 2L exactly.
    """
    points, weights = grid_points(res_beta, res_alpha)
    ylm = spherical_harmonics(lmax, points, normalization="component")  # [G, (L+1)²]
    if mmax is not None:
        ylm = ylm[:, m_primary_order(lmax, mmax)]
    to_grid = ylm
    # (1/4π) ∫ Y_a Y_b dΩ = δ_ab in component normalisation.
    from_grid = (ylm * (weights / (4 * math.pi))[:, None]).T.contiguous()
    return to_grid.contiguous(), from_grid


class S2Grid(DerivedConstants):
    """Fixed projections between SH coefficients and values on a quadrature grid.

    ``to_grid(x)``: [..., K, C] → [..., G, C]; ``from_grid(f)``: [..., G, C] → [..., K, C].
    The default resolution makes the grid product of two features exact (see the module notes).
    """

    def __init__(self, lmax: int, mmax: Optional[int] = None, resolution: Optional[Tuple[int, int]] = None):
        super().__init__()
        self.lmax = int(lmax)
        self.mmax = None if mmax is None else int(mmax)
        self.resolution = tuple(resolution) if resolution is not None else product_resolution(lmax, mmax)
        to_grid, from_grid = grid_projections(self.lmax, *self.resolution, mmax=self.mmax)
        self.register_constant("to_grid_matrix", to_grid)
        self.register_constant("from_grid_matrix", from_grid)

    @property
    def num_points(self) -> int:
        return self.resolution[0] * self.resolution[1]

    def to_grid(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(self.to_grid_matrix.to(x.dtype), x)

    def from_grid(self, f: torch.Tensor) -> torch.Tensor:
        return torch.matmul(self.from_grid_matrix.to(f.dtype), f)

    def extra_repr(self) -> str:
        return f"lmax={self.lmax}, mmax={self.mmax}, resolution={self.resolution}"


__all__ = ["S2Grid", "grid_points", "grid_projections", "num_coefficients", "product_resolution",
           "quadrature_resolution"]
