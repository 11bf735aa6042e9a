"""A data card: what a labelled data set holds, the range of its labels, where they came from and their cost.

The card extends :func:`mlip.data.summary.summarize` (frames, atoms and elements per ``config_type``) with,
per ``config_type`` and for the whole set: the energy per atom, the largest force on an atom, the stress
components (GPa) and, where frames carry the labeller's provenance (``label_wall_time_s``, ``calculator``,
``calculator_version``, ``calculator_settings`` written by :mod:`mlip.workflows.labelling`), the labelling
wall time and the distinct calculator settings. Everything is computed from the file; nothing is assumed.
"""

from __future__ import annotations

import json
from typing import Dict, Iterable, List

import numpy as np
from ase.units import GPa

from mlip.data.summary import summarize

__all__ = ["data_card", "format_data_card"]

PROVENANCE_KEYS = ("calculator", "calculator_version", "calculator_settings")


def _range(values: List[float]) -> Dict[str, float]:
    a = np.asarray(values, dtype=float)
    return {"min": float(a.min()), "median": float(np.median(a)), "max": float(a.max())}


class _Labels:
    """Per-group accumulator of label statistics."""

    def __init__(self):
        self.energy_per_atom: List[float] = []
        self.max_force: List[float] = []
        self.stress_gpa: List[float] = []
        self.wall_time_s: List[float] = []

    def add(self, sample) -> None:
        n = len(sample.atoms)
        self.energy_per_atom.append(float(sample.energy) / n)
        self.max_force.append(float(np.linalg.norm(np.asarray(sample.forces), axis=1).max()))
        if sample.stress is not None:
            self.stress_gpa.extend((np.asarray(sample.stress, dtype=float) / GPa).tolist())
        seconds = sample.atoms.info.get("label_wall_time_s")
        if seconds is not None and np.isfinite(float(seconds)):
            self.wall_time_s.append(float(seconds))

    def as_dict(self) -> Dict:
        out = {"energy_per_atom_eV": _range(self.energy_per_atom),
               "max_force_eV_per_A": _range(self.max_force)}
        if self.stress_gpa:
            out["stress_component_GPa"] = _range(self.stress_gpa)
        if self.wall_time_s:
            out["label_wall_time_s"] = {**_range(self.wall_time_s), "total": float(np.sum(self.wall_time_s)),
                                        "frames": len(self.wall_time_s)}
        return out


def data_card(samples: Iterable) -> Dict:
    """The card of labelled :class:`~mlip.data.Sample` objects (see the module docstring).

    Returns ``summarize``'s dictionary plus ``labels`` (whole set), ``labels_by_config_type`` and
    ``provenance`` (each distinct calculator/version/settings triple with its frame count)."""
    samples = list(samples)
    if not samples:
        raise ValueError("the data set is empty: no card to write")
    card = summarize(samples)
    total = _Labels()
    by_type: Dict[str, _Labels] = {}
    provenance: Dict[tuple, int] = {}
    for sample in samples:
        total.add(sample)
        by_type.setdefault(str(sample.atoms.info.get("config_type", "unknown")), _Labels()).add(sample)
        key = tuple(str(sample.atoms.info.get(k, "")) for k in PROVENANCE_KEYS)
        provenance[key] = provenance.get(key, 0) + 1
    card["labels"] = total.as_dict()
    card["labels_by_config_type"] = {name: acc.as_dict() for name, acc in by_type.items()}
    card["provenance"] = [
        {"calculator": c, "calculator_version": v,
         "calculator_settings": json.loads(s) if s.startswith("{") else s, "frames": n}
        for (c, v, s), n in sorted(provenance.items())
    ]
    return card


def format_data_card(card: Dict) -> str:
    """A Markdown rendering of :func:`data_card`'s dictionary: one table row per ``config_type``."""
    lines = [f"{card['frames']} frames, {card['atoms']['total']} atoms (per frame {card['atoms']['min']}–"
             f"{card['atoms']['max']}, median {card['atoms']['median']:g}); elements: "
             + ", ".join(f"{k} ({v} frames)" for k, v in card["elements"].items()), ""]
    lines.append("| config_type | frames | atoms | E/atom (eV) | max force (eV/Å) | stress (GPa) | label time (s) |")
    lines.append("|---|---|---|---|---|---|---|")
    rows = [(name, card["config_types"][name], card["labels_by_config_type"][name])
            for name in card["config_types"]]
    rows.append(("**all**", {"frames": card["frames"], "atoms": card["atoms"]}, card["labels"]))
    for name, counts, labels in rows:
        e, f = labels["energy_per_atom_eV"], labels["max_force_eV_per_A"]
        s = labels.get("stress_component_GPa")
        t = labels.get("label_wall_time_s")
        stress = f"{s['min']:.1f} … {s['max']:.1f}" if s else "—"
        cost = f"{t['total']:.0f} (median {t['median']:.0f})" if t else "—"
        lines.append(f"| {name} | {counts['frames']} | {counts['atoms']['min']}–{counts['atoms']['max']} | "
                     f"{e['min']:.3f} … {e['max']:.3f} | {f['median']:.2f} (max {f['max']:.1f}) | {stress} | "
                     f"{cost} |")
    for entry in card["provenance"]:
        lines.append("")
        lines.append(f"Labelled by {entry['calculator'] or '(not recorded)'} {entry['calculator_version']} "
                     f"({entry['frames']} frames); settings: `{json.dumps(entry['calculator_settings'])}`")
    return "\n".join(lines)
