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

    def forward(self, x, edge_index, species, rbf, envelope, wigner) -> torch.Tensor:
        x = x + self.attention(self.norm_attention(x), edge_index, species, rbf, envelope, wigner)
        return x + self.feed_forward(self.norm_feed_forward(x))
