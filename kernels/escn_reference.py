"""PyTorch definitions of the two eSCN rotation steps of every EquiformerV3 layer.

These are the CPU path of the model and the reference the CUDA kernels
(:mod:`mlip.kernels.escn_rotation`) must reproduce. Notation: N nodes, E edges, S source slots
per edge (the attention gathers [x_j ‖ x_i], S = 2), K = (L + 1)² e3nn components, K_M rows of
the m-truncated edge frame (m-primary order, :mod:`mlip.so3.m_layout`), C channels.

* :func:`gather_rotate_reference`: msg[e, :, sC:(s+1)C] = W_e · x[index[s, e]];
* :func:`rotate_scatter_reference`: out[n] = Σ_{(s, e): index[s, e] = n} W_eᵀ · msg[e, :, sC:(s+1)C];
* :func:`edge_outer_reference`: the gradient of both with respect to W, on the degree blocks.

The Wigner matrices W [E, K_M, K] are block diagonal by degree (row r of degree l is non-zero only
in the columns of degree l). The kernels read only those blocks and give zero gradient elsewhere;
:func:`edge_outer_reference` is masked the same way. In the model W comes from
:func:`mlip.so3.wigner_D`, which multiplies by that mask, so the off-block gradient never reaches
the positions either way.
"""

from __future__ import annotations

from typing import Dict, Tuple

import torch

from mlip.nn import scatter_sum
from mlip.so3.m_layout import degrees, degrees_m_primary, num_truncated_coefficients

_MASKS: Dict[Tuple[int, int, torch.dtype, torch.device], torch.Tensor] = {}


def layout_from_shape(wigner: torch.Tensor) -> Tuple[int, int]:
    """(lmax, mmax) of Wigner matrices [E, K_M, K]; ValueError when the shape is no m-primary layout."""
    if wigner.dim() != 3:
        raise ValueError(f"wigner must have shape [E, K_M, K], got {tuple(wigner.shape)}")
    k_m, k = int(wigner.shape[1]), int(wigner.shape[2])
    lmax = int(round(k ** 0.5)) - 1
    if lmax < 0 or (lmax + 1) ** 2 != k:
        raise ValueError(f"wigner has {k} columns, not (L + 1)²")
    for mmax in range(lmax + 1):
        if num_truncated_coefficients(lmax, mmax) == k_m:
            return lmax, mmax
    raise ValueError(f"wigner has {k_m} rows: no m-truncation of lmax={lmax} has that many")


def block_mask(lmax: int, mmax: int, dtype: torch.dtype, device) -> torch.Tensor:
    """[K_M, K] 1 where the row's degree equals the column's degree, else 0 (cached)."""
    key = (lmax, mmax, dtype, torch.device(device))
    if key not in _MASKS:
        rows = degrees_m_primary(lmax, mmax)
        _MASKS[key] = (rows[:, None] == degrees(lmax)[None, :]).to(dtype=dtype, device=device)
    return _MASKS[key]


def gather_sources(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x [N, K, C], index [S, E] → [E, K, S·C]: row (e, k) holds x[index[0, e], k] ‖ … ‖ x[index[S−1, e], k]."""
    n, k, c = x.shape
    s, e = index.shape
    rows = index.t()[:, None, :] * k + torch.arange(k, device=x.device)[None, :, None]  # [E, K, S]
    return x.reshape(n * k, c).index_select(0, rows.reshape(-1)).view(e, k, s * c)


def gather_rotate_reference(x: torch.Tensor, wigner: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x [N, K, C], wigner [E, K_M, K], index [S, E] → edge-frame messages [E, K_M, S·C]."""
    return torch.bmm(wigner, gather_sources(x, index))


def rotate_scatter_reference(wigner: torch.Tensor, msg: torch.Tensor, index: torch.Tensor,
                             num_nodes: int) -> torch.Tensor:
    """wigner [E, K_M, K], msg [E, K_M, S·C], index [S, E] → node sums [num_nodes, K, C]."""
    s, e = index.shape
    rotated = torch.bmm(wigner.transpose(1, 2), msg)  # [E, K, S·C]
    if s == 1:
        return scatter_sum(rotated, index[0], num_nodes)
    k, c = rotated.shape[1], msg.shape[2] // s
    rotated = rotated.view(e, k, s, c).permute(2, 0, 1, 3).reshape(s * e, k, c)
    return scatter_sum(rotated, index.reshape(-1), num_nodes)


def edge_outer_reference(a: torch.Tensor, b: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """a [E, K_M, S·C], b [N, K, C], index [S, E] → [E, K_M, K]:
    out[e, r, k] = Σ_s Σ_c a[e, r, sC + c] b[index[s, e], k, c] on the degree blocks, 0 elsewhere."""
    k_m, k = a.shape[1], b.shape[1]
    lmax = int(round(k ** 0.5)) - 1
    mmax = next(m for m in range(lmax + 1) if num_truncated_coefficients(lmax, m) == k_m)
    out = torch.bmm(a, gather_sources(b, index).transpose(1, 2))
    return out * block_mask(lmax, mmax, out.dtype, out.device)
