"""Learning-rate schedules.

* ``cosine`` (:func:`warmup_cosine`): linear warm-up from zero, then cosine decay to a floor at the
  run's last epoch; the length of the run must be known in advance.
* ``wsd`` (:func:`warmup_stable_decay`): warm-up, then a constant rate for as long as the validation
  loss improves, then a short decay to the floor once the plateau rule fires
  (:mod:`mlip.training.plateau`); the length of the run is not known in advance.
"""

from __future__ import annotations

import math
from typing import Optional

SCHEDULES = ("cosine", "wsd")


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


def warmup_stable_decay(step: int, warmup_steps: int, decay_start: Optional[int], decay_steps: int,
                        min_factor: float = 0.01) -> float:
    """Factor on the base learning rate at optimiser step ``step`` (0-based) of a warm-up–stable–decay
    schedule.

    Linear from 0 to 1 over ``warmup_steps``; then 1 until ``decay_start`` (None: the plateau has not
    been reached, the rate stays 1); from there linear from 1 down to ``min_factor``, reached at the
    last step of the decay (``decay_start + decay_steps - 1``), and ``min_factor`` afterwards.
    """
    if warmup_steps > 0 and step < warmup_steps:
        return (step + 1) / warmup_steps
    if decay_start is None or step < decay_start:
        return 1.0
    progress = min((step - decay_start + 1) / max(decay_steps, 1), 1.0)
    return 1.0 - (1.0 - min_factor) * progress
