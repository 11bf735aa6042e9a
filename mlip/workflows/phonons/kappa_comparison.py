"""κ of a few named crystals by a model and by a reference calculator, and the model's κ_SRME against it.

For distillation: the reference is the teacher (a foundation potential such as CHGNet), the model its
student; both go through the same κ protocol (:func:`mlip.workflows.phonons.kappa.run_kappa`, Matbench
Discovery's: symmetry-preserving relaxation, 0.03 Å displacements, Wigner transport in the RTA at
300 K with isotope scattering), each in its own resumable campaign
(:func:`mlip.workflows.phonons.kappa_batch.run_kappa_batch`: ``out_dir/model`` and ``out_dir/reference``; a
rerun recomputes nothing), and the model is scored per crystal with
:func:`mlip.workflows.phonons.kappa_metrics.kappa_scores` (κ_SRME, κ_SRE, κ_SRD) against the reference's
mode-resolved κ, not against experiment.

Crystals are named (:data:`KAPPA_COMPOUNDS`: diamond Si, rocksalt NaCl and MgO, started from their
experimental lattice constants and relaxed by each calculator) or given as ``FORMULA:STRUCTURE:A``
(``ase.build.bulk``'s crystal structure and lattice constant in Å, e.g. ``Cu:fcc:3.61``). Each is the
conventional cubic cell; fc2 and fc3 come from the same ``supercell``-fold repetition of it (2: 64
atoms for the 8-atom cells of Si, NaCl and MgO, a width of twice the lattice constant), and the q-mesh
(``mesh``³, default :data:`DEFAULT_MESH`) is on the primitive cell. These supercells are smaller than
the PhononDB ones of the benchmark (κ differs from the benchmark's by the folding of periodic images;
both sides fold the same way, so κ_SRME compares like with like).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ase import Atoms

#: name: (formula, ``ase.build.bulk`` crystal structure, experimental lattice constant in Å)
KAPPA_COMPOUNDS: Dict[str, Tuple[str, str, float]] = {
    "Si": ("Si", "diamond", 5.431),
    "NaCl": ("NaCl", "rocksalt", 5.640),
    "MgO": ("MgO", "rocksalt", 4.212),
}
DEFAULT_SUPERCELL = 2
DEFAULT_MESH = 19
TEMPERATURE = 300.0


def kappa_compound(spec: str, supercell: int = DEFAULT_SUPERCELL,
                   mesh: int = DEFAULT_MESH) -> Tuple[str, Atoms]:
    """(id, conventional cell) of a name of :data:`KAPPA_COMPOUNDS` or ``FORMULA:STRUCTURE:A``, with the
    κ settings in ``atoms.info`` (``fc2_supercell``, ``fc3_supercell``: ``supercell``³; ``q_point_mesh``:
    ``mesh``³). ValueError (one line) for an unknown name or a structure ASE cannot build."""
    from ase.build import bulk

    if spec in KAPPA_COMPOUNDS:
        material_id, (formula, structure, a) = spec, KAPPA_COMPOUNDS[spec]
    else:
        parts = str(spec).split(":")
        try:
            formula, structure, a = parts[0], parts[1], float(parts[2])
            if len(parts) != 3 or not a > 0:
                raise ValueError
        except (IndexError, ValueError):
            raise ValueError(f"unknown compound {spec!r}: give one of {', '.join(KAPPA_COMPOUNDS)} or "
                             f"FORMULA:STRUCTURE:A (e.g. Cu:fcc:3.61)") from None
        material_id = f"{formula}-{structure}"
    if int(supercell) < 1 or int(mesh) < 1:
        raise ValueError(f"supercell and mesh must be >= 1, got {supercell} and {mesh}")
    try:
        atoms = bulk(formula, structure, a=a, cubic=True)
    except Exception as err:  # ASE raises ValueError, KeyError or RuntimeError for what it cannot build
        raise ValueError(f"compound {spec!r}: ASE cannot build {formula} as {structure} ({err})") from None
    atoms.info = {"fc2_supercell": [int(supercell)] * 3, "fc3_supercell": [int(supercell)] * 3,
                  "q_point_mesh": [int(mesh)] * 3}
    return material_id, atoms


def compare_kappa(
    model,
    reference,
    out_dir: Union[str, Path],
    compounds: Sequence[str] = tuple(KAPPA_COMPOUNDS),
    supercell: int = DEFAULT_SUPERCELL,
    mesh: int = DEFAULT_MESH,
    progress: bool = True,
    **kappa_kwargs,
) -> Dict[str, Any]:
    """κ(300 K) of ``compounds`` by ``model`` and by ``reference``, and the model's scores against it.

    Args:
        model, reference: anything :func:`mlip.workflows.resolve_calculator` accepts (mlip models run
            in float64); one calculator serves every supercell.
        out_dir: ``out_dir/model`` and ``out_dir/reference`` hold the two resumable κ campaigns (a
            folder computed by another model is refused).
        compounds: names of :data:`KAPPA_COMPOUNDS` or ``FORMULA:STRUCTURE:A``.
        supercell, mesh: see the module docstring.
        progress: progress bars.
        **kappa_kwargs: passed on to :func:`mlip.workflows.phonons.kappa.run_kappa` (displacement,
            method, ...).

    Returns:
        ``{"compounds": {id: {"kappa_model", "kappa_reference" (trace/3 at 300 K, W/(m·K), None
        without κ), "status_model", "status_reference", "srme", "sre", "srd" (None when the reference
        has no κ: then ``note`` says why)}}, "mean_srme" (over the compounds with a reference κ; None
        when none has one), "n_scored", "computed" ({"model", "reference"}: κ calculations this call
        ran), "settings"}``.
    """
    from mlip.workflows.phonons.kappa_batch import load_kappa_table, run_kappa_batch
    from mlip.workflows.phonons.kappa_metrics import kappa_scores

    if isinstance(compounds, str):
        compounds = [compounds]
    items: List[Tuple[str, Atoms]] = [kappa_compound(c, supercell, mesh) for c in compounds]
    if not items:
        raise ValueError("give at least one compound")
    ids = [mid for mid, _ in items]
    if len(set(ids)) != len(ids):
        raise ValueError(f"compounds repeat: {', '.join(sorted({i for i in ids if ids.count(i) > 1}))}")
    out_dir = Path(out_dir)
    computed = {}
    for role, calc in (("reference", reference), ("model", model)):
        counts = run_kappa_batch(items, calc, out_dir / role, n_shards=1, shard_index=0, progress=progress,
                                 merge=False, **kappa_kwargs)
        computed[role] = int(counts["computed"])
    tables = {role: load_kappa_table(out_dir / role) for role in ("model", "reference")}
    per: Dict[str, Dict[str, Any]] = {}
    for mid in ids:
        pred, ref = tables["model"].get(mid), tables["reference"].get(mid)
        row = {"status_model": _status(pred), "status_reference": _status(ref)}
        if row["status_reference"] == "ok":
            scores = kappa_scores(pred, ref, TEMPERATURE)
            row.update(kappa_model=scores["kappa_pred"], kappa_reference=scores["kappa_ref"],
                       srme=scores["srme"], sre=scores["sre"], srd=scores["srd"])
        else:
            row.update(kappa_model=_kappa(pred), kappa_reference=_kappa(ref), srme=None, sre=None, srd=None,
                       note=f"the reference is {row['status_reference']}: no κ to score against")
        per[mid] = row
    scored = [row["srme"] for row in per.values() if row["srme"] is not None]
    return {
        "compounds": per,
        "mean_srme": sum(scored) / len(scored) if scored else None,
        "n_scored": len(scored),
        "computed": computed,
        "settings": {"supercell": [int(supercell)] * 3, "mesh": [int(mesh)] * 3, "temperature_K": TEMPERATURE,
                     "cell": "conventional cubic", **{k: v for k, v in kappa_kwargs.items()}},
    }


def _status(record: Optional[Dict[str, Any]]) -> str:
    """The status of a :func:`mlip.workflows.phonons.kappa_batch.load_kappa_table` record."""
    if record is None:
        return "missing"
    if record.get("failed"):
        return "failed"
    if record.get("imaginary_modes"):
        return "imaginary_modes"
    if record.get("symmetry_broken"):
        return "symmetry_broken"
    return "ok"


def _kappa(record: Optional[Dict[str, Any]]) -> Optional[float]:
    """Trace/3 of the first temperature's κ of a record, or None."""
    import numpy as np

    if record is None or record.get("kappa") is None:
        return None
    voigt = np.asarray(record["kappa"], dtype=float).reshape(-1, 6)[0]
    return float(voigt[:3].mean())


__all__ = ["DEFAULT_MESH", "DEFAULT_SUPERCELL", "KAPPA_COMPOUNDS", "TEMPERATURE", "compare_kappa",
           "kappa_compound"]
