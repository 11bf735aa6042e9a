"""Edge lengths that are safe to differentiate where an edge has zero length."""

from __future__ import annotations

import torch


def safe_length(sq: torch.Tensor) -> torch.Tensor:
    """|r| [E] from |r|² [E]; 0 where |r|² = 0 (self edges, coinciding atoms), with a zero rather than NaN gradient."""
    nonzero = sq > 0
    length = torch.sqrt(torch.where(nonzero, sq, 1.0))
    return torch.where(nonzero, length, 0.0)
