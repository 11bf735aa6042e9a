"""Train a recipe in a fixed wall-clock budget, with the learning-rate schedule fitted to that budget.

``mlip train`` stops at ``max_minutes`` after the epoch that crosses it, but its cosine schedule runs
over ``epochs``: when the budget ends first, the rate has not decayed. This script times a few training
steps first (on a slice of the training set, in a scratch folder) and a few validation batches (in the
config's ``eval_dtype``, as the trainer validates; :mod:`mlip.training.budget`), sets ``epochs`` to what
fits in the budget, then trains with ``max_minutes`` as a guard. Used for the GPU recipes, where a device is lent for
minutes (examples/recipes/equiformer_v3-chgnet/README.md):

    python examples/recipes/train_on_budget.py examples/recipes/equiformer_v3-chgnet/train.yaml \\
        --minutes 6 --data-dir data --out-dir equiformer_v3-chgnet

A killed run continues with the same command and ``--resume``: no new calibration, the epochs that the run
saved in its ``config.json``, and the minutes it has used count against the budget.
"""

import argparse
import math
import sys
import time
from pathlib import Path

from mlip.data import read_dataset
from mlip.training import TrainConfig, train
from mlip.training.budget import calibrate


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", help="a mlip train YAML config")
    parser.add_argument("--minutes", type=float, required=True, help="wall-clock budget of the training")
    parser.add_argument("--data-dir", default=".", help="folder of the config's data files (or their .gz)")
    parser.add_argument("--out-dir", help="override the config's out_dir")
    parser.add_argument("--calibration-steps", type=int, default=40,
                        help="training steps timed first (in two runs of a quarter and three quarters)")
    parser.add_argument("--device", help="override the config's device")
    parser.add_argument("--resume", action="store_true",
                        help="continue the killed run in the out_dir (the same command otherwise)")
    args = parser.parse_args(argv)

    config = TrainConfig.from_yaml(args.config)
    if args.out_dir:
        config.out_dir = args.out_dir
    if args.device:
        config.device = args.device
    if args.resume:
        saved = Path(config.out_dir) / "config.json"
        if not (saved.is_file() and (Path(config.out_dir) / "train_state.safetensors").is_file()):
            parser.error(f"nothing to resume in {config.out_dir} "
                         "(it needs the run's config.json and train_state.safetensors)")
        # the calibrated epochs and budget; train() refuses any other difference from the saved run
        calibrated = TrainConfig.from_yaml(saved)
        if calibrated.max_minutes is None or not math.isclose(calibrated.max_minutes, args.minutes * 1.05):
            parser.error(f"the run in {config.out_dir} was not fitted to {args.minutes:g} min "
                         f"(its max_minutes: {calibrated.max_minutes})")
        config.epochs, config.max_minutes = calibrated.epochs, calibrated.max_minutes

    if not config.data.train or not config.data.valid:
        parser.error("the config needs data.train and data.valid (files in --data-dir)")

    def load(name):
        path = Path(args.data_dir) / name
        if not path.is_file() and Path(str(path) + ".gz").is_file():
            path = Path(str(path) + ".gz")
        if not path.is_file():
            parser.error(f"no data file {path} (nor {path}.gz)")
        return read_dataset(path, energy_key=config.data.energy_key, forces_key=config.data.forces_key,
                            stress_key=config.data.stress_key)

    t0 = time.perf_counter()
    train_samples = load(config.data.train)
    valid_samples = load(config.data.valid)
    print(f"read {len(train_samples)} training and {len(valid_samples)} validation structures in "
          f"{time.perf_counter() - t0:.0f} s", flush=True)

    if args.resume:
        print(f"resuming {config.out_dir}: {config.epochs} epochs in {args.minutes:g} min", flush=True)
    else:
        fit_epochs(config, train_samples, valid_samples, args.minutes, args.calibration_steps)
    result = train(config, train_samples=train_samples, valid_samples=valid_samples, resume=args.resume,
                   progress=False)
    print(f"trained {result.epochs_run} epochs; best: {result.best}", flush=True)
    return 0


def fit_epochs(config: TrainConfig, train_samples, valid_samples, minutes: float,
               calibration_steps: int) -> None:
    """Set ``config.epochs`` to those that fit in ``minutes`` (``max_minutes`` to 1.05 times it, a guard),
    from training steps and validation batches timed on the data (:func:`mlip.training.budget.calibrate`)."""
    calibration = calibrate(config, train_samples, valid_samples, minutes, calibration_steps)
    config.epochs = calibration.epochs
    config.max_minutes = minutes * 1.05
    print(f"calibration: {calibration.seconds_per_step * 1e3:.0f} ms per step, "
          f"{calibration.seconds_per_epoch:.1f} s per epoch ({calibration.seconds_of_validation:.3g} s of "
          f"validation): {config.epochs} epochs in {minutes:g} min", flush=True)


if __name__ == "__main__":
    sys.exit(main())
