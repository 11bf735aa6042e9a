"""Latency of one energy + forces + stress call on small cells: every shipped model against ASE's EMT.

    python benchmarks/speed/small_cell_latency.py [--rounds 5] [--repeats 20] [--threads 1]
        [--label after] [--json benchmarks/results/small_cell_latency.json] [--models NAME ...]
        [--compile NAME ...]

Structures: rattled fcc Cu/Au cells of 4, 8 and 16 atoms (the conventional cube, 2×1×1 and 2×2×1 of
it, half the atoms Au, fixed seed). Before every call the positions are moved slightly (a new small
random displacement about the rattled structure, as an MD step moves them), so no result is reused;
moving them is outside the timed region. One call is ``atoms.get_potential_energy()``,
``atoms.get_forces()`` and ``atoms.get_stress()`` in a row, as ASE's dynamics and optimizers ask: the
first runs ASE's state check and one ``calculate()`` that computes all three properties (the MLIP
calculators and EMT both do), the other two find them cached.

Every shipped model (``mlip.pretrained.TRAINED``) is loaded in float32 and float64 on the CPU, next to
EMT. The calculators are interleaved: each round times every calculator ``--repeats`` times per
structure, the order reversed every other round, so that all of them see the same load on a shared
machine; the report is the median over all timed calls (after warm-up calls) and each one's ratio to EMT
on the same structure, in wall-clock time and in CPU time of the process (with one thread the
two agree on an idle machine; on a loaded one the CPU time is the steadier measure, since it
leaves out the time spent waiting for a core). The issue's target is ≤ 10 ms per call for ≤ 16 atoms
on one thread for the shipped transformers (float32); ``targets`` in the JSON says which meet it.

Every row also counts the PyTorch operations of one call (``aten_ops``: every ``aten::`` event
torch.profiler records, nested ones included, forward and backward; deterministic, unlike the times).
``--compile NAME ...`` adds those shipped models in float32 through ``MLIPCalculator(compile=True)``
(torch.compile of the whole evaluation, energy, forces and stress in one graph; the seconds of the
first call, which compiles, are reported as ``first_call_s`` at the first size, wall-clock, with the
process's CPU seconds in ``first_call_cpu_s``, the compiler's subprocesses not counted).

The results are merged into ``--json`` under ``--label`` (e.g. ``before`` and ``after`` a change),
each with the machine facts (torch version, CPU model, threads, load average) and the git commit.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from ase.build import bulk
from ase.calculators.emt import EMT

import mlip
from mlip.io import read_json, write_json

SIZES = {4: (1, 1, 1), 8: (2, 1, 1), 16: (2, 2, 1)}
TARGET_MS = 10.0
TRANSFORMERS = ("equiformer_v3-emt", "platonic-emt")
DEFAULT_JSON = Path(__file__).resolve().parents[1] / "results" / "small_cell_latency.json"


def structure(n_atoms: int, seed: int = 0):
    """Rattled fcc Cu/Au cell of ``n_atoms`` atoms (half Au), cubic conventional cell repeated."""
    atoms = bulk("Cu", "fcc", a=3.75, cubic=True).repeat(SIZES[n_atoms])
    rng = np.random.default_rng(seed)
    symbols = np.array(["Cu"] * n_atoms)
    symbols[rng.permutation(n_atoms)[: n_atoms // 2]] = "Au"
    atoms.set_chemical_symbols(symbols.tolist())
    atoms.rattle(0.05, seed=seed)
    return atoms


def time_calls(atoms, base, rng, n: int) -> list:
    """(wall-clock seconds, CPU seconds of this process) of each of ``n`` calls, the positions moved
    (outside the timer) before each."""
    times = []
    for _ in range(n):
        atoms.positions = base + rng.normal(scale=0.01, size=base.shape)
        t0, c0 = time.perf_counter(), time.process_time()
        atoms.get_potential_energy()
        atoms.get_forces()
        atoms.get_stress()
        times.append((time.perf_counter() - t0, time.process_time() - c0))
    return times


def count_ops(atoms, base, rng) -> int:
    """PyTorch operations (``aten::`` events, nested ones included) of one call, positions moved first."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        time_calls(atoms, base, rng, 1)
    return sum(1 for e in prof.events() if e.name.startswith("aten::"))


def machine_facts(threads: int) -> dict:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).resolve().parent).stdout.strip()
    except OSError:
        commit = ""
    return {"torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version(),
            "cpu": cpu, "cpus": os.cpu_count(), "threads": threads, "load_average": list(os.getloadavg()),
            "commit": commit, "mlip": mlip.__version__}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", default=None, help="shipped names (default: all trained)")
    parser.add_argument("--dtypes", nargs="*", default=["float32", "float64"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--compile", nargs="*", default=[], metavar="NAME",
                        help="also these shipped models in float32 with compile=True (torch.compile)")
    parser.add_argument("--label", default="latest", help="key of this run in the JSON (e.g. before, after)")
    parser.add_argument("--json", default=str(DEFAULT_JSON), help="merge the results into this JSON file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    names = args.models if args.models is not None else sorted(mlip.pretrained.TRAINED)
    calcs = {"EMT": EMT()}
    for name in names:
        for dtype in args.dtypes:
            calcs[f"{name} {dtype}"] = mlip.load_calculator(name, device="cpu", dtype=dtype)
    for name in args.compile:
        calcs[f"{name} float32-compiled"] = mlip.load_calculator(name, device="cpu", dtype="float32",
                                                                 compile=True)
    structures = {n: structure(n) for n in SIZES}
    rng = np.random.default_rng(1)
    work, ops, first_call = {}, {}, {}
    for key, calc in calcs.items():
        for n, atoms in structures.items():
            a = atoms.copy()
            a.calc = calc
            work[key, n] = (a, atoms.get_positions())
            first_call[key, n] = time_calls(a, work[key, n][1], rng, 1)[0]
            time_calls(a, work[key, n][1], rng, args.warmup)
            ops[key, n] = count_ops(a, work[key, n][1], rng) if key != "EMT" else 0
    times = {k: [] for k in work}
    keys = list(calcs)
    for r in range(args.rounds):
        for n in structures:
            for key in keys if r % 2 == 0 else keys[::-1]:
                a, base = work[key, n]
                times[key, n] += time_calls(a, base, rng, args.repeats)
        print(f"round {r + 1}/{args.rounds} done", flush=True)

    facts = machine_facts(args.threads)
    rows = []
    for key in keys:
        for n in structures:
            wall, cpu = (1e3 * np.asarray(t) for t in zip(*times[key, n]))
            emt_wall, emt_cpu = (1e3 * np.asarray(t) for t in zip(*times["EMT", n]))
            model, _, dtype = key.partition(" ")
            ms, cpu_ms = float(np.median(wall)), float(np.median(cpu))
            rows.append({"calculator": key, "model": model, "dtype": dtype or None, "n_atoms": n, "ms": ms,
                         "ms_quartiles": [float(q) for q in np.percentile(wall, [25, 75])],
                         "ms_p10": float(np.percentile(wall, 10)), "cpu_ms": cpu_ms,
                         "calls": len(wall), "vs_emt": ms / float(np.median(emt_wall)),
                         "cpu_vs_emt": cpu_ms / float(np.median(emt_cpu)), "aten_ops": ops[key, n],
                         "first_call_s": first_call[key, n][0], "first_call_cpu_s": first_call[key, n][1]})
    print(f"\ntorch {facts['torch']}, {facts['cpu']}, {args.threads} thread(s), "
          f"commit {facts['commit'][:10]}, load average {facts['load_average'][0]:.1f}")
    columns = (("wall-clock", "ms", "vs_emt"), ("CPU time of the process", "cpu_ms", "cpu_vs_emt"))
    for what, field, ratio in columns:
        print(f"\nmedian {what} ms per energy + forces + stress call (ratio to EMT)")
        print(f"{'calculator':<36}" + "".join(f"{f'{n} atoms':>22}" for n in structures))
        for key in keys:
            mine = {r["n_atoms"]: r for r in rows if r["calculator"] == key}
            print(f"{key:<36}"
                  + "".join(f"{mine[n][field]:12.2f} ms ({mine[n][ratio]:5.1f}x)" for n in structures))
    print("\nPyTorch operations per call (aten events, nested included; first call in s)")
    for key in keys:
        mine = {r["n_atoms"]: r for r in rows if r["calculator"] == key}
        print(f"{key:<36}" + "".join(f"{mine[n]['aten_ops']:>10d} ({mine[n]['first_call_s']:7.2f} s)"
                                     for n in structures))
    targets = {}
    for name, dtype in ((n, d) for n in TRANSFORMERS for d in ("float32", "float32-compiled")):
        mine = [r for r in rows if r["model"] == name and r["dtype"] == dtype]
        if mine:
            worst, worst_cpu = max(r["ms"] for r in mine), max(r["cpu_ms"] for r in mine)
            targets[f"{name} {dtype} <= {TARGET_MS:g} ms"] = {"worst_ms": worst, "met": worst <= TARGET_MS,
                                                              "worst_cpu_ms": worst_cpu}
    for k, v in targets.items():
        print(f"target {k}: worst {v['worst_ms']:.2f} ms wall-clock ({v['worst_cpu_ms']:.2f} ms CPU), "
              f"{'met' if v['met'] else 'NOT met'}")

    if args.json:
        record = read_json(args.json) or {}
        record[args.label] = {"command": " ".join(["python"] + sys.argv), "machine": facts,
                              "rounds": args.rounds, "repeats": args.repeats,
                              "warmup": args.warmup, "structures": "rattled fcc Cu/Au, half Au, a=3.75 Å",
                              "rows": rows, "targets": targets}
        write_json(args.json, record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
