"""The train state of a run (``train_state.safetensors``): raw weights, optimiser moments and EMA shadow,
with the epoch, step, best loss and history in its JSON header (never pickled), and where a run
stands when it starts or resumes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import torch

from mlip.io import atomic_write
from mlip.training.config import TrainConfig
from mlip.training.distributed import Distributed
from mlip.training.plateau import PlateauState
from mlip.training.run_dir import STATE_NAME, record_resume


#: the metadata key of the state file that holds its JSON header
STATE_KEY = "mlip_train_state"


def save_state(path: Path, potential, optimizer, ema, meta: dict) -> None:
    """Write the weights, EMA shadow and optimiser moments to ``path`` atomically, ``meta`` (epoch,
    step, best loss, history, ...) and the optimiser's parameter groups in its header."""
    from safetensors.torch import save_file

    tensors = {f"model.{k}": v.detach().cpu().contiguous().clone() for k, v in potential.state_dict().items()}
    tensors.update({f"ema.{k}": v.detach().cpu().contiguous().clone() for k, v in ema.shadow.items()})
    opt = optimizer.state_dict()
    for index, state in opt["state"].items():
        for key, value in state.items():
            tensors[f"opt.{index}.{key}"] = torch.as_tensor(value).detach().cpu().contiguous().clone()
    header = dict(meta, param_groups=opt["param_groups"])
    text = json.dumps(header)
    atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata={STATE_KEY: text}))


def load_state(path: Path, potential, optimizer, ema) -> dict:
    """Load a :func:`save_state` file into ``potential``, ``optimizer`` and ``ema``; returns its header.
    :class:`mlip.CheckpointError` for an unreadable file or one of another model."""
    from safetensors import safe_open

    from mlip.checkpoint import CheckpointError

    try:
        with safe_open(str(path), framework="pt") as fh:
            header = json.loads((fh.metadata() or {})[STATE_KEY])
            tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    except Exception as err:  # corrupt, truncated or foreign file
        raise CheckpointError(f"cannot resume from {str(path)!r}: {err}") from None
    model_state = {k[6:]: v for k, v in tensors.items() if k.startswith("model.")}
    try:
        potential.load_state_dict(model_state)
    except RuntimeError as err:
        raise CheckpointError(f"{str(path)!r} was written for another model: {err}") from None
    for name in ema.shadow:
        ema.shadow[name] = tensors[f"ema.{name}"].to(ema.shadow[name])
    state: Dict[int, dict] = {}
    for key, value in tensors.items():
        if key.startswith("opt."):
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = value
    optimizer.load_state_dict({"state": state, "param_groups": header["param_groups"]})
    return header


@dataclass
class RunState:
    """Where a run stands: the first epoch to run, optimiser steps taken, the best validation loss,
    the per-epoch history, the epoch a resume started from and the minutes spent before it, the plateau
    rule's progress (``wsd`` schedule) and why the run ended, once it has (None while it may go on)."""

    start_epoch: int = 0
    step: int = 0
    best_loss: float = float("inf")
    history: List[dict] = field(default_factory=list)
    resumed_from: Optional[int] = None
    minutes_before: float = 0.0
    plateau: PlateauState = field(default_factory=PlateauState)
    finished: Optional[str] = None


def start_or_resume(config: TrainConfig, dist: Distributed, out_dir: Path, resume: bool,
                    changes: Dict[str, list], potential, optimizer, ema, n_train: int,
                    n_valid: int) -> RunState:
    """A fresh :class:`RunState`, or with ``resume`` the one of ``out_dir``'s train state (whose
    weights, optimiser moments and EMA are loaded); a resume with other data sizes is refused."""
    run = RunState()
    if not resume:
        return run
    meta = load_state(out_dir / STATE_NAME, potential, optimizer, ema)
    run.start_epoch, run.step, run.best_loss = meta["epoch"], meta["step"], meta["best_loss"]
    run.resumed_from = run.start_epoch
    run.history = meta.get("history", [])
    run.plateau, run.finished = PlateauState.from_dict(meta.get("plateau")), meta.get("finished")
    # a state written before "minutes" was stored: the last epoch's metric
    run.minutes_before = float(meta.get("minutes", run.history[-1]["minutes"] if run.history else 0.0))
    sizes = {"training": n_train, "validation": n_valid}
    before = {"training": meta.get("n_train"), "validation": meta.get("n_valid")}
    differ = [f"{what} set {before[what]} -> {n}" for what, n in sizes.items()
              if before[what] is not None and before[what] != n]
    if differ:
        raise ValueError(f"cannot resume {str(out_dir)!r}: the data differ from the run's "
                         f"({', '.join(differ)} structures); resume with the run's data or start "
                         "a new run")
    if dist.is_main:
        record_resume(config, out_dir, changes, run.start_epoch)
    return run
