"""The output folder of a training run: what it holds, when a new or resumed run may use it, and the
record of what each resume changed.

Files in ``out_dir``:

* ``best.safetensors``: the EMA weights with the lowest validation loss (a normal checkpoint);
* ``last.safetensors``: the EMA weights after the last finished epoch;
* ``train_state.safetensors``: raw weights, optimiser moments and EMA shadow, with the epoch,
  step and best loss in its JSON header, for ``resume`` (never pickled; :mod:`mlip.training.train_state`);
* ``metrics.json``: one entry per epoch (losses, validation MAE/RMSE, learning rate, time);
* ``config.json``: the run's :class:`TrainConfig` (JSON, which is also YAML: ``mlip train`` reads it),
  its paths relative to the folder (``out_dir`` is ``"."``; :func:`portable_config`), so that the folder
  can be committed and resumed on another machine or from another clone (``cd OUT_DIR && mlip train
  config.json --resume`` runs as well);
* ``config_changes.json``: the config changes each resume accepted (see :data:`RESUMABLE_CHANGES`).

A new run refuses an ``out_dir`` that holds an earlier run unless told to ``overwrite`` it. No file of
the folder holds an absolute path of the machine (the checkpoints: :mod:`mlip.training.provenance`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, List, Optional

from mlip.io import jsonable, read_json, write_json
from mlip.training.config import TrainConfig
from mlip.training.provenance import FILE_KEYS, file_record, key_holder


STATE_NAME = "train_state.safetensors"
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
    "compile",      # how the steps run (compiled or eager): the same optimisation up to rounding
)


def portable_config(config: TrainConfig, out_dir: Path) -> dict:
    """``config`` as a mapping with ``out_dir`` ``"."`` and each path of
    :data:`~mlip.training.provenance.FILE_KEYS` that names an existing file relative to ``out_dir``
    (another value, such as a shipped model's name, is kept): what ``config.json`` holds."""
    data = config.to_dict()
    data["out_dir"] = "."
    for key in FILE_KEYS:
        holder, last = key_holder(data, key)
        value = holder.get(last) if holder is not None else None
        if isinstance(value, str) and Path(value).exists():
            holder[last] = os.path.relpath(Path(value).absolute(), Path(out_dir).absolute())
    return data


def _same_file(stored: str, given: str, out_dir: Path) -> bool:
    """Whether the path ``stored`` in ``config.json`` (relative to ``out_dir``, or for a run written
    before that, to the working folder) and the path ``given`` now (relative to ``out_dir`` too, as
    :func:`portable_config` writes it) name the same file, or files of the same content (data moved
    with a clone)."""
    now = (out_dir / given).resolve()
    candidates = [(out_dir / stored).resolve(), Path(stored).resolve()]
    if now in candidates:
        return True
    digest = file_record(str(now))["sha256"]
    return digest is not None and any(file_record(str(c))["sha256"] == digest
                                      for c in candidates if c.is_file())


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
    old, new = _comparable(stored), _comparable(portable_config(config, out_dir))
    missing = "(absent)"
    changed = {k: [old.get(k, missing), new.get(k, missing)] for k in sorted(set(old) | set(new))
               if old.get(k, missing) != new.get(k, missing)}
    for key in FILE_KEYS:  # a path written differently, to the same data, changes nothing
        paths = changed.get(key, [None])
        if all(isinstance(v, str) for v in paths) and _same_file(*paths, out_dir):
            del changed[key]
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


def prepare_out_dir(config: TrainConfig, out_dir: Path, resume: bool, overwrite: bool, is_main: bool):
    """Check that ``out_dir`` suits a new or resumed run, then (main process) create it, clear an
    overwritten run and write a new run's ``config.json``. Returns the folders it created, deepest
    first (for :func:`remove_failed_start`), and a resume's accepted config changes."""
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
    write_json(out_dir / CONFIG_NAME, portable_config(config, out_dir))
    return created, changes


def record_resume(config: TrainConfig, out_dir: Path, changes: Dict[str, list], epoch: int) -> None:
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
    write_json(out_dir / CONFIG_NAME, portable_config(config, out_dir))


def remove_failed_start(out_dir: Path, created: List[Path]) -> None:
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
