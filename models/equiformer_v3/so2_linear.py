"""SO2Linear: the eSCN convolution in an edge frame, one block per order m."""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch import nn

from mlip.so3 import m_blocks, num_truncated_coefficients


def complex_weight(stacked: torch.Tensor) -> torch.Tensor:
    """[[W_r, −W_i], [W_i, W_r]] [2·n·C_out, 2·n·C_in] from W_r stacked over W_i [2·n·C_out, n·C_in]: the
    map (x₊, x₋) → (W_r x₊ − W_i x₋, W_i x₊ + W_r x₋) as one matrix, which a single matmul applies."""
    w_r, w_i = stacked.chunk(2, dim=0)
    return torch.cat([torch.cat([w_r, -w_i], dim=1), torch.cat([w_i, w_r], dim=1)], dim=0)


class SO2Linear(nn.Module):
    """Linear map on m-truncated edge-frame features that commutes with rotations about the edge.

    In the edge frame a rotation by θ about the edge turns each pair (x_+m, x_−m) of every degree by
    mθ. The most general linear map commuting with that mixes degrees freely within one order m:

    * m = 0: one dense matrix on the (L + 1)·C_in invariant components (with bias); it also emits
      ``extra`` invariant scalars (attention logits, gates);
    * m > 0: two matrices W_r, W_i on the stacked degrees l = m … L acting like a complex number,
      y₊ = W_r x₊ − W_i x₋ and y₋ = W_r x₋ + W_i x₊ (no bias), applied as one real matrix
      (:func:`complex_weight`).

    Components with |m| > mmax are never produced. Shapes: x [E, K_M, C_in] (m-primary layout) →
    (y [E, K_M, C_out], extra [E, extra]).
    """

    def __init__(self, in_channels: int, out_channels: int, lmax: int, mmax: int, extra: int = 0):
        super().__init__()
        self.in_channels = int(in_channels)
        self.out_channels = int(out_channels)
        self.lmax, self.mmax = int(lmax), int(mmax)
        self.extra = int(extra)
        self.blocks = m_blocks(lmax, mmax)
        self.num_coefficients = num_truncated_coefficients(lmax, mmax)
        n0 = lmax + 1
        self.m0 = nn.Linear(n0 * in_channels, n0 * out_channels + self.extra)
        # W_r stacked over W_i, one matrix per m > 0: [2·n·C_out, n·C_in].
        self.m_pos = nn.ModuleList()
        for m, _, n in self.blocks[1:]:
            layer = nn.Linear(n * in_channels, 2 * n * out_channels, bias=False)
            with torch.no_grad():
                layer.weight.mul_(1.0 / math.sqrt(2.0))
            self.m_pos.append(layer)

    def forward(self, x: torch.Tensor, radial: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """x [E, K_M, C_in]; optional radial [E, L + 1, C_in], a weight per (degree, channel)
        multiplied into x first → (y [E, K_M, C_out], extra [E, extra])."""
        e = x.shape[0]
        n0 = self.lmax + 1
        c_in, c_out = self.in_channels, self.out_channels
        # torch.split (not slicing) so that the backward pass concatenates instead of zero-filling.
        sizes = [n0] + [2 * n for _, _, n in self.blocks[1:]]
        parts = torch.split(x, sizes, dim=1)
        x0 = parts[0] if radial is None else parts[0] * radial
        y0, extra = torch.split(self.m0(x0.reshape(e, n0 * c_in)), [n0 * c_out, self.extra], dim=1)
        out = [y0.reshape(e, n0, c_out)]
        for layer, (m, _, n), part in zip(self.m_pos, self.blocks[1:], parts[1:]):
            pair = part.reshape(e, 2, n, c_in)  # [E, (+m, −m), degrees m … L, C_in]
            if radial is not None:
                pair = pair * radial[:, None, m:, :]
            # (x₊, x₋) → (y₊, y₋) in one matmul with the complex-structured matrix: the output is the
            # +m block followed by the −m block, already in the m-primary layout (no sums of halves)
            y = torch.mm(pair.reshape(e, 2 * n * c_in), complex_weight(layer.weight).t())  # [E, 2·n·C_out]
            out.append(y.view(e, 2 * n, c_out))
        return torch.cat(out, dim=1), extra

    def extra_repr(self) -> str:
        return (f"{self.in_channels} → {self.out_channels}, lmax={self.lmax}, mmax={self.mmax}, "
                f"extra={self.extra}")
