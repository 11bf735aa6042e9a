"""One line per stage of benchmarks/gpu/gpu_check.sh, read from the JSON files it wrote, and the issue 39
targets gathered into one file.

    python benchmarks/gpu/gpu_summary.py STAGE OUT_DIR    # STAGE: tests, compile, benchmark, relax, train
    python benchmarks/gpu/gpu_summary.py all OUT_DIR      # writes OUT_DIR/gpu_summary.json, prints targets
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

FILES = {"tests": "gpu_tests.json", "compile": "compile_probe.json", "benchmark": "gpu_check.json",
         "relax": "batched_relax.json", "train": "training_step.json"}


def fmt(value) -> str:
    """3 significant digits, or "-" for a value that was not measured."""
    return f"{value:.3g}" if isinstance(value, (int, float)) else "-"


def load(out: Path, stage: str):
    path = out / FILES[stage]
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        return {"missing": f"{path.name}: {type(err).__name__}"}


def targets(out: Path) -> dict:
    bench, comp, relax = load(out, "benchmark"), load(out, "compile"), load(out, "relax")
    t = dict(bench.get("targets") or {})
    plat = next((r for r in comp.get("rows", []) if r.get("model", "").startswith("platonic")), {})
    for mode in ("eager", "compiled"):
        for what in ("network", "calculator"):
            key = f"{mode}_{what}_atom_steps_per_s"
            t[f"platonic_{plat.get('atoms', '?')}_{key} (>= 1e6)"] = plat.get(key)
    t["batched_relax_structures_per_minute (>= 1e4)"] = (
        relax.get("structures_per_minute") if relax.get("status") == "ok" else relax.get("status", "missing"))
    return t


def line(stage: str, out: Path) -> str:
    d = load(out, stage)
    if "missing" in d:
        return f"{stage}: no result ({d['missing']})"
    if stage == "tests":
        return f"tests: pytest exit code {d.get('pytest_exit_code')} in {d.get('seconds', 0):.0f} s"
    if stage == "benchmark":
        if "error" in d:
            return f"benchmark: {d['error']}"
        t = d.get("targets", {})
        return "benchmark: " + "; ".join(f"{k} = {fmt(v)}" for k, v in t.items())
    if stage == "compile":
        parts = []
        for r in d.get("rows", []):
            if "error" in r:
                parts.append(f"{r.get('model')}: {r['error'][:150]}")
                continue
            parts.append(f"{r['model']} {r.get('atoms')} atoms, atom·steps/s: network eager "
                         f"{fmt(r.get('eager_network_atom_steps_per_s'))} / compiled "
                         f"{fmt(r.get('compiled_network_atom_steps_per_s'))}, calculator eager "
                         f"{fmt(r.get('eager_calculator_atom_steps_per_s'))} / compiled "
                         f"{fmt(r.get('compiled_calculator_atom_steps_per_s'))}; compile "
                         f"{fmt(r.get('compile_seconds'))} s")
        return "compile: " + ("; ".join(parts) or d.get("error", "no rows"))
    if stage == "relax":
        if d.get("status") == "ok":
            return f"relax: {d['structures_per_minute']:.0f} structures/min ({d['structures_done']} done)"
        return f"relax: {d.get('status')} ({d.get('reason') or d.get('error', '')[:200]})"
    if stage == "train":
        rows = d.get("rows", {})
        return "train: " + ("; ".join(f"{name} {1e3 * r['seconds_per_step']:.1f} ms/step "
                                      f"({r['structures_per_second']:.0f} structures/s)"
                                      for name, r in rows.items()) or "no rows")
    raise SystemExit(f"unknown stage {stage!r}; expected one of {', '.join(FILES)} or all")


def main(argv=None) -> int:
    stage, out = (argv or sys.argv[1:])[:2]
    out = Path(out)
    if stage != "all":
        print(line(stage, out))
        return 0
    summary = {"lines": [line(s, out) for s in FILES], "targets": targets(out)}
    (out / "gpu_summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary["targets"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
