"""Frame-dependent rotary position embedding (RoPE) of relative edge vectors."""

from __future__ import annotations

import torch
from torch import nn


def frame_vectors(elements: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
    """Express vectors in every frame: R_gᵀ r.

    elements [G, 3, 3], vectors [n, 3] → [n, G, 3].
    """
    return torch.einsum("gab,ea->egb", elements.to(vectors.dtype), vectors)


def rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate channel pairs (2f, 2f+1) of x [..., 2F] counter-clockwise by angles with cos/sin [..., F]."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    y0 = x0 * cos - x1 * sin
    y1 = x0 * sin + x1 * cos
    return torch.stack((y0, y1), dim=-1).flatten(-2)


class FrameRoPE(nn.Module):
    """Learned RoPE frequencies ω ∈ R^{H×F×3} (H heads per frame, F = head_dim/2 pairs).

    Frame g uses the rotated frequencies R_g ω, so the angle for edge e is
    θ_{e,g,h,f} = (R_g ω_{h,f})·r_e = ω_{h,f}·(R_gᵀ r_e). Initialised ω ~ N(0, σ²) with σ in Å⁻¹.
    """

    def __init__(self, num_heads: int, head_dim: int, sigma: float):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {head_dim}")
        self.sigma = float(sigma)
        self.omega = nn.Parameter(torch.randn(num_heads, head_dim // 2, 3) * sigma)

    def forward(self, frame_vec: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """frame_vec [E, G, 3] (R_gᵀ r_e) → (cos θ, sin θ), each [E, G, H, F]."""
        theta = torch.einsum("egb,hfb->eghf", frame_vec, self.omega)
        return torch.cos(theta), torch.sin(theta)

    def extra_repr(self) -> str:
        return f"heads={self.omega.shape[0]}, pairs={self.omega.shape[1]}, sigma={self.sigma}"
