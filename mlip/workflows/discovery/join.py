"""Merge the shards of a discovery relaxation into the benchmark's submission files.

:func:`join_discovery` gathers the results of one or more campaign folders (shards may share a
folder or have one each; their ``campaign.json`` must describe the same campaign), computes the
formation energies (:mod:`.formation`) and writes, atomically, into ``out_dir``:

* ``<date>-discovery.csv.gz``: columns ``material_id``, ``e_form_per_atom`` (eV/atom, 4 decimals;
  empty for a material that failed or whose entry MP2020 rejected: the benchmark counts it as
  unstable);
* ``<date>-geo-opt.jsonl.gz``: one JSON object per line with ``material_id``, ``structure``
  (pymatgen ``Structure.as_dict()``, null when failed), ``energy`` (eV, total, uncorrected; null
  when failed), ``converged``, ``n_steps``;
* ``<date>-model.yml``: a skeleton of the benchmark's model YAML with the fields it requires,
  the evaluation settings and the file names filled in, the rest null to be completed by hand;
* ``<date>-join.json``: counts (materials, failed, not converged, without formation energy) and
  the failed materials with their errors.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from mlip.io import write_text
from mlip.workflows.discovery.relax_campaign import CAMPAIGN_FILE
from mlip.workflows.sharding import load_results

PathLike = Union[str, Path]

#: exactly the columns / keys of the benchmark's files
DISCOVERY_COLUMNS = ("material_id", "e_form_per_atom")
GEO_OPT_KEYS = ("material_id", "structure", "energy", "converged", "n_steps")


def read_campaigns(run_dirs: Sequence[PathLike]) -> dict:
    """The common ``campaign.json`` of ``run_dirs`` (ValueError when one is missing or differs)."""
    from mlip.io import read_json

    manifest = None
    for run_dir in run_dirs:
        path = Path(run_dir) / CAMPAIGN_FILE
        data = read_json(path)
        if data is None or "materials" not in data:
            raise ValueError(f"{str(run_dir)!r} is not a discovery relaxation folder (no readable {CAMPAIGN_FILE})")
        if manifest is None:
            manifest = data
            continue
        changed = [k for k in ("model", "settings", "materials", "structures") if data.get(k) != manifest.get(k)]
        if changed:
            raise ValueError(f"{str(run_dir)!r} holds another campaign than {str(run_dirs[0])!r} "
                             f"(different {', '.join(changed)}): shards of one campaign only")
    if manifest is None:
        raise ValueError("no relaxation folder given")
    return manifest


def gather_results(run_dirs: Sequence[PathLike], ids: Sequence[str]) -> Dict[str, dict]:
    """``{material_id: record}`` over all folders (a successful record wins over a failed one)."""
    out: Dict[str, dict] = {}
    for run_dir in run_dirs:
        for mid, rec in load_results(run_dir, ids).items():
            if mid not in out or (out[mid].get("failed") and not rec.get("failed")):
                out[mid] = rec
    return out


def _fmt(value: float) -> str:
    return "" if value is None or not math.isfinite(value) else f"{value:.4f}"


def _model_yaml(manifest: dict, csv_name: str, jsonl_name: str, date: str) -> dict:
    info = manifest.get("model_info", {})
    settings = manifest.get("settings", {})
    label = info.get("label") or manifest.get("model_label")
    return {
        "model_name": label,
        "model_key": None if label is None else str(label).lower().replace(" ", "-").replace("/", "-"),
        "model_version": info.get("mlip_version") if info.get("n_params") is not None else None,
        "date_added": date,
        "date_published": None,
        "authors": [{"name": None, "affiliation": None, "email": None, "orcid": None}],
        "repo": None,
        "doi": None,
        "paper": None,
        "pypi": "https://pypi.org/project/mlip-torch",
        "requirements": info.get("requirements", {}),
        "openness": None,
        "trained_for_benchmark": None,
        "train_task": "S2EFS",
        "test_task": "IS2RE-SR",
        "targets": "EFS_G",
        "model_type": "UIP",
        "model_params": info.get("n_params"),
        "n_estimators": 1,
        "training_set": None,
        "training_cost": None,
        "hyperparams": {
            "graph_construction_radius": info.get("cutoff"),
            "max_neighbors": None,
            "evaluation": {
                "max_force": settings.get("fmax"),
                "max_steps": settings.get("steps"),
                "ase_optimizer": settings.get("optimizer", "FIRE"),
                "cell_filter": settings.get("cell_filter", "FrechetCellFilter"),
                "dtype": settings.get("dtype"),
                "kappa": {"displacement_distance": None},
            },
        },
        "notes": {"Description": None, "Training": None},
        "metrics": {
            "discovery": {"pred_file": csv_name, "pred_col": "e_form_per_atom"},
            "geo_opt": {"pred_file": jsonl_name, "struct_col": "structure"},
            "phonons": {"kappa_103": {"pred_file": None}},
        },
    }


def join_discovery(
    run_dirs: Union[PathLike, Sequence[PathLike]],
    elemental_references: Union[PathLike, Dict[str, float]],
    out_dir: Optional[PathLike] = None,
    entries: Optional[PathLike] = None,
    date: Optional[str] = None,
    allow_missing: bool = False,
) -> Dict[str, Any]:
    """Write the submission files of a finished relaxation campaign (see the module docstring).

    Args:
        run_dirs: the campaign folder(s) of ``mlip discovery relax`` (one per shard, or one).
        elemental_references: file (or dict) of elemental reference energies, eV/atom
            (:func:`.formation.read_elemental_references`).
        out_dir: where to write (default: the first run folder).
        entries: a ComputedStructureEntries file of the same materials: MP2020 corrections.
        date: ``YYYY-MM-DD`` prefix of the file names (default: today).
        allow_missing: write the files even when materials have no result yet (they are listed
            with an empty formation energy, and so count as unstable); default: refuse.

    Returns:
        ``{"discovery": path, "geo_opt": path, "model_yaml": path, "summary": path, "n_materials",
        "n_failed", "n_missing", "n_not_converged", "n_no_e_form"}``.
    """
    from mlip.workflows.discovery.formation import (
        formation_energies,
        read_elemental_references,
        relaxed_atoms,
    )
    from mlip.workflows.discovery.inputs import read_structures, structure_dict
    from mlip.io import jsonable, write_json

    if isinstance(run_dirs, (str, Path)):
        run_dirs = [run_dirs]
    run_dirs = [Path(d) for d in run_dirs]
    manifest = read_campaigns(run_dirs)
    ids = [str(i) for i in manifest["materials"]]
    records = gather_results(run_dirs, ids)
    missing = [mid for mid in ids if mid not in records]
    if missing and not allow_missing:
        raise ValueError(f"{len(missing)} of {len(ids)} materials have no result yet (e.g. "
                         f"{', '.join(missing[:5])}): finish the remaining shards (a rerun resumes), "
                         f"or pass allow_missing / --allow-missing to count them as unstable")
    date = date or datetime.date.today().isoformat()
    try:
        datetime.date.fromisoformat(date)
    except ValueError:
        raise ValueError(f"date must be YYYY-MM-DD, got {date!r}") from None
    refs = (read_elemental_references(elemental_references) if isinstance(elemental_references, (str, Path))
            else dict(elemental_references))
    entry_map = None
    if entries is not None:
        materials = read_structures(entries)
        no_entry = [m.material_id for m in materials if m.entry is None]
        if no_entry:
            raise ValueError(f"{str(entries)!r} holds structures, not ComputedStructureEntries "
                             f"(e.g. {no_entry[0]!r})")
        entry_map = {m.material_id: m.entry for m in materials}
    e_form = formation_energies(records, refs, entry_map)

    out_dir = Path(out_dir) if out_dir is not None else run_dirs[0]
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / f"{date}-discovery.csv.gz"
    jsonl_path = out_dir / f"{date}-geo-opt.jsonl.gz"
    yaml_path = out_dir / f"{date}-model.yml"
    summary_path = out_dir / f"{date}-join.json"

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(DISCOVERY_COLUMNS)
    lines: List[str] = []
    failed, no_e_form, not_converged = {}, {}, []
    for mid in ids:
        rec = records.get(mid)
        ok = rec is not None and not rec.get("failed")
        value = e_form[mid]["e_form_per_atom"] if ok else math.nan
        writer.writerow([mid, _fmt(value)])
        if rec is not None and rec.get("failed"):
            failed[mid] = rec.get("error", "failed")
        elif ok and not math.isfinite(value):
            no_e_form[mid] = e_form[mid]["note"]
        if ok and not rec.get("converged"):
            not_converged.append(mid)
        line = {
            "material_id": mid,
            "structure": structure_dict(relaxed_atoms(rec)) if ok else None,
            "energy": float(rec["energy"]) if ok else None,
            "converged": bool(rec.get("converged", False)) if ok else False,
            "n_steps": int(rec["n_steps"]) if ok else None,
        }
        lines.append(json.dumps(jsonable(line), allow_nan=False))
    write_text(csv_path, buf.getvalue(), compress=True)
    write_text(jsonl_path, "\n".join(lines) + "\n", compress=True)

    import yaml

    skeleton = _model_yaml(manifest, csv_path.name, jsonl_path.name, date)
    text = ("# Matbench Discovery model YAML skeleton written by `mlip discovery join`.\n"
            "# Fill in every null field before submitting.\n" + yaml.safe_dump(skeleton, sort_keys=False))
    write_text(yaml_path, text)

    summary = {
        "date": date, "run_dirs": [str(d) for d in run_dirs], "model": manifest.get("model_label"),
        "settings": manifest.get("settings"), "formation": "MP2020 on entries" if entries else "plain references",
        "n_materials": len(ids), "n_failed": len(failed), "n_missing": len(missing),
        "n_not_converged": len(not_converged), "n_no_e_form": len(no_e_form),
        "failed": failed, "missing": missing, "no_e_form": no_e_form,
        "files": {"discovery": csv_path.name, "geo_opt": jsonl_path.name, "model_yaml": yaml_path.name},
    }
    write_json(summary_path, summary)
    return {"discovery": csv_path, "geo_opt": jsonl_path, "model_yaml": yaml_path, "summary": summary_path,
            **{k: summary[k] for k in ("n_materials", "n_failed", "n_missing", "n_not_converged", "n_no_e_form")}}


def read_discovery_csv(path: PathLike, column: str = "e_form_per_atom") -> Dict[str, float]:
    """``{material_id: e_form_per_atom}`` of a discovery CSV (NaN for empty cells)."""
    from mlip.workflows.discovery.inputs import read_table

    return {mid: row["e_form"] for mid, row in read_table(path, {"e_form": (column,)}).items()}


__all__ = ["DISCOVERY_COLUMNS", "GEO_OPT_KEYS", "gather_results", "join_discovery", "read_campaigns",
           "read_discovery_csv"]
