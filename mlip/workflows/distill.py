"""Distillation: a fast student model trained on the labels of any ASE-calculator teacher.

:func:`distill` chains the package's own stages, each resumable, in one folder ``out_dir``:

1. ``structures.xyz``: :func:`mlip.data.structures.generate_structures` for the elements (MD
   snapshots, if counted, run with the teacher);
2. ``labels/`` and ``labelled.xyz``: the teacher's energies, forces and stresses
   (:func:`mlip.workflows.labelling.label_structures`: sharded, resumable structure by structure);
3. ``train.xyz``, ``valid.xyz``, ``test.xyz``: :func:`mlip.data.splits.split_dataset` with each
   ``config_type`` split separately and frames of one group (an MD trajectory) kept together, as
   ``mlip data split`` does; isolated atoms always go to training (they set the reference energies);
4. ``training/``: :func:`mlip.training.train` (the trainer of ``mlip train``, resumed from its
   train state; the folder's run lock, :mod:`mlip.run_lock`, lets one process train at a time), then
   ``student.safetensors``, the best weights, which ``mlip md --model`` loads;
5. ``evaluation.json``: the student against the teacher's labels of the test part (energy per atom,
   forces, stress; in all and per ``config_type``), redone on every run.

``distill.json`` records the settings of the folder. A later run with the same settings resumes
each stage; one that changes a setting is refused with a ValueError naming it (only ``epochs`` and
``minutes`` may change: they lengthen or shorten the training, as a resumed ``mlip train`` allows).

The student is a shipped model's architecture (its name: the model section of the training config
stored in its checkpoint, with the distilled elements as species; the loss and optimiser of a
first training stage, :data:`STUDENT_LOSS` and :data:`STUDENT_OPTIMIZER`; least-squares reference
energies) or a ``mlip train``
YAML config (everything of it but the species, data and out_dir). Either way the model carries the
ZBL repulsion term unless the config turns it off.

With ``minutes`` and no ``epochs`` the training budget sets the number of epochs: one epoch is run
and timed, then the run is resumed with as many epochs as fit in ``minutes`` (the cosine schedule
is laid over those); ``minutes`` is also the trainer's ``max_minutes``.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence, Union

from mlip.io import atomic_write, first_difference, json_roundtrip, read_json, read_yaml, write_json

SETTINGS_NAME = "distill.json"
STRUCTURES_NAME = "structures.xyz"
LABELS_DIR = "labels"
LABELLED_NAME = "labelled.xyz"
PARTS = ("train", "valid", "test")
TRAINING_DIR = "training"
STUDENT_NAME = "student.safetensors"
EVALUATION_NAME = "evaluation.json"

DEFAULT_STUDENT = "equiformer_v3-emt"
#: epochs when neither ``epochs`` nor ``minutes`` is given
DEFAULT_EPOCHS = 20
#: the loss and optimiser of a student built from a shipped model's architecture: those of the first
#: stage of the shipped EquiformerV3 recipe (a model trained from random weights)
STUDENT_LOSS = {"energy_weight": 20.0, "forces_weight": 10.0, "stress_weight": 3.0, "kind": "mse"}
STUDENT_OPTIMIZER = {"lr": 0.002, "weight_decay": 0.001, "warmup_fraction": 0.03, "min_lr_factor": 0.02,
                     "ema_decay": 0.99}
#: the training-config keys of a shipped model that a distilled student keeps (beside its model); the
#: reference energies are the trainer's default least-squares fit, which a short training needs (from
#: isolated-atom ones the network must first learn the cohesive energy)
STUDENT_KEPT = ("batch_size", "augment_rotations", "dtype", "eval_dtype")
#: settings a rerun may change (the training's length); any other change is refused
RESUMABLE_SETTINGS = ("epochs", "minutes")


@dataclass
class DistillResult:
    """What :func:`distill` made: the files of every stage in ``out_dir``, the student's errors against
    the teacher on the test part (``evaluation``, as written to ``evaluation.json``) and the minutes
    each stage took in this run."""

    out_dir: Path
    structures: Path
    labelled: Path
    parts: Dict[str, Path]
    training_dir: Path
    student: Path
    evaluation_path: Path
    evaluation: Dict[str, Any]
    minutes: Dict[str, float] = field(default_factory=dict)


def student_config(student: Union[str, Path], elements: Sequence[str]) -> Dict[str, Any]:
    """The training config (a :class:`mlip.training.TrainConfig` mapping without data and out_dir) of
    ``student``: a shipped model's name or a ``mlip train`` YAML config, with ``elements`` as species.
    ValueError for an unknown name, an unreadable config or a shipped model without a training config."""
    from mlip import pretrained

    path = Path(student)
    if path.suffix in (".yaml", ".yml", ".json") or path.is_file():
        if not path.is_file():
            raise ValueError(f"student config {str(student)!r} does not exist")
        config = read_yaml(path, "student config")
        if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
            raise ValueError(f"student config {str(student)!r}: a training config with a model section")
        config = {k: v for k, v in config.items() if k not in ("data", "out_dir")}
    else:
        if not pretrained.is_known(str(student)) or str(student) in pretrained.UNTRAINED:
            raise ValueError(f"unknown student {str(student)!r}: give a shipped trained model's name "
                             f"({', '.join(sorted(pretrained.TRAINED))}) or a training config (.yaml)")
        trained = pretrained.load(str(student)).metadata.get("training", {}).get("config")
        if not trained:
            raise ValueError(f"shipped model {str(student)!r} holds no training config to copy")
        config = {"model": dict(trained["model"]), "loss": dict(STUDENT_LOSS),
                  "optimizer": dict(STUDENT_OPTIMIZER),
                  **{k: trained[k] for k in STUDENT_KEPT if k in trained}}
    config["model"] = {**config["model"], "species": list(elements)}
    return config


def _check_settings(out_dir: Path, settings: Dict[str, Any]) -> bool:
    """Compare ``settings`` with those recorded in ``out_dir`` (ValueError naming the first that
    differs, other than :data:`RESUMABLE_SETTINGS`); True when the folder already holds a run."""
    recorded = read_json(out_dir / SETTINGS_NAME)
    if recorded is None:
        taken = [name for name in (STRUCTURES_NAME, LABELS_DIR, LABELLED_NAME, TRAINING_DIR, STUDENT_NAME)
                 if (out_dir / name).exists()]
        if taken:
            raise ValueError(f"out_dir {str(out_dir)!r} holds {', '.join(taken)} but no {SETTINGS_NAME}: "
                             "not a distillation folder; choose another out_dir")
        return False
    changed = first_difference({k: v for k, v in recorded.items() if k not in RESUMABLE_SETTINGS},
                               {k: v for k, v in settings.items() if k not in RESUMABLE_SETTINGS})
    if changed is not None:
        key, before, now = changed
        raise ValueError(f"out_dir {str(out_dir)!r} was made with {key} = {before!r}, "
                         f"this run gives {now!r}: use the same {key} to resume, or another out_dir")
    return True


def _teacher_md_calculator(lab, elements: Sequence[str]):
    """The teacher as the calculator of the MD snapshots (the labeller's calculator for a bulk cell of
    the first element; the gpaw teacher, whose k-points depend on each cell, is refused)."""
    if lab.name == "gpaw":
        raise ValueError("MD snapshots (md in counts) run with the teacher, and the gpaw teacher would "
                         "need k-points for every MD cell: give md=0, or make them with "
                         "'mlip data structures --md-model' and label those")
    from ase import Atoms

    return lab.make(Atoms(elements[0]))


def _assign_parts(frames: Sequence, fractions: Sequence[float], seed: int) -> Dict[str, str]:
    """Structure id → part (train, valid or test) of the unlabelled ``frames`` (see the module
    docstring), decided before labelling so that a structure the teacher fails on only drops out of its
    part. ValueError when the train or test part would be empty."""
    from mlip.data.splits import split_dataset
    from mlip.workflows.labelling import structure_id

    isolated = [f for f in frames if f.info.get("config_type") == "isolated_atom"]
    rest = [f for f in frames if f.info.get("config_type") != "isolated_atom"]
    parts = list(split_dataset(rest, fractions, seed=seed, group_by="group", stratify_by="config_type"))
    parts[0] = isolated + list(parts[0])
    for name, part in zip(PARTS, parts):
        if not part and name != "valid":
            raise ValueError(f"the {name} part would be empty ({len(rest)} structures besides the isolated "
                             f"atoms, fractions {list(fractions)}): raise the counts or the {name} fraction")
    return {structure_id(f): name for name, part in zip(PARTS, parts) for f in part}


def _write_parts(labelled: Path, out_dir: Path, part_of: Dict[str, str]):
    """Write the labelled frames into train/valid/test extxyz files by :func:`_assign_parts`; returns
    their paths and sizes, by part."""
    import ase.io

    frames = ase.io.read(labelled, ":")
    paths = {name: out_dir / f"{name}.xyz" for name in PARTS}
    sizes = {}
    for name in PARTS:
        part = [f for f in frames if part_of[str(f.info["id"])] == name]
        atomic_write(paths[name], lambda tmp, part=part: ase.io.write(tmp, part, format="extxyz"))
        sizes[name] = len(part)
    return paths, sizes


def _train(config: Dict[str, Any], parts: Dict[str, Path], training_dir: Path, epochs: Optional[int],
           minutes: Optional[float], progress: bool, log: Callable[[str], None]):
    """Train (or resume) the student in ``training_dir``; returns the trainer's result."""
    from mlip.training import TrainConfig, train
    from mlip.training.run_dir import CONFIG_NAME, STATE_NAME

    valid = str(parts["valid"]) if _has_frames(parts["valid"]) else None
    data = {"train": str(parts["train"]), "valid": valid, "valid_fraction": 0.0}
    base = {**config, "data": {**config.get("data", {}), **data}, "out_dir": str(training_dir)}
    if minutes is not None:
        base["max_minutes"] = float(minutes)
    budget_only = epochs is None and minutes is not None
    if not (training_dir / STATE_NAME).exists():
        if not budget_only:
            base["epochs"] = int(epochs if epochs is not None else config.get("epochs", DEFAULT_EPOCHS))
            return train(TrainConfig.from_dict(base, where="student"), progress=progress)
        # a time budget alone: one epoch, timed, then (below) as many as fit in the budget
        train(TrainConfig.from_dict({**base, "epochs": 1}, where="student"), progress=progress)
    earlier = read_json(training_dir / CONFIG_NAME) or {}
    metrics = training_dir / "metrics.json"
    history = json.loads(metrics.read_text()) if metrics.is_file() else []
    if epochs is not None:
        base["epochs"] = int(epochs)
    elif budget_only and earlier.get("epochs") == 1 and history:  # the timed first epoch
        per_epoch = max(float(history[0]["minutes"]), 1e-6)
        base["epochs"] = max(1, int(math.floor(float(minutes) / per_epoch)))
        log(f"training: one epoch took {per_epoch:.2f} min: {base['epochs']} epochs fit in {minutes:g} min")
    else:
        base["epochs"] = int(earlier.get("epochs", DEFAULT_EPOCHS))
    return train(TrainConfig.from_dict(base, where="student"), resume=True, progress=progress)


def _has_frames(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


def _evaluate(student: Path, test: Path, teacher: str, dtype: str = "float64") -> Dict[str, Any]:
    """The student's errors against the teacher's labels of ``test``, in all and per config_type."""
    from mlip.data import read_dataset
    from mlip.pretrained import load_potential
    from mlip.training.evaluation import evaluate_groups

    potential = load_potential(student).eval()
    samples = read_dataset(test, species=potential.species)
    def kind(sample) -> str:
        return str(sample.atoms.info.get("config_type", "(none)"))

    overall, groups = evaluate_groups(potential, samples, kind, dtype=dtype)
    return {"student": str(student), "teacher": teacher, "test": str(test), "n_test": len(samples),
            "units": "energy meV/atom, forces meV/Å, stress meV/Å³", **overall,
            "per_config_type": {name: {"n": n, **metrics} for name, (n, metrics) in groups.items()}}


def distill(elements: Sequence[str], teacher: str = "emt", out_dir: Union[str, Path] = "distill", *,
            settings: Optional[Dict[str, Any]] = None, counts: Optional[Dict[str, int]] = None, seed: int = 0,
            student: Union[str, Path] = DEFAULT_STUDENT, fractions: Sequence[float] = (0.8, 0.1, 0.1),
            epochs: Optional[int] = None, minutes: Optional[float] = None, n_shards: Optional[int] = None,
            shard_index: Optional[int] = None, progress: bool = True,
            log: Callable[[str], None] = print) -> Optional[DistillResult]:
    """Distil ``teacher`` into a student model for ``elements`` in ``out_dir`` (see the module docstring).

    Args:
        elements: chemical symbols (the student's species, in this order).
        teacher: a labeller spec of :func:`mlip.workflows.labelling.labeller` (``emt``, ``gpaw``,
            ``package.module:Class``); ``settings`` its keyword settings.
        counts: structures per kind (:func:`mlip.data.structures.generate_structures`; None: its
            defaults); ``md`` trajectories run with the teacher.
        seed: the structures, the split and the training's seed.
        student: a shipped model's name or a training config (see the module docstring).
        fractions: train, valid and test fractions of each config_type.
        epochs, minutes: the training's length and time budget (see the module docstring).
        n_shards, shard_index: label only this process's share (the run stops after labelling until
            every shard is done; rerun then).
        progress: progress bars; ``log`` receives one line per stage.

    Returns the :class:`DistillResult`, or None when labels are still missing (other shards) or this
    process does not write (a non-zero MPI rank of a gpaw teacher).
    """
    from mlip.data.structures import DEFAULT_COUNTS, generate_structures
    from mlip.data.splits import split_indices
    from mlip.workflows.labelling import label_structures, labeller, labelling_status, write_labelled

    out_dir = Path(out_dir)
    elements = [str(e) for e in elements]
    counts = dict(DEFAULT_COUNTS if counts is None else counts)
    if epochs is not None and int(epochs) < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    if minutes is not None and not (math.isfinite(float(minutes)) and float(minutes) > 0):
        raise ValueError(f"minutes must be a positive number, got {minutes}")
    split_indices(0, fractions)  # the fractions' own errors, before anything is made
    lab = labeller(teacher, settings)
    config = student_config(student, elements)
    record = json_roundtrip({"elements": elements, "teacher": teacher,
                             "teacher_settings": dict(settings or {}), "counts": counts, "seed": int(seed),
                             "fractions": list(fractions),
                             "student": str(student), "student_config": config, "epochs": epochs,
                             "minutes": minutes})
    from mlip.training import TrainConfig

    TrainConfig.from_dict({**config, "data": {"train": "-"}}, where="student")  # a bad config fails here
    existed = _check_settings(out_dir, record)
    minutes_of: Dict[str, float] = {}
    structures_path = out_dir / STRUCTURES_NAME

    t0 = time.perf_counter()
    if structures_path.is_file():
        import ase.io

        frames = ase.io.read(structures_path, ":")
        part_of = _assign_parts(frames, fractions, int(seed))
        log(f"structures: {len(frames)} reused from {structures_path}")
    else:
        md = _teacher_md_calculator(lab, elements) if counts.get("md", 0) else None
        frames = generate_structures(elements, counts, seed=seed, md_calculator=md, progress=progress)
        part_of = _assign_parts(frames, fractions, int(seed))  # before anything is written
        from mlip.data.sample import write_extxyz

        out_dir.mkdir(parents=True, exist_ok=True)
        if not existed:
            write_json(out_dir / SETTINGS_NAME, record)
        write_extxyz(frames, structures_path)
        log(f"structures: {len(frames)} ({sum(len(f) for f in frames)} atoms) -> {structures_path} "
            f"({(time.perf_counter() - t0) / 60:.2f} min)")
    minutes_of["structures"] = (time.perf_counter() - t0) / 60

    t0 = time.perf_counter()
    labels_dir = out_dir / LABELS_DIR
    done = label_structures(frames, lab, labels_dir, n_shards=n_shards, shard_index=shard_index,
                            progress=progress)
    if not lab.is_writer:
        return None
    labelled_count, failed, missing = labelling_status(frames, labels_dir)
    if failed:
        write_json(labels_dir / "failures.json", {"failed": [{"id": i, "error": e} for i, e in failed]})
    if missing:
        log(f"labels: {labelled_count} of {len(frames)} structures labelled by {lab.name}, "
            f"{len(missing)} not yet (other shards): rerun when they are done")
        return None
    labelled = out_dir / LABELLED_NAME
    write_labelled(frames, labels_dir, labelled)
    note = f", {len(failed)} failed (in {LABELS_DIR}/failures.json, left out)" if failed else ""
    log(f"labels: {labelled_count} structures by {lab.name} {lab.version} ({done['computed']} computed, "
        f"{done['skipped']} reused{note}) -> {labelled} ({(time.perf_counter() - t0) / 60:.2f} min)")
    minutes_of["labels"] = (time.perf_counter() - t0) / 60

    parts, sizes = _write_parts(labelled, out_dir, part_of)
    if not sizes["train"] or not sizes["test"]:
        empty = "train" if not sizes["train"] else "test"
        raise RuntimeError(f"the teacher failed on every structure of the {empty} "
                           f"part (see {labels_dir / 'failures.json'})")
    log("split: " + ", ".join(f"{name} {sizes[name]}" for name in PARTS)
        + f" -> {out_dir}/{{train,valid,test}}.xyz")

    t0 = time.perf_counter()
    training_dir = out_dir / TRAINING_DIR
    config.setdefault("seed", int(seed))
    from mlip.run_lock import folder_lock

    with folder_lock(training_dir):  # shards that finish labelling together: one trains, the other is refused
        result = _train(config, parts, training_dir, None if epochs is None else int(epochs), minutes,
                        progress, log)
    student_path = out_dir / STUDENT_NAME
    atomic_write(student_path, lambda tmp: shutil.copyfile(result.best, tmp))
    last = result.history[-1] if result.history else {}
    log(f"training: {len(result.history)} epochs ({config['model']['name']}), best weights -> {student_path} "
        f"({(time.perf_counter() - t0) / 60:.2f} min; {last.get('minutes', 0.0):.2f} min in all)")
    minutes_of["training"] = (time.perf_counter() - t0) / 60

    t0 = time.perf_counter()
    evaluation = _evaluate(student_path, parts["test"], f"{lab.name} {lab.version}")
    evaluation_path = out_dir / EVALUATION_NAME
    write_json(evaluation_path, evaluation)
    minutes_of["evaluation"] = (time.perf_counter() - t0) / 60
    log(f"evaluation: student vs teacher on {evaluation['n_test']} test structures: energy "
        f"{evaluation['energy_mae_meV_per_atom']:.2f} meV/atom, "
        f"forces {evaluation['forces_mae_meV_per_A']:.1f} meV/Å, "
        f"stress {evaluation['stress_mae_meV_per_A3']:.2f} meV/Å³ (MAE) -> {evaluation_path}")
    return DistillResult(out_dir=out_dir, structures=structures_path, labelled=labelled, parts=parts,
                         training_dir=training_dir, student=student_path, evaluation_path=evaluation_path,
                         evaluation=evaluation, minutes=minutes_of)


__all__ = ["DEFAULT_STUDENT", "DistillResult", "RESUMABLE_SETTINGS", "STUDENT_LOSS", "STUDENT_OPTIMIZER",
           "distill", "student_config"]
