"""Cost of one MD step (energy + forces + stress, float32) of shipped models and checkpoints, side by side.

    python benchmarks/speed/shipped_md_step.py [MODEL ...] [--rounds 3] [--repeats 10] [--threads 1] [--json out.json]

MODEL is a shipped name (``equiformer_v3-emt``, ...) or a checkpoint path; by default every trained model
the package ships. The structures are the model cards' (``mlip card``): a 256-atom fcc Cu
cell and a 500-atom Cu-Au solid solution. The models are timed in alternating rounds, each round timing
every model once per structure (median of ``--repeats`` calls after 3 warm-up calls, positions moved
before every call so that the neighbour list is rebuilt as in MD), and the report gives the median over
the rounds and each model's cost relative to the first one: on a noisy machine compare those ratios,
not the absolute times.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from platonic_md_step import time_steps  # noqa: E402

import mlip  # noqa: E402
from mlip.workflows.model_card import speed_structures  # noqa: E402  (the cards' structures)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help="shipped names or checkpoint paths (default: every shipped model)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    names = args.models or sorted(mlip.pretrained.TRAINED)
    calcs = {name: mlip.load_calculator(name, device="cpu", dtype="float32") for name in names}
    structures = speed_structures()
    times = {(m, s): [] for m in names for s in structures}
    for r in range(args.rounds):
        for s, atoms in structures.items():
            for m in (names if r % 2 == 0 else names[::-1]):  # alternate the order between rounds
                times[m, s].append(time_steps(calcs[m], atoms.copy(), args.repeats))
        print(f"round {r + 1}/{args.rounds} done", flush=True)

    print(f"\ntorch {torch.__version__}, {args.threads} thread(s), float32, ms per energy + forces + stress call")
    rows = []
    for s in structures:
        print(f"\n{s}")
        first_ms = 1e3 * float(np.median(times[names[0], s]))
        for m in names:
            ms = 1e3 * float(np.median(times[m, s]))
            spread = 1e3 * (max(times[m, s]) - min(times[m, s]))
            rows.append({"model": m, "structure": s, "ms_per_step": ms, "rounds_ms": [1e3 * t for t in times[m, s]],
                         f"vs_{names[0]}": ms / first_ms})
            print(f"  {m:<40} {ms:9.1f} ms (rounds differ by {spread:.1f})  {ms / first_ms:6.3f}x {names[0]}")
    if args.json:
        Path(args.json).write_text(json.dumps({"threads": args.threads, "torch": torch.__version__,
                                               "rounds": args.rounds, "repeats": args.repeats, "rows": rows},
                                              indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
