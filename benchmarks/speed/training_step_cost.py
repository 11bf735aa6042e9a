"""Training-step cost of a recipe's stage-1 model against its size and optional settings, side by side.

    OMP_NUM_THREADS=1 python benchmarks/speed/training_step_cost.py --train emt-train.xyz       # the Platonic sizes
    OMP_NUM_THREADS=2 python benchmarks/speed/training_step_cost.py --train emt-train.xyz \
        --recipe equiformer_v3-hour --steps 20 --warmup 5 --rounds 3

Each row is the recipe's stage-1 config (``--recipe platonic``: ``benchmarks/configs/platonic_emt_stage1.yaml``,
the earlier Platonic stage 1; ``equiformer_v3-hour``: ``examples/recipes/equiformer_v3-emt/stage1.yaml``) with its
model overridden; a step is what ``mlip train`` does per batch (forward, forces, stress with the graph
kept, backward, AdamW), timed by :func:`ablations.seconds_per_step` on the batches the trainer's first
epoch starts with. The rows are timed in alternating rounds and each prints the median over rounds and
its ratio to the first row, all from the same run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "accuracy"))  # ablations.py
from ablations import BASES, ROOT, seconds_per_step  # noqa: E402

PLATONIC = BASES["platonic"]  # the earlier Platonic stage 1 (benchmarks/configs/platonic_emt_stage1.yaml)

#: label → model overrides of the Platonic stage-1 config (the first row is its own size)
PLATONIC_SIZES = {
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
#: label → model overrides of the one-hour EquiformerV3 stage 1 (the first row is the example file's model)
EQUIFORMER_HOUR_VARIANTS = {
    "log densities to 6 Å, attention 5 Å (example)": {},
    "5 Å, log densities": {"cutoff": 5.0, "attention_cutoff": None},
    "5 Å, no log densities (earlier recipe)": {"cutoff": 5.0, "attention_cutoff": None,
                                               "log_density_embedding": False},
}
#: --recipe → (stage-1 config, its rows)
RECIPES = {
    "platonic": (PLATONIC, PLATONIC_SIZES),
    "equiformer_v3-hour": (ROOT / "examples" / "recipes" / "equiformer_v3-emt" / "stage1.yaml",
                           EQUIFORMER_HOUR_VARIANTS),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", default="emt-train.xyz",
                        help="training extxyz (batches of the first epoch's order are timed)")
    parser.add_argument("--recipe", choices=sorted(RECIPES), default="platonic")
    parser.add_argument("--steps", type=int, default=6, help="timed steps per size and round")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps before them")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", nargs="+", metavar="TEXT",
                        help="time only the sizes whose label contains one of these (and the first, the reference)")
    args = parser.parse_args(argv)
    config_path, all_sizes = RECIPES[args.recipe]
    first = next(iter(all_sizes))
    sizes = {label: o for label, o in all_sizes.items()
             if label == first or not args.only or any(t in label for t in args.only)}

    import torch

    from mlip.data import read_dataset
    from mlip.models import create_model
    from mlip.io import read_yaml

    base = read_yaml(config_path, "training config")
    samples = list(read_dataset(args.train))
    configs = {label: dict(base, data={}, model=dict(base["model"], **overrides)) for label, overrides in sizes.items()}
    params = {}
    for label, cfg in configs.items():
        model = dict(cfg["model"])
        params[label] = create_model(model.pop("name"), seed=0, **model).num_parameters()
    times = {label: [] for label in sizes}
    for _ in range(args.rounds):
        for label, cfg in configs.items():
            times[label].append(seconds_per_step(cfg, samples, args.steps, n_warmup=args.warmup))
    reference = float(np.median(times[first]))
    print(f"{torch.get_num_threads()} thread(s), batch {base['batch_size']}, {args.steps} steps x {args.rounds} rounds")
    print(f"{'size':<46}{'parameters':>12}{'s/step':>9}{'ratio':>8}")
    for label in sizes:
        median = float(np.median(times[label]))
        print(f"{label:<46}{params[label]:>12,}{median:>9.3f}{median / reference:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
