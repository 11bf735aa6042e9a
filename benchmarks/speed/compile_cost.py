"""Eager against compiled (``MLIPCalculator(..., compile=True)``): ms per energy + forces + stress call
for the shipped models at 16, 64 and 512 atoms on the CPU, one thread and two, side by side in one
run, written to one JSON file.

    python benchmarks/speed/compile_cost.py [--threads 1 2] [--sizes 16 64 512] [--out results/compile_cpu.json]
    python benchmarks/speed/compile_cost.py --smoke      # one tiny model, 8 atoms, one thread (checks the script)

Each thread count runs in its own process (the compiled CPU kernels are built for the thread count
torch uses when they compile, so one process cannot measure two). In each process every model gets
an eager and a compiled calculator (float32, the MD setting; ``--dtype float64`` for relaxations);
the first compiled call at each size is timed apart (compilation, and any recompilation for a new
size), then eager and compiled calls alternate on rattled fcc Cu so that the load of a shared machine
falls on both alike, and the medians are reported with their ratio (eager / compiled: above 1 means
compiling pays). The compiled results are checked against the eager ones at each size.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODELS = ["embedded-atom-emt", "platonic-emt", "equiformer_v3-emt"]
#: fcc Cu supercells of the conventional (4-atom) cell giving each size
REPEATS = {8: (1, 1, 2), 16: (1, 2, 2), 32: (2, 2, 2), 64: (2, 2, 4), 128: (2, 4, 4), 256: (4, 4, 4),
           512: (4, 4, 8)}


def cu_cell(n_atoms: int, seed: int = 0):
    from ase.build import bulk

    if n_atoms not in REPEATS:
        raise SystemExit(f"size {n_atoms} not among {sorted(REPEATS)}")
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True) * REPEATS[n_atoms]
    atoms.rattle(0.05, seed=seed)
    return atoms


def one_call(calc, atoms, rng):
    """One energy + forces + stress evaluation on freshly displaced positions; seconds, results."""
    from ase.calculators.calculator import all_changes

    atoms.positions += rng.normal(scale=1e-3, size=atoms.positions.shape)
    t0 = time.perf_counter()
    calc.calculate(atoms, ["energy", "forces", "stress"], all_changes)
    return time.perf_counter() - t0, dict(calc.results)


def rel_diff(a, b) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.abs(a - b).max() / max(np.abs(a).max(), 1e-30))


def measure_model(name, sizes, dtype, seconds_per_size, max_repeats):
    """Rows (one per size) for one model in this process."""
    import torch
    from ase.calculators.calculator import all_changes

    from mlip.calculators import MLIPCalculator
    from mlip.calculators.compiled_network import is_compiled
    from mlip.pretrained import load_potential
    from mlip.testing import build_potential

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "smoke":
            potential = build_potential("platonic-softmax", species=["Cu"])
        else:
            potential = load_potential(name)
    eager = MLIPCalculator(potential, device="cpu", dtype=dtype)
    compiled = MLIPCalculator(potential, device="cpu", dtype=dtype, compile=True)
    rows = []
    for n in sizes:
        atoms = cu_cell(n)
        rng = np.random.default_rng(n)
        rec = dict(model=name, atoms=n, threads=torch.get_num_threads(), dtype=dtype)
        t_eager, ref = one_call(eager, atoms, rng)  # warm-up, and the reference for the same positions
        t0 = time.perf_counter()
        compiled.calculate(atoms, ["energy", "forces", "stress"], all_changes)
        rec["first_compiled_call_s"] = time.perf_counter() - t0
        got = compiled.results
        rec["max_rel_diff"] = {k: rel_diff(ref[k], got[k]) for k in ("energy", "forces", "stress")}
        rec["compiled"] = is_compiled(compiled)
        repeats = int(max(3, min(max_repeats, seconds_per_size / max(2 * t_eager, 1e-6))))
        times = {"eager": [], "compiled": []}
        for _ in range(repeats):  # alternate, so that a busy machine slows both alike
            for key, calc in (("eager", eager), ("compiled", compiled)):
                times[key].append(one_call(calc, atoms, rng)[0])
        rec["repeats"] = repeats
        rec["eager_ms"] = 1e3 * float(np.median(times["eager"]))
        rec["compiled_ms"] = 1e3 * float(np.median(times["compiled"]))
        rec["speedup"] = rec["eager_ms"] / rec["compiled_ms"]
        print(json.dumps(rec), flush=True)
        rows.append(rec)
    return rows


def worker(args) -> int:
    import torch

    torch.set_num_threads(args.threads[0])
    rows = []
    for name in args.models:
        try:
            rows += measure_model(name, args.sizes, args.dtype, args.seconds_per_size, args.max_repeats)
        except Exception as err:  # record and go on with the next model
            rows.append(dict(model=name, threads=args.threads[0], error=f"{type(err).__name__}: {err}"[:500]))
            print(json.dumps(rows[-1]), flush=True)
    Path(args.worker_out).write_text(json.dumps(rows))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--sizes", nargs="+", type=int, default=[16, 64, 512])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--seconds-per-size", type=float, default=20.0,
                        help="time for the alternating calls of one model at one size (default: %(default)s)")
    parser.add_argument("--max-repeats", type=int, default=30)
    parser.add_argument("--out", default=str(HERE.parent / "results" / "compile_cpu.json"))
    parser.add_argument("--smoke", action="store_true", help="a tiny model, 8 atoms, one thread, not written")
    parser.add_argument("--worker-out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.smoke:
        args.models, args.sizes, args.threads, args.seconds_per_size = ["smoke"], [8], [1], 1.0
    if args.worker_out:
        return worker(args)
    import torch

    from mlip.io import write_json

    t_start = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for threads in args.threads:
            part = Path(tmp) / f"threads{threads}.json"
            cmd = [sys.executable, __file__, "--threads", str(threads), "--worker-out", str(part),
                   "--models", *args.models, "--sizes", *map(str, args.sizes), "--dtype", args.dtype,
                   "--seconds-per-size", str(args.seconds_per_size), "--max-repeats", str(args.max_repeats)]
            env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
            proc = subprocess.run(cmd, env=env)
            if part.exists():
                rows += json.loads(part.read_text())
            else:
                rows.append(dict(threads=threads, error=f"worker exited with status {proc.returncode}"))
    print(f"\n{'model':<20} {'atoms':>5} {'thr':>3} {'eager ms':>9} {'compiled ms':>11} {'ratio':>6} "
          f"{'first call s':>12}")
    for r in rows:
        if "eager_ms" in r:
            print(f"{r['model']:<20} {r['atoms']:>5} {r['threads']:>3} {r['eager_ms']:>9.2f} "
                  f"{r['compiled_ms']:>11.2f} {r['speedup']:>6.2f} {r['first_compiled_call_s']:>12.1f}")
        else:
            print(f"{r.get('model', '-'):<20} error: {r.get('error')}")
    result = dict(torch=torch.__version__, cpu=os.cpu_count(), dtype=args.dtype,
                  load_average=os.getloadavg(), elapsed_s=time.perf_counter() - t_start, rows=rows)
    if args.smoke:
        return 0 if rows and all("eager_ms" in r and r["compiled"] for r in rows) else 1
    write_json(args.out, result)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
