"""A model's targets read from a file, and whether the card's numbers meet them (the rows of its
``## Targets`` section, :func:`.markdown.targets_section`).

A targets file (JSON) states what a model is asked to reach, e.g. an issue's table
(``examples/recipes/equiformer_v3-sige/v2/targets.json``)::

    {"source": "issue 55, item 5",
     "test": {"energy": 3, "forces": 50, "stress": 0.936},
     "near_equilibrium": {"config_types": ["prototype", "strained", "rattled", "ordered_alloy"],
                          "forces": 20},
     "properties": {"lattice.Si.a_A": {"percent": 0.2},
                    "vacancy.Si.formation_energy_relaxed_eV": {"absolute": 0.1}},
     "phonon_frequency_mae_THz": {"Si": 0.12, "Ge": 0.12},
     "kappa_percent_of_published": 20,
     "note": "stress: 0.15 GPa = 0.936 meV/Å³"}

``test``: MAE on the test file (meV/atom, meV/Å, meV/Å³); ``near_equilibrium``: the force MAE over the
test structures of those config_types together; ``properties``: crystal properties of
``benchmarks/accuracy/dft_validation.py`` (:data:`.quotes.DFT_PROPERTIES`' keys) within a relative
(``percent``) or absolute (``absolute``, the property's unit) difference of the DFT reference;
``phonon_frequency_mae_THz``: per element; ``kappa_percent_of_published``: κ(300 K) within that many
percent of the published range the validation quotes (below its low end less the percent or above its
high end plus it: missed). Every part is optional but ``source``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional

from mlip.workflows.model_card.measure import KEYS, UNIT

#: the parts a targets file may have
PARTS = ("source", "test", "near_equilibrium", "properties", "phonon_frequency_mae_THz",
         "kappa_percent_of_published", "note")


def _number(path: Path, where: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{path}: {where} is {value!r}, not a number ≥ 0")
    return float(value)


def read_targets(path) -> Dict[str, Any]:
    """The targets of ``path`` (module docstring), checked: ``ValueError`` naming the file and the part
    that is wrong."""
    from mlip.workflows.model_card.quotes import DFT_PROPERTIES

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"targets file {str(path)!r} does not exist")
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not JSON ({err.msg}, line {err.lineno})") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("source"), str):
        raise ValueError(f"{path}: an object with a 'source' (where the targets come from)")
    unknown = sorted(set(spec) - set(PARTS))
    if unknown:
        raise ValueError(f"{path}: unknown part(s) {', '.join(unknown)} (known: {', '.join(PARTS)})")
    out: Dict[str, Any] = {"source": spec["source"]}
    if "note" in spec:
        out["note"] = str(spec["note"])
    test = spec.get("test", {})
    if set(test) - set(KEYS):
        raise ValueError(f"{path}: test targets are energy, forces, stress (got {', '.join(sorted(test))})")
    out["test"] = {key: _number(path, f"test.{key}", value) for key, value in test.items()}
    if "near_equilibrium" in spec:
        near = spec["near_equilibrium"]
        kinds = near.get("config_types") if isinstance(near, dict) else None
        if not kinds or not all(isinstance(k, str) for k in kinds) or "forces" not in near:
            raise ValueError(f"{path}: near_equilibrium needs config_types (a list of names) and forces")
        out["near_equilibrium"] = {"config_types": list(kinds),
                                   "forces": _number(path, "near_equilibrium.forces", near["forces"])}
    known = {key for key, *_ in DFT_PROPERTIES}
    properties = {}
    for key, target in spec.get("properties", {}).items():
        if key not in known:
            raise ValueError(f"{path}: property {key!r} is not one a card quotes "
                             f"({', '.join(sorted(known))})")
        if key.startswith("kappa."):
            raise ValueError(f"{path}: {key}: κ's target is kappa_percent_of_published (no DFT κ here)")
        if not isinstance(target, dict) or len(target) != 1 or set(target) - {"percent", "absolute"}:
            raise ValueError(f"{path}: property {key!r}: one of {{\"percent\": x}} or {{\"absolute\": x}}")
        (kind, value), = target.items()
        properties[key] = {kind: _number(path, f"properties.{key}.{kind}", value)}
    out["properties"] = properties
    out["phonon_frequency_mae_THz"] = {
        element: _number(path, f"phonon_frequency_mae_THz.{element}", value)
        for element, value in spec.get("phonon_frequency_mae_THz", {}).items()}
    if "kappa_percent_of_published" in spec:
        out["kappa_percent_of_published"] = _number(path, "kappa_percent_of_published",
                                                     spec["kappa_percent_of_published"])
    return out


def property_met(row: dict) -> Optional[bool]:
    """Whether a quoted crystal property (a row of the card's ``dft_validation``) meets its target: None
    when it has no target or nothing to compare with."""
    value, ref = row["model"], row.get("reference")
    if row.get("target_percent_of_published") is not None:
        published = row.get("published")
        if not published:
            return None
        p = row["target_percent_of_published"] / 100
        return published[0] * (1 - p) <= value <= published[1] * (1 + p)
    if ref is None:
        return None
    if row.get("target_absolute") is not None:
        return abs(value - ref) <= row["target_absolute"]
    if row.get("target_percent") is not None:
        return abs(100 * (value - ref) / ref) <= row["target_percent"]
    return None


def property_target_text(row: dict) -> Optional[str]:
    """A quoted crystal property's target in words (``within 0.2 %``), None without one."""
    if row.get("target_percent_of_published") is not None:
        return f"within {row['target_percent_of_published']:g} % of the published range"
    if row.get("target_absolute") is not None:
        return f"within {row['target_absolute']:g} {row['unit']}"
    if row.get("target_percent") is not None:
        return f"within {row['target_percent']:g} %"
    return None


def target_rows(data: dict) -> List[dict]:
    """Every target of a card's ``targets_file`` entry beside what the card measured: dictionaries with
    ``target`` (words), ``value`` (words) and ``met`` (True, False, or None: not measured)."""
    spec = data.get("targets_file")
    if not spec:
        return []
    rows = []
    metrics = data["test"]["metrics"]
    for key, target in spec.get("test", {}).items():
        mae = metrics.get(KEYS[key])
        rows.append({"what": f"test {key} MAE", "target": f"≤ {target:g} {UNIT[key]}",
                     "value": "—" if mae is None else f"{mae:.3g} {UNIT[key]}",
                     "met": None if mae is None else mae <= target})
    near = spec.get("near_equilibrium")
    if near:
        measured = data["test"].get("near_equilibrium") or {}
        mae = (measured.get("metrics") or {}).get(KEYS["forces"])
        counted = f"; {measured['n']} structures" if measured else ""
        rows.append({"what": f"test force MAE, near equilibrium ({', '.join(near['config_types'])}{counted})",
                     "target": f"≤ {near['forces']:g} meV/Å",
                     "value": "—" if mae is None else f"{mae:.3g} meV/Å",
                     "met": None if mae is None else mae <= near["forces"]})
    dft = data.get("dft_validation") or {}
    quoted = {row["key"]: row for row in dft.get("properties", [])}
    from mlip.workflows.model_card.quotes import DFT_PROPERTIES, property_targets

    wanted = [key for key, *_ in DFT_PROPERTIES
              if key in spec.get("properties", {})
              or (key.startswith("kappa.") and "kappa_percent_of_published" in spec)]
    labels = {key: (label, unit) for key, label, unit, _ in DFT_PROPERTIES}
    for key in wanted:
        label, unit = labels[key]
        row = quoted.get(key)
        if row is None:
            text = property_target_text({"unit": unit, **property_targets(key, spec)})
            rows.append({"what": label, "target": text, "value": "not measured", "met": None})
            continue
        ref = row.get("reference")
        if row.get("published"):
            versus = f"published {row['published'][0]:g}–{row['published'][1]:g}"
        else:
            versus = "—" if ref is None else f"DFT {ref:.4g}"
        rows.append({"what": label, "target": property_target_text(row),
                     "value": f"{row['model']:.4g} {unit} ({versus})", "met": property_met(row)})
    phonons = dft.get("phonon_frequency_mae_THz", {})
    for element, target in spec.get("phonon_frequency_mae_THz", {}).items():
        mae = phonons.get(element)
        rows.append({"what": f"{element} phonon frequency MAE over the band path",
                     "target": f"≤ {target:g} THz",
                     "value": "not measured" if mae is None else f"{mae:.3g} THz",
                     "met": None if mae is None else mae <= target})
    return rows
