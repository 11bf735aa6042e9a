"""κ for a whole file of crystals: sharded over processes, resumable, one results file, κ_SRME.

The input is any ASE-readable multi-frame file (extxyz, as Matbench Discovery's PhononDB-PBE
structures file) whose frames carry their own settings in ``atoms.info``: ``fc2_supercell``,
``fc3_supercell`` and ``q_point_mesh``, and an id in ``material_id`` (or ``mp_id``).

:func:`run_kappa_batch` computes this process's share of the materials (see
:mod:`mlip.workflows.sharding`: explicit shard, Slurm array or torchrun), each with
:func:`mlip.workflows.phonons.kappa.run_kappa` in its own folder so that even a half-finished material
resumes its force sets, and stores each result as soon as it is known. When every material has a
result, :func:`merge_kappa_batch` writes one file in the style of Matbench Discovery's
``<date>-phonons-kappa-103.json.gz``: a pandas "columns" JSON (``pd.read_json`` reads it) with
``material_id``, ``formula``, ``kappa_tot_rta`` [n_T, 6] (Voigt, W/(m·K)), ``kappa_p_rta``,
``kappa_c``, ``mode_kappa_tot_rta`` [n_T, n_q, n_bands, 6], ``mode_weights`` [n_q], ``q_points``,
``ph_freqs`` [n_q, n_bands] (THz), ``has_imag_ph_modes``, ``broken_symmetry``, ``errors``,
``temperatures`` and ``kappa_tot_avg`` (trace/3 per temperature).

:func:`score_kappa_batch` compares such a file (or a batch folder) with a reference file of the
same columns, material by material (κ_SRME, κ_SRE, κ_SRD; failed, unstable or symmetry-broken
predictions score 2) and on average.
"""

from __future__ import annotations

import datetime
import gzip
import json
import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
from ase import Atoms

from mlip.data.occupancy import require_ordered
from mlip.io import atomic_write
from mlip.workflows.sharding import load_results, result_path, run_sharded

INFO_KEYS = ("fc2_supercell", "fc3_supercell", "q_point_mesh")
ID_KEYS = ("material_id", "mp_id")


def read_kappa_structures(path: Union[str, Path], require_settings: bool = True,
                          format: Optional[str] = None) -> List[Tuple[str, Atoms]]:
    """(material_id, atoms) for every frame of ``path`` (ASE ``format``, default: from the name).

    Raises ValueError naming the file and frame for an unreadable file, a frame that is not a
    3-D periodic crystal, a missing ``fc2_supercell``/``fc3_supercell``/``q_point_mesh`` (when
    ``require_settings``), or a repeated id. Frames without an id get ``<formula>-<frame>``.
    """
    import ase.io

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"structures file {str(path)!r} does not exist")
    try:
        frames = ase.io.read(str(path), index=":", format=format)
    except Exception as err:  # ASE raises many kinds for malformed files
        msg = str(err) or type(err).__name__
        raise ValueError(f"cannot read structures file {str(path)!r}: {msg}") from None
    if not frames:
        raise ValueError(f"structures file {str(path)!r} holds no structure")
    items, seen = [], set()
    for k, atoms in enumerate(frames):
        where = f"{path.name}, frame {k}"
        if not atoms.pbc.all() or atoms.cell.rank != 3:
            raise ValueError(f"{where}: κ needs a crystal periodic in three directions")
        require_ordered(atoms, where, option=None)  # a CIF's partially occupied site (ASE keeps one species)
        if require_settings:
            missing = [key for key in INFO_KEYS if key not in atoms.info]
            if missing:
                raise ValueError(f"{where}: atoms.info lacks {', '.join(missing)} (each frame carries its "
                                 f"own fc2/fc3 supercells and q-mesh in batch mode)")
        mid = next((str(atoms.info[key]) for key in ID_KEYS if key in atoms.info), None)
        mid = mid or f"{atoms.get_chemical_formula()}-{k}"
        if mid in seen:
            raise ValueError(f"{where}: material id {mid!r} appears twice")
        seen.add(mid)
        items.append((mid, atoms))
    return items


def _cost(atoms: Atoms) -> float:
    """Rough cost of a material: atoms in its fc3 supercell times the number of atoms displaced."""
    from mlip.workflows.phonons.phonopy_bridge import supercell_matrix

    try:
        fc3 = supercell_matrix(atoms.info.get("fc3_supercell", 1))
    except ValueError:
        fc3 = np.eye(3)  # run_kappa reports the bad supercell for this material
    n_super = len(atoms) * max(abs(np.linalg.det(fc3)), 1.0)
    return float(n_super * len(atoms))


def run_kappa_batch(
    structures: Union[str, Path, Sequence[Tuple[str, Atoms]]],
    calculator,
    out_dir: Union[str, Path],
    n_shards: Optional[int] = None,
    shard_index: Optional[int] = None,
    progress: bool = True,
    merge: bool = True,
    **kappa_kwargs,
) -> Dict[str, Any]:
    """κ of this process's share of ``structures``; writes the merged file when all are done.

    Args:
        structures: a file for :func:`read_kappa_structures` or a list of (id, atoms).
        calculator: anything :func:`mlip.workflows.resolve_calculator` accepts (float64 for mlip
            models); resolved once per process.
        out_dir: campaign folder: ``results/<id>.json`` per material, ``materials/<id>/`` with
            each material's resumable cache, and the merged ``<date>-phonons-kappa-<n>.json.gz``.
        n_shards, shard_index: this process's shard (default: Slurm array, torchrun, or all).
        progress: a progress bar over materials (materials/min).
        merge: write the merged file when every material has a result.
        **kappa_kwargs: passed to :func:`mlip.workflows.phonons.kappa.run_kappa` (displacement,
            temperatures, method, isotopes, relax, fmax, ...); supercells and mesh come from each
            frame's ``atoms.info``.

    Returns:
        the counts of :func:`mlip.workflows.sharding.run_sharded`, plus ``"merged"``: the path of
        the merged file or None when materials are still missing.
    """
    from mlip.workflows.phonons.kappa import run_kappa
    from mlip.calculators.model_loading import resolve_calculator
    from mlip.workflows.phonons.phonopy_bridge import import_phono3py

    import_phono3py()  # one clear error now, not one "crashed" record per material
    items = read_kappa_structures(structures) if isinstance(structures, (str, Path)) else list(structures)
    for key in ("fc2_supercell", "fc3_supercell", "mesh", "out_dir", "progress", "raise_errors"):
        if key in kappa_kwargs:
            raise TypeError(f"run_kappa_batch sets {key!r} itself (supercells and mesh come from atoms.info)")
    calc = resolve_calculator(calculator, dtype="float64")
    out_dir = Path(out_dir)
    _claim_campaign(out_dir, calc, items, kappa_kwargs)

    def compute(material_id: str, atoms: Atoms) -> Dict[str, Any]:
        folder = out_dir / "materials" / result_path(out_dir, material_id).stem
        result = run_kappa(atoms, calc, out_dir=folder, progress=False, **kappa_kwargs)
        return {"material_id": material_id, "formula": atoms.get_chemical_formula(), "result": result.to_dict()}

    counts = run_sharded(items, compute, out_dir, costs=[_cost(a) for _, a in items], n_shards=n_shards,
                         shard_index=shard_index, progress=progress, desc="κ")
    counts["merged"] = None
    if merge:
        stored = load_results(out_dir, [mid for mid, _ in items])
        if len(stored) == len(items):
            counts["merged"] = str(merge_kappa_batch(out_dir, [mid for mid, _ in items]))
    return counts


def _claim_campaign(out_dir: Path, calc, items, kappa_kwargs: dict) -> None:
    """Record (model, settings, structures) in ``out_dir/campaign.json``, or refuse a folder that
    holds a campaign with other ones: finished results are reused by material id alone, so mixing
    would silently score one model's κ as another's."""
    from mlip.workflows.fingerprints import structures_fingerprint
    from mlip.io import jsonable, read_json, write_json
    from mlip.workflows.fingerprints import model_fingerprint

    manifest = {
        "model": model_fingerprint(calc),
        "settings": jsonable(dict(sorted(kappa_kwargs.items()))),
        "materials": [mid for mid, _ in items],
        "structures": structures_fingerprint([atoms for _, atoms in items]),
    }
    path = out_dir / "campaign.json"
    old = read_json(path) if path.exists() else None
    if old is not None:
        changed = [key for key in manifest if old.get(key) != manifest[key]]
        if changed:
            raise ValueError(f"{out_dir} holds a κ campaign with another {', '.join(changed)}; "
                             f"use another output folder (or delete it to start over)")
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(path, manifest)


# ----------------------------------------------------------------------------------- the file
COLUMNS = ("material_id", "formula", "temperatures", "kappa_tot_rta", "kappa_p_rta", "kappa_c", "kappa_tot_avg",
           "mode_kappa_tot_rta", "mode_weights", "q_points", "ph_freqs", "has_imag_ph_modes", "broken_symmetry",
           "init_spg", "final_spg", "status", "errors")


def _voigt(tensors) -> Optional[list]:
    """[n_T, 3, 3] → [n_T, 6] (xx, yy, zz, yz, xz, xy) as lists, or None."""
    if tensors is None:
        return None
    t = np.asarray(tensors, dtype=float)
    return np.stack([t[..., 0, 0], t[..., 1, 1], t[..., 2, 2], t[..., 1, 2], t[..., 0, 2], t[..., 0, 1]],
                    axis=-1).tolist()


def _row(record: Dict[str, Any]) -> Dict[str, Any]:
    """One row of the merged file from a stored batch record."""
    from mlip.workflows.phonons.kappa_result import KappaResult

    mid = record.get("material_id", record.get("id"))
    if record.get("failed") and "result" not in record:  # the whole material crashed outside run_kappa
        return {"material_id": mid, "formula": record.get("formula"), "status": "failed",
                "errors": [record.get("error", "failed")], "has_imag_ph_modes": None, "broken_symmetry": None}
    res = KappaResult.from_dict(record["result"])
    ok_kappa = res.kappa is not None
    row = {
        "material_id": mid,
        "formula": record.get("formula"),
        "temperatures": None if res.temperatures is None else np.asarray(res.temperatures).tolist(),
        "kappa_tot_rta": _voigt(res.kappa) if ok_kappa else None,
        "kappa_p_rta": _voigt(res.kappa_particle),
        "kappa_c": _voigt(res.kappa_coherence),
        "kappa_tot_avg": (np.trace(np.asarray(res.kappa), axis1=-2, axis2=-1) / 3).tolist() if ok_kappa else None,
        "mode_kappa_tot_rta": None if res.mode_kappa is None else np.asarray(res.mode_kappa).tolist(),
        "mode_weights": None if res.grid_weights is None else np.asarray(res.grid_weights).tolist(),
        "q_points": None if res.qpoints is None else np.asarray(res.qpoints).tolist(),
        "ph_freqs": None if res.frequencies is None else np.asarray(res.frequencies).tolist(),
        "has_imag_ph_modes": res.imaginary_modes,
        "broken_symmetry": bool(res.symmetry_broken),
        "init_spg": res.spacegroup_initial,
        "final_spg": res.spacegroup_final,
        "status": res.status,
        "errors": [res.error] if res.error else [],
    }
    return row


def merge_kappa_batch(out_dir: Union[str, Path], ids: Optional[Sequence[str]] = None,
                      output: Union[str, Path, None] = None) -> Path:
    """Write the merged results file (pandas "columns" JSON, gzip) and return its path.

    Default name: ``out_dir/<YYYY-MM-DD>-phonons-kappa-<n>.json.gz``. Materials without a stored
    result are listed with status ``"missing"``.
    """
    out_dir = Path(out_dir)
    stored = load_results(out_dir, ids)
    ids = list(ids) if ids is not None else sorted(stored)
    rows = [_row(stored[mid]) if mid in stored else {"material_id": mid, "status": "missing", "errors": ["missing"]}
            for mid in ids]
    table = {col: {str(k): _finite(row.get(col)) for k, row in enumerate(rows)} for col in COLUMNS}
    if output is None:
        output = out_dir / f"{datetime.date.today().isoformat()}-phonons-kappa-{len(rows)}.json.gz"
    text = json.dumps(table, allow_nan=False).encode()

    def write(tmp):
        with gzip.open(tmp, "wb") as fh:
            fh.write(text)

    atomic_write(output, write)
    return Path(output)


def _finite(value):
    """NaN/inf → None recursively (strict JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def load_kappa_table(path: Union[str, Path]) -> Dict[str, Dict[str, Any]]:
    """Records keyed by material id from a merged results file (ours or Matbench Discovery's, as
    long as it has ``material_id``, ``kappa_tot_rta``, ``mode_kappa_tot_rta`` and ``mode_weights``)
    or from a batch folder; shaped for :func:`mlip.workflows.phonons.kappa_metrics.kappa_scores`."""
    path = Path(path)
    if path.is_dir():
        rows = [_row(r) for r in load_results(path).values()]
    else:
        opener = gzip.open if path.suffix == ".gz" else open
        try:
            with opener(path, "rt") as fh:
                table = json.load(fh)
        except (OSError, ValueError) as err:
            raise ValueError(f"cannot read κ results {str(path)!r}: {err}") from None
        if not isinstance(table, dict) or "material_id" not in table:
            raise ValueError(f"{str(path)!r} is not a κ results table (a 'columns' JSON with 'material_id')")
        index = list(table["material_id"])
        rows = [{col: table[col].get(k) for col in table if isinstance(table[col], dict)} for k in index]
    out = {}
    for row in rows:
        errors = row.get("errors") or []
        status = row.get("status") or ("failed" if errors else None)
        out[str(row["material_id"])] = {
            "kappa": row.get("kappa_tot_rta"),
            "mode_kappa": row.get("mode_kappa_tot_rta"),
            "grid_weights": row.get("mode_weights"),
            "qpoints": row.get("q_points"),
            "temperatures": row.get("temperatures"),
            "failed": status in ("failed", "missing") or bool(errors) or row.get("kappa_tot_rta") is None,
            "imaginary_modes": bool(row.get("has_imag_ph_modes")),
            "symmetry_broken": bool(row.get("broken_symmetry")),
        }
    return out


def score_kappa_batch(predictions: Union[str, Path], reference: Union[str, Path],
                      temperature: float = 300.0) -> Dict[str, Any]:
    """κ_SRME, κ_SRE and κ_SRD per material and their means (every reference material counts;
    a missing prediction scores 2). See :func:`mlip.workflows.phonons.kappa_metrics.mean_kappa_scores`."""
    from mlip.workflows.phonons.kappa_metrics import mean_kappa_scores

    return mean_kappa_scores(load_kappa_table(predictions), load_kappa_table(reference), temperature)


__all__ = [
    "INFO_KEYS",
    "load_kappa_table",
    "merge_kappa_batch",
    "read_kappa_structures",
    "run_kappa_batch",
    "score_kappa_batch",
]
