"""The epochs of a training run that fit a wall-clock budget, from steps timed on its own data.

A cosine schedule runs over ``epochs``; a run stopped by ``max_minutes`` before then has not decayed its
rate. :func:`calibrate` times what an epoch costs, so that ``epochs`` can be set to what fits:

>>> calibration = calibrate(config, train_samples, valid_samples, minutes=60)  # doctest: +SKIP
>>> config.epochs = calibration.epochs                                          # doctest: +SKIP
"""

import math
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from mlip.checkpoint import load_potential
from mlip.training.config import TrainConfig
from mlip.training.evaluation import evaluate
from mlip.training.reference_energies import is_isolated_atom
from mlip.training.samples import atoms_of, without_config_types
from mlip.training.trainer import train


@dataclass
class Calibration:
    """What one epoch of a run costs (seconds), and the epochs that fit the budget."""

    seconds_per_step: float
    seconds_of_validation: float
    seconds_per_epoch: float
    epochs: int


def calibrate(config: TrainConfig, train_samples: Sequence, valid_samples: Sequence, minutes: float,
              calibration_steps: int = 40) -> Calibration:
    """The epochs of ``config`` that fit in ``minutes`` (at least 1), from its training steps and
    validation batches timed on the data, on ``config.device``.

    Training steps: one epoch each on random subsets of n and 3n steps (n = ``calibration_steps // 4``;
    a file's order is often by composition or kind, whose sizes differ), in scratch folders that are
    removed; the difference of the two times leaves out the first steps' start-up costs. The subsets
    leave out ``data.exclude_config_types`` as the run does. With ``reference_energies: isolated_atoms``
    every subset holds the isolated-atom structures (of both sets), since their energies are evaluated
    in every training step; another reference is fitted by least squares (a subset may lack what it
    needs). Validation: up to n batches of a seeded random subset in ``config.eval_dtype``, as the
    trainer validates, after one untimed batch.
    """
    n = max(1, calibration_steps // 4)
    kept = without_config_types(train_samples, config.data.exclude_config_types)
    shuffled = [kept[i] for i in np.random.default_rng(config.seed).permutation(len(kept))]
    valid = without_config_types(valid_samples, config.data.exclude_config_types)
    isolated = []
    if config.reference_energies == "isolated_atoms":
        cutoff = float(config.model["cutoff"])
        isolated = [s for s in list(train_samples) + list(valid_samples) if is_isolated_atom(atoms_of(s), cutoff)]
    seconds, counts, per_valid_batch = [], [], 0.0
    for n_steps in (n, 3 * n):
        subset = shuffled[:min(len(kept), n_steps * config.batch_size)]
        subset = subset + [s for s in isolated if not any(s is t for t in subset)]
        counts.append(math.ceil(len(subset) / config.batch_size))
        scratch = Path(tempfile.mkdtemp(prefix="calibrate-"))
        try:
            settings = config.to_dict()
            settings["data"]["exclude_config_types"] = []  # the subset has none; the run keeps the key
            if not isolated:
                settings["reference_energies"] = "least_squares"
            probe = TrainConfig.from_dict({**settings, "epochs": 1, "max_minutes": None,
                                           "out_dir": str(scratch / "run")}, where="calibration")
            result = train(probe, train_samples=subset, valid_samples=[], progress=False)
            seconds.append(60 * result.history[0]["minutes"])
            if n_steps == n and valid:
                per_valid_batch = seconds_per_validation_batch(load_potential(result.best), valid, n, config)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    if counts[1] > counts[0] and seconds[1] > seconds[0]:
        per_step = (seconds[1] - seconds[0]) / (counts[1] - counts[0])
    else:  # a training set too small for two slices: the start-up costs stay in
        per_step = seconds[1] / counts[1]
    validation = per_valid_batch * math.ceil(len(valid) / config.batch_size)
    per_epoch = per_step * math.ceil(len(kept) / config.batch_size) + validation
    return Calibration(per_step, validation, per_epoch, max(1, int(minutes * 60 // per_epoch)))


def seconds_per_validation_batch(potential, valid_samples: Sequence, n_batches: int, config: TrainConfig) -> float:
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
