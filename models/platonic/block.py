"""Pre-norm transformer block of the Platonic Transformer."""

from __future__ import annotations

import torch
from torch import nn

from .attention import FrameAttention
from .group_linear import GroupLinear
from .groups import RotationGroup


class FeedForward(nn.Module):
    """GroupLinear(C → m·C) → GELU → GroupLinear(m·C → C), acting on [N, G, C]."""

    def __init__(self, group: RotationGroup, channels: int, multiplier: int = 4):
        super().__init__()
        self.fc1 = GroupLinear(group, channels, multiplier * channels)
        self.fc2 = GroupLinear(group, multiplier * channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


class PlatonicBlock(nn.Module):
    """x ← x + Attn(LN x);  x ← x + FFN(LN x).

    The layer norms act over the C channels of each frame with affine parameters shared over the
    G frames (an ``nn.LayerNorm(C)`` on [N, G, C]), which keeps the block G-equivariant.
    """

    def __init__(self, group: RotationGroup, channels: int, attention: FrameAttention, ffn_multiplier: int = 4):
        super().__init__()
        self.norm1 = nn.LayerNorm(channels)
        self.attn = attention
        self.norm2 = nn.LayerNorm(channels)
        self.ffn = FeedForward(group, channels, ffn_multiplier)

    def residual_outputs(self) -> tuple:
        """The last linear map of each residual branch: zeroed, they make the block the identity
        (``init_grow`` appends such blocks to grow a trained model deeper)."""
        return (self.attn.out_proj, self.ffn.fc2)

    def forward(self, x, edge_index, frame_vec, radial, envelope):
        """x [N, G, C] → [N, G, C]."""
        x = x + self.attn(self.norm1(x), edge_index, frame_vec, radial, envelope)
        return x + self.ffn(self.norm2(x))
