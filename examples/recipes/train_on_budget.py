"""Train a recipe in a fixed wall-clock budget, with the learning-rate schedule fitted to that budget.

``mlip train`` stops at ``max_minutes`` after the epoch that crosses it, but its cosine schedule runs
over ``epochs``: when the budget ends first, the rate has not decayed. This script times a few training
steps first (on a slice of the training set, in a scratch folder) and a few validation batches (in the
config's ``eval_dtype``, as the trainer validates), sets ``epochs`` to what fits in the budget, then
trains with ``max_minutes`` as a guard. Used for the GPU recipes, where a device is lent for
minutes (examples/recipes/equiformer_v3-chgnet/README.md):

    python examples/recipes/train_on_budget.py examples/recipes/equiformer_v3-chgnet/train.yaml \\
        --minutes 6 --data-dir data --out-dir equiformer_v3-chgnet

A killed run continues with the same command and ``--resume``: no new calibration, the epochs that the run
saved in its ``config.json``, and the minutes it has used count against the budget.
"""

import argparse
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from mlip.checkpoint import load_potential
from mlip.data import read_dataset
from mlip.training import TrainConfig, train
from mlip.training.evaluation import evaluate
from mlip.training.samples import without_config_types


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
    from training steps timed on the data."""
    # Calibration: the same batches and model on random subsets of n and 3n steps (a file's order is
    # often by composition or kind, whose sizes differ), one epoch each, in a scratch folder; the
    # difference of their times leaves out the first steps' start-up costs.
    n = max(1, calibration_steps // 4)
    # the frames training will see: without data.exclude_config_types (the calibration config drops the
    # key, so that a subset without those kinds is no error; the run itself keeps it and says how many)
    kept = without_config_types(train_samples, config.data.exclude_config_types)
    shuffled = [kept[i] for i in np.random.default_rng(config.seed).permutation(len(kept))]
    valid = without_config_types(valid_samples, config.data.exclude_config_types)
    seconds, counts = [], []
    for n_steps in (n, 3 * n):
        n_cal = min(len(kept), n_steps * config.batch_size)
        counts.append(math.ceil(n_cal / config.batch_size))
        scratch = Path(tempfile.mkdtemp(prefix="calibrate-"))
        settings = config.to_dict()
        settings["data"]["exclude_config_types"] = []
        settings["reference_energies"] = "least_squares"  # a random subset may lack the isolated atoms
        calibration = TrainConfig.from_dict({**settings, "epochs": 1, "max_minutes": None,
                                             "out_dir": str(scratch / "run")}, where="calibration")
        result = train(calibration, train_samples=shuffled[:n_cal], valid_samples=[], progress=False)
        seconds.append(60 * result.history[0]["minutes"])
        if n_steps == n and valid:
            per_valid_batch = seconds_per_validation_batch(load_potential(result.best), valid, n, config)
        shutil.rmtree(scratch, ignore_errors=True)
    if counts[1] > counts[0] and seconds[1] > seconds[0]:
        per_step = (seconds[1] - seconds[0]) / (counts[1] - counts[0])
    else:  # a training set too small for two slices: the start-up costs stay in
        per_step = seconds[1] / counts[1]
    steps = math.ceil(len(kept) / config.batch_size)
    validation = per_valid_batch * math.ceil(len(valid) / config.batch_size) if valid else 0.0
    per_epoch = per_step * steps + validation
    config.epochs = max(1, int(minutes * 60 // per_epoch))
    config.max_minutes = minutes * 1.05
    print(f"calibration: {per_step * 1e3:.0f} ms per step, {per_epoch:.1f} s per epoch "
          f"({validation:.3g} s of validation): {config.epochs} epochs in {minutes:g} min", flush=True)


def seconds_per_validation_batch(potential, valid_samples, n_batches: int, config: TrainConfig) -> float:
    """Time of one validation batch (energy, forces and stress in ``config.eval_dtype``, as the trainer
    validates), the mean over up to ``n_batches`` batches of a seeded random subset of ``valid_samples``
    (a file's order is often by kind), after one untimed batch."""
    potential = potential.to(config.device)  # a checkpoint loads on the CPU
    order = np.random.default_rng(config.seed).permutation(len(valid_samples))
    subset = [valid_samples[i] for i in order[:n_batches * config.batch_size]]
    evaluate(potential, subset[:config.batch_size], config.batch_size, config.eval_dtype, config.device)
    t0 = time.perf_counter()
    evaluate(potential, subset, config.batch_size, config.eval_dtype, config.device)
    return (time.perf_counter() - t0) / math.ceil(len(subset) / config.batch_size)


if __name__ == "__main__":
    sys.exit(main())
