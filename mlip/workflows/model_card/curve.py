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


def shipped_index(curve: dict, shipped_epoch: Optional[int]) -> Optional[int]:
    """The index in ``curve`` of the last stage's epoch ``shipped_epoch`` (counted within that stage, as its
    checkpoint counts it: the weights a card ships), or None where none is given or it is the last point
    (the stopping point, marked already)."""
    last_stage = [i for i, s in enumerate(curve["stage"]) if s == curve["stage"][-1]]
    if shipped_epoch is None or not 1 <= shipped_epoch <= len(last_stage):
        return None
    k = last_stage[shipped_epoch - 1]
    return None if k == len(curve["stage"]) - 1 else k


def plot_learning_curve(curve: dict, path: Path, title: str,
                        shipped_epoch: Optional[int] = None) -> Optional[str]:
    """Write the PNG of ``curve`` (validation energy and force MAE against cumulative minutes, log scale,
    a dotted line where each later stage begins, the stopping point marked, and the epoch of the shipped
    weights where that is an earlier one) to ``path``, atomically.
    Returns None, or, when matplotlib is missing, the one-line reason the plot was not made."""
    from mlip.extras import MissingExtraError, require
    from mlip.io import atomic_write

    try:
        require("matplotlib", "plot", "the learning curve")
    except MissingExtraError as err:
        return str(err)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import LogFormatter

    fig = Figure(figsize=(7, 6), constrained_layout=True)
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 1, sharex=True)
    starts = [m for m, s, prev in zip(curve["minutes"][1:], curve["stage"][1:], curve["stage"])
              if s != prev]
    shipped = shipped_index(curve, shipped_epoch)
    for ax, key, label in zip(axes, CURVE_KEYS, ("energy MAE (meV/atom)", "force MAE (meV/Å)")):
        points = [(m, v) for m, v in zip(curve["minutes"], curve[key]) if v is not None]
        if points:
            ax.plot(*zip(*points), "o-", ms=3, color="tab:blue")
            ax.plot(*points[-1], "s", ms=7, color="tab:red", label="stopped")
            if shipped is not None and curve[key][shipped] is not None:
                ax.plot(curve["minutes"][shipped], curve[key][shipped], "D", ms=7, color="tab:green",
                        label=f"shipped weights (epoch {shipped_epoch})")
                ax.legend(loc="best", fontsize="small")
            ax.set_yscale("log")
            # plain numbers (150, not 1.5 × 10²), on the minor ticks too where a curve spans less than a decade
            ax.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
            ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.4)))
        for minutes in starts:
            ax.axvline(minutes, color="grey", ls=":", lw=1)
        ax.set_ylabel(f"validation {label}")
    stop = curve["stopped"]
    axes[0].set_title(f"{title}: stopped after epoch {stop['epoch']}, {stop['minutes']:.0f} min")
    axes[-1].set_xlabel("training minutes, all stages")
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    return None
