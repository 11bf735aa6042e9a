"""Composition of a data set: categories, elements, atom counts, labels present."""

from __future__ import annotations

from typing import Dict, Iterable

import numpy as np

__all__ = ["summarize", "format_summary"]


def _parts(item):
    """(atoms, has_stress, info) of a Sample or an ase.Atoms carrying results."""
    if hasattr(item, "atoms") and hasattr(item, "energy"):
        return item.atoms, item.stress is not None
    results = item.calc.results if getattr(item, "calc", None) is not None else {}
    return item, "stress" in results


def summarize(items: Iterable) -> Dict:
    """Counts per ``config_type`` and per element (frames containing it), atom-count statistics.

    Works on :class:`~mlip.data.Sample` or labelled ``ase.Atoms``.
    """
    by_type: Dict[str, Dict] = {}
    elements: Dict[str, int] = {}
    n_atoms = []
    n_stress = 0
    n_periodic = 0
    for item in items:
        atoms, has_stress = _parts(item)
        n = len(atoms)
        n_atoms.append(n)
        n_stress += bool(has_stress)
        n_periodic += bool(np.any(atoms.pbc))
        ct = str(atoms.info.get("config_type", "unknown"))
        entry = by_type.setdefault(ct, {"frames": 0, "atoms": []})
        entry["frames"] += 1
        entry["atoms"].append(n)
        for sym in sorted(set(atoms.get_chemical_symbols())):
            elements[sym] = elements.get(sym, 0) + 1
    counts = np.array(n_atoms, dtype=np.int64)

    def stats(a):
        a = np.asarray(a)
        return {"min": int(a.min()), "median": float(np.median(a)), "max": int(a.max()), "total": int(a.sum())}

    edges = [1, 2, 4, 8, 16, 32, 64, 128]
    hist = {}
    for lo, hi in zip(edges[:-1], edges[1:]):
        hist[f"{lo}-{hi - 1}"] = int(((counts >= lo) & (counts < hi)).sum())
    hist[f">={edges[-1]}"] = int((counts >= edges[-1]).sum())
    return {
        "frames": len(n_atoms),
        "atoms": stats(counts) if len(n_atoms) else None,
        "with_stress": n_stress,
        "periodic": n_periodic,
        "config_types": {k: {"frames": v["frames"], "atoms": stats(v["atoms"])} for k, v in by_type.items()},
        "elements": dict(sorted(elements.items(), key=lambda kv: -kv[1])),
        "atom_count_histogram": hist,
    }


def format_summary(summary: Dict) -> str:
    """Plain-text table of :func:`summarize`'s result."""
    lines = [f"{summary['frames']} frames"]
    if summary["atoms"]:
        a = summary["atoms"]
        lines[0] += (f", {a['total']} atoms (per frame min {a['min']}, median {a['median']:g}, max {a['max']}); "
                     f"{summary['periodic']} periodic, {summary['with_stress']} with stress")
    lines.append(f"{'config_type':<16}{'frames':>8}{'atoms min/median/max':>24}")
    for name, v in summary["config_types"].items():
        s = v["atoms"]
        lines.append(f"{name:<16}{v['frames']:>8}{s['min']:>10}/{s['median']:g}/{s['max']}")
    lines.append("elements (frames containing): " + ", ".join(f"{k} {v}" for k, v in summary["elements"].items()))
    lines.append("atoms per frame: " + ", ".join(f"{k}: {v}" for k, v in summary["atom_count_histogram"].items()))
    return "\n".join(lines)


def main(argv=None) -> int:
    """``mlip data summary PATH [--format F] [--energy-key K] ...``: read (and so validate) a data set, print its composition."""
    import argparse

    from mlip.data.readers import FORMATS, read_dataset

    p = argparse.ArgumentParser(prog="mlip data summary",
                                description="Read a labelled data set (extxyz, ASE db, MPtrj JSON), check every "
                                            "frame and print its composition.")
    p.add_argument("path")
    p.add_argument("--format", choices=FORMATS, default=None, help="override the extension")
    p.add_argument("--energy-key", default=None)
    p.add_argument("--forces-key", default=None)
    p.add_argument("--stress-key", default=None)
    args = p.parse_args(argv)
    samples = read_dataset(args.path, args.format, energy_key=args.energy_key, forces_key=args.forces_key,
                           stress_key=args.stress_key, stream=True)
    print(format_summary(summarize(samples)))
    return 0
