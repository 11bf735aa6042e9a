"""Real spherical harmonics in e3nn's basis and ordering.

e3nn's real spherical harmonics are the standard real harmonics *without* the Condon–Shortley
phase, with the polar axis along y and the azimuth measured from z towards x: writing
(x', y', z') = (z, x, y),

    Y_l^m  = N_lm · P̄_l^|m|(z') · Re[(x' + i y')^|m|]   (m ≥ 0)
    Y_l^−m = N_lm · P̄_l^|m|(z') · Im[(x' + i y')^|m|]   (m > 0)

where P̄_l^m is the polynomial part of the associated Legendre function (the factor
(1 − z'²)^(m/2) is carried by (x' + i y')^m). Everything is a polynomial in x, y, z, so values and
gradients are finite for every direction, the poles included. Components of degree l are stored
at ``l² … l² + 2l`` in the order m = −l … l; the l = 1 slice is (x, y, z) up to normalisation.

Normalisations (as in e3nn): ``"component"`` (Σ_m Y_lm² = 2l + 1 on the unit sphere),
``"norm"`` (Σ_m Y_lm² = 1) and ``"integral"`` (∫ Y_lm² dΩ = 1).
"""

from __future__ import annotations

import math

import torch


def num_coefficients(lmax: int) -> int:
    """(lmax + 1)²: the number of components of degrees 0 … lmax."""
    return (lmax + 1) ** 2


def _normalisation_factor(l: int, normalization: str) -> float:
    if normalization == "component":
        return 1.0
    if normalization == "norm":
        return 1.0 / math.sqrt(2 * l + 1)
    if normalization == "integral":
        return 1.0 / math.sqrt(4 * math.pi)
    raise ValueError(f"unknown normalization {normalization!r}; use 'component', 'norm' or 'integral'")


def spherical_harmonics(
    lmax: int, vectors: torch.Tensor, normalize: bool = True, normalization: str = "component"
) -> torch.Tensor:
    """Y_lm(vectors) for l = 0 … lmax.

    Args:
        lmax: highest degree (any non-negative integer).
        vectors: [..., 3] Cartesian vectors.
        normalize: evaluate at vectors / |vectors| (otherwise the homogeneous polynomials |r|^l Y_lm(r̂)).
        normalization: ``"component"``, ``"norm"`` or ``"integral"``.

    Returns:
        [..., (lmax + 1)²] in e3nn order.
    """
    if lmax < 0:
        raise ValueError(f"lmax must be >= 0, got {lmax}")
    if vectors.shape[-1] != 3:
        raise ValueError(f"vectors must have a last dimension of 3, got shape {tuple(vectors.shape)}")
    if normalize:
        vectors = vectors / vectors.norm(dim=-1, keepdim=True)
    # Standard coordinates: polar axis z' = y, azimuth from x' = z towards y' = x.
    xs, ys, zs = vectors[..., 2], vectors[..., 0], vectors[..., 1]
    r2 = xs * xs + ys * ys + zs * zs if not normalize else None

    # Re/Im of (x' + i y')^m, m = 0 … lmax. The constants (re⁰ = 1, the P̄_m^m below) are kept as Python
    # numbers rather than tensors: multiplying by them gives the same values (they are integers, exact in
    # every floating type) in fewer operations, which small structures pay for per edge-frame call.
    re = [1.0, xs]
    im = [0.0, ys]
    for m in range(2, lmax + 1):
        re.append(re[m - 1] * xs - im[m - 1] * ys)
        im.append(re[m - 1] * ys + im[m - 1] * xs)

    # P̄_l^m(z'), homogeneous of degree l − m (the r² factor is 1 for unit vectors).
    legendre = {}
    for m in range(lmax + 1):
        legendre[(m, m)] = float(math.prod(range(1, 2 * m, 2)))
        if m + 1 <= lmax:
            legendre[(m + 1, m)] = (2 * m + 1) * zs * legendre[(m, m)] if m > 1 else (2 * m + 1) * zs
        for l in range(m + 2, lmax + 1):
            prev2 = legendre[(l - 2, m)] if r2 is None else r2 * legendre[(l - 2, m)]
            legendre[(l, m)] = ((2 * l - 1) * zs * legendre[(l - 1, m)] - (l + m - 1) * prev2) / (l - m)

    components = []
    for l in range(lmax + 1):
        norm = _normalisation_factor(l, normalization)
        for m in range(-l, l + 1):
            a = abs(m)
            coeff = norm * math.sqrt((2 * l + 1) * math.factorial(l - a) / math.factorial(l + a))
            if a:
                coeff *= math.sqrt(2.0)
            value = coeff * legendre[(l, a)]
            if a:
                value = value * (re[a] if m >= 0 else im[a])
            components.append(value if isinstance(value, torch.Tensor) else torch.full_like(xs, value))
    return torch.stack(components, dim=-1)
