"""Training-step cost of the Platonic Transformer against its width, depth, heads, group and optional terms.

    OMP_NUM_THREADS=1 python benchmarks/platonic_width_cost.py --train emt-train.xyz

Each size is the earlier recipe's stage-1 config (``examples/train_platonic_emt.yaml``) with its model
overridden; a step is what ``mlip train`` does per batch (forward, forces, stress with the graph
kept, backward, AdamW), timed by :func:`ablations.seconds_per_step` (one warm-up step) on the
structures of the training file's first batches. The sizes are timed in alternating rounds and
each row prints the median over rounds and its ratio to that config's size, both from the same run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ablations import PLATONIC, seconds_per_step  # noqa: E402

#: label → model overrides of that stage-1 config (the first row is its own size)
SIZES = {
    "16 channels, 2 blocks, 2 heads (earlier stage 1)": {},
    "32 channels": {"channels": 32},
    "48 channels": {"channels": 48},
    "64 channels": {"channels": 64},
    "24 channels, 3 blocks": {"channels": 24, "num_layers": 3},
    "32 channels, 3 blocks": {"channels": 32, "num_layers": 3},
    "32 channels, 4 heads": {"channels": 32, "num_heads": 4},
    "octahedral group": {"group": "octahedral"},
    "neighbour density": {"density": True},
    "distance-filtered values": {"radial_values": True},
    "density and filtered values": {"density": True, "radial_values": True},
    "density (+ logarithmic) and filtered values": {"density": True, "radial_values": True,
                                                    "density_log_densities": True},
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", default="emt-train.xyz", help="training extxyz (its first batches are timed)")
    parser.add_argument("--steps", type=int, default=6, help="timed steps per size and round (after 1 warm-up)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", nargs="+", metavar="TEXT",
                        help="time only the sizes whose label contains one of these (and the first, the reference)")
    args = parser.parse_args(argv)
    first = next(iter(SIZES))
    sizes = {label: o for label, o in SIZES.items()
             if label == first or not args.only or any(t in label for t in args.only)}

    import torch

    from mlip.data import read_dataset
    from mlip.models import create_model
    from mlip.yaml_io import read_yaml

    base = read_yaml(PLATONIC, "training config")
    samples = list(read_dataset(args.train))[: (args.steps + 1) * base["batch_size"]]
    configs = {label: dict(base, data={}, model=dict(base["model"], **overrides)) for label, overrides in sizes.items()}
    params = {}
    for label, cfg in configs.items():
        model = dict(cfg["model"])
        params[label] = create_model(model.pop("name"), seed=0, **model).num_parameters()
    times = {label: [] for label in sizes}
    for _ in range(args.rounds):
        for label, cfg in configs.items():
            times[label].append(seconds_per_step(cfg, samples, args.steps, n_warmup=1))
    reference = float(np.median(times[first]))
    print(f"{torch.get_num_threads()} thread(s), batch {base['batch_size']}, {args.steps} steps x {args.rounds} rounds")
    print(f"{'size':<46}{'parameters':>12}{'s/step':>9}{'ratio':>8}")
    for label in sizes:
        median = float(np.median(times[label]))
        print(f"{label:<46}{params[label]:>12,}{median:>9.3f}{median / reference:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
