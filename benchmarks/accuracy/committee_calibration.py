"""How well a committee's uncertainty ranks its errors: predicted against actual force error, per structure.

    python benchmarks/accuracy/committee_calibration.py --members M0.safetensors M1.safetensors ... --heldout FILE
        [--label NAME] [--json benchmarks/results/committee-calibration-emt.json]
        [--plot docs/committee-calibration.png] [--bins 8]

For each labelled structure of ``--heldout`` (which the members never trained on), with the committee
of ``--members`` in float64 (:func:`mlip.workflows.active_learning.committee_errors`):

* predicted error σ_s: the mean over atoms of ``forces_uncertainty`` (the members' standard deviation of
  each atom's force vector, eV/Å); also its largest atom, σ_s^max;
* actual error e_s: the RMSE of the committee's mean force against the label (eV/Å).

Reported: Spearman's rank correlation of σ_s (and σ_s^max) with e_s over all structures and within each
``config_type`` (the issue's target: ≥ 0.6 over all), the median of e_s / σ_s (how far the committee's
spread understates its error), and the calibration curve: the structures sorted by
σ_s into ``--bins`` groups of equal size, with the mean σ and the root mean square e of each (a
committee of N members whose spread were the error's standard deviation would lie on e = σ·√(1 + 1/N)
for the mean). The plot shows the structures (e against σ, log–log, by config_type), the curve and the
line e = σ.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]  # benchmarks/
DEFAULT_JSON = ROOT / "results" / "committee-calibration-emt.json"
DEFAULT_PLOT = ROOT.parent / "docs" / "committee-calibration.png"


def calibration_curve(predicted, actual, bins: int) -> list:
    """The structures in ``bins`` groups of equal size by predicted error: per group its count, mean
    predicted and root-mean-square actual error (eV/Å)."""
    order = np.argsort(predicted, kind="stable")
    groups = [g for g in np.array_split(order, bins) if len(g)]
    p, a = np.asarray(predicted), np.asarray(actual)
    return [{"n": int(len(g)), "predicted": float(p[g].mean()),
             "actual_rms": float(np.sqrt((a[g] ** 2).mean()))} for g in groups]


def measure(members, heldout: Path, bins: int) -> dict:
    from mlip.calculators.committee import committee_predictions
    from mlip.data import read_dataset
    from mlip.workflows.active_learning import committee_errors, rank_correlation
    from mlip.workflows.active_learning.committee import load_committee

    potentials = load_committee(members)
    samples = list(read_dataset(heldout))
    t0 = time.perf_counter()
    found = committee_errors(potentials, samples, dtype="float64")
    largest = [float(np.max(r["forces_uncertainty"])) for r, s in zip(
        committee_predictions(potentials, [s.atoms for s in samples], dtype="float64"), samples)
        if s.forces is not None]
    kinds = found["config_type"]
    per_kind = {}
    for kind in sorted(set(kinds)):
        chosen = [i for i, k in enumerate(kinds) if k == kind]
        per_kind[kind] = {"n": len(chosen),
                          "spearman_mean_sigma": rank_correlation([found["predicted"][i] for i in chosen],
                                                                  [found["actual"][i] for i in chosen]),
                          "spearman_max_sigma": rank_correlation([largest[i] for i in chosen],
                                                                 [found["actual"][i] for i in chosen])}
    return {"members": [str(m) for m in members], "heldout": str(heldout), "n": len(found["actual"]),
            "spearman_mean_sigma": found["rank_correlation"],
            "spearman_max_sigma": rank_correlation(largest, found["actual"]),
            "per_config_type": per_kind,
            "calibration": calibration_curve(found["predicted"], found["actual"], bins),
            "median_actual_over_predicted": float(np.median(np.asarray(found["actual"])
                                                            / np.maximum(found["predicted"], 1e-12))),
            "committee_forces_mae_meV_per_A": found["metrics"]["forces_mae_meV_per_A"],
            "structures": {"predicted": found["predicted"], "predicted_max": largest,
                           "actual": found["actual"], "config_type": kinds},
            "seconds": time.perf_counter() - t0}


def plot(result: dict, path: Path, title: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    s = result["structures"]
    fig = Figure(figsize=(5.6, 4.6), constrained_layout=True)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    predicted, actual = np.asarray(s["predicted"]), np.asarray(s["actual"])
    for kind in sorted(set(s["config_type"])):
        chosen = [i for i, k in enumerate(s["config_type"]) if k == kind]
        ax.scatter(predicted[chosen], actual[chosen], s=10, alpha=0.6, label=kind)
    curve = result["calibration"]
    ax.plot([c["predicted"] for c in curve], [c["actual_rms"] for c in curve], "k-o", ms=4,
            label="binned (rms actual)")
    lo = max(min(predicted.min(), actual.min()), 1e-4)
    hi = max(predicted.max(), actual.max())
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="actual = predicted")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("predicted: mean per-atom force std of the committee (eV/Å)")
    ax.set_ylabel("actual: force RMSE of the committee mean (eV/Å)")
    ax.set_title(f"{title}\nSpearman {result['spearman_mean_sigma']:.2f} over {result['n']} held-out "
                 "structures", fontsize=9)
    ax.legend(fontsize=7)
    fig.savefig(str(path), dpi=120)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--members", nargs="+", required=True, type=Path, help="the committee's checkpoints")
    p.add_argument("--heldout", required=True, type=Path, help="labelled structures the members never saw")
    p.add_argument("--label", default="committee on EMT", help="what the committee is (plot title, record)")
    p.add_argument("--bins", type=int, default=8)
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    p.add_argument("--plot", type=Path, default=DEFAULT_PLOT)
    args = p.parse_args(argv)
    from mlip.io import write_json

    result = {"label": args.label, **measure(args.members, args.heldout, args.bins),
              "date": time.strftime("%Y-%m-%d")}
    write_json(args.json, result)
    plot(result, args.plot, args.label)
    print(f"{args.label}: Spearman(predicted, actual force error) {result['spearman_mean_sigma']:.3f} "
          f"(largest atom: {result['spearman_max_sigma']:.3f}) over {result['n']} structures; "
          + ", ".join(f"{k} {v['spearman_mean_sigma']:.2f} (n {v['n']})"
                      for k, v in result["per_config_type"].items())
          + f" -> {args.json}, {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
