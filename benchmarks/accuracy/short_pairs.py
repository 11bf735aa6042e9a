"""Is a model softer than its labels when two atoms come close? The force along the shortest pair, model
against first principles, in every labelled structure where a pair is closer than ``--below``.

    python benchmarks/accuracy/short_pairs.py --model M.safetensors [--model ...] --data FILE [FILE ...]
        [--element Si] [--below 2.0] [--json benchmarks/results/short-pairs-sige.json]

Why: a stable-MD criterion (``stable_md.py``: no pair closer than 1.9 Å in 50 ps of liquid silicon) is
failed either by a model whose repulsion is too soft, which better data fixes, or by a liquid whose
thermal tail reaches that close with the physics right. For each structure of ``--data`` with a pair of
``--element`` atoms closer than ``--below`` Å (images included), the shortest such pair i–j and the
force that pushes the two apart, ``b = (F_j − F_i)·u / 2`` with ``u`` the unit vector from i to j (eV/Å;
> 0: repulsive), from the labels (:func:`mlip.data.read_dataset`: ``forces`` or ``REF_forces``) and
from each model (float64). Reported
per ``config_type`` and over all: the number of pairs, the mean label ``b``, and each model's mean and
mean absolute difference from it, and the mean difference relative to the mean label; a model too soft
at short range has a negative difference.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np


def shortest_pair(atoms, element: int, below: float):
    """(i, j, d, u): the shortest pair of ``element`` atoms under ``below`` Å, or None."""
    from ase.neighborlist import neighbor_list

    i, j, d, vectors = neighbor_list("ijdD", atoms, below)
    keep = (atoms.numbers[i] == element) & (atoms.numbers[j] == element)
    if not keep.any():
        return None
    k = int(np.argmin(np.where(keep, d, np.inf)))
    return int(i[k]), int(j[k]), float(d[k]), vectors[k] / d[k]


def bond_force(forces: np.ndarray, i: int, j: int, u: np.ndarray) -> float:
    """eV/Å: half the relative force of j and i along ``u`` (i → j); positive pushes them apart."""
    return float(np.dot(forces[j] - forces[i], u) / 2)


def model_label(spec: str) -> str:
    """A model's name in the report: a shipped name, or a checkpoint's folder and stem (iter-002/member-0)."""
    path = Path(spec)
    return f"{path.parent.name}/{path.stem}" if path.suffix else spec


def measure(models: Sequence[str], files: Sequence[Path], element: str, below: float) -> Dict:
    from ase.data import atomic_numbers

    import mlip
    from mlip.data import read_dataset

    z = atomic_numbers[element]
    calcs = {model_label(str(m)): mlip.load_calculator(str(m), device="cpu", dtype="float64") for m in models}
    pairs: List[Dict] = []
    for path in files:
        for sample in read_dataset(path):  # the labels wherever the file keeps them (forces, REF_forces)
            atoms = sample.atoms
            found = shortest_pair(atoms, z, below)
            if found is None:
                continue
            i, j, d, u = found
            row = {"file": Path(path).name, "id": atoms.info.get("id"),
                   "config_type": atoms.info.get("config_type", "unknown"), "distance_A": d,
                   "label": bond_force(sample.forces, i, j, u), "models": {}}
            for name, calc in calcs.items():
                copy = atoms.copy()
                copy.calc = calc
                row["models"][name] = bond_force(np.asarray(copy.get_forces()), i, j, u)
            pairs.append(row)
    groups: Dict[str, List[Dict]] = {"all": pairs}
    for row in pairs:
        groups.setdefault(row["config_type"], []).append(row)
    summary = {}
    for group, rows in groups.items():
        if not rows:
            continue
        label = np.array([r["label"] for r in rows])
        entry = {"n": len(rows), "closest_A": min(r["distance_A"] for r in rows),
                 "label_mean_eV_per_A": float(label.mean()), "models": {}}
        for name in calcs:
            diff = np.array([r["models"][name] for r in rows]) - label
            entry["models"][name] = {"mean_difference_eV_per_A": float(diff.mean()),
                                     "mean_absolute_difference_eV_per_A": float(np.abs(diff).mean()),
                                     "relative_difference_percent": float(100 * diff.sum() / label.sum())}
        summary[group] = entry
    return {"element": element, "below_A": below, "files": [Path(f).name for f in files],
            "summary": summary, "pairs": pairs}


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", action="append", required=True, help="a checkpoint or shipped model (repeat)")
    p.add_argument("--data", nargs="+", required=True, type=Path, help="labelled structures (extxyz)")
    p.add_argument("--element", default="Si")
    p.add_argument("--below", type=float, default=2.0, help="Å: pairs closer than this")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    missing = [str(f) for f in args.data if not f.is_file()]
    if missing:
        raise SystemExit(f"short_pairs: no such file {missing[0]}")
    try:
        measured = measure(args.model, args.data, args.element, args.below)
    except ValueError as err:  # a frame without labels, an unknown model
        raise SystemExit(f"short_pairs: {err}") from None
    result = {**measured, "date": time.strftime("%Y-%m-%d")}
    for group, entry in result["summary"].items():
        diffs = ", ".join(f"{m} {v['mean_difference_eV_per_A']:+.2f} "
                          f"({v['relative_difference_percent']:+.1f} %)" for m, v in entry["models"].items())
        print(f"{group}: {entry['n']} pairs from {entry['closest_A']:.3f} Å, label {entry['label_mean_eV_per_A']:+.2f} "
              f"eV/Å; model − label: {diffs}")
    if args.json:
        from mlip.io import write_json

        write_json(args.json, result)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
