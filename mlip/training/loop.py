"""The epochs of a run: one pass over the shuffled training set (AdamW steps with the learning rate of
the schedule, gradient clipping, EMA update), then validation with the EMA weights and the checkpoints,
every epoch; the run stops at ``epochs``, after ``max_minutes``, when a session's minutes are used, or
(``wsd`` schedule) after the decay that follows the plateau (:mod:`mlip.training.plateau`).
"""

from __future__ import annotations

import math
import time
import warnings
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from mlip.checkpoint import save_potential
from mlip.io import jsonable, write_json
from mlip.calculators.compiled_network import CompileFallbackWarning
from mlip.training.augmentation import rotate_batch
from mlip.training.compiled_step import CompiledStep
from mlip.training.config import TrainConfig
from mlip.training.distributed import Distributed
from mlip.training.evaluation import evaluate
from mlip.training.loss import combine_loss, loss_sums, loss_terms
from mlip.training.run_dir import STATE_NAME
from mlip.training.samples import atoms_of, batch_targets
from mlip.training.schedule import warmup_cosine, warmup_stable_decay
from mlip.training.train_state import RunState, save_state


def _warmup_steps(config: TrainConfig, steps_per_epoch: int) -> int:
    """The warm-up in optimiser steps: ``warmup_fraction`` of the run (``cosine``) or ``warmup_epochs``
    epochs (``wsd``, whose length is not known)."""
    oc = config.optimizer
    if oc.schedule == "wsd":
        return int(round(oc.warmup_epochs * steps_per_epoch))
    return int(round(oc.warmup_fraction * steps_per_epoch * config.epochs))


def _lr_factor(config: TrainConfig, run: RunState, steps_per_epoch: int) -> float:
    """The schedule's factor on ``optimizer.lr`` at optimiser step ``run.step``."""
    oc = config.optimizer
    warmup = _warmup_steps(config, steps_per_epoch)
    if oc.schedule == "wsd":
        plateau = run.plateau
        return warmup_stable_decay(run.step, warmup, plateau.decay_start, plateau.decay_steps,
                                   oc.min_lr_factor)
    return warmup_cosine(run.step, steps_per_epoch * config.epochs, warmup, oc.min_lr_factor)


def _watch_plateau(config: TrainConfig, run: RunState, record: dict, epoch: int,
                   steps_per_epoch: int) -> bool:
    """``wsd`` schedule, main process: add the epoch's monitored loss (validation, else training) to the
    plateau rule and its smoothed value, improvement and phase to ``record``; returns whether the rule
    fired now (the decay then starts with the next step; :meth:`PlateauState.fire`)."""
    pc, plateau = config.plateau, run.plateau
    monitored = record.get("valid_loss", record["train_loss"])
    improvement = plateau.observe(monitored, pc.smoothing, pc.window)
    warmup = _warmup_steps(config, steps_per_epoch)
    fired = (plateau.decay_start is None and run.step >= warmup and improvement is not None
             and improvement < pc.min_improvement)
    if fired:
        decay_epochs = plateau.fire(epoch + 1, run.step, steps_per_epoch, config.optimizer.decay_fraction)
        print(f"plateau after epoch {epoch + 1}: the smoothed loss fell {100 * improvement:.3g} % over the "
              f"last {pc.window} epochs (< {100 * pc.min_improvement:g} %); the rate decays over {decay_epochs} "
              f"more epoch(s), then the run ends", flush=True)
    record.update(plateau_smoothed_loss=plateau.smoothed[-1], plateau_improvement=improvement,
                  phase=plateau.phase(run.step, warmup))
    return fired


def _train_epoch(config: TrainConfig, dist: Distributed, potential, optimizer, ema, train_samples: list,
                 epoch: int, run: RunState, scale: float, progress: bool,
                 compiled: Optional[CompiledStep] = None) -> float:
    """One pass over the shuffled training set (``run.step`` advances per batch); returns the mean
    training loss over this process's batches. ``compiled``: the compiled step that gives each batch's
    loss and gradients while it works (``compile: true``), else the eager step does."""
    import mlip

    oc = config.optimizer
    dtype = getattr(torch, config.dtype)
    device = dist.device
    steps_per_epoch = math.ceil(len(train_samples) / config.batch_size)
    # A zero weight skips that derivative: an energy-only step (no forces, no stress) needs no
    # double backward and costs about a third of a full one.
    want_forces = config.loss.forces_weight > 0
    want_stress = config.loss.stress_weight > 0
    potential.train()
    order = np.random.default_rng([config.seed, epoch]).permutation(len(train_samples))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps_per_epoch, desc=f"epoch {epoch + 1}/{config.epochs}", unit="batch",
                   dynamic_ncols=True, leave=False)
    running, n_batches = 0.0, 0
    for b in range(steps_per_epoch):
        batch = order[b * config.batch_size:(b + 1) * config.batch_size]
        # Each process takes every world_size-th structure of the global batch; the losses are
        # sums divided by global counts and the gradients are summed, so the update equals
        # that of one process on the whole batch.
        chunk = [train_samples[i] for i in batch[dist.rank::dist.world_size]]
        if config.augment_rotations:  # the same rotations whatever the number of processes
            rotations = rotate_batch([train_samples[i] for i in batch],
                                     np.random.default_rng([config.seed, epoch, b, 1]))
            chunk = rotations[dist.rank::dist.world_size]
        optimizer.zero_grad(set_to_none=True)
        if chunk:
            graph = mlip.batch_atoms([atoms_of(s) for s in chunk], potential.cutoff, dtype=dtype,
                                     device=device)
            target = batch_targets(chunk, dtype, device)
        # the compiled step (one process only: no counts to sum) sets the gradients itself
        loss = compiled(graph, target) if compiled is not None and chunk else None
        if loss is None:
            if chunk:
                out = potential(graph, compute_forces=want_forces, compute_stress=want_stress,
                                create_graph=want_forces or want_stress)
                terms = loss_sums(out, target, scale, config)
            else:
                terms = {}
            counts = dist.sum_counts({k: float(n) for k, (_, n) in terms.items()},
                                     ("energy", "forces", "stress"))
            loss, _ = combine_loss(terms, counts, config)
            if isinstance(loss, torch.Tensor) and loss.requires_grad:
                loss.backward()
            dist.sum_gradients(potential)
        loss_value = dist.sum_scalar(float(loss.detach()) if isinstance(loss, torch.Tensor) else 0.0)
        if not math.isfinite(loss_value):
            raise RuntimeError(f"non-finite loss at epoch {epoch + 1}, batch {b + 1}")
        for group in optimizer.param_groups:
            group["lr"] = oc.lr * _lr_factor(config, run, steps_per_epoch)
        torch.nn.utils.clip_grad_norm_(potential.parameters(), oc.clip_norm)
        optimizer.step()
        ema.update(potential)
        run.step += 1
        running += loss_value
        n_batches += 1
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{running / n_batches:.4g}", refresh=False)
    if bar is not None:
        bar.close()
    return running / max(n_batches, 1)


def _validate_and_save(config: TrainConfig, potential, ema, valid_samples: list, device, out_dir: Path,
                       epoch: int, run: RunState, train_loss: float, optimizer, scale: float, metadata: dict,
                       t_start: float, steps: Optional[dict] = None) -> dict:
    """With the EMA weights: the validation metrics and loss (in ``eval_dtype``), then the last
    checkpoint and, when the validation loss (or without validation data the training loss) is
    the lowest so far, the best one (``run.best_loss`` follows). Returns the epoch's record, with
    ``steps`` (how the training steps ran, :meth:`CompiledStep.epoch_record`) after the training loss."""
    dtype = getattr(torch, config.dtype)
    with ema.swapped(potential):
        record = {"epoch": epoch + 1, "step": run.step, "train_loss": train_loss, **(steps or {}),
                  "lr": optimizer.param_groups[0]["lr"], "minutes": (time.perf_counter() - t_start) / 60}
        if valid_samples:
            # One pass gives the metrics and the loss (in eval_dtype).
            losses = []
            eval_dtype = getattr(torch, config.eval_dtype)

            def batch_loss(out, chunk):
                loss, _ = loss_terms(out, batch_targets(chunk, eval_dtype, device), scale, config)
                losses.append((float(loss), len(chunk)))

            metrics = evaluate(potential, valid_samples, config.batch_size, config.eval_dtype, device,
                               batch_loss)
            potential.to(dtype)
            record.update({f"valid_{k}": v for k, v in metrics.items()})
            valid_loss = sum(v * n for v, n in losses) / max(sum(n for _, n in losses), 1)
            record["valid_loss"] = valid_loss
        else:
            valid_loss = record["train_loss"]
        # a quantity the validation set has no labels for (stress of molecules) has NaN errors: null in JSON
        potential.metadata = dict(metadata, epoch=epoch + 1, metrics=jsonable(record))
        save_potential(potential, out_dir / "last.safetensors")
        if valid_loss < run.best_loss:
            run.best_loss = valid_loss
            save_potential(potential, out_dir / "best.safetensors")
    return record


def _compiled_step(config: TrainConfig, dist: Distributed, potential, scale: float) -> Optional[CompiledStep]:
    """The compiled training step when ``config.compile`` asks for it and one process trains; prints
    (main process) which step runs."""
    if not config.compile:
        return None
    if dist.world_size > 1:
        if dist.is_main:
            warnings.warn(f"compile: true is not supported with {dist.world_size} processes (the loss "
                          "divides by counts summed over them); the training steps run eagerly",
                          CompileFallbackWarning, stacklevel=2)
        return None
    print("training steps compiled with torch.compile: the first batch, and any of sizes not met before, "
          "compile first (minutes)", flush=True)
    return CompiledStep(potential, config, scale)


def _print_epoch(record: dict, epoch: int, epochs: int) -> None:
    """One line per epoch, with or without the progress bar: logs of batch jobs show progress."""
    shown = {k: v for k, v in record.items() if k.startswith("valid_") and "mae" in k}
    valid_text = f" valid {record['valid_loss']:.4g}" if "valid_loss" in record else ""
    print(f"epoch {epoch + 1}/{epochs}: loss {record['train_loss']:.4g}{valid_text} "
          + "".join(f"{k[6:]}={v:.3g} " for k, v in shown.items())
          + f"({record['minutes']:.2f} min)", flush=True)


def run_epochs(config: TrainConfig, dist: Distributed, out_dir: Path, potential, optimizer, ema,
               train_samples: list, valid_samples: list, run: RunState, scale: float, metadata: dict,
               resume: bool, progress: bool, session_minutes: Optional[float] = None) -> None:
    """The epochs from ``run.start_epoch`` to ``config.epochs``. After each, the main process
    validates with the EMA weights, writes the checkpoints, ``metrics.json`` and the train state
    (``run.history`` gains the epoch's record) and prints one line; every process stops after the
    epoch that exceeds ``max_minutes``, counting the minutes spent before a resume, before an epoch
    that would end after ``session_minutes`` of this call (as long as the longest epoch of this
    call), and with the ``wsd`` schedule after the decay that follows the plateau (``run.finished``)."""
    # Elapsed minutes (metric and max_minutes budget) continue those of the run before a resume.
    t_start = time.perf_counter() - 60 * run.minutes_before
    t_session, longest = time.perf_counter(), 0.0
    steps_per_epoch = math.ceil(len(train_samples) / config.batch_size)
    wsd = config.optimizer.schedule == "wsd"
    if run.finished and run.start_epoch < config.epochs:
        if dist.is_main:
            print(f"the run ended after epoch {run.start_epoch} ({run.finished}): no epoch run", flush=True)
        run.start_epoch = config.epochs
    spent = resume and config.max_minutes is not None and run.minutes_before > config.max_minutes
    if spent and run.start_epoch < config.epochs:
        if dist.is_main:
            print(f"the run has used {run.minutes_before:.3g} of its max_minutes {config.max_minutes:g}: "
                  "no epoch run; raise max_minutes to continue", flush=True)
        run.start_epoch = config.epochs  # nothing to run
    compiled = _compiled_step(config, dist, potential, scale) if run.start_epoch < config.epochs else None
    for epoch in range(run.start_epoch, config.epochs):
        t_epoch = time.perf_counter()
        train_loss = _train_epoch(config, dist, potential, optimizer, ema, train_samples, epoch, run, scale,
                                  progress, compiled)
        potential.eval()
        if not dist.is_main:
            dist.barrier()
            if wsd and dist.broadcast_flag(False):  # the plateau fired: the same decay on every process
                run.plateau.fire(epoch + 1, run.step, steps_per_epoch, config.optimizer.decay_fraction)
            if dist.broadcast_flag(False):
                break
            continue
        record = _validate_and_save(config, potential, ema, valid_samples, dist.device, out_dir, epoch, run,
                                    train_loss, optimizer, scale, metadata, t_start,
                                    compiled.epoch_record() if compiled is not None else {})
        fired = wsd and _watch_plateau(config, run, record, epoch, steps_per_epoch)
        if run.plateau.end_epoch is not None and epoch + 1 >= run.plateau.end_epoch:
            run.finished = f"plateau at epoch {run.plateau.fired_at_epoch}, decay done"
            record["stopped"] = run.finished
        run.history.append(record)
        write_json(out_dir / "metrics.json", run.history)
        save_state(out_dir / STATE_NAME, potential, optimizer, ema,
                   {"epoch": epoch + 1, "step": run.step, "best_loss": run.best_loss, "history": run.history,
                    "minutes": record["minutes"], "n_train": len(train_samples),
                    "n_valid": len(valid_samples), "plateau": run.plateau.to_dict(),
                    "finished": run.finished})
        _print_epoch(record, epoch, config.epochs)
        dist.barrier()
        if wsd:
            dist.broadcast_flag(fired)
        now = time.perf_counter()
        longest = max(longest, now - t_epoch)
        stop = config.max_minutes is not None and (now - t_start) / 60 > config.max_minutes
        session_over = session_minutes is not None and now - t_session + longest > 60 * session_minutes
        if session_over and not run.finished and epoch + 1 < config.epochs:
            print(f"session of {session_minutes:g} min used after epoch {epoch + 1}: the state is saved in "
                  f"{out_dir}; the same command continues the run", flush=True)
        if dist.broadcast_flag(stop or session_over or bool(run.finished)):
            break
