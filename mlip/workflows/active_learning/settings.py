"""The settings of an active-learning run (:func:`mlip.workflows.active_learning.learn`), checked before any
work is done and recorded in the run's folder, so a resumed run is the same run."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Dict, List, Optional

#: how the frames to label are chosen: the most uncertain with diversity, or uniformly at random (the
#: baseline the benchmark compares against; the same exploration, the same budget)
SELECTIONS = ("uncertainty", "random")
#: settings a resumed run may change: they only say when to stop
RESUMABLE = ("label_budget", "max_iterations", "threshold")


@dataclass
class ExploreSettings:
    """Where each iteration looks for structures its committee is unsure about, all started from seeds
    (structures drawn at random from the seed set) and driven by the committee's mean forces.

    ``temperatures`` (K): the MD schedule: every iteration runs ``md_runs`` Langevin trajectories at each
    temperature, ``md_steps`` steps of ``timestep_fs`` with ``friction`` (1/fs), a frame every
    ``md_interval`` steps. ``relaxations``: FIRE relaxations per iteration of seeds rattled by
    ``rattle`` (Å), ``relax_steps`` steps, a frame every ``relax_interval``. ``strained`` /
    ``rattled``: frames per iteration of seeds strained by up to ``strain`` (volume ±``strain``, shear
    ±``strain``/2, plus a 0.02 Å rattle) / rattled by a Gaussian of ``rattle`` Å. A trajectory stops
    early (its frames kept) where the largest per-atom force uncertainty passes ``stop_uncertainty``
    (eV/Å): the committee no longer knows where it is going."""

    temperatures: List[float] = field(default_factory=lambda: [300.0, 800.0, 1200.0])
    md_runs: int = 1
    md_steps: int = 200
    md_interval: int = 20
    timestep_fs: float = 2.0
    friction: float = 0.02
    relaxations: int = 2
    relax_steps: int = 40
    relax_interval: int = 10
    strained: int = 8
    rattled: int = 8
    strain: float = 0.06
    rattle: float = 0.1
    stop_uncertainty: float = 2.0

    def check(self) -> None:
        """ValueError naming the first setting out of range."""
        for name in ("md_runs", "md_steps", "relaxations", "relax_steps", "strained", "rattled"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"explore.{name} must be >= 0, got {getattr(self, name)}")
        for name in ("md_interval", "relax_interval"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"explore.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("timestep_fs", "friction", "stop_uncertainty"):
            value = float(getattr(self, name))
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"explore.{name} must be a positive number, got {getattr(self, name)}")
        for name in ("strain", "rattle"):
            value = float(getattr(self, name))
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"explore.{name} must be >= 0, got {getattr(self, name)}")
        if any(not (math.isfinite(float(t)) and float(t) > 0) for t in self.temperatures):
            raise ValueError(f"explore.temperatures must be positive (K), got {list(self.temperatures)}")
        if self.md_runs and self.md_steps and not self.temperatures:
            raise ValueError("explore.temperatures is empty but MD runs are asked for (md_runs > 0)")

    @classmethod
    def from_dict(cls, data: Optional[Dict[str, Any]]) -> "ExploreSettings":
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown explore setting(s) {', '.join(unknown)}; "
                             f"accepted: {', '.join(sorted(known))}")
        settings = cls(**data)
        settings.check()
        return settings


@dataclass
class LearnSettings:
    """How the loop runs (see :func:`mlip.workflows.active_learning.learn` for each stage).

    ``committee``: members (2–8), trained from seeds ``seed`` … ``seed + committee − 1`` with the
    training config ``model`` (a shipped model's name, whose architecture and training settings are
    taken, or a ``mlip train`` YAML config, as ``mlip distill --student`` takes), ``epochs`` on the
    initial data and ``finetune_epochs`` in each later iteration (warm-started from the member's
    previous weights). ``label_budget``: oracle calls in all; ``per_iteration``: at most this many
    per iteration; ``threshold`` (eV/Å, or None): stop when the largest per-atom force uncertainty of
    an iteration's exploration is below it; ``max_iterations``: iterations after the initial training.
    ``selection``: one of :data:`SELECTIONS`. ``trust_lo`` / ``trust_hi`` (eV/Å, or None): the trust
    window of selection by uncertainty (as DP-GEN's ``model_devi_f_trust_lo``/``_hi``): frames whose
    uncertainty is above ``trust_hi`` are failed explorations, counted and recorded but never labelled,
    frames below ``trust_lo`` are predicted well enough; only those between are selected from, and an
    iteration with none there stops the loop. ``score_batch_size``: structures per batched committee
    evaluation when scoring and evaluating."""

    committee: int = 4
    model: str = "embedded-atom-emt"
    epochs: int = 100
    finetune_epochs: int = 30
    label_budget: int = 200
    per_iteration: int = 50
    threshold: Optional[float] = None
    max_iterations: int = 10
    selection: str = "uncertainty"
    trust_lo: Optional[float] = None
    trust_hi: Optional[float] = None
    seed: int = 0
    score_batch_size: int = 16
    explore: ExploreSettings = field(default_factory=ExploreSettings)

    def check(self) -> None:
        """ValueError naming the first setting out of range."""
        if not 2 <= int(self.committee) <= 8:
            raise ValueError(f"committee must have 2 to 8 members, got {self.committee}")
        for name in ("epochs", "finetune_epochs", "per_iteration", "score_batch_size"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("label_budget", "max_iterations", "seed"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.threshold is not None and not (math.isfinite(float(self.threshold)) and self.threshold > 0):
            raise ValueError(f"threshold must be a positive number of eV/Å, got {self.threshold}")
        if self.selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {', '.join(SELECTIONS)}, got {self.selection!r}")
        for name in ("trust_lo", "trust_hi"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(float(value)) and value > 0):
                raise ValueError(f"{name} must be a positive number of eV/Å, got {value}")
        if self.trust_lo is not None and self.trust_hi is not None and self.trust_lo >= self.trust_hi:
            raise ValueError(f"trust_lo ({self.trust_lo:g} eV/Å) must be below trust_hi "
                             f"({self.trust_hi:g} eV/Å)")
        if self.selection == "random" and (self.trust_lo is not None or self.trust_hi is not None):
            raise ValueError("trust_lo/trust_hi are a window of selection by uncertainty; selection "
                             "'random' draws from every candidate (leave them out)")
        self.explore.check()

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


__all__ = ["ExploreSettings", "LearnSettings", "RESUMABLE", "SELECTIONS"]
