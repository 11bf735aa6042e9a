"""A model card's learning curve: the validation errors of every epoch of every training stage against the
minutes spent since the first stage began, where and why the training stopped, and its plot.

The numbers come from each run folder's ``metrics.json`` (one record per epoch, ``minutes`` counted from the
start of that stage's run, a resumed run continuing them); the stopping reason is the last record's
``stopped`` (the plateau rule's ``plateau at epoch N, decay done``), else what the last stage's config
tells: all its epochs run, or its wall-clock budget ``max_minutes`` spent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

from mlip.workflows.model_card.measure import KEYS

#: the per-epoch validation errors the curve follows (keys of ``metrics.json`` records)
CURVE_KEYS = (f"valid_{KEYS['energy']}", f"valid_{KEYS['forces']}")


def _reason(last: dict, n_epochs: int, config: dict) -> Optional[str]:
    """Why the last stage stopped: its last record's ``stopped``, else its config's epochs or budget;
    None when neither tells (stopped from outside)."""
    if last.get("stopped"):
        return str(last["stopped"])
    if n_epochs >= config.get("epochs", n_epochs + 1):
        return f"all {config['epochs']} epochs of its config run"
    budget = config.get("max_minutes")
    if budget is not None and last["minutes"] >= budget:
        return f"its wall-clock budget max_minutes {budget:g} spent"
    return None


def learning_curve(run_dirs: List[Path]) -> dict:
    """The card's ``learning_curve`` entry from the run folders of the stages, in order: per epoch (lists
    of one value per epoch over all stages) the ``stage`` (1-based), the ``epoch`` (counted over all
    stages), the cumulative ``minutes`` and the validation energy and force MAE (None where a record has
    none); and ``stopped``: the stage, epoch and minutes of the last epoch, and the ``reason``."""
    from mlip.checkpoint import read_header

    curve: dict = {"stage": [], "epoch": [], "minutes": [], **{key: [] for key in CURVE_KEYS}}
    before = 0.0
    for k, run_dir in enumerate(run_dirs, 1):
        history = json.loads((Path(run_dir) / "metrics.json").read_text())
        for record in history:
            curve["stage"].append(k)
            curve["epoch"].append(len(curve["epoch"]) + 1)
            curve["minutes"].append(before + record["minutes"])
            for key in CURVE_KEYS:
                curve[key].append(record.get(key))
        before += history[-1]["minutes"]
    config = read_header(Path(run_dirs[-1]) / "best.safetensors")["metadata"]["training"]["config"]
    curve["stopped"] = {"stage": len(run_dirs), "epoch": curve["epoch"][-1], "minutes": before,
                        "reason": _reason(history[-1], len(history), config)}
    return curve


def plot_learning_curve(curve: dict, path: Path, title: str) -> Optional[str]:
    """Write the PNG of ``curve`` (validation energy and force MAE against cumulative minutes, log scale,
    a dotted line where each later stage begins, the stopping point marked) to ``path``, atomically.
    Returns None, or, when matplotlib is missing, the one-line reason the plot was not made."""
    from mlip.extras import MissingExtraError, require
    from mlip.io import atomic_write

    try:
        require("matplotlib", "plot", "the learning curve")
    except MissingExtraError as err:
        return str(err)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 6), constrained_layout=True)
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 1, sharex=True)
    starts = [m for m, s, prev in zip(curve["minutes"][1:], curve["stage"][1:], curve["stage"])
              if s != prev]
    for ax, key, label in zip(axes, CURVE_KEYS, ("energy MAE (meV/atom)", "force MAE (meV/Å)")):
        points = [(m, v) for m, v in zip(curve["minutes"], curve[key]) if v is not None]
        if points:
            ax.plot(*zip(*points), "o-", ms=3, color="tab:blue")
            ax.plot(*points[-1], "s", ms=7, color="tab:red")  # the stopping point
            ax.set_yscale("log")
        for minutes in starts:
            ax.axvline(minutes, color="grey", ls=":", lw=1)
        ax.set_ylabel(f"validation {label}")
    stop = curve["stopped"]
    axes[0].set_title(f"{title}: stopped after epoch {stop['epoch']}, {stop['minutes']:.0f} min")
    axes[-1].set_xlabel("training minutes, all stages")
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    return None
