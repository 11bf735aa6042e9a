"""Cost of one MD step (energy + forces + stress) of the default Platonic Transformer vs system size.

Rattled fcc Cu supercells of 108, 500, 2048 and 4000 atoms, cutoff 5 Å, softmax and linear attention,
float32 and float64, all measured side by side in this one run (machines are noisy: compare the ratios,
not absolute times). Every step moves the atoms, so the neighbour list is rebuilt as in MD.

    python benchmarks/speed/platonic_md_step.py [--sizes 108 500 2048 4000] [--repeats 3] [--json out.json]

Prints µs/atom/step per configuration and, for linear scaling, the per-atom cost at the largest size
divided by that at 500 atoms (≈ 1 means linear).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from ase.build import bulk

import mlip
from mlip.models import create_model

CELLS = {108: 3, 500: 5, 2048: 8, 4000: 10}


def time_steps(calc, atoms, repeats: int, cpu: bool = False):
    """Median seconds per energy+forces+stress evaluation, positions changed before every call; with
    ``cpu``, (wall-clock, CPU seconds of the process)."""
    atoms.calc = calc
    rng = np.random.default_rng(0)
    for _ in range(3):  # warm-up: the allocator's heap grows to the working set over a few steps
        atoms.positions += rng.normal(scale=1e-3, size=atoms.positions.shape)
        atoms.get_forces()
        atoms.get_stress()
    times = []
    for _ in range(repeats):
        atoms.positions += rng.normal(scale=1e-3, size=atoms.positions.shape)
        t0, c0 = time.perf_counter(), time.process_time()
        atoms.get_potential_energy()
        atoms.get_forces()
        atoms.get_stress()
        times.append((time.perf_counter() - t0, time.process_time() - c0))
    wall, cpu_time = (float(np.median(t)) for t in zip(*times))
    return (wall, cpu_time) if cpu else wall


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=sorted(CELLS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    bad = [n for n in args.sizes if n not in CELLS]
    if bad:
        parser.error(f"sizes must be among {sorted(CELLS)}, got {bad}")

    rows = []
    print(f"torch {torch.__version__}, {args.threads} threads, default Platonic config, cutoff 5 Å")
    print(f"{'attention':>9} {'dtype':>7} {'atoms':>6} {'edges/atom':>10} {'ms/step':>10} {'µs/atom/step':>13}")
    for attention in ("softmax", "linear"):
        potential = create_model("platonic", species=["Cu"], cutoff=5.0, seed=0, attention=attention)
        for dtype in ("float32", "float64"):
            calc = mlip.MLIPCalculator(potential, device="cpu", dtype=dtype)
            for n in args.sizes:
                k = CELLS[n]
                atoms = bulk("Cu", "fcc", a=3.61, cubic=True) * (k, k, k)
                atoms.rattle(0.05, seed=1)
                graph = mlip.AtomicGraph.from_atoms(atoms, 5.0)
                sec = time_steps(calc, atoms, args.repeats)
                row = dict(attention=attention, dtype=dtype, atoms=n, edges_per_atom=graph.n_edges / n,
                           ms_per_step=sec * 1e3, us_per_atom_step=sec / n * 1e6)
                rows.append(row)
                print(f"{attention:>9} {dtype:>7} {n:>6} {row['edges_per_atom']:>10.1f} {row['ms_per_step']:>10.1f} "
                      f"{row['us_per_atom_step']:>13.1f}", flush=True)

    print("\nlinear scaling: per-atom cost at the largest size / at 500 atoms (≈1 is linear)")
    largest = max(args.sizes)
    for attention in ("softmax", "linear"):
        for dtype in ("float32", "float64"):
            by_n = {r["atoms"]: r["us_per_atom_step"] for r in rows if r["attention"] == attention and r["dtype"] == dtype}
            if 500 in by_n and largest != 500:
                print(f"  {attention:>7} {dtype}: {by_n[largest] / by_n[500]:.2f}  ({largest} vs 500 atoms)")
    print("\nratios at the largest size (same run):")
    get = {(r["attention"], r["dtype"]): r["us_per_atom_step"] for r in rows if r["atoms"] == largest}
    print(f"  linear/softmax  float32: {get[('linear', 'float32')] / get[('softmax', 'float32')]:.2f}")
    print(f"  float64/float32 softmax: {get[('softmax', 'float64')] / get[('softmax', 'float32')]:.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"threads": args.threads, "torch": torch.__version__, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
