"""Rotation matrices for tests of equivariance (float64 tensors)."""

from __future__ import annotations

import math

import torch


def random_rotations(n: int, seed: int = 0) -> torch.Tensor:
    """``n`` random rotation matrices [n, 3, 3] (from normalised Gaussian quaternions), reproducible
    from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n, 4, generator=g, dtype=torch.float64)
    q = q / q.norm(dim=-1, keepdim=True)
    w, x, y, z = q.unbind(-1)
    return torch.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
        2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
        2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y),
    ], dim=-1).view(n, 3, 3)


def rotation_about_y(theta: float) -> torch.Tensor:
    """The rotation [3, 3] by ``theta`` (radians) about the y axis."""
    c, s = math.cos(theta), math.sin(theta)
    return torch.tensor([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]], dtype=torch.float64)
