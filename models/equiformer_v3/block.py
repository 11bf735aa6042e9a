"""Pre-norm transformer block of EquiformerV3."""

from __future__ import annotations

import torch
from torch import nn

from .attention import EdgeAttention
from .feed_forward import FeedForward
from .layer_norm import make_norm


class TransformerBlock(nn.Module):
    """x ← x + Attention(Norm₁ x); x ← x + FeedForward(Norm₂ x). Shapes: [N, (L + 1)², C]."""

    def __init__(self, attention: EdgeAttention, feed_forward: FeedForward, norm: str, lmax: int, channels: int):
        super().__init__()
        self.norm_attention = make_norm(norm, lmax, channels)
        self.attention = attention
        self.norm_feed_forward = make_norm(norm, lmax, channels)
        self.feed_forward = feed_forward

    def residual_outputs(self) -> tuple:
        """The last linear map of each residual branch: zeroed, they make the block the identity
        (``init_grow`` appends such blocks to grow a trained model deeper)."""
        return (self.attention.project, self.feed_forward.linear_out)

    def forward(self, x, edge_index, species, rbf, envelope, wigner, radial=None) -> torch.Tensor:
        """``radial``: the attention's edge-MLP output when the caller evaluated it (or None)."""
        x = x + self.attention(self.norm_attention(x), edge_index, species, rbf, envelope, wigner, radial)
        return x + self.feed_forward(self.norm_feed_forward(x))
