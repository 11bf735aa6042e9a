"""Deterministic edge frames: the rotation that turns an edge direction onto +y."""

from __future__ import annotations

import torch


def edge_rotation(vectors: torch.Tensor) -> torch.Tensor:
    """Rotation matrices R [..., 3, 3] with R · v̂ = +e_y for each vector v [..., 3].

    The frame is fixed by the coordinate axis least parallel to v̂ (ties go to the lowest axis),
    so the same input always gives the same frame, bit for bit; |v̂ × axis| ≥ √(2/3) keeps it well
    conditioned. Rows are (x̂', v̂, x̂' × v̂) with x̂' = normalise(v̂ × axis). Any other choice differs
    by a rotation about the edge, which SO(2)-equivariant edge operations do not see, so the frame
    may jump between axes while energies and forces stay smooth.
    """
    if vectors.shape[-1] != 3:
        raise ValueError(f"vectors must have a last dimension of 3, got shape {tuple(vectors.shape)}")
    u = vectors / vectors.norm(dim=-1, keepdim=True)
    axis = torch.nn.functional.one_hot(u.detach().abs().argmin(dim=-1), 3).to(u.dtype)
    x = torch.linalg.cross(u, axis)
    x = x / x.norm(dim=-1, keepdim=True)
    z = torch.linalg.cross(x, u)
    return torch.stack([x, u, z], dim=-2)
