"""The plateau rule: when a run whose length is not known in advance (``optimizer.schedule: wsd``) has
stopped improving, and the short decay that ends it.

The monitored loss is the validation loss of each epoch (the EMA weights'; the training loss when there
is no validation data), smoothed by an exponential moving average,
``s_e = a · s_(e-1) + (1 − a) · loss_e`` (``s_1 = loss_1``, ``a = plateau.smoothing``). Its relative
improvement over the last ``w = plateau.window`` epochs is ``(s_(e-w) − s_e) / |s_(e-w)|``; the rule fires
at the first epoch after the warm-up where that is below ``plateau.min_improvement``. The rate then decays
(:func:`mlip.training.schedule.warmup_stable_decay`) over ``ceil(decay_fraction · e)`` more epochs (at
least one), and the run ends after them. Every epoch's record carries the smoothed loss, the improvement
and the phase (``warmup``, ``stable``, ``decay``), so the rule can be checked from ``metrics.json``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import List, Optional


def relative_improvement(smoothed: List[float], window: int) -> Optional[float]:
    """``(s[-1-window] − s[-1]) / |s[-1-window]|``: the fraction by which the smoothed loss fell over the
    last ``window`` epochs (negative if it rose); None before ``window + 1`` epochs."""
    if len(smoothed) <= window:
        return None
    before = smoothed[-1 - window]
    return (before - smoothed[-1]) / abs(before) if before != 0 else 0.0


@dataclass
class PlateauState:
    """The plateau rule's progress, saved in the train state: the smoothed loss of every epoch so far,
    and once the rule has fired, the epoch it fired at, the optimiser step the decay starts at, its
    length in steps and the epoch after which the run ends."""

    smoothed: List[float] = field(default_factory=list)
    fired_at_epoch: Optional[int] = None
    decay_start: Optional[int] = None
    decay_steps: int = 0
    end_epoch: Optional[int] = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Optional[dict]) -> "PlateauState":
        return cls(**data) if data else cls()

    def observe(self, loss: float, smoothing: float, window: int) -> Optional[float]:
        """Add an epoch's monitored loss; returns the relative improvement over the window (or None)."""
        last = self.smoothed[-1:]  # none for the first epoch, whose loss starts the average
        self.smoothed.append(smoothing * last[0] + (1 - smoothing) * loss if last else loss)
        return relative_improvement(self.smoothed, window)

    def fire(self, epoch: int, step: int, steps_per_epoch: int, decay_fraction: float) -> int:
        """The rule fired after epoch ``epoch`` (1-based) and optimiser step ``step``: the decay starts at the
        next step and lasts ``ceil(decay_fraction · epoch)`` epochs (at least one). Returns that number."""
        decay_epochs = max(1, math.ceil(decay_fraction * epoch))
        self.fired_at_epoch, self.decay_start = epoch, step
        self.decay_steps = decay_epochs * steps_per_epoch
        self.end_epoch = epoch + decay_epochs
        return decay_epochs

    def phase(self, step: int, warmup_steps: int) -> str:
        """``warmup``, ``stable`` or ``decay``: where the schedule stands after ``step`` steps."""
        if step <= warmup_steps and self.decay_start is None:
            return "warmup"
        return "stable" if self.decay_start is None else "decay"
