"""The miniature Matbench Discovery end to end: EMT plays DFT; any model plays the candidate.

    python examples/discovery_emt.py                       # 24 candidates, EMT as the model: the plumbing check
    python examples/discovery_emt.py -n 300                # the full miniature benchmark (~4.5 min on 2 cores)
    python examples/discovery_emt.py -n 300 --model default   # a shipped model (or a checkpoint path)
    python examples/discovery_emt.py -n 300 --model default --batch-size 32   # batched (torch-sim, Python >= 3.12)

Steps (each one is also a command, see README.md):

1. ``mlip discovery emt-benchmark``: relaxed elements and L1₂ compounds of Al, Cu, Ag, Au, Ni, Pd,
   Pt form the known hull; ``-n`` unrelaxed candidates with reference relaxed structures,
   formation energies and hull distances (seeded; cached, so a rerun reuses it);
2. ``mlip discovery relax``: the model relaxes every candidate (FIRE + FrechetCellFilter, fmax
   0.02 eV/Å, ≤ 500 steps, float64), resumable;
3. ``mlip discovery join``: formation energies from the elemental references, the submission files;
4. ``mlip discovery metrics``: F1, DAF, MAE, ... on hull distances, RMSD, plot.

With EMT as the model, F1 = 1 and MAE ≤ 5e-5 eV/atom (the 4-decimal rounding of the submission
file) prove the plumbing; with a trained model the numbers are its real scores on this task.
"""

import argparse
import time
from pathlib import Path

from mlip.cli import main

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--model", default="ase.calculators.emt:EMT", help="shipped name, checkpoint path or module:Class")
parser.add_argument("--out-dir", default="discovery-emt-out", help="everything goes here (default: %(default)s)")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("-n", type=int, default=24, help="number of candidates (default: %(default)s; 300 for the "
                    "full miniature benchmark)")
parser.add_argument("--kappa-srme", type=float, default=None, help="the model's κ_SRME, for the CPS")
parser.add_argument("--fix-symmetry", action="store_true", help="relax keeping each candidate's space group "
                    "(not the benchmark's protocol; for models that are not exactly rotation invariant)")
parser.add_argument("--batch-size", type=int, default=1, help="relax this many materials at a time with torch-sim "
                    "(an mlip model; pip install 'mlip-torch[torchsim]', Python >= 3.12); default: one at a time")
args = parser.parse_args()

out = Path(args.out_dir)
bench = out / f"benchmark-seed{args.seed}-n{args.n}"
model_tag = "".join(c if c.isalnum() or c in "-_." else "_" for c in args.model) + ("-fixsym" if args.fix_symmetry else "")
# one folder per (benchmark, model): a campaign folder refuses other structures or another model
run, submission = out / f"relax-{bench.name}-{model_tag}", out / f"submission-{bench.name}-{model_tag}"
date = "2000-01-01"  # a fixed date so that reruns overwrite the same files

steps = [
    ["discovery", "emt-benchmark", str(bench), "--seed", str(args.seed), "-n", str(args.n)],
    ["discovery", "relax", str(bench / "initial-structures.json.gz"), "--model", args.model, "--out-dir", str(run)]
    + (["--fix-symmetry"] if args.fix_symmetry else [])
    + (["--batch-size", str(args.batch_size)] if args.batch_size > 1 else []),
    ["discovery", "join", str(run), "--elemental-refs", str(bench / "elemental-references.json"),
     "--out-dir", str(submission), "--date", date],
    ["discovery", "metrics", str(submission / f"{date}-discovery.csv.gz"), "--reference", str(bench / "summary.csv.gz"),
     "--geo-opt", str(submission / f"{date}-geo-opt.jsonl.gz"),
     "--reference-structures", str(bench / "relaxed-structures.json.gz")]
    + (["--kappa-srme", str(args.kappa_srme)] if args.kappa_srme is not None else []),
]
for argv in steps:
    print(f"\n$ mlip {' '.join(argv)}", flush=True)
    t0 = time.perf_counter()
    status = main(argv)
    print(f"({time.perf_counter() - t0:.1f} s)")
    if status != 0:
        raise SystemExit(status)
