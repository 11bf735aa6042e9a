"""Thermal-conductivity metrics of Matbench Discovery: κ_SRME, κ_SRE and κ_SRD.

Per material, with κ the trace/3 of the conductivity tensor at one temperature (300 K) and κ_i
the trace/3 of the contribution of phonon mode i (irreducible q-point and band):

* SRD (symmetric relative difference, signed): ``2 (κ_pred − κ_ref) / (κ_pred + κ_ref)``;
* SRE (symmetric relative error): ``|SRD|``;
* SRME (symmetric relative mean error, mode-resolved, so that errors of different modes cannot
  cancel): ``2 Σ_i |κ_pred,i − κ_ref,i| / (Σ_q w_q · (κ_pred + κ_ref))`` with the mode
  contributions as phono3py gives them (multiplicity included: ``κ = Σ_i κ_i / Σ_q w_q``), which
  is ``2 Σ_i w_i |k_pred,i − k_ref,i| / (Σ_i w_i (κ_pred + κ_ref))`` for per-q-point values k_i.

0 is perfect; 2 is the worst (when one side is zero). A failed run, imaginary modes or a changed
space group score SRME = SRE = 2 and SRD = −2 (treated as a prediction of κ = 0, as Matbench
Discovery does with missing values). The benchmark averages SRME (and SRE) over its 103 PhononDB
materials at 300 K.

In the Wigner formulation each mode's κ_i is its populations (particle) term plus a share of the
coherence terms of the pairs it belongs to (:func:`mode_kappa_total`, as in the published
implementation).

Inputs of the material-level functions ("records") may be a
:class:`mlip.workflows.phonons.kappa_result.KappaResult`, the dict of its ``to_dict()`` / ``kappa.json``, or a
plain mapping with the keys:

* ``kappa``: κ tensor(s) [n_T, 3, 3], [n_T, 6] (Voigt), [3, 3] or [6] (W/(m·K)), or
  ``kappa_average``: trace/3 [n_T] or a scalar;
* ``mode_kappa``: [n_T, n_q, n_bands, 6] or [n_q, n_bands, 6] (Voigt), or
  ``mode_kappa_average`` (trace/3): [n_T, n_q, n_bands] or [n_q, n_bands];
* ``grid_weights``: [n_q];
* optional ``temperatures`` [n_T] (K; needed with several temperatures), ``failed``,
  ``imaginary_modes``, ``symmetry_broken``, ``qpoints`` [n_q, 3] (when both sides carry them
  they must agree modulo reciprocal lattice vectors; q-point weights are compared in any case).
"""

from __future__ import annotations

import math
from typing import Any, Dict, Mapping, Sequence, Union

import numpy as np

from mlip.workflows.phonons.kappa_result import FORMAT, KappaResult

#: the score of a failed / unstable / symmetry-broken material
WORST = 2.0


# ----------------------------------------------------------------------------------------- arrays
def kappa_average(kappa) -> Union[float, np.ndarray]:
    """Trace/3 of κ tensors: [..., 3, 3] or Voigt [..., 6] → [...] (a float for a single tensor)."""
    k = np.asarray(kappa, dtype=float)
    if k.shape[-2:] == (3, 3):
        out = np.trace(k, axis1=-2, axis2=-1) / 3.0
    elif k.shape[-1:] == (6,):
        out = k[..., :3].mean(axis=-1)
    else:
        raise ValueError(f"κ must be [..., 3, 3] tensors or Voigt [..., 6], got shape {k.shape}")
    return float(out) if np.ndim(out) == 0 else out


def mode_kappa_total(mode_kappa_particle, mode_kappa_coherence, heat_capacities) -> np.ndarray:
    """Per-mode Wigner κ: populations term plus a share of the coherence terms.

    Args:
        mode_kappa_particle: [n_T, n_q, n_bands, 6] band-diagonal (populations) contributions.
        mode_kappa_coherence: [n_T, n_q, n_bands, n_bands, 6] band-pair (coherences)
            contributions with a zero diagonal (phono3py's ``mode_kappa_matrix`` without its
            diagonal; older phono3py's ``mode_kappa_C``).
        heat_capacities: [n_T, n_q, n_bands] mode heat capacities (any unit).

    Returns:
        [n_T, n_q, n_bands, 6]: mode m gets ``Σ_s κ_C[s, m] · 2 C_s / (C_s + C_m)``, the
        convention of the published κ_SRME code (k_SRME's ``calculate_mode_kappa_TOT``, Matbench
        Discovery's ``calc_mode_kappa_tot``), including its treatment of a mode with zero heat
        capacity (acoustic modes at Γ): there the s = m term is 0/0, the published code's whole sum
        for that mode becomes NaN and is set to 0, so such a mode gets no coherence share at all.
        For κ_C symmetric in its band indices (phono3py's is) the shares of a pair of modes with
        non-zero heat capacities add up to the pair's total.
    """
    particle = np.asarray(mode_kappa_particle, dtype=float)
    coherence = np.asarray(mode_kappa_coherence, dtype=float)
    heat = np.asarray(heat_capacities, dtype=float)
    if coherence.ndim != 5 or coherence.shape[2] != coherence.shape[3]:
        raise ValueError(
            f"coherence contributions must be [n_T, n_q, n_bands, n_bands, 6], got {coherence.shape}"
        )
    if particle.shape != coherence.shape[:3] + coherence.shape[4:] or heat.shape != coherence.shape[:3]:
        raise ValueError(
            f"shapes do not match: particle {particle.shape}, coherence {coherence.shape}, heat "
            f"capacities {heat.shape} (expected [n_T, n_q, n_bands, 6], [n_T, n_q, n_bands, n_bands, 6], "
            "[n_T, n_q, n_bands])"
        )
    c_s = heat[:, :, :, None]
    c_m = heat[:, :, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(c_s + c_m > 0, 2.0 * c_s / (c_s + c_m), 0.0)  # [T, q, s, m]
    coherent = np.einsum("tqsmc,tqsm->tqmc", coherence, share)
    coherent[heat == 0] = 0.0  # a mode without heat capacity gets no coherence share (see above)
    return particle + coherent


def kappa_srd(kappa_pred, kappa_ref) -> float:
    """Symmetric relative difference ``2 (κ_pred − κ_ref) / (κ_pred + κ_ref)`` of scalars (or
    tensors, reduced to trace/3). A missing (None/NaN) prediction gives −2; both zero give 0."""
    ref = _scalar(kappa_ref)
    if not math.isfinite(ref):
        raise ValueError(f"the reference κ must be finite, got {kappa_ref!r}")
    pred = _scalar(kappa_pred)
    if not math.isfinite(pred):
        return -WORST
    if pred + ref == 0:
        return 0.0 if pred == ref else math.copysign(WORST, pred - ref)
    return 2.0 * (pred - ref) / (pred + ref)


def kappa_sre(kappa_pred, kappa_ref) -> float:
    """Symmetric relative error ``2 |κ_pred − κ_ref| / (κ_pred + κ_ref)`` (= |SRD|); 2 for a
    missing prediction."""
    return abs(kappa_srd(kappa_pred, kappa_ref))


def kappa_srme_arrays(mode_kappa_pred, mode_kappa_ref, grid_weights, kappa_pred, kappa_ref) -> float:
    """κ_SRME of one material at one temperature from arrays.

    Args:
        mode_kappa_pred, mode_kappa_ref: mode contributions on the same q-points and bands,
            Voigt [n_q, n_bands, 6] or trace/3 [n_q, n_bands] (W/(m·K); multiplicity included,
            ``κ = Σ mode_kappa / Σ grid_weights``).
        grid_weights: [n_q] multiplicities of the q-points (Σ = mesh size).
        kappa_pred, kappa_ref: totals, scalars (trace/3) or tensors [3, 3] / Voigt [6].

    Returns ``2 Σ |κ_pred,i − κ_ref,i| / Σ w / (κ_pred + κ_ref)``; 2 when the prediction has
    NaNs; 0 when both sides are zero everywhere.
    """
    pred_m = _mode_average(mode_kappa_pred)
    ref_m = _mode_average(mode_kappa_ref)
    if pred_m.shape != ref_m.shape:
        raise ValueError(
            f"predicted and reference modes differ in shape ({pred_m.shape} vs {ref_m.shape}): the q-mesh, "
            "primitive cell or symmetry differ; κ_SRME compares modes on the same grid"
        )
    weights = np.asarray(grid_weights, dtype=float)
    if weights.shape != pred_m.shape[:1]:
        raise ValueError(f"grid_weights must be [n_q] = [{pred_m.shape[0]}], got shape {weights.shape}")
    if not np.all(np.isfinite(ref_m)):
        raise ValueError("the reference mode contributions contain NaN")
    k_ref = _scalar(kappa_ref)
    if not math.isfinite(k_ref):
        raise ValueError(f"the reference κ must be finite, got {kappa_ref!r}")
    k_pred = _scalar(kappa_pred)
    if not math.isfinite(k_pred) or not np.all(np.isfinite(pred_m)) or not np.all(np.isfinite(weights)):
        return WORST
    error = float(np.abs(pred_m - ref_m).sum()) / float(weights.sum())
    denominator = k_pred + k_ref
    if denominator == 0:
        return 0.0 if error == 0 else WORST
    return 2.0 * error / denominator


def _scalar(kappa) -> float:
    if kappa is None:
        return float("nan")
    k = np.asarray(kappa, dtype=float)
    if k.ndim == 0:
        return float(k)
    if k.shape in ((3, 3), (6,)):
        return float(kappa_average(k))
    if k.size == 1:
        return float(k.reshape(()))
    raise ValueError(f"κ must be a scalar, a [3, 3] tensor or Voigt [6], got shape {k.shape}")


def _mode_average(mode_kappa) -> np.ndarray:
    m = np.asarray(mode_kappa, dtype=float)
    if m.ndim == 3 and m.shape[-1] == 6:
        return m[..., :3].mean(axis=-1)
    if m.ndim == 2:
        return m
    raise ValueError(f"mode contributions must be Voigt [n_q, n_bands, 6] or trace/3 [n_q, n_bands], "
                     f"got shape {m.shape}")


# ----------------------------------------------------------------------------------------- records
def _record(obj, temperature: float, role: str) -> Dict[str, Any]:
    """Normalise a result-like object to {flags, kappa (scalar), modes [n_q, n_bands], weights}."""
    if isinstance(obj, Mapping) and obj.get("format") == FORMAT:
        obj = KappaResult.from_dict(dict(obj))
    if isinstance(obj, KappaResult):
        flags = {"failed": obj.failed, "imaginary_modes": obj.imaginary_modes,
                 "symmetry_broken": obj.symmetry_broken}
        data = {"kappa": obj.kappa, "mode_kappa": obj.mode_kappa, "grid_weights": obj.grid_weights,
                "temperatures": obj.temperatures, "qpoints": obj.qpoints}
    elif isinstance(obj, Mapping):
        flags = {key: obj.get(key) for key in ("failed", "imaginary_modes", "symmetry_broken")}
        data = obj
    elif obj is None:
        flags, data = {"missing": True}, {}
    else:
        raise TypeError(f"{role}: expected a KappaResult, its dict or a mapping, got {type(obj).__name__}")
    flags = {key: bool(value) for key, value in flags.items()}
    flags["status"] = next((key for key in ("missing", "failed", "imaginary_modes", "symmetry_broken")
                            if flags.get(key)), "ok")

    temps = data.get("temperatures")
    temps = None if temps is None else np.atleast_1d(np.asarray(temps, dtype=float))

    def pick(array, single_ndim: int):
        """Select ``temperature`` when ``array`` has a leading temperature axis."""
        if array is None:
            return None
        a = np.asarray(array, dtype=float)
        if a.ndim == single_ndim:
            return a
        if a.ndim != single_ndim + 1:
            raise ValueError(f"{role}: unexpected array shape {a.shape}")
        if temps is None:
            if a.shape[0] != 1:
                raise ValueError(
                    f"{role}: several temperatures but no 'temperatures' to choose {temperature:g} K"
                )
            return a[0]
        hits = np.flatnonzero(np.abs(temps - float(temperature)) < 1e-6)
        if hits.size == 0:
            raise ValueError(f"{role}: no result at {temperature:g} K (temperatures {temps.tolist()} K)")
        return a[int(hits[0])]

    kappa = None
    if data.get("kappa") is not None:
        k = np.asarray(data["kappa"], dtype=float)
        kappa = pick(k, 2 if k.shape[-2:] == (3, 3) else 1)
    elif data.get("kappa_average") is not None:
        kappa = pick(data["kappa_average"], 0)
    modes = None
    if data.get("mode_kappa") is not None:
        modes = pick(data["mode_kappa"], 3)
    elif data.get("mode_kappa_average") is not None:
        modes = pick(data["mode_kappa_average"], 2)
    return {**flags, "kappa": kappa, "modes": modes, "grid_weights": data.get("grid_weights"),
            "qpoints": data.get("qpoints")}


def kappa_scores(pred, ref, temperature: float = 300.0) -> Dict[str, Any]:
    """SRME, SRE and SRD of one material at ``temperature`` (K).

    ``pred`` and ``ref`` are records (see the module docstring); ``pred=None`` is a missing
    prediction. The reference must be a complete, finite result (ValueError otherwise).

    Returns:
        ``{"srme", "sre", "srd", "kappa_pred", "kappa_ref" (trace/3, W/(m·K); kappa_pred None
        when not available), "status"}`` where status is the prediction's (``"ok"``,
        ``"failed"`` (flagged, or no finite κ), ``"imaginary_modes"``, ``"symmetry_broken"``,
        ``"missing"``); anything but ``"ok"`` scores SRME = SRE = 2, SRD = −2 — a changed space
        group too, even when κ was computed (``stop_on_broken_symmetry=False``).

    Raises:
        ValueError: an incomplete or flagged reference, predicted κ without mode-resolved κ,
            mode arrays of different shapes or q-point weights that differ, a temperature
            missing from a record.
    """
    r = _record(ref, temperature, "reference")
    if r["status"] != "ok" or r["kappa"] is None or r["modes"] is None:
        raise ValueError(f"the reference result must be complete (κ and mode-resolved κ), got status "
                         f"{r['status']!r}")
    p = _record(pred, temperature, "prediction")
    kappa_ref = _scalar(r["kappa"])
    kappa_pred = None if p["kappa"] is None else _scalar(p["kappa"])
    if kappa_pred is not None and not math.isfinite(kappa_pred):
        kappa_pred = None
    out = {"kappa_pred": kappa_pred, "kappa_ref": kappa_ref, "status": p["status"]}
    if p["status"] == "ok" and kappa_pred is None:
        out["status"] = "failed"  # no (finite) κ
    if out["status"] != "ok":
        return {**out, "srme": WORST, "sre": WORST, "srd": -WORST}
    if p["modes"] is None:
        raise ValueError(
            "the prediction has κ but no mode-resolved κ ('mode_kappa' or 'mode_kappa_average')"
        )
    weights = p["grid_weights"] if p["grid_weights"] is not None else r["grid_weights"]
    if weights is None:
        raise ValueError("grid_weights are needed for κ_SRME (in the prediction or the reference)")
    ref_weights = r["grid_weights"]
    if (ref_weights is not None and np.shape(ref_weights) == np.shape(weights)
            and not np.array_equal(np.asarray(ref_weights), np.asarray(weights))):
        raise ValueError("predicted and reference q-point weights differ: the q-points are not the same")
    if p["qpoints"] is not None and r["qpoints"] is not None:
        qp, qr = np.asarray(p["qpoints"], dtype=float), np.asarray(r["qpoints"], dtype=float)
        delta = qp - qr if qp.shape == qr.shape else None
        if delta is None or not np.allclose(delta - np.round(delta), 0.0, atol=1e-6):
            raise ValueError("predicted and reference q-points differ (q-mesh, primitive cell or its "
                             "orientation): their modes cannot be compared one by one")
    srme = kappa_srme_arrays(p["modes"], r["modes"], weights, p["kappa"], r["kappa"])
    srd = kappa_srd(kappa_pred, kappa_ref)
    return {**out, "srme": srme, "sre": abs(srd), "srd": srd}


def kappa_srme(pred, ref, temperature: float = 300.0) -> float:
    """κ_SRME of one material (see :func:`kappa_scores`)."""
    return float(kappa_scores(pred, ref, temperature)["srme"])


def kappa_sre_result(pred, ref, temperature: float = 300.0) -> float:
    """κ_SRE of one material from records (2 for failed/unstable/broken; see :func:`kappa_scores`)."""
    return float(kappa_scores(pred, ref, temperature)["sre"])


def mean_kappa_scores(preds: Union[Mapping[str, Any], Sequence[Any]],
                      refs: Union[Mapping[str, Any], Sequence[Any]],
                      temperature: float = 300.0) -> Dict[str, Any]:
    """Scores averaged over materials.

    Args:
        preds, refs: records keyed by material id (every reference material counts; one without
            a prediction scores 2 — predictions without a reference are ignored and counted in
            ``n_extra``) or two sequences of equal length in the same order.
        temperature: K.

    Returns:
        ``{"srme", "sre", "srd" (means), "n_materials", "n_ok", "n_failed" (not "ok", missing
        included), "n_missing", "n_extra", "per_material": {id: kappa_scores(...)}}``.
    """
    if isinstance(refs, Mapping):
        if not isinstance(preds, Mapping):
            raise TypeError("refs is keyed by material id: preds must be a mapping too")
        keys = list(refs)
        pairs = [(key, preds.get(key), refs[key]) for key in keys]
        n_extra = len(set(preds) - set(refs))
    else:
        preds, refs = list(preds), list(refs)
        if len(preds) != len(refs):
            raise ValueError(f"{len(preds)} predictions for {len(refs)} references")
        pairs = [(i, p, r) for i, (p, r) in enumerate(zip(preds, refs))]
        n_extra = 0
    if not pairs:
        raise ValueError("no reference materials")
    per = {key: kappa_scores(p, r, temperature) for key, p, r in pairs}
    values = list(per.values())
    return {
        "srme": float(np.mean([v["srme"] for v in values])),
        "sre": float(np.mean([v["sre"] for v in values])),
        "srd": float(np.mean([v["srd"] for v in values])),
        "n_materials": len(values),
        "n_ok": sum(v["status"] == "ok" for v in values),
        "n_failed": sum(v["status"] != "ok" for v in values),
        "n_missing": sum(v["status"] == "missing" for v in values),
        "n_extra": n_extra,
        "per_material": per,
    }


__all__ = [
    "WORST",
    "kappa_average",
    "kappa_scores",
    "kappa_sre",
    "kappa_sre_result",
    "kappa_srd",
    "kappa_srme",
    "kappa_srme_arrays",
    "mean_kappa_scores",
    "mode_kappa_total",
]
