"""What a model card quotes from the benchmark reports of its model: the crystal properties against DFT
(``benchmarks/accuracy/dft_validation.py``), the comparison with MACE trained alike
(``benchmarks/accuracy/mace_baseline.py``) and, for a distilled student, the comparison with its teacher
(``benchmarks/accuracy/student_vs_teacher.py``).

Each ``quote_*`` reads the report as its script writes it and returns the card's entry; a report that does
not name this model raises ``ValueError`` naming what it holds.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Dict

from mlip.workflows.model_card.measure import KEYS

#: the crystal properties a card quotes from benchmarks/accuracy/dft_validation.py: (dotted key, label, unit,
#: target as a relative difference in %, or None)
DFT_PROPERTIES = (
    ("lattice.Si.a_A", "Si lattice constant", "Å", 0.5),
    ("lattice.Ge.a_A", "Ge lattice constant", "Å", 0.5),
    ("lattice.Si.B_GPa", "Si bulk modulus", "GPa", 5.0), ("lattice.Ge.B_GPa", "Ge bulk modulus", "GPa", 5.0),
    ("elastic.Si.C11_GPa", "Si C11", "GPa", None), ("elastic.Si.C12_GPa", "Si C12", "GPa", None),
    ("elastic.Si.C44_GPa", "Si C44", "GPa", None),
    ("phases.Si.transition_pressures_GPa.diamond_to_beta_tin", "Si diamond → β-Sn pressure", "GPa", None),
    ("vacancy.Si.formation_energy_relaxed_eV", "Si vacancy formation energy (relaxed)", "eV", None),
    ("surface.Si.gamma_100_relaxed_2x1_J_per_m2", "Si (100) 2×1 surface energy (relaxed)", "J/m²", None),
    ("kappa.Si.kappa_300K_W_per_mK", "Si κ(300 K)", "W/(m·K)", None),
    ("kappa.Ge.kappa_300K_W_per_mK", "Ge κ(300 K)", "W/(m·K)", None),
)
#: Si's phonon frequency MAE target against the reference (THz)
PHONON_TARGET_THZ = {"Si": 0.3}


def property_scalars(properties: Dict[str, Any], prefix: str = "") -> Dict[str, float]:
    """Every finite number of a ``dft_validation.json`` method's ``properties`` that is not part of a list,
    by its dotted path (``lattice.Si.a_A``); relaxation traces, E(V) curves, fit parameters and relaxed
    cells are left out."""
    out: Dict[str, float] = {}
    for key, value in properties.items():
        path = f"{prefix}{key}"
        if key in ("relaxation", "curves", "bm_parameters", "cell_relaxed_A"):
            continue
        if isinstance(value, dict):
            out.update(property_scalars(value, path + "."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out[path] = float(value)
    return out


def quote_dft_validation(path: Path, method: str | None, command: str) -> dict:
    """The card's ``dft_validation`` entry from a ``dft_validation.json``: for each of
    :data:`DFT_PROPERTIES` the model has, its value and the reference's, and the phonon frequency MAE
    per element. ``method``: the model's name in the report (default: the one method besides the
    reference)."""
    report = json.loads(path.read_text())
    reference = report["reference"]
    others = [m for m in report["methods"] if m != reference]
    if method is None:
        if len(others) != 1:
            raise ValueError(f"{path}: methods {others}; name this model's with --dft-validation-method")
        method = others[0]
    if method not in report["methods"]:
        raise ValueError(f"{path}: no method {method!r} (it has {', '.join(report['methods'])})")

    mine = property_scalars(report["methods"][method]["properties"])
    ref = property_scalars(report["methods"][reference]["properties"])
    rows = [{"key": key, "label": label, "unit": unit, "target_percent": target, "model": mine[key],
             "reference": ref.get(key)} for key, label, unit, target in DFT_PROPERTIES if key in mine]
    phonons = report.get("differences", {}).get(method, {}).get("phonon_frequency_mae_THz", {})
    return {"command": command, "reference": reference, "method": method, "properties": rows,
            "phonon_frequency_mae_THz": phonons, "literature": report.get("literature", {})}


def quote_mace_baseline(path: Path, row_name: str, command: str) -> dict:
    """The card's ``mace`` entry from a ``mace_baseline.json``: MACE's row and this model's (the row whose
    ``model`` is ``row_name``), test errors and ms per MD step, and MACE's training budget."""
    report = json.loads(path.read_text())
    rows = {r["model"]: r for r in report["models"]}
    if row_name not in rows:
        raise ValueError(f"{path}: no row {row_name!r} (rows: {', '.join(rows)}); give --mace-row")

    def entry(r):
        return {"n_parameters": r["n_parameters"], "test": {k: r["test"].get(k) for k in KEYS.values()},
                "ms_per_step": {n: v["ms_per_step"] for n, v in r["md"].items()}, "threads": r.get("threads")}

    budget = rows["MACE"].get("training") or {}
    return {"command": command, "minutes": report.get("minutes"), "n_test": report.get("n_test"),
            "mace_epochs": budget.get("epochs_equivalent"), "mace": entry(rows["MACE"]),
            "model": entry(rows[row_name])}


def quote_student_vs_teacher(path: Path, command: str, teacher_name: str) -> tuple:
    """(the card's ``teacher`` entry, its ``mini_discovery`` entry or None) from a
    ``student_vs_teacher.json``."""
    report = json.loads(path.read_text())["stages"]
    teacher: dict = {"name": teacher_name, "command": command}
    if "kappa" in report:
        k = report["kappa"]
        teacher["kappa"] = {"mean_srme": k["mean_srme"], "compounds": {
            name: {"student": row["kappa_model"], "teacher": row["kappa_reference"], "srme": row["srme"]}
            for name, row in k["compounds"].items()}}
    if "cost" in report:
        teacher["cost"] = report["cost"]
    if "dft" in report:
        (file, d), = report["dft"]["files"].items()  # one file of first-principles labels
        teacher["dft"] = {"what": f"{d['n']} structures of {file}",
                          "errors": {"student": d["student"]["overall"],
                                     teacher_name: d["teacher"]["overall"]}}
    discovery = None
    if "discovery" in report:
        d = report["discovery"]
        bench = d["benchmark"]
        discovery = {"command": command, "n_materials": d["n_materials"], "metrics": d["metrics"],
                     "rmsd_A": d["RMSD"], "truth": f"{teacher_name} plays DFT", "truth_name": teacher_name,
                     "candidates": f"decorating prototypes over {len(bench['systems'])} systems",
                     "hull": "teacher's hull"}
    return teacher, discovery
