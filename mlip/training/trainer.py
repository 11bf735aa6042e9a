"""Training a potential: :func:`train` runs the stages of a run, each in its module of
:mod:`mlip.training`:

1. the output folder, refused if it holds another run, or checked against the run it resumes
   (:mod:`~mlip.training.run_dir`), on one process or several under torchrun
   (:mod:`~mlip.training.distributed`);
2. the training and validation structures (:mod:`~mlip.training.datasets`);
3. the model with its starting weights, reference energies and output scale
   (:mod:`~mlip.training.initial_model`);
4. AdamW and the EMA of the weights (:mod:`~mlip.training.optim`);
5. a resume's weights, optimiser moments and progress (:mod:`~mlip.training.train_state`);
6. the epochs: training steps on the loss (:mod:`~mlip.training.loss`), validation every epoch,
   best and last checkpoints written atomically (:mod:`~mlip.training.loop`).

A killed run resumed with ``resume=True`` continues after the last finished epoch (the shuffling of
epoch k depends only on the seed and k), so at most the epoch in progress is lost. The elapsed time
(``max_minutes``, the ``minutes`` metric) continues too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from mlip.training.config import TrainConfig
from mlip.training.datasets import training_sets
from mlip.training.distributed import Distributed
from mlip.training.initial_model import build_potential
from mlip.training.loop import run_epochs
from mlip.training.optim import make_optimizer
from mlip.training.provenance import training_provenance
from mlip.training.run_dir import prepare_out_dir, remove_failed_start
from mlip.training.train_state import start_or_resume


@dataclass
class TrainResult:
    """Outcome of :func:`train`: paths of the checkpoints and the per-epoch history."""

    best: Path
    last: Path
    history: List[dict]
    epochs_run: int
    resumed_from: Optional[int] = None
    #: why the run ended before ``epochs`` (the ``wsd`` schedule's plateau and decay), else None
    finished: Optional[str] = None


def train(config: TrainConfig, train_samples: Optional[Sequence] = None, valid_samples: Optional[Sequence] = None,
          resume: bool = False, progress: bool = True, overwrite: bool = False,
          session_minutes: Optional[float] = None) -> TrainResult:
    """Train the model described by ``config`` and write checkpoints to ``config.out_dir``.

    ``train_samples``/``valid_samples`` (labelled ASE Atoms) override ``config.data``. With
    ``resume``, continue from ``out_dir/train_state.safetensors`` (ValueError if absent, or if the
    config differs from the run's in a key not in :data:`~mlip.training.run_dir.RESUMABLE_CHANGES`). Without it, an
    ``out_dir`` holding an earlier run is refused unless ``overwrite`` (which deletes that run's
    files first). One line per epoch is printed; ``progress`` adds a progress bar over its batches.
    ``session_minutes`` ends this call before an epoch that would end after that many minutes (the
    state is saved after every epoch: the run continues with ``resume``).
    A new run that fails before finishing an epoch removes the ``out_dir`` it created.
    """
    config.validate()
    dist = Distributed.from_environment(config.device)
    out_dir = Path(config.out_dir)
    created, changes = prepare_out_dir(config, out_dir, resume, overwrite, dist.is_main)
    dist.barrier()
    try:
        return _train(config, dist, out_dir, train_samples, valid_samples, resume, progress, changes,
                      session_minutes)
    except BaseException:
        if dist.is_main and not resume:
            remove_failed_start(out_dir, created)
        raise


def _train(config: TrainConfig, dist: Distributed, out_dir: Path, train_samples, valid_samples,
           resume: bool, progress: bool, changes: Dict[str, list],
           session_minutes: Optional[float] = None) -> TrainResult:
    """The run itself (see :func:`train`): data, model, optimiser, resumed state, then the epochs."""
    progress = progress and dist.is_main
    train_samples, valid_samples = training_sets(config, train_samples, valid_samples, report=dist.is_main)
    potential, scale, scale_kind = build_potential(config, dist, train_samples, valid_samples)
    optimizer, ema = make_optimizer(config, potential)
    run = start_or_resume(config, dist, out_dir, resume, changes, potential, optimizer, ema,
                          len(train_samples), len(valid_samples))
    # the config with its paths reduced to file names, and the files read by name, size and hash: a
    # checkpoint tells nothing of the machine that trained it (mlip.training.provenance)
    portable, files = training_provenance(config.to_dict()) if dist.is_main else ({}, {})
    metadata = {
        "trained": True,
        "training": {"config": portable, "files": files, "n_train": len(train_samples),
                     "n_valid": len(valid_samples), "output_scale": scale, "output_scale_from": scale_kind},
    }
    run_epochs(config, dist, out_dir, potential, optimizer, ema, train_samples, valid_samples, run, scale,
               metadata, resume, progress, session_minutes)
    dist.close()
    return TrainResult(best=out_dir / "best.safetensors", last=out_dir / "last.safetensors",
                       history=run.history, epochs_run=len(run.history), resumed_from=run.resumed_from,
                       finished=run.finished)
