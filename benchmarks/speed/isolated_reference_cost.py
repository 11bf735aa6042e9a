"""What the isolated-atom reference energies cost per calculator call, and what caching saves.

A potential with ``isolated_reference`` subtracts the model's output for a neighbourless atom of each
species (one forward pass over n_species atoms without edges). A calculator, whose weights are frozen,
computes it once per state of the weights; training recomputes it every step. This script times, in one
run and alternating, the calculator as shipped (cached) and with the cache cleared before every call (the
cost without caching), on rattled fcc Cu cells, energy + forces + stress per call, and prints the ratio.

    python benchmarks/speed/isolated_reference_cost.py [--model equiformer_v3-emt] [--sizes 1 2 3] [--repeats 25]
"""

from __future__ import annotations

import argparse

import torch
from ase.build import bulk

import mlip
from platonic_md_step import time_steps  # beside this script: median seconds per energy + forces + stress call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="equiformer_v3-emt", help="a shipped name or checkpoint path")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 3], help="repeats of the 4-atom cubic cell")
    parser.add_argument("--repeats", type=int, default=25, help="calls per timing (the median is kept)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    calc = mlip.load_calculator(args.model)
    potential = calc.potential
    if not potential.isolated_reference:
        raise SystemExit(f"{args.model} does not use isolated-atom reference energies: nothing to measure")
    cached = potential._isolated_energies

    def recomputed(dtype):
        potential._isolated_cache = None
        return cached(dtype)

    print(f"{args.model}, float32, {args.threads} thread(s); ms per call (energy + forces + stress), median of {args.repeats}")
    print(f"{'atoms':>6} {'round':>5} {'recomputed':>11} {'cached':>8} {'cached/recomputed':>18}")
    for round_ in range(1, args.rounds + 1):
        for size in args.sizes:
            atoms = bulk("Cu", "fcc", a=3.6, cubic=True).repeat(size)
            potential._isolated_energies = recomputed
            slow = 1e3 * time_steps(calc, atoms, args.repeats)
            potential._isolated_energies = cached
            fast = 1e3 * time_steps(calc, atoms, args.repeats)
            print(f"{len(atoms):>6} {round_:>5} {slow:>11.1f} {fast:>8.1f} {fast / slow:>18.2f}")


if __name__ == "__main__":
    main()
