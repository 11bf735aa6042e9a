"""The m-primary layout of SO(2) features in an edge frame, with m-truncation.

In the edge frame (edge along +y, e3nn's polar axis) a rotation about the edge by θ turns each
pair (Y_l^m, Y_l^−m) by the angle mθ, the same way for every degree l. The eSCN convolution
therefore treats each order m as one block across degrees. Components with |m| > mmax are
dropped, and the rest are stored "m-primary":

    [m = 0: l = 0 … L | m = +1: l = 1 … L | m = −1: l = 1 … L | m = +2: l = 2 … L | m = −2: … | …]

so each block is a contiguous slice of length L + 1 − m.
"""

from __future__ import annotations

from typing import List, Tuple

import torch


def num_truncated_coefficients(lmax: int, mmax: int) -> int:
    """K_M = Σ_{m ≤ M} (2 − δ_m0)(L + 1 − m): components kept by m-truncation (19 for L4 M2)."""
    _check(lmax, mmax)
    return sum((1 if m == 0 else 2) * (lmax + 1 - m) for m in range(mmax + 1))


def m_primary_order(lmax: int, mmax: int) -> torch.Tensor:
    """Indices into the e3nn layout (component (l, m) at l² + l + m), in m-primary order.

    Returns a long tensor of length :func:`num_truncated_coefficients`.
    """
    _check(lmax, mmax)
    index = [l * l + l for l in range(lmax + 1)]
    for m in range(1, mmax + 1):
        index += [l * l + l + m for l in range(m, lmax + 1)]
        index += [l * l + l - m for l in range(m, lmax + 1)]
    return torch.tensor(index, dtype=torch.long)


def m_blocks(lmax: int, mmax: int) -> List[Tuple[int, int, int]]:
    """(m, start, length) of each block in the m-primary layout; m > 0 blocks come as +m then −m.

    The +m block starts at ``start`` and the −m block right after it at ``start + length``.
    """
    _check(lmax, mmax)
    blocks = [(0, 0, lmax + 1)]
    start = lmax + 1
    for m in range(1, mmax + 1):
        blocks.append((m, start, lmax + 1 - m))
        start += 2 * (lmax + 1 - m)
    return blocks


def degrees_m_primary(lmax: int, mmax: int) -> torch.Tensor:
    """Degree l of each component in the m-primary layout [K_M]."""
    order = m_primary_order(lmax, mmax)
    return torch.floor(torch.sqrt(order.double())).long()


def degrees(lmax: int) -> torch.Tensor:
    """Degree l of each component in the e3nn layout [(L + 1)²]."""
    return torch.cat([torch.full((2 * l + 1,), l, dtype=torch.long) for l in range(lmax + 1)])


def _check(lmax: int, mmax: int) -> None:
    if lmax < 0 or mmax < 0 or mmax > lmax:
        raise ValueError(f"need 0 <= mmax <= lmax, got lmax={lmax}, mmax={mmax}")
