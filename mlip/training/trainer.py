"""The training loop: energies, forces and stresses; AdamW, warm-up + cosine, clipping, EMA;
validation every epoch; best and last checkpoints written atomically; resumable.

Files in ``out_dir``:

* ``best.safetensors``: the EMA weights with the lowest validation loss (a normal checkpoint);
* ``last.safetensors``: the EMA weights after the last finished epoch;
* ``train_state.safetensors``: raw weights, optimiser moments and EMA shadow, with the epoch,
  step and best loss in its JSON header, for ``resume`` (never pickled);
* ``metrics.json``: one entry per epoch (losses, validation MAE/RMSE, learning rate, time);
* ``config.json``: the run's :class:`TrainConfig` (JSON, which is also YAML: ``mlip train`` reads it);
* ``config_changes.json``: the config changes each resume accepted (see :data:`RESUMABLE_CHANGES`).

A killed run resumed with ``resume=True`` continues after the last finished epoch (the shuffling of
epoch k depends only on the seed and k), so at most the epoch in progress is lost. The elapsed time
(``max_minutes``, the ``minutes`` metric) continues too. A new run refuses an ``out_dir`` that holds
an earlier run unless told to ``overwrite`` it.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from mlip.checkpoint import save_potential
from mlip.data.splits import train_valid_split
from mlip.io import atomic_write, jsonable, read_json, write_json
from mlip.training.augmentation import rotate_batch
from mlip.training.config import TrainConfig
from mlip.training.ema import ExponentialMovingAverage
from mlip.training.evaluation import evaluate
from mlip.training.provenance import training_provenance
from mlip.training.reference_energies import fit_reference_energies, isolated_atom_energies, output_scale
from mlip.training.samples import atoms_of, batch_targets, config_type_of, labels_of, without_config_types
from mlip.training.schedule import warmup_cosine

STATE_NAME = "train_state.safetensors"
STATE_KEY = "mlip_train_state"
CONFIG_NAME = "config.json"
CHANGES_NAME = "config_changes.json"
#: the files of a run that a new run would overwrite: their presence makes ``out_dir`` taken
RUN_FILES = ("best.safetensors", "last.safetensors", STATE_NAME, "metrics.json")

#: the config keys a resumed run may change; any other change alters the optimisation (the data and
#: its split, the model, the loss, the batch size and shuffling, the optimiser, the dtypes, the
#: starting weights) and is refused, since "best" would then compare different losses.
RESUMABLE_CHANGES = (
    "epochs",       # train longer or shorter; the cosine schedule is recomputed for the new total
    "max_minutes",  # the time budget (the elapsed minutes carry over from the earlier run)
    "out_dir",      # where the run lives (mlip train --out-dir; a moved folder)
    "device",       # where it runs: the same optimisation on another machine
)


@dataclass
class TrainResult:
    """Outcome of :func:`train`: paths of the checkpoints and the per-epoch history."""

    best: Path
    last: Path
    history: List[dict]
    epochs_run: int
    resumed_from: Optional[int] = None


# ----------------------------------------------------------------------------------- batches
def _error_sum(diff: torch.Tensor, kind: str, delta: float) -> torch.Tensor:
    if diff.numel() == 0:
        return diff.new_zeros(())
    if kind == "mse":
        return (diff * diff).sum()
    if kind == "mae":
        return diff.abs().sum()
    return torch.nn.functional.huber_loss(diff, torch.zeros_like(diff), delta=delta, reduction="sum")


def loss_sums(out: Dict[str, torch.Tensor], target: Dict[str, torch.Tensor], scale: float, config: TrainConfig):
    """Summed errors and their counts per term: ``{term: (sum, count)}``. Every target is divided
    by ``scale`` (eV); stresses are first multiplied by the volume per atom, so all three terms are
    per-atom energies. Sums (not means) let several processes add their parts of a global batch."""
    lc = config.loss
    e = (out["energy"] - target["energy"]) / target["n_atoms"] / scale
    terms = {"energy": (_error_sum(e, lc.kind, lc.huber_delta), e.numel())}
    if "forces" in target and "forces" in out and lc.forces_weight:
        d = (out["forces"] - target["forces"]) / scale
        terms["forces"] = (_error_sum(d, lc.kind, lc.huber_delta), d.numel())
    if "stress" in out and lc.stress_weight:
        mask = torch.isfinite(target["stress"]).all(dim=1) & torch.isfinite(target["volume_per_atom"])
        ds = (out["stress"][mask] - target["stress"][mask]) * target["volume_per_atom"][mask, None] / scale
        terms["stress"] = (_error_sum(ds, lc.kind, lc.huber_delta), ds.numel())
    return terms


def combine_loss(terms, counts: Dict[str, float], config: TrainConfig):
    """Σ_term weight · sum / count (counts may be global over processes). Returns (loss, parts)."""
    lc = config.loss
    weights = {"energy": lc.energy_weight, "forces": lc.forces_weight, "stress": lc.stress_weight}
    parts = {k: terms[k][0] / counts[k] for k in terms if counts.get(k, 0) > 0}
    total = sum(weights[k] * v for k, v in parts.items())
    if not isinstance(total, torch.Tensor):
        total = torch.zeros(())
    return total, parts


def loss_terms(out: Dict[str, torch.Tensor], target: Dict[str, torch.Tensor], scale: float, config: TrainConfig):
    """Weighted mean loss of one batch and its parts (see :func:`loss_sums`)."""
    terms = loss_sums(out, target, scale, config)
    return combine_loss(terms, {k: float(n) for k, (_, n) in terms.items()}, config)


# ----------------------------------------------------------------------------------- state
def _save_state(path: Path, potential, optimizer, ema, meta: dict) -> None:
    from safetensors.torch import save_file

    tensors = {f"model.{k}": v.detach().cpu().contiguous().clone() for k, v in potential.state_dict().items()}
    tensors.update({f"ema.{k}": v.detach().cpu().contiguous().clone() for k, v in ema.shadow.items()})
    opt = optimizer.state_dict()
    for index, state in opt["state"].items():
        for key, value in state.items():
            tensors[f"opt.{index}.{key}"] = torch.as_tensor(value).detach().cpu().contiguous().clone()
    header = dict(meta, param_groups=opt["param_groups"])
    text = json.dumps(header)
    atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata={STATE_KEY: text}))


def _load_state(path: Path, potential, optimizer, ema) -> dict:
    from safetensors import safe_open

    from mlip.checkpoint import CheckpointError

    try:
        with safe_open(str(path), framework="pt") as fh:
            header = json.loads((fh.metadata() or {})[STATE_KEY])
            tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    except Exception as err:  # corrupt, truncated or foreign file
        raise CheckpointError(f"cannot resume from {str(path)!r}: {err}") from None
    model_state = {k[6:]: v for k, v in tensors.items() if k.startswith("model.")}
    try:
        potential.load_state_dict(model_state)
    except RuntimeError as err:
        raise CheckpointError(f"{str(path)!r} was written for another model: {err}") from None
    for name in ema.shadow:
        ema.shadow[name] = tensors[f"ema.{name}"].to(ema.shadow[name])
    state: Dict[int, dict] = {}
    for key, value in tensors.items():
        if key.startswith("opt."):
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = value
    optimizer.load_state_dict({"state": state, "param_groups": header["param_groups"]})
    return header


# ----------------------------------------------------------------------------------- data
def _read(path: str, config: TrainConfig) -> list:
    keys = {k: getattr(config.data, k) for k in ("energy_key", "forces_key", "stress_key") if getattr(config.data, k)}
    from mlip.data import read_dataset  # extxyz, ASE db, MPtrj

    return list(read_dataset(path, **keys))


def _exclude_config_types(names: Sequence[str], train_samples: list, valid_samples: list, report: bool):
    """``(train, valid)`` without the frames whose ``config_type`` is in ``names``
    (``data.exclude_config_types``); prints the counts left out when ``report``. ValueError for a
    name that no frame carries (a misspelt name would otherwise exclude nothing)."""
    names = {str(n) for n in names}
    present = {config_type_of(s) for s in train_samples + valid_samples}
    missing = sorted(names - present)
    if missing:
        listed = ", ".join(map(repr, missing))
        raise ValueError(f"data.exclude_config_types: no frame has config_type {listed} "
                         f"(present: {', '.join(sorted(t for t in present if t)) or 'none'})")
    kept_train = without_config_types(train_samples, names)
    kept_valid = without_config_types(valid_samples, names)
    if report:
        print(f"data: left out {len(train_samples) - len(kept_train)} training and "
              f"{len(valid_samples) - len(kept_valid)} validation frames of config_type "
              f"{', '.join(sorted(names))} (data.exclude_config_types)", flush=True)
    return kept_train, kept_valid


def _refuse_differences(where: str, checks) -> None:
    """ValueError naming the first ``(what, config's model, checkpoint)`` pair whose two values differ."""
    for what, mine, theirs in checks:
        if mine != theirs:
            raise ValueError(f"{where}: its {what} ({theirs}) differs from the config's model ({mine})")


def load_initial_weights(potential, source: str, grow: bool = False) -> None:
    """Copy the weights of checkpoint ``source`` into ``potential`` (``init_from``), refusing a
    checkpoint of another architecture, species, cutoff or hyperparameters.

    With ``grow`` (``init_grow``) the checkpoint may have fewer transformer blocks than
    ``potential``: they fill the first blocks, and each extra block is made the identity (the
    parameters of its ``residual_outputs()`` zeroed), so the grown potential starts with the
    checkpoint's energies.
    """
    from mlip.pretrained import load_potential

    start = load_potential(source)
    mine_hp, theirs_hp = dict(potential.hyperparameters), dict(start.hyperparameters)
    n_mine, n_theirs = mine_hp.get("num_layers"), theirs_hp.get("num_layers")
    if grow:
        if n_mine is None or n_theirs is None:
            raise ValueError(f"init_grow: the {potential.architecture} model has no num_layers to grow")
        if n_theirs > n_mine:
            raise ValueError(f"init_grow from {source!r}: it has {n_theirs} blocks, more than the config's "
                             f"model ({n_mine}); a model can only be grown deeper")
        mine_hp["num_layers"] = theirs_hp["num_layers"]  # the one difference allowed
    _refuse_differences(f"init_from {source!r}", (
        ("architecture", potential.architecture, start.architecture),
        ("species", potential.atomic_numbers.tolist(), start.atomic_numbers.tolist()),
        ("cutoff", float(potential.cutoff), float(start.cutoff)),
        ("hyperparameters", mine_hp, theirs_hp),
        ("terms", potential.term_specs, start.term_specs)))
    # The reference energies travel with the state dict; whether they are isolated-atom energies does not.
    potential.isolated_reference = start.isolated_reference
    with torch.no_grad():
        if not grow or n_mine == n_theirs:
            potential.load_state_dict(start.state_dict())
            return
        missing, unexpected = potential.load_state_dict(start.state_dict(), strict=False)
        new_blocks = tuple(f"model.blocks.{i}." for i in range(n_theirs, n_mine))
        stray = [k for k in missing if not k.startswith(new_blocks)]
        if unexpected or stray:  # the block layout is not what growing assumes
            raise ValueError(f"init_grow from {source!r}: tensors do not line up (unexpected "
                             f"{unexpected[:3]}, missing outside the new blocks {stray[:3]})")
        for block in potential.model.blocks[n_theirs:]:
            for module in block.residual_outputs():
                for p in module.parameters():
                    p.zero_()


def _load_embedded_atom(potential, source: str) -> None:
    """Start ``potential``'s embedded-atom term from checkpoint ``source`` of the ``embedded_atom``
    architecture (``init_embedded_atom_from``): copy the term, output scale, reference energies (and
    whether they are isolated-atom ones), and zero the model's final readout layer."""
    from mlip.pretrained import load_potential

    where = f"init_embedded_atom_from {source!r}"
    term = potential.terms["embedded_atom"] if "embedded_atom" in potential.terms else None
    if term is None:
        raise ValueError(f"{where}: the config's {potential.architecture} model has no embedded-atom term "
                         "(declare terms: {embedded_atom: ...} in model)")
    start = load_potential(source)
    if start.architecture != "embedded_atom":
        raise ValueError(f"{where}: a checkpoint of the embedded_atom architecture is needed, this one is "
                         f"{start.architecture!r}")
    _refuse_differences(where, (("species", potential.atomic_numbers.tolist(), start.atomic_numbers.tolist()),
                                ("cutoff", float(potential.cutoff), float(start.cutoff))))
    # A term trained with other arguments (avg_neighbors or envelope_exponent included, which no tensor
    # shape shows) would compute other energies.
    from mlip.models import default_hyperparameters

    wanted = dict(potential.term_specs["embedded_atom"])
    theirs = {**default_hyperparameters("embedded_atom"), **dict(start.hyperparameters)}  # as the loader built it
    if theirs != wanted:
        raise ValueError(f"{where}: its term's hyperparameters differ from the term declared beside the model "
                         f"({theirs} vs {wanted}); train it with the arguments of the model's "
                         "terms: {embedded_atom: ...}")
    with torch.no_grad():
        term.load_state_dict(start.model.embedded_atom.state_dict())
        potential.scale.copy_(start.scale)
        potential.reference_energies.copy_(start.reference_energies)
        for p in potential.model.final_readout().parameters():
            p.zero_()
    potential.isolated_reference = start.isolated_reference


# ----------------------------------------------------------------------------------- run folder
def _flat_config(data: dict, prefix: str = "") -> dict:
    """``{"loss.forces_weight": 1.0, ...}``: nested mappings flattened to dotted keys."""
    out = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat_config(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _comparable(data: dict) -> dict:
    """A config mapping with today's defaults filled in (where it still parses) and JSON-normalised
    values (tuples as lists), flattened: two runs' configs compare key by key."""
    try:
        data = TrainConfig.from_dict(data).to_dict()
    except (TypeError, ValueError):  # written by another version: compare what is there
        pass
    return _flat_config(json.loads(json.dumps(jsonable(data))))


def _stored_config(out_dir: Path) -> Optional[dict]:
    """The config the run in ``out_dir`` was started with: ``config.json``, or for a run written
    before that file existed, the one in ``last.safetensors``'s header; None if neither is there."""
    stored = read_json(out_dir / CONFIG_NAME)
    if isinstance(stored, dict):
        return stored
    last = out_dir / "last.safetensors"
    if last.is_file():
        from mlip.checkpoint import read_header

        try:
            stored = read_header(last)["metadata"]["training"]["config"]
        except Exception:  # unreadable or foreign: nothing to compare with
            return None
        return stored if isinstance(stored, dict) else None
    return None


def _resume_changes(config: TrainConfig, out_dir: Path) -> Dict[str, list]:
    """``{key: [run's value, config's value]}`` for the keys of :data:`RESUMABLE_CHANGES` that
    differ from the run's stored config; ValueError naming every other key that differs."""
    stored = _stored_config(out_dir)
    if stored is None:
        return {}
    old, new = _comparable(stored), _comparable(config.to_dict())
    missing = "(absent)"
    changed = {k: [old.get(k, missing), new.get(k, missing)] for k in sorted(set(old) | set(new))
               if old.get(k, missing) != new.get(k, missing)}
    refused = {k: v for k, v in changed.items() if k not in RESUMABLE_CHANGES}
    if refused:
        listed = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in refused.items())
        raise ValueError(f"cannot resume {str(out_dir)!r}: the config changes the optimisation of the run "
                         f"({listed}); restore the run's values (saved in {out_dir / CONFIG_NAME}) or "
                         f"start a new run (another out_dir, or --overwrite); only "
                         f"{', '.join(RESUMABLE_CHANGES)} may change")
    return changed


def _new_folders(out_dir: Path) -> List[Path]:
    """The folders that creating ``out_dir`` makes, deepest first (empty if it exists)."""
    folders = []
    path = out_dir.absolute()
    while not path.exists() and path != path.parent:
        folders.append(path)
        path = path.parent
    return folders


def _prepare_out_dir(config: TrainConfig, out_dir: Path, resume: bool, overwrite: bool, is_main: bool):
    """Check that ``out_dir`` suits a new or resumed run, then (main process) create it, clear an
    overwritten run and write a new run's ``config.json``. Returns the folders it created, deepest
    first (for :func:`_remove_failed_start`), and a resume's accepted config changes."""
    if resume and overwrite:
        raise ValueError("resume and overwrite exclude each other (continue the run in out_dir, "
                         "or replace it)")
    changes = {}
    if resume:
        if not (out_dir / STATE_NAME).exists():
            raise ValueError(f"nothing to resume: {out_dir / STATE_NAME} does not exist")
        changes = _resume_changes(config, out_dir)
    else:
        earlier = [name for name in RUN_FILES if (out_dir / name).exists()]
        if earlier and not overwrite:
            raise ValueError(f"out_dir {str(out_dir)!r} already holds a training run ({', '.join(earlier)}); "
                             "continue it with --resume (resume=True), replace it with --overwrite "
                             "(overwrite=True) or choose another out_dir")
    if not is_main or resume:
        return [], changes
    created = _new_folders(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if overwrite:  # nothing of the replaced run may mix with the new one
        for name in RUN_FILES + (CONFIG_NAME, CHANGES_NAME):
            (out_dir / name).unlink(missing_ok=True)
    write_json(out_dir / CONFIG_NAME, config.to_dict())
    return created, changes


def _record_resume(config: TrainConfig, out_dir: Path, changes: Dict[str, list], epoch: int) -> None:
    """Append a resume's accepted ``changes`` (``{key: [old, new]}``, applying from the epoch after
    ``epoch``) to ``config_changes.json`` (``{"resumes": [...]}``) and save the config it runs with
    as ``config.json`` (what the next resume compares with)."""
    if changes:
        log = read_json(out_dir / CHANGES_NAME) or {}
        resumes = log.get("resumes") if isinstance(log.get("resumes"), list) else []
        resumes.append({"after_epoch": epoch, "changes": changes})
        write_json(out_dir / CHANGES_NAME, {"resumes": resumes})
        print(f"resuming {out_dir} with " + ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in changes.items())
              + f" (recorded in {CHANGES_NAME})", flush=True)
    write_json(out_dir / CONFIG_NAME, config.to_dict())


def _remove_failed_start(out_dir: Path, created: List[Path]) -> None:
    """After a new run failed before finishing an epoch: remove its ``config.json`` and the folders
    it created, if nothing else is in them (a folder the user had is kept)."""
    if (out_dir / STATE_NAME).exists():
        return  # an epoch finished: its checkpoints are worth keeping
    (out_dir / CONFIG_NAME).unlink(missing_ok=True)
    for folder in created:
        try:
            folder.rmdir()
        except OSError:  # not empty (or gone): leave it
            return


# ----------------------------------------------------------------------------------- train
def train(config: TrainConfig, train_samples: Optional[Sequence] = None, valid_samples: Optional[Sequence] = None,
          resume: bool = False, progress: bool = True, overwrite: bool = False) -> TrainResult:
    """Train the model described by ``config`` and write checkpoints to ``config.out_dir``.

    ``train_samples``/``valid_samples`` (labelled ASE Atoms) override ``config.data``. With
    ``resume``, continue from ``out_dir/train_state.safetensors`` (ValueError if absent, or if the
    config differs from the run's in a key not in :data:`RESUMABLE_CHANGES`). Without it, an
    ``out_dir`` holding an earlier run is refused unless ``overwrite`` (which deletes that run's
    files first). One line per epoch is printed; ``progress`` adds a progress bar over its batches.
    A new run that fails before finishing an epoch removes the ``out_dir`` it created.
    """
    config.validate()
    dist = _Distributed.from_environment(config.device)
    out_dir = Path(config.out_dir)
    created, changes = _prepare_out_dir(config, out_dir, resume, overwrite, dist.is_main)
    dist.barrier()
    try:
        return _train(config, dist, out_dir, train_samples, valid_samples, resume, progress, changes)
    except BaseException:
        if dist.is_main and not resume:
            _remove_failed_start(out_dir, created)
        raise


def _train(config: TrainConfig, dist: "_Distributed", out_dir: Path, train_samples, valid_samples,
           resume: bool, progress: bool, changes: Dict[str, list]) -> TrainResult:
    """The run itself (see :func:`train`): data, model, optimiser, resumed state, then the epochs."""
    progress = progress and dist.is_main
    if train_samples is None:
        if not config.data.train:
            raise ValueError("no training data: set data.train in the config")
        train_samples = _read(config.data.train, config)
        if valid_samples is None:
            if config.data.valid:
                valid_samples = _read(config.data.valid, config)
            else:
                train_samples, valid_samples = train_valid_split(train_samples, config.data.valid_fraction,
                                                                 config.seed)
    train_samples = list(train_samples)
    valid_samples = list(valid_samples or [])
    if config.data.exclude_config_types:
        train_samples, valid_samples = _exclude_config_types(config.data.exclude_config_types, train_samples,
                                                             valid_samples, dist.is_main)
    if not train_samples:
        raise ValueError("the training set is empty")
    for i, s in enumerate(train_samples):
        labels_of(s, f"training structure {i}")

    potential, scale, scale_kind = _build_potential(config, dist, train_samples, valid_samples)
    optimizer, ema = _make_optimizer(config, potential)
    run = _start_or_resume(config, dist, out_dir, resume, changes, potential, optimizer, ema,
                           len(train_samples), len(valid_samples))
    # the config with its paths reduced to file names, and the files read by name, size and hash: a
    # checkpoint tells nothing of the machine that trained it (mlip.training.provenance)
    portable, files = training_provenance(config.to_dict()) if dist.is_main else ({}, {})
    metadata = {
        "trained": True,
        "training": {"config": portable, "files": files, "n_train": len(train_samples),
                     "n_valid": len(valid_samples), "output_scale": scale, "output_scale_from": scale_kind},
    }

    # Elapsed minutes (metric and max_minutes budget) continue those of the run before a resume.
    t_start = time.perf_counter() - 60 * run.minutes_before
    spent = resume and config.max_minutes is not None and run.minutes_before > config.max_minutes
    if spent and run.start_epoch < config.epochs:
        if dist.is_main:
            print(f"the run has used {run.minutes_before:.3g} of its max_minutes {config.max_minutes:g}: "
                  "no epoch run; raise max_minutes to continue", flush=True)
        run.start_epoch = config.epochs  # nothing to run
    for epoch in range(run.start_epoch, config.epochs):
        train_loss = _train_epoch(config, dist, potential, optimizer, ema, train_samples, epoch, run, scale,
                                  progress)
        potential.eval()
        if not dist.is_main:
            dist.barrier()
            if dist.broadcast_flag(False):
                break
            continue
        record = _validate_and_save(config, potential, ema, valid_samples, dist.device, out_dir, epoch, run,
                                    train_loss, optimizer, scale, metadata, t_start)
        run.history.append(record)
        write_json(out_dir / "metrics.json", run.history)
        _save_state(out_dir / STATE_NAME, potential, optimizer, ema,
                    {"epoch": epoch + 1, "step": run.step, "best_loss": run.best_loss, "history": run.history,
                     "minutes": record["minutes"], "n_train": len(train_samples),
                     "n_valid": len(valid_samples)})
        _print_epoch(record, epoch, config.epochs)
        dist.barrier()
        stop = config.max_minutes is not None and (time.perf_counter() - t_start) / 60 > config.max_minutes
        if dist.broadcast_flag(stop):
            break
    dist.close()
    return TrainResult(best=out_dir / "best.safetensors", last=out_dir / "last.safetensors",
                       history=run.history, epochs_run=len(run.history), resumed_from=run.resumed_from)


def _build_potential(config: TrainConfig, dist: "_Distributed", train_samples: list, valid_samples: list):
    """The model of ``config.model`` with its starting weights (``init_from``,
    ``init_embedded_atom_from`` or the seed), reference energies and output scale, on the run's
    device and dtype, the embedded-atom term frozen on request. Returns (potential, output scale,
    where the scale came from)."""
    from mlip.models import create_model

    model_args = dict(config.model)
    name = model_args.pop("name")
    potential = create_model(name, seed=config.seed, **model_args)
    numbers = potential.atomic_numbers.tolist()
    isolated = config.reference_energies == "isolated_atoms"
    # None: keep the init_from checkpoint's reference energies (and whether they are isolated-atom ones)
    reference = isolated_atom_energies(train_samples + valid_samples, numbers, potential.cutoff) if isolated else None
    if config.init_from:
        load_initial_weights(potential, config.init_from, grow=config.init_grow)
        scale, scale_kind = float(potential.scale), f"kept from {config.init_from}"
    elif config.init_embedded_atom_from:
        _load_embedded_atom(potential, config.init_embedded_atom_from)
        scale, scale_kind = float(potential.scale), f"kept from {config.init_embedded_atom_from}"
    else:
        if reference is None:
            reference = fit_reference_energies(train_samples, numbers)
        scale, scale_kind = output_scale(train_samples, numbers, reference)
        with torch.no_grad():
            potential.scale.fill_(scale)
    if reference is not None:
        with torch.no_grad():
            potential.reference_energies.copy_(torch.tensor(reference, dtype=torch.float64))
        potential.isolated_reference = isolated
    dtype = getattr(torch, config.dtype)
    device = dist.device  # config.device, or this process's own GPU under torchrun
    potential = potential.to(device=device, dtype=dtype)

    if config.freeze_embedded_atom:
        term = potential.terms["embedded_atom"] if "embedded_atom" in potential.terms else None
        if term is None:
            raise ValueError("freeze_embedded_atom: the model has no embedded-atom term beside a network to train "
                             "(a transformer with terms: {embedded_atom: ...})")
        for p in term.parameters():
            p.requires_grad_(False)
    return potential, scale, scale_kind


def _make_optimizer(config: TrainConfig, potential):
    """AdamW (no weight decay on biases, norms and embeddings; frozen parameters left out) and the
    EMA of the weights. Returns (optimizer, ema)."""
    oc = config.optimizer
    decay, no_decay = [], []
    for pname, p in potential.named_parameters():
        if not p.requires_grad:
            continue  # frozen (freeze_embedded_atom)
        (no_decay if p.ndim < 2 or "embedding" in pname else decay).append(p)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": oc.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=oc.lr, betas=tuple(oc.betas))
    return optimizer, ExponentialMovingAverage(potential, oc.ema_decay)


@dataclass
class _RunState:
    """Where a run stands: the first epoch to run, optimiser steps taken, the best validation loss,
    the per-epoch history, the epoch a resume started from and the minutes spent before it."""

    start_epoch: int = 0
    step: int = 0
    best_loss: float = float("inf")
    history: List[dict] = field(default_factory=list)
    resumed_from: Optional[int] = None
    minutes_before: float = 0.0


def _start_or_resume(config: TrainConfig, dist: "_Distributed", out_dir: Path, resume: bool,
                     changes: Dict[str, list], potential, optimizer, ema, n_train: int,
                     n_valid: int) -> _RunState:
    """A fresh :class:`_RunState`, or with ``resume`` the one of ``out_dir``'s train state (whose
    weights, optimiser moments and EMA are loaded); a resume with other data sizes is refused."""
    run = _RunState()
    if not resume:
        return run
    meta = _load_state(out_dir / STATE_NAME, potential, optimizer, ema)
    run.start_epoch, run.step, run.best_loss = meta["epoch"], meta["step"], meta["best_loss"]
    run.resumed_from = run.start_epoch
    run.history = meta.get("history", [])
    # a state written before "minutes" was stored: the last epoch's metric
    run.minutes_before = float(meta.get("minutes", run.history[-1]["minutes"] if run.history else 0.0))
    sizes = {"training": n_train, "validation": n_valid}
    before = {"training": meta.get("n_train"), "validation": meta.get("n_valid")}
    differ = [f"{what} set {before[what]} -> {n}" for what, n in sizes.items()
              if before[what] is not None and before[what] != n]
    if differ:
        raise ValueError(f"cannot resume {str(out_dir)!r}: the data differ from the run's "
                         f"({', '.join(differ)} structures); resume with the run's data or start "
                         "a new run")
    if dist.is_main:
        _record_resume(config, out_dir, changes, run.start_epoch)
    return run


def _train_epoch(config: TrainConfig, dist: "_Distributed", potential, optimizer, ema, train_samples: list,
                 epoch: int, run: _RunState, scale: float, progress: bool) -> float:
    """One pass over the shuffled training set (``run.step`` advances per batch); returns the mean
    training loss over this process's batches."""
    import mlip

    oc = config.optimizer
    dtype = getattr(torch, config.dtype)
    device = dist.device
    steps_per_epoch = math.ceil(len(train_samples) / config.batch_size)
    total_steps = steps_per_epoch * config.epochs
    warmup = int(round(oc.warmup_fraction * total_steps))
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
            out = potential(graph, compute_forces=want_forces, compute_stress=want_stress,
                            create_graph=want_forces or want_stress)
            terms = loss_sums(out, target, scale, config)
        else:
            terms = {}
        counts = dist.sum_counts({k: float(n) for k, (_, n) in terms.items()}, ("energy", "forces", "stress"))
        loss, _ = combine_loss(terms, counts, config)
        if isinstance(loss, torch.Tensor) and loss.requires_grad:
            loss.backward()
        dist.sum_gradients(potential)
        loss_value = dist.sum_scalar(float(loss.detach()) if isinstance(loss, torch.Tensor) else 0.0)
        if not math.isfinite(loss_value):
            raise RuntimeError(f"non-finite loss at epoch {epoch + 1}, batch {b + 1}")
        for group in optimizer.param_groups:
            group["lr"] = oc.lr * warmup_cosine(run.step, total_steps, warmup, oc.min_lr_factor)
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
                       epoch: int, run: _RunState, train_loss: float, optimizer, scale: float, metadata: dict,
                       t_start: float) -> dict:
    """With the EMA weights: the validation metrics and loss (in ``eval_dtype``), then the last
    checkpoint and, when the validation loss (or without validation data the training loss) is
    the lowest so far, the best one (``run.best_loss`` follows). Returns the epoch's record."""
    dtype = getattr(torch, config.dtype)
    with ema.swapped(potential):
        record = {"epoch": epoch + 1, "step": run.step, "train_loss": train_loss,
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


def _print_epoch(record: dict, epoch: int, epochs: int) -> None:
    """One line per epoch, with or without the progress bar: logs of batch jobs show progress."""
    shown = {k: v for k, v in record.items() if k.startswith("valid_") and "mae" in k}
    valid_text = f" valid {record['valid_loss']:.4g}" if "valid_loss" in record else ""
    print(f"epoch {epoch + 1}/{epochs}: loss {record['train_loss']:.4g}{valid_text} "
          + "".join(f"{k[6:]}={v:.3g} " for k, v in shown.items())
          + f"({record['minutes']:.2f} min)", flush=True)


class _Distributed:
    """torch.distributed when launched by torchrun (WORLD_SIZE > 1), else a single process."""

    def __init__(self, rank: int = 0, world_size: int = 1, owns_group: bool = False, device=None):
        self.rank, self.world_size, self.owns_group = rank, world_size, owns_group
        #: the device of this process: its own GPU (cuda:LOCAL_RANK) under torchrun with CUDA
        self.device = torch.device(device) if device is not None else torch.device("cpu")

    @classmethod
    def from_environment(cls, device: str) -> "_Distributed":
        import os

        import torch.distributed as td

        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls(device=device)
        cuda = str(device).startswith("cuda")
        if cuda:
            local = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local)
            device = f"cuda:{local}"
        owns = False
        if not td.is_initialized():
            td.init_process_group(backend="nccl" if cuda else "gloo")
            owns = True
        return cls(td.get_rank(), td.get_world_size(), owns, device)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.world_size > 1:
            import torch.distributed as td

            td.barrier()

    def sum_counts(self, counts: Dict[str, float], keys) -> Dict[str, float]:
        if self.world_size == 1:
            return counts
        import torch.distributed as td

        t = torch.tensor([counts.get(k, 0.0) for k in keys], dtype=torch.float64, device=self.device)
        td.all_reduce(t)
        return {k: float(v) for k, v in zip(keys, t)}

    def sum_scalar(self, value: float) -> float:
        if self.world_size == 1:
            return value
        import torch.distributed as td

        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        td.all_reduce(t)
        return float(t)

    def sum_gradients(self, module) -> None:
        if self.world_size == 1:
            return
        import torch.distributed as td

        for p in module.parameters():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            td.all_reduce(p.grad)

    def broadcast_flag(self, flag: bool) -> bool:
        if self.world_size == 1:
            return flag
        import torch.distributed as td

        t = torch.tensor([1 if flag else 0], device=self.device)
        td.broadcast(t, src=0)
        return bool(t.item())

    def close(self) -> None:
        if self.owns_group:
            import torch.distributed as td

            td.destroy_process_group()
