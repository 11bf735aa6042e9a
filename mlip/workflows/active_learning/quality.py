"""How good a committee's uncertainty is: its predicted force error against the actual one, structure by
structure, on labelled data the committee did not train on.

Per structure s: predicted error σ_s = the mean over atoms of the committee's per-atom force uncertainty
(eV/Å; :class:`mlip.calculators.CommitteeCalculator`'s ``forces_uncertainty``), actual error e_s = the
RMSE of the committee's mean force against the label (eV/Å). The figure of merit is Spearman's rank
correlation of σ and e over the structures (:func:`rank_correlation`): whether the uncertainty puts the
structures in the order of their errors, which is what selection needs.
"""

from __future__ import annotations

from typing import Any, Dict, Sequence

import numpy as np


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 0 … n−1, ties sharing their mean rank."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), dtype=float)
    ranks[order] = np.arange(len(values), dtype=float)
    for value in np.unique(values):
        tied = values == value
        if tied.sum() > 1:
            ranks[tied] = ranks[tied].mean()
    return ranks


def rank_correlation(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation of ``a`` and ``b`` (the Pearson correlation of their ranks, ties at
    their mean rank); NaN for fewer than 3 values or a constant input."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) != len(b):
        raise ValueError(f"rank_correlation: {len(a)} values against {len(b)}")
    if len(a) < 3:
        return float("nan")
    ra, rb = _ranks(a), _ranks(b)
    if np.ptp(ra) == 0 or np.ptp(rb) == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def committee_errors(potentials: Sequence, samples: Sequence, batch_size: int = 16, dtype: str = "float64",
                     progress: bool = False) -> Dict[str, Any]:
    """The committee's mean predictions and uncertainty on labelled ``samples`` (Atoms with labels, or
    :class:`mlip.data.Sample`), structure by structure: ``predicted`` σ_s and ``actual`` e_s (eV/Å, see
    the module docstring; structures without force labels are left out of both), the ``config_type`` of
    each, Spearman's ``rank_correlation`` of the two, the committee mean's error ``metrics``
    (:func:`mlip.training.evaluation.error_metrics`: energy, forces, stress MAE/RMSE) and
    ``per_config_type``: for each config_type its count ``n``, force MAE (meV/Å) and rank correlation."""
    from mlip.calculators.committee import committee_predictions
    from mlip.training.evaluation import error_metrics, flatten_predictions
    from mlip.training.samples import atoms_of, labels_of

    structures = [atoms_of(s) for s in samples]
    results = committee_predictions(potentials, structures, batch_size=batch_size, dtype=dtype,
                                    progress=progress, desc="evaluate")
    predicted, actual, kinds, abs_errors = [], [], [], []
    for k, (sample, result) in enumerate(zip(samples, results)):
        labels = labels_of(sample, f"structure {k}")
        if labels.forces is None:
            continue
        predicted.append(float(np.mean(result["forces_uncertainty"])))
        actual.append(float(np.sqrt(np.mean((result["forces"] - labels.forces) ** 2))))
        abs_errors.append(np.abs(result["forces"] - labels.forces).reshape(-1))
        kinds.append(str(structures[k].info.get("config_type", "")))
    metrics = error_metrics(flatten_predictions(samples, [r["energy"] for r in results],
                                                [r["forces"] for r in results],
                                                [r["stress"] for r in results]))
    per_kind = {}
    for kind in sorted(set(kinds)):
        chosen = [i for i, name in enumerate(kinds) if name == kind]
        errors = np.concatenate([abs_errors[i] for i in chosen])
        per_kind[kind] = {"n": len(chosen), "forces_mae_meV_per_A": 1e3 * float(errors.mean()),
                          "rank_correlation": rank_correlation([predicted[i] for i in chosen],
                                                               [actual[i] for i in chosen])}
    return {"predicted": predicted, "actual": actual, "config_type": kinds,
            "rank_correlation": rank_correlation(predicted, actual), "metrics": metrics,
            "per_config_type": per_kind}


__all__ = ["committee_errors", "rank_correlation"]
