"""Distil a teacher into a fast student: Cu–Ag–Au with ASE's EMT as the teacher.

The same pipeline as ``mlip distill Cu Ag Au --teacher emt --out-dir distill-cuagau``: structures of the
three elements (their pairs and ternary alloys among them), the teacher's labels, a split by kind of
structure, the student's training and its errors against the teacher on the held-out test part. At the
default, small settings (an embedded-atom student, 10 epochs) it runs in about a minute; ``--full``
uses the default structure counts (about a thousand), the default EquiformerV3 student and a 15-minute
training budget: the "3-element system in about 20 minutes" of docs/training.md. Rerunning with the
same settings resumes; any teacher works the same way (``--teacher package.module:Class``).
"""

import argparse
import json

from mlip.workflows.distill import distill

SMALL_COUNTS = {"prototype": 16, "random_alloy": 16, "rattled": 16, "strained": 8, "vacancy": 8, "surface": 8}

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--teacher", default="emt", help="emt, gpaw or 'package.module:Class' (default: emt)")
parser.add_argument("--out-dir", default="distill-cuagau")
parser.add_argument("--full", action="store_true",
                    help="default structure counts and a 15-minute training budget (about 20 minutes in all)")
args = parser.parse_args()

if args.full:
    result = distill(["Cu", "Ag", "Au"], args.teacher, args.out_dir, minutes=15, progress=False)
else:
    # the cheapest shipped architecture as the student, so that the quick run trains for many steps
    result = distill(["Cu", "Ag", "Au"], args.teacher, args.out_dir, counts=SMALL_COUNTS, epochs=10,
                     student="embedded-atom-emt", progress=False)

evaluation = result.evaluation
print(f"student {result.student}: errors against the teacher on {evaluation['n_test']} held-out structures")
for kind, row in evaluation["per_config_type"].items():
    print(f"  {kind:14s} n={row['n']:3d}  energy {row['energy_mae_meV_per_atom']:8.2f} meV/atom  "
          f"forces {row['forces_mae_meV_per_A']:7.1f} meV/Å")
print("minutes per stage: " + json.dumps({k: round(v, 2) for k, v in result.minutes.items()}))
print(f"run MD with it: mlip md structure.cif --model {result.student}")
