"""Score a discovery submission the way Matbench Discovery does.

* Hull distances on the fixed reference hull: ``e_above_hull_pred = e_above_hull_ref +
  e_form_pred − e_form_ref`` (eV/atom). A material is stable when its hull distance is ≤ 0.
  A missing prediction (failed relaxation, no formation energy, absent from the file) is NaN and
  counts as unstable; a prediction off by more than 5 eV/atom from the reference formation energy
  is masked to NaN as in the benchmark's analysis.
* Classification and regression metrics (F1, DAF, Precision, Recall, Accuracy, TPR, FPR, TNR,
  FNR, TP, FP, TN, FN, MAE, RMSE, R²) come from ``matbench_discovery.metrics.stable_metrics``
  (the optional extra ``mlip-torch[discovery]``), with one documented difference: Accuracy is
  (TP + TN) / (number of materials), as the benchmark's current code computes it, whereas the 1.3.1
  release divided by the number of *non-missing* predictions. MAE/RMSE/R² are over the materials
  with a prediction (NaN dropped, as the benchmark does). DAF = precision / prevalence of this set.
  When the reference table has a ``uniq_proto`` column the metrics are also given for the unique
  prototypes (the leaderboard's headline subset).
* RMSD (Å) of relaxed structures against reference relaxed structures:
  ``StructureMatcher(stol=1.0, scale=False).get_rms_dist`` (the benchmark's settings), averaged
  over the materials that match (unmatched or failed ones are left out of the mean and counted).
* CPS = 0.5·F1 + 0.4·(1 − κ_SRME/2) + 0.1·clip(1 − RMSD/0.15, 0, 1), when a κ_SRME is given
  (F1 of the unique prototypes when known, else of the full set).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Union

import numpy as np

from mlip.extras import require

PathLike = Union[str, Path]

#: predictions further than this from the reference formation energy are masked (eV/atom)
MASK_E_FORM_ERROR = 5.0
#: RMSD (Å) at which the CPS geometry term reaches zero
CPS_RMSD_SCALE = 0.15


def _stable_metrics():
    return require("matbench_discovery.metrics", "discovery", "discovery metrics",
                   package="matbench-discovery").stable_metrics


def hull_distances(predictions: Mapping[str, float], reference: Mapping[str, dict],
                   mask: float = MASK_E_FORM_ERROR) -> Dict[str, Any]:
    """Predicted hull distances of every reference material (eV/atom).

    Returns ``{"ids": [...], "each_true": array, "each_pred": array (NaN = missing),
    "e_form_ref", "e_form_pred", "n_missing", "n_masked"}``. Raises ValueError for predictions of
    materials the reference does not know.
    """
    unknown = sorted(set(predictions) - set(reference))
    if unknown:
        raise ValueError(f"{len(unknown)} predicted materials are not in the reference table "
                         f"(e.g. {', '.join(unknown[:5])})")
    ids = list(reference)
    e_ref = np.array([reference[m]["e_form_per_atom"] for m in ids], dtype=float)
    each_true = np.array([reference[m]["e_above_hull"] for m in ids], dtype=float)
    e_pred = np.array([predictions.get(m, math.nan) for m in ids], dtype=float)
    n_missing = int(np.isnan(e_pred).sum())
    bad = np.abs(e_pred - e_ref) > mask
    e_pred = np.where(bad, np.nan, e_pred)
    return {"ids": ids, "each_true": each_true, "each_pred": each_true + e_pred - e_ref, "e_form_ref": e_ref,
            "e_form_pred": e_pred, "n_missing": n_missing, "n_masked": int(bad.sum())}


def guarded_stable_metrics(each_true: np.ndarray, each_pred: np.ndarray) -> Dict[str, float]:
    """The metrics of ``matbench_discovery.metrics.stable_metrics`` (stability threshold 0, NaN
    predictions = unstable), with its current code's guards: a ratio whose denominator is zero is
    NaN. Used where the installed release raises ZeroDivisionError; tested to agree with it
    everywhere else."""
    t = np.asarray(each_true, dtype=float)
    p = np.asarray(each_pred, dtype=float)
    have = ~np.isnan(p)
    actual = t <= 0
    predicted = have & (p <= 0)
    tp, fn = float((actual & predicted).sum()), float((actual & ~predicted).sum())
    fp, tn = float((~actual & predicted).sum()), float((~actual & ~predicted).sum())

    def ratio(a, b):
        return a / b if b > 0 else math.nan

    pos, neg = tp + fn, tn + fp
    prevalence = ratio(pos, pos + neg)
    precision, recall = ratio(tp, tp + fp), ratio(tp, pos)
    f1 = math.nan if not precision + recall > 0 else 2 * precision * recall / (precision + recall)
    keep = have & ~np.isnan(t)
    err = t[keep] - p[keep]
    ss_tot = float(((t[keep] - t[keep].mean()) ** 2).sum()) if keep.any() else math.nan
    return dict(
        F1=f1, DAF=ratio(precision, prevalence) if prevalence > 0 else math.nan, Precision=precision,
        Recall=recall, Accuracy=ratio(tp + tn, pos + neg), TPR=recall, FPR=ratio(fp, neg), TNR=ratio(tn, neg),
        FNR=ratio(fn, pos), TP=tp, FP=fp, TN=tn, FN=fn,
        MAE=float(np.abs(err).mean()) if keep.any() else math.nan,
        RMSE=float(np.sqrt((err**2).mean())) if keep.any() else math.nan,
        R2=1 - float((err**2).sum()) / ss_tot if keep.sum() > 1 and ss_tot > 0 else math.nan,
    )


def classification_metrics(each_true: np.ndarray, each_pred: np.ndarray) -> Dict[str, float]:
    """``matbench_discovery.metrics.stable_metrics`` (NaN predictions = unstable), Accuracy over
    all materials (see the module docstring), plus ``missing_preds``."""
    pd = require("pandas", "discovery", "discovery metrics")

    each_true = np.asarray(each_true, dtype=float)
    each_pred = np.asarray(each_pred, dtype=float)
    if len(each_true) == 0:
        raise ValueError("no materials to score")
    n_stable = int((each_true <= 0).sum())
    if n_stable in (0, len(each_true)):
        raise ValueError(f"the reference set has {n_stable} stable materials out of {len(each_true)}: "
                         f"F1, precision and DAF need both stable and unstable materials")
    if int((~np.isnan(each_pred)).sum()) == 0:
        raise ValueError("no material has a prediction (every relaxation failed or is missing)")
    stable_metrics = _stable_metrics()
    try:
        raw = stable_metrics(pd.Series(each_true), pd.Series(each_pred), fillna=True)
    except ZeroDivisionError:
        # matbench-discovery 1.3.1 divides by zero when no material is predicted stable (or
        # none correctly); its current code returns NaN there, as guarded_stable_metrics does.
        raw = guarded_stable_metrics(each_true, each_pred)
    out = {k: float(v) for k, v in raw.items()}
    out["Accuracy"] = (out["TP"] + out["TN"]) / len(each_true)
    out["missing_preds"] = int(np.isnan(each_pred).sum())
    return out


def read_geo_opt(path: PathLike) -> Dict[str, Any]:
    """``{material_id: ASE Atoms or None}`` of a ``geo-opt.jsonl.gz`` (None where the structure is null)."""
    from mlip.workflows.discovery.inputs import atoms_from_structure_dict, json_rows, load_json_file

    out = {}
    for mid, row in json_rows(load_json_file(path), repr(str(path))):
        value = row.get("structure")
        out[str(mid)] = None if value is None else atoms_from_structure_dict(value, f"{str(path)!r}, entry {mid!r}")
    return out


def structure_rmsd(predicted: Mapping[str, Any], reference: Mapping[str, Any], progress: bool = False
                   ) -> Dict[str, Optional[float]]:
    """RMSD (Å) per material with ``StructureMatcher(stol=1.0, scale=False).get_rms_dist``
    (pymatgen); None where the prediction is missing or does not match. Materials of the
    reference only."""
    require("pymatgen", "discovery", "RMSD")
    from pymatgen.analysis.structure_matcher import StructureMatcher
    from pymatgen.io.ase import AseAtomsAdaptor
    matcher = StructureMatcher(stol=1.0, scale=False)
    out: Dict[str, Optional[float]] = {}
    ids = list(reference)
    iterator = ids
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(ids, desc="RMSD", unit="material", leave=False, dynamic_ncols=True)
    for mid in iterator:
        pred = predicted.get(mid)
        if pred is None:
            out[mid] = None
            continue
        res = matcher.get_rms_dist(AseAtomsAdaptor.get_structure(pred), AseAtomsAdaptor.get_structure(reference[mid]))
        out[mid] = None if res is None else float(res[0])
    return out


def combined_performance_score(f1: float, kappa_srme: float, rmsd: float) -> float:
    """CPS = 0.5·F1 + 0.4·(1 − κ_SRME/2) + 0.1·clip(1 − RMSD/0.15, 0, 1) (dimensionless)."""
    return 0.5 * f1 + 0.4 * (1 - kappa_srme / 2) + 0.1 * float(np.clip(1 - rmsd / CPS_RMSD_SCALE, 0, 1))


def discovery_metrics(
    predictions: Union[PathLike, Mapping[str, float]],
    reference: Union[PathLike, Mapping[str, dict]],
    geo_opt: Optional[PathLike] = None,
    reference_structures: Optional[PathLike] = None,
    kappa_srme: Optional[float] = None,
    out_dir: Optional[PathLike] = None,
    plot: bool = True,
    progress: bool = True,
    pred_col: str = "e_form_per_atom",
) -> Dict[str, Any]:
    """All metrics of a submission (see the module docstring); written to ``out_dir/metrics.json``
    with the parity plot ``out_dir/hull-distance-parity.png`` when ``out_dir`` is given.

    Args:
        predictions: a discovery CSV (``material_id``, ``e_form_per_atom``) or a dict.
        reference: a reference table (:func:`.inputs.read_reference_table`) or its dict.
        geo_opt: relaxed structures (``geo-opt.jsonl.gz``): with ``reference_structures``, the RMSD.
        reference_structures: the reference relaxed structures (any structures file, e.g.
            ComputedStructureEntries).
        kappa_srme: the model's κ_SRME (0 best, 2 worst): CPS.
        pred_col: the prediction column of the CSV.

    Returns:
        ``{"full_test_set": {...}, ["unique_prototypes": {...},] "n_materials", "n_masked",
        "rmsd", "n_rmsd", "n_rmsd_unmatched", "kappa_srme", "cps", "files"}``.
    """
    from mlip.workflows.discovery.inputs import read_reference_table, read_structures
    from mlip.workflows.discovery.join import read_discovery_csv

    ref = read_reference_table(reference) if isinstance(reference, (str, Path)) else dict(reference)
    pred = read_discovery_csv(predictions, pred_col) if isinstance(predictions, (str, Path)) else dict(predictions)
    hd = hull_distances(pred, ref)
    result: Dict[str, Any] = {"n_materials": len(hd["ids"]), "n_masked": hd["n_masked"],
                              "full_test_set": classification_metrics(hd["each_true"], hd["each_pred"])}
    uniq = np.array([bool(ref[m].get("uniq_proto", False)) for m in hd["ids"]])
    if any("uniq_proto" in ref[m] for m in hd["ids"]) and uniq.any():
        result["unique_prototypes"] = classification_metrics(hd["each_true"][uniq], hd["each_pred"][uniq])
    headline = result.get("unique_prototypes", result["full_test_set"])

    result.update(rmsd=None, n_rmsd=0, n_rmsd_unmatched=0)
    if (geo_opt is None) != (reference_structures is None):
        raise ValueError("RMSD needs both the relaxed structures (geo-opt file) and the reference structures")
    if geo_opt is not None:
        predicted = read_geo_opt(geo_opt)
        refs = {m.material_id: m.atoms for m in read_structures(reference_structures)}
        rmsd = structure_rmsd(predicted, refs, progress=progress)
        values = [v for v in rmsd.values() if v is not None]
        result.update(rmsd=float(np.mean(values)) if values else None, n_rmsd=len(values),
                      n_rmsd_unmatched=len(rmsd) - len(values))
    result["kappa_srme"] = None if kappa_srme is None else float(kappa_srme)
    result["cps"] = None
    if kappa_srme is not None:
        if not 0 <= kappa_srme <= 2:
            raise ValueError(f"κ_SRME lies in [0, 2], got {kappa_srme}")
        if result["rmsd"] is None:
            raise ValueError("CPS needs the RMSD: give the geo-opt file and the reference structures")
        result["cps"] = combined_performance_score(headline["F1"], kappa_srme, result["rmsd"])
    result["files"] = {}
    if out_dir is not None:
        from mlip.io import write_json

        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        if plot:
            path = out_dir / "hull-distance-parity.png"
            plot_hull_distances(hd["each_true"], hd["each_pred"], path, headline)
            result["files"]["plot"] = str(path)
        result["files"]["metrics"] = str(out_dir / "metrics.json")
        write_json(out_dir / "metrics.json", result)
    return result


def plot_hull_distances(each_true, each_pred, path: PathLike, metrics: Optional[dict] = None) -> None:
    """Parity plot of predicted vs reference hull distance (eV/atom); missing predictions are
    drawn at the top edge in grey, the four quadrants (TP, FN, FP, TN) in colour."""
    matplotlib = require("matplotlib", "plot", "the parity plot")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mlip.io import atomic_write

    t = np.asarray(each_true, dtype=float)
    p = np.asarray(each_pred, dtype=float)
    have = ~np.isnan(p)
    span = np.concatenate([t, p[have]])
    lo, hi = float(np.min(span)), float(np.max(span))
    pad = 0.05 * max(hi - lo, 1e-3)
    lo, hi = lo - pad, hi + pad
    fig, ax = plt.subplots(figsize=(5.2, 5))
    groups = [("TP", (t <= 0) & (p <= 0), "tab:green"), ("FN", (t <= 0) & ~(p <= 0) & have, "tab:orange"),
              ("FP", (t > 0) & (p <= 0), "tab:red"), ("TN", (t > 0) & (p > 0), "tab:blue")]
    for name, sel, color in groups:
        ax.scatter(t[sel], p[sel], s=10, alpha=0.7, color=color, label=f"{name} ({int(sel.sum())})")
    if (~have).any():
        ax.scatter(t[~have], np.full((~have).sum(), hi), s=12, marker="x", color="grey",
                   label=f"missing ({int((~have).sum())})")
    ax.plot([lo, hi], [lo, hi], color="black", lw=0.8)
    ax.axhline(0, color="grey", lw=0.6, ls="--")
    ax.axvline(0, color="grey", lw=0.6, ls="--")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("reference hull distance (eV/atom)")
    ax.set_ylabel("predicted hull distance (eV/atom)")
    if metrics:
        ax.set_title(f"F1 {metrics['F1']:.3f}   DAF {metrics['DAF']:.2f}   MAE {metrics['MAE'] * 1e3:.1f} meV/atom",
                     fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=130, format="png", bbox_inches="tight"))
    plt.close(fig)


METRIC_ROWS = ("F1", "DAF", "Precision", "Recall", "Accuracy", "MAE", "RMSE", "R2", "TP", "FP", "TN", "FN",
               "missing_preds")


def format_summary(result: Dict[str, Any]) -> str:
    """The metrics as a text table (one column per subset)."""
    subsets = [s for s in ("full_test_set", "unique_prototypes") if s in result]
    lines = [f"{'metric':<14}" + "".join(f"{s:>20}" for s in subsets)]
    for key in METRIC_ROWS:
        cells = []
        for s in subsets:
            v = result[s].get(key)
            if v is None or (isinstance(v, float) and math.isnan(v)):
                cells.append(f"{'-':>20}")
            elif key in ("TP", "FP", "TN", "FN", "missing_preds"):
                cells.append(f"{int(v):>20d}")
            else:
                cells.append(f"{v:>20.4f}")
        unit = " (eV/atom)" if key in ("MAE", "RMSE") else ""
        lines.append(f"{key + unit:<14}" + "".join(cells))
    lines.append(f"materials: {result['n_materials']} ({result['n_masked']} predictions masked for "
                 f"|Δe_form| > {MASK_E_FORM_ERROR:g} eV/atom)")
    if result.get("rmsd") is not None:
        lines.append(f"RMSD: {result['rmsd']:.4f} Å over {result['n_rmsd']} matched structures "
                     f"({result['n_rmsd_unmatched']} unmatched or missing)")
    if result.get("cps") is not None:
        lines.append(f"CPS: {result['cps']:.4f} (κ_SRME {result['kappa_srme']:.4f})")
    return "\n".join(lines)


__all__ = ["CPS_RMSD_SCALE", "MASK_E_FORM_ERROR", "classification_metrics", "combined_performance_score",
           "discovery_metrics", "format_summary", "guarded_stable_metrics", "hull_distances", "plot_hull_distances", "read_geo_opt",
           "structure_rmsd"]
