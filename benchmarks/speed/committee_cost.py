"""Cost of one committee call beside one model's: what the uncertainty of ``CommitteeCalculator`` costs.

    python benchmarks/speed/committee_cost.py [--models embedded-atom-emt equiformer_v3-emt] [--members 2 4]
        [--sizes 16 108] [--rounds 3] [--repeats 10] [--threads 1]
        [--json benchmarks/results/committee_cost.json]

For each shipped model (its weights copied into every member: the cost does not depend on the weights)
and each structure size (rattled fcc Cu/Au cells, half Au), one call is ``get_potential_energy``,
``get_forces`` and ``get_stress`` (plus ``forces_uncertainty`` for a committee, found cached), the
positions moved slightly before each call outside the timer. Timed side by side, interleaved by round:

* ``single``: one :class:`MLIPCalculator`;
* ``committee-M``: :class:`CommitteeCalculator` of M members (one graph, one backward pass);
* ``separate-M``: M :class:`MLIPCalculator` called one after the other (what a committee costs
  without sharing the graph and the backward pass).

Reported: the median wall-clock and CPU milliseconds per call and each one's ratio to ``single``, in
float32 on the CPU. The JSON also holds the machine facts and the git commit.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import time
from pathlib import Path

import numpy as np
import torch
from ase.build import bulk

from mlip.calculators import CommitteeCalculator, MLIPCalculator
from mlip.io import write_json
from mlip.pretrained import load_potential

DEFAULT_JSON = Path(__file__).resolve().parents[1] / "results" / "committee_cost.json"


def structure(n_atoms: int, seed: int = 0):
    """A rattled fcc Cu/Au cell of about ``n_atoms`` atoms (the conventional cube repeated), half Au."""
    reps = {4: (1, 1, 1), 16: (2, 2, 1), 32: (2, 2, 2), 108: (3, 3, 3), 256: (4, 4, 4)}[n_atoms]
    atoms = bulk("Cu", "fcc", a=3.75, cubic=True).repeat(reps)
    rng = np.random.default_rng(seed)
    numbers = atoms.numbers.copy()
    numbers[rng.permutation(len(atoms))[: len(atoms) // 2]] = 79
    atoms.numbers = numbers
    atoms.rattle(0.05, seed=seed)
    return atoms


def time_call(atoms, base, rng, committee: bool) -> tuple:
    atoms.positions = base + rng.normal(scale=0.01, size=base.shape)
    t0, c0 = time.perf_counter(), time.process_time()
    atoms.get_potential_energy()
    atoms.get_forces()
    atoms.get_stress()
    if committee:
        atoms.calc.get_forces_uncertainty(atoms)
    return time.perf_counter() - t0, time.process_time() - c0


def time_separate(copies, base, rng) -> tuple:
    positions = base + rng.normal(scale=0.01, size=base.shape)
    t0, c0 = time.perf_counter(), time.process_time()
    for atoms in copies:
        atoms.positions = positions
        atoms.get_potential_energy()
        atoms.get_forces()
        atoms.get_stress()
    return time.perf_counter() - t0, time.process_time() - c0


def measure(model: str, n_atoms: int, members, rounds: int, repeats: int) -> dict:
    potential = load_potential(model)
    base_atoms = structure(n_atoms)
    base = base_atoms.positions.copy()
    variants = {"single": ("one", MLIPCalculator(potential))}
    for m in members:
        variants[f"committee-{m}"] = ("committee", CommitteeCalculator([potential] * m))
        variants[f"separate-{m}"] = ("separate", [MLIPCalculator(potential) for _ in range(m)])
    times = {name: [] for name in variants}
    rng = np.random.default_rng(1)
    for r in range(rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        for name in order:
            kind, calc = variants[name]
            if kind == "separate":
                copies = []
                for c in calc:
                    a = base_atoms.copy()
                    a.calc = c
                    copies.append(a)
                time_separate(copies, base, rng)  # warm-up
                times[name] += [time_separate(copies, base, rng) for _ in range(repeats)]
            else:
                atoms = base_atoms.copy()
                atoms.calc = calc
                time_call(atoms, base, rng, kind == "committee")  # warm-up
                times[name] += [time_call(atoms, base, rng, kind == "committee") for _ in range(repeats)]
    single_wall = float(np.median([t[0] for t in times["single"]]))
    single_cpu = float(np.median([t[1] for t in times["single"]]))
    rows = {}
    for name, values in times.items():
        wall, cpu = float(np.median([t[0] for t in values])), float(np.median([t[1] for t in values]))
        rows[name] = {"ms_per_call": 1e3 * wall, "cpu_ms_per_call": 1e3 * cpu,
                      "ratio_to_single": wall / single_wall, "cpu_ratio_to_single": cpu / single_cpu}
    return rows


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parent).stdout.strip()
    except OSError:
        return "unknown"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["embedded-atom-emt", "equiformer_v3-emt"])
    p.add_argument("--members", type=int, nargs="+", default=[2, 4])
    p.add_argument("--sizes", type=int, nargs="+", default=[16, 108])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    results = {}
    for model in args.models:
        for n in args.sizes:
            rows = measure(model, n, args.members, args.rounds, args.repeats)
            results.setdefault(model, {})[str(n)] = rows
            print(f"{model}, {n} atoms: " + ", ".join(
                f"{name} {row['ms_per_call']:.2f} ms ({row['ratio_to_single']:.2f}x, cpu "
                f"{row['cpu_ratio_to_single']:.2f}x)" for name, row in rows.items()), flush=True)
    record = {"results": results, "threads": args.threads, "dtype": "float32", "device": "cpu",
              "rounds": args.rounds, "repeats": args.repeats, "torch": torch.__version__,
              "cpu": platform.processor() or platform.machine(), "load_average": os.getloadavg(),
              "commit": git_commit(), "date": time.strftime("%Y-%m-%d")}
    write_json(args.json, record)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
