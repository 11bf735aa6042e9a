"""Minutes per training epoch of one recipe at several batch sizes, side by side.

    OMP_NUM_THREADS=2 python benchmarks/speed/batch_size_cost.py examples/recipes/equiformer_v3-emt/stage1.yaml \
        --train emt-train.xyz [--batch-sizes 4 8 16] [--rounds 3]

A smaller batch gives more optimizer steps per epoch; what it costs is the time per epoch, which this
measures: ``benchmarks/accuracy/ablations.py``'s ``seconds_per_step`` (the trainer's step: forward, forces,
stress, backward and AdamW, on the batches its first epoch starts with, scaled to the training set's mean
atoms per batch) times the number of batches in ``mlip train``'s training split, in alternating rounds. Validation
passes are not included. Prints the median minutes per epoch of each batch size and its ratio to the
recipe's own batch size.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "accuracy"))  # ablations.py

from ablations import seconds_per_step  # noqa: E402

from mlip.data import read_dataset, train_valid_split  # noqa: E402
from mlip.training import TrainConfig  # noqa: E402
from mlip.io import read_yaml  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", help="training config (YAML); its data section is replaced by --train")
    parser.add_argument("--train", default="emt-train.xyz", help="training data (mlip data emt emt-train.xyz)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--structures", type=int, default=160,
                        help="structures timed per batch size and round (after 5 warm-up batches)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if any(b < 1 for b in args.batch_sizes):
        parser.error(f"batch sizes must be positive, got {args.batch_sizes}")
    base = read_yaml(args.config, "training config")
    config = TrainConfig.from_dict(dict(base, data=dict(base.get("data") or {}, train=args.train)))
    # mlip train's own split (by structure group), as benchmarks/accuracy/ablations.py uses it
    samples, _ = train_valid_split(list(read_dataset(args.train)), config.data.valid_fraction, config.seed)
    n_train = len(samples)
    minutes = {b: [] for b in args.batch_sizes}
    for r in range(args.rounds):
        for b in (args.batch_sizes if r % 2 == 0 else args.batch_sizes[::-1]):
            cfg = dict(base, data={}, batch_size=b)
            steps = max(5, args.structures // b)
            minutes[b].append(seconds_per_step(cfg, samples, steps, n_warmup=5) * math.ceil(n_train / b) / 60)
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    own = config.batch_size
    reference = float(np.median(minutes[own])) if own in minutes else None
    print(f"\n{args.config}: {n_train} training structures; minutes per epoch (training steps only)")
    for b, values in minutes.items():
        med = float(np.median(values))
        ratio = f"  {med / reference:.2f}x batch {own}" if reference else ""
        print(f"  batch {b:>3}: {med:6.2f} min/epoch  (rounds {', '.join(f'{v:.2f}' for v in values)}), "
              f"{math.ceil(n_train / b)} steps{ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
