"""Wigner-D matrices of real spherical harmonics, computed directly from rotation matrices.

D^l(R) is defined by Y^l(R r) = D^l(R) Y^l(r) for every direction r (e3nn's convention; D^1(R) = R
because the l = 1 harmonics are (x, y, z)). By orthonormality of the harmonics,

    D^l_mn(R) = (1 / 4π) ∫ Y_lm(R r) Y_ln(r) dΩ(r),

and the integrand has degree 2l, so a quadrature grid exact to degree 2·lmax evaluates it without
error. Every entry is a polynomial in the entries of R: there are no Euler angles, no singular
directions and no special-cased "pole" edges, and gradients flow through D for every rotation.
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

import torch

from .m_layout import degrees
from .s2_grid import grid_points, quadrature_resolution
from .spherical_harmonics import spherical_harmonics

_CACHE: Dict[Tuple[int, torch.dtype, torch.device], Tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}


def _quadrature(lmax: int, dtype: torch.dtype, device: torch.device):
    key = (lmax, dtype, device)
    if key not in _CACHE:
        points, weights = grid_points(*quadrature_resolution(2 * lmax))
        ref = spherical_harmonics(lmax, points) * (weights / (4 * math.pi))[:, None]  # [G, K]
        deg = degrees(lmax)
        mask = (deg[:, None] == deg[None, :]).to(torch.float64)  # block diagonal [K, K]
        _CACHE[key] = (points.to(dtype=dtype, device=device), ref.to(dtype=dtype, device=device),
                       mask.to(dtype=dtype, device=device))
    return _CACHE[key]


def wigner_D(rotations: torch.Tensor, lmax: int, rows: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Block-diagonal D(R) = ⊕_{l ≤ lmax} D^l(R) in e3nn's basis.

    Args:
        rotations: [..., 3, 3] rotation matrices (det +1).
        lmax: highest degree.
        rows: optional indices of the rows to return (e.g. :func:`mlip.so3.m_primary_order`);
            only those rows are computed.

    Returns:
        [..., K, (lmax + 1)²] with K = len(rows) or (lmax + 1)².
    """
    if rotations.shape[-2:] != (3, 3):
        raise ValueError(f"rotations must have shape [..., 3, 3], got {tuple(rotations.shape)}")
    points, ref, mask = _quadrature(lmax, rotations.dtype, rotations.device)
    rotated = torch.einsum("...ab,gb->...ga", rotations, points)  # R r_g: [..., G, 3]
    ylm = spherical_harmonics(lmax, rotated, normalize=False)  # |R r_g| = 1: [..., G, K]
    if rows is not None:
        rows = rows.to(rotations.device)
        ylm = ylm.index_select(-1, rows)  # the same values as ylm[..., rows], a cheaper gather
        mask = mask.index_select(0, rows)
    return torch.einsum("...gk,gn->...kn", ylm, ref) * mask
