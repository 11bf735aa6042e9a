"""Generate a small EMT-labelled training set, read it back and split it by group.

    python examples/emt_dataset.py                      # 300 frames, a few seconds
    python examples/emt_dataset.py -n 3000 --out emt.xyz  # the default-sized set (~1 minute)

The structures are metals and alloys of Al, Cu, Ag, Au, Ni, Pd, Pt (crystals, ordered and random
alloys, vacancies, slabs, MD snapshots, clusters) labelled with ASE's EMT: energy (eV), forces (eV/Å)
and, for 3-D cells, stress (eV/Å³, ASE sign). The same seed always gives the same file.
"""

import argparse
import time

from mlip.data import format_summary, read_dataset, split_dataset, summarize
from mlip.data.emt import generate_emt_dataset

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("-n", "--n-structures", type=int, default=300, help="number of frames (default 300)")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", default="emt_small.xyz", help="extxyz file to write (default emt_small.xyz)")
args = parser.parse_args()

t0 = time.perf_counter()
generate_emt_dataset(args.n_structures, seed=args.seed, out_path=args.out, progress=True)
print(f"generated {args.out} in {time.perf_counter() - t0:.1f} s\n")

samples = read_dataset(args.out)
print(format_summary(summarize(samples)))

# MD frames of one trajectory share a group: a grouped split never puts them on both sides.
train, val, test = split_dataset(samples, (0.8, 0.1, 0.1), seed=0, group_by="group")
print(f"\nsplit by group: {len(train)} train, {len(val)} validation, {len(test)} test frames")
iso = [s for s in samples if s.atoms.info["prototype"] == "atom"]
for s in iso:
    print(f"isolated {s.atoms.get_chemical_formula()}: E = {s.energy:.3f} eV (EMT's bulk fcc is ≈ 0)")
