"""Learning-rate schedule: linear warm-up from zero, then cosine decay to a floor."""

from __future__ import annotations

import math


def warmup_cosine(step: int, total_steps: int, warmup_steps: int, min_factor: float = 0.01) -> float:
    """Factor on the base learning rate at optimiser step ``step`` (0-based).

    Linear from 0 to 1 over ``warmup_steps``, then a half cosine from 1 to ``min_factor`` at
    ``total_steps``; ``min_factor`` afterwards.
    """
    if warmup_steps > 0 and step < warmup_steps:
        return (step + 1) / warmup_steps
    span = max(total_steps - warmup_steps, 1)
    progress = min(max(step - warmup_steps, 0) / span, 1.0)
    return min_factor + (1 - min_factor) * 0.5 * (1 + math.cos(math.pi * progress))
