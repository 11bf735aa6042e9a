"""What a model card quotes from the benchmark reports of its model: the crystal properties against DFT
(``benchmarks/accuracy/dft_validation.py``), the comparison with MACE trained alike
(``benchmarks/accuracy/mace_baseline.py``) and, for a distilled student, the comparison with its teacher
(``benchmarks/accuracy/student_vs_teacher.py``); the error budget's label noise of the data's first version
(``examples/datasets/sige-pbe/v2/noise.py --json``) and the residual of its second version's k-point rule
(``benchmarks/data/kpoint_convergence.py report``).

Each ``quote_*`` reads the report as its script writes it and returns the card's entry; a report that does
not name this model raises ``ValueError`` naming what it holds.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Dict, Sequence

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


def property_targets(key: str, targets: dict) -> Dict[str, float]:
    """The row keys of a crystal property's target from a targets file's entry
    (:func:`.targets.read_targets`): ``target_percent`` or ``target_absolute``, or for κ
    ``target_percent_of_published``; {} when the file sets none for ``key``."""
    if key.startswith("kappa."):
        percent = targets.get("kappa_percent_of_published")
        return {} if percent is None else {"target_percent_of_published": percent}
    return {f"target_{kind}": value for kind, value in targets["properties"].get(key, {}).items()}


def quote_dft_validation(path: Path, method: str | None, command: str, targets: dict | None = None,
                         beside: Sequence[str] = ()) -> dict:
    """The card's ``dft_validation`` entry from a ``dft_validation.json``: for each of
    :data:`DFT_PROPERTIES` the model has, its value and the reference's, and the phonon frequency MAE
    per element. ``method``: the model's name in the report (default: the one method besides the
    reference). ``targets``: a targets file's entry (:func:`.targets.read_targets`), whose property,
    phonon and κ targets replace the defaults. ``beside``: other methods of the same report (foundation
    models) whose values the card shows in columns of their own."""
    report = json.loads(path.read_text())
    reference = report["reference"]
    others = [m for m in report["methods"] if m != reference]
    if method is None:
        if len(others) != 1:
            raise ValueError(f"{path}: methods {others}; name this model's with --dft-validation-method")
        method = others[0]
    for name in (method, *beside):
        if name not in report["methods"]:
            raise ValueError(f"{path}: no method {name!r} (it has {', '.join(report['methods'])})")

    mine = property_scalars(report["methods"][method]["properties"])
    ref = property_scalars(report["methods"][reference]["properties"])
    theirs = {name: property_scalars(report["methods"][name]["properties"]) for name in beside}
    published = report.get("literature", {}).get("kappa_300K_W_per_mK", {})
    rows = []
    for key, label, unit, target in DFT_PROPERTIES:
        if key not in mine:
            continue
        row = {"key": key, "label": label, "unit": unit, "target_percent": target, "model": mine[key],
               "reference": ref.get(key)}
        if targets is not None:
            row["target_percent"] = None  # the file's targets replace the defaults
            row.update(property_targets(key, targets))
            if "target_percent_of_published" in row:
                row["published"] = published.get(key.split(".")[1])
        if beside:
            row["beside"] = {name: theirs[name].get(key) for name in beside}
        rows.append(row)
    differences = report.get("differences", {})
    phonons = differences.get(method, {}).get("phonon_frequency_mae_THz", {})
    entry = {"command": command, "reference": reference, "method": method, "properties": rows,
             "phonon_frequency_mae_THz": phonons, "literature": report.get("literature", {})}
    if targets is not None:
        entry["phonon_targets_THz"] = targets["phonon_frequency_mae_THz"]
    if beside:
        entry["beside"] = list(beside)
        entry["beside_phonon_frequency_mae_THz"] = {
            name: differences.get(name, {}).get("phonon_frequency_mae_THz", {}) for name in beside}
    return entry


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


#: the numbers of each config_type in a label-noise record (``noise.py --json``'s ``kinds``)
NOISE_KEYS = ("n", "energy_std_meV_per_atom", "energy_max_meV_per_atom", "forces_mae_meV_per_A",
              "stress_mae_GPa")
#: the numbers of each structure of a k-point study's check of its reference against a denser mesh
FLOOR_KEYS = ("dE_meV_per_atom", "force_mae_meV_per_A", "stress_mae_GPa")


def _record(path: Path, what: str, key: str, maker: str) -> dict:
    """The JSON object in ``path`` that has ``key``; ``ValueError`` naming the file and ``what`` it should
    be (made by ``maker``) otherwise."""
    if not path.is_file():
        raise ValueError(f"{what} file {str(path)!r} does not exist")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"{what} file {str(path)!r} is not JSON ({err})") from None
    if not isinstance(record, dict) or key not in record:
        raise ValueError(f"{what} file {str(path)!r} has no {key!r}: not a record of {maker}")
    return record


def quote_label_noise(path: Path, command: str | None) -> dict:
    """The error budget's ``label_noise`` entry from the record of ``noise.py --json``: the data's first
    version against its second on the same structures, per ``config_type`` (:data:`NOISE_KEYS`). ``command``:
    the command that wrote it (default: the record's own)."""
    maker = "examples/datasets/sige-pbe/v2/noise.py --json"
    record = _record(path, "label-noise", "kinds", maker)
    for kind, row in record["kinds"].items():
        missing = [k for k in NOISE_KEYS if not isinstance(row, dict) or k not in row]
        if missing:
            raise ValueError(f"label-noise file {str(path)!r}: kind {kind!r} has no {', '.join(missing)}")
    command = command or record.get("command")
    if not command:
        raise ValueError(f"label-noise file {str(path)!r} names no command: give --label-noise-command")
    return {"command": command, "n_compared": record.get("n_compared"),
            "kinds": {kind: {k: row[k] for k in NOISE_KEYS} for kind, row in record["kinds"].items()}}


def quote_label_floor(path: Path, command: str | None) -> dict:
    """The error budget's ``label_floor`` entry from a k-point study (``kpoint_convergence.py report``):
    the chosen rule (the second version's labels), the study's reference, and the reference against a
    denser mesh per structure (:data:`FLOOR_KEYS`); when the chosen rule is not the reference, also its
    worst errors per ``config_type`` against the reference. ``command``: the command that wrote it (default:
    the record's own; the study's report names none)."""
    maker = "benchmarks/data/kpoint_convergence.py report"
    study = _record(path, "label-floor", "reference_against_denser", maker)
    denser = study["reference_against_denser"]
    rows = denser.get("rows") if isinstance(denser, dict) else None
    if not isinstance(rows, list) or any(not isinstance(r, dict) or "config_type" not in r
                                         or any(k not in r for k in FLOOR_KEYS) for r in rows):
        raise ValueError(f"label-floor file {str(path)!r}: reference_against_denser has no rows of "
                         f"config_type, {', '.join(FLOOR_KEYS)}")
    command = command or study.get("command")
    if not command:
        raise ValueError(f"label-floor file {str(path)!r} names no command: give --label-floor-command")
    rules = dict(study.get("rules", {}))
    if "density" in denser:  # the denser rule is described in its check, not among the study's rules
        rules.setdefault(denser.get("rule"), {k: denser.get(k) for k in ("density", "gamma_centred", "even")})
    chosen, reference = study.get("chosen"), study.get("reference")
    entry = {"command": command, "rule": chosen, "reference": reference,
             "rules": {name: rules[name] for name in (chosen, reference, denser.get("rule"))
                       if name in rules},
             "denser": denser.get("rule"),
             "rows": [{k: r.get(k) for k in ("structure", "config_type", *FLOOR_KEYS)} for r in rows]}
    policy = next((p for p in study.get("policies", []) if p.get("policy") == chosen), None)
    if chosen != reference and policy:
        entry["rule_against_reference"] = {
            kind: {k: c.get(k) for k in ("n", "energy_meV_per_atom", "forces_meV_per_A", "stress_GPa")}
            for kind, c in policy["kinds"].items()}
    return entry
