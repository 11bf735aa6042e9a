"""The active-learning loop: :func:`learn`.

Iteration 0 trains the committee on the initial data (``OUT/iter-000/``), or adopts members trained
elsewhere. Every later iteration k, in
``OUT/iter-NNN/``, runs five stages, each skipped when its output exists (outputs are written
atomically, so a run killed at any point resumes where it stopped):

1. **explore** → ``pool.xyz``: candidates from the seeds with the committee of iteration k − 1 (MD over
   the temperature schedule, relaxations, strained and rattled seeds; :mod:`.explore`), or the given
   fixed pool; each frame scored by the committee in batches: ``uncertainty`` (its largest per-atom
   force uncertainty, eV/Å), ``uncertainty_mean`` and ``energy_uncertainty`` (eV) in its info;
2. **select** → ``selected.xyz``: at most ``per_iteration`` frames (fewer when the label budget runs
   out) by uncertainty with diversity, or at random (:mod:`.select`); with a trust window
   (``trust_lo``/``trust_hi``) by uncertainty only from the frames inside it: those above are failed
   explorations, never labelled (counted, and their ids recorded, in ``metrics.json``);
3. **label** → ``labels/`` and ``labelled.xyz``: the oracle's energies, forces and stresses through
   :func:`mlip.workflows.labelling.label_structures` (resumable structure by structure; a structure
   the oracle fails on is recorded in ``labels/failures.json`` and left out); with an
   ``oracle_launcher`` (e.g. ``mpiexec -n 2 gpaw python``) the stage runs ``mlip data label`` on
   ``selected.xyz`` as that command, so a parallel oracle such as GPAW under MPI labels while
   exploration and training stay in this process;
4. **train** → ``member-K.safetensors``: each member warm-started from its weights of iteration k − 1
   and trained on the initial data plus every label so far (:mod:`.committee`);
5. **evaluate** → ``metrics.json``: the committee mean's errors on the held-out file and the rank
   correlation of its uncertainty with its actual force error there (:mod:`.quality`), with the
   iteration's exploration and label counts.

The loop stops when the label budget is spent, after ``max_iterations``, or when an exploration's
largest uncertainty is below ``threshold`` or none of its frames is in the trust window (that iteration
selects nothing). ``OUT/summary.json`` holds
every iteration's metrics, why the loop stopped and the final committee. ``OUT/learn.json`` records the
settings: a later run into the folder must say ``resume`` and may change only when to stop
(:data:`~.settings.RESUMABLE`); while a run holds the folder (:mod:`mlip.run_lock`) a second one is
refused.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from mlip.io import atomic_write, read_json, write_json
from mlip.workflows.active_learning.committee import (adopt_committee, check_adoptable, committee_paths,
                                                      is_trained, load_committee, train_committee)
from mlip.workflows.active_learning.settings import RESUMABLE, ExploreSettings, LearnSettings

SETTINGS_NAME = "learn.json"
SUMMARY_NAME = "summary.json"
POOL_NAME = "pool.xyz"
SELECTED_NAME = "selected.xyz"
LABELS_DIR = "labels"
LABELLED_NAME = "labelled.xyz"
METRICS_NAME = "metrics.json"


@dataclass
class LearnResult:
    """What :func:`learn` left in ``out_dir``: one metrics record per iteration (as in each
    ``metrics.json``), the reason it stopped, the labels spent and the final committee's weights."""

    out_dir: Path
    iterations: List[Dict[str, Any]]
    stopped: str
    labels: int
    committee: List[Path]
    summary: Path = field(default=Path())


def iteration_dir(out_dir: Path, k: int) -> Path:
    return Path(out_dir) / f"iter-{k:03d}"


def _read_frames(path: Path) -> list:
    import ase.io

    return ase.io.read(path, ":") if path.stat().st_size else []


def _write_frames(path: Path, frames: Sequence) -> None:
    import ase.io

    atomic_write(path, lambda tmp: ase.io.write(tmp, list(frames), format="extxyz") if frames
                 else Path(tmp).write_text(""))


class _Run:
    """One call of :func:`learn`: its inputs, settings and folder, and the stages of an iteration."""

    def __init__(self, out_dir: Path, settings: LearnSettings, labeller, base_config: Dict[str, Any],
                 initial: list, heldout: Optional[list], seeds: list, pool: Optional[list], progress: bool,
                 log: Callable[[str], None], start: Optional[List[Path]] = None,
                 oracle: Optional[Tuple[str, Dict[str, Any], List[str]]] = None,
                 finetune_from: Optional[Path] = None):
        self.out_dir, self.settings, self.labeller = out_dir, settings, labeller
        self.oracle = oracle  # (spec, settings, launcher) where the oracle runs as a command
        self.base_config, self.initial, self.heldout = base_config, initial, heldout
        self.seeds, self.pool, self.progress, self.log = seeds, pool, progress, log
        self.n, self.start, self.finetune_from = settings.committee, start, finetune_from

    def say(self, k: int, stage: str, text: str, t0: Optional[float] = None) -> None:
        took = f" ({(time.perf_counter() - t0) / 60:.2f} min)" if t0 is not None else ""
        self.log(f"iteration {k} {stage}: {text}{took}")

    # ---------------------------------------------------------------------------------- stages
    def train(self, k: int, samples: list) -> List[Path]:
        folder = iteration_dir(self.out_dir, k)
        if is_trained(folder, self.n):
            self.say(k, "train", f"{self.n} members reused from {folder}")
            return committee_paths(folder, self.n)
        if k == 0 and self.start is not None:
            paths = adopt_committee(self.start, folder)
            self.say(k, "train", f"{self.n} members copied from {', '.join(map(str, self.start))}")
            return paths
        t0 = time.perf_counter()
        if k > 0:
            previous = committee_paths(iteration_dir(self.out_dir, k - 1), self.n)
            start = f"the members of iteration {k - 1}"
        elif self.finetune_from is not None:  # each member from the one pre-trained model, its own seed
            previous, start = [self.finetune_from] * self.n, str(self.finetune_from)
        else:
            previous, start = None, "random weights"
        epochs = self.settings.epochs if k == 0 else self.settings.finetune_epochs
        paths = train_committee(self.base_config, samples, folder, self.n, self.settings.seed, epochs,
                                previous=previous, progress=self.progress)
        self.say(k, "train", f"{self.n} members on {len(samples)} structures, {epochs} epochs from {start} "
                             f"-> {folder}/member-*.safetensors", t0)
        return paths

    def explore(self, k: int, members: List[Path]) -> list:
        from mlip.calculators.committee import CommitteeCalculator, committee_predictions
        from mlip.workflows.active_learning.explore import explore

        folder = iteration_dir(self.out_dir, k)
        path = folder / POOL_NAME
        if path.is_file():
            frames = _read_frames(path)
            self.say(k, "explore", f"{len(frames)} frames reused from {path}{self._spread(frames)}")
            return frames
        t0 = time.perf_counter()
        potentials = load_committee(members)
        if self.pool is not None:  # less what earlier iterations sent to the oracle
            taken = {str(f.info["id"]) for j in range(1, k) for f in _read_frames(
                iteration_dir(self.out_dir, j) / SELECTED_NAME)}
            frames = [f.copy() for f in self.pool if str(f.info["id"]) not in taken]
            where = f"the fixed pool less {len(taken)} labelled"
        else:
            calc = CommitteeCalculator(potentials, device="cpu", dtype="float32")
            frames = explore(self.seeds, calc, self.settings.explore, folder, self.settings.seed, k,
                             progress=self.progress)
            kinds = {}
            for f in frames:
                kinds[f.info["config_type"]] = kinds.get(f.info["config_type"], 0) + 1
            where = ", ".join(f"{n} {kind[len('explore_'):]}" for kind, n in sorted(kinds.items()))
            where = where or "nothing"
        scores = committee_predictions(potentials, frames, batch_size=self.settings.score_batch_size,
                                       progress=self.progress, desc="score") if frames else []
        for frame, score in zip(frames, scores):
            frame.calc = None
            frame.info["uncertainty"] = float(np.max(score["forces_uncertainty"]))
            frame.info["uncertainty_mean"] = float(np.mean(score["forces_uncertainty"]))
            frame.info["energy_uncertainty"] = float(score["energy_uncertainty"])
        _write_frames(path, frames)
        self.say(k, "explore", f"{len(frames)} frames ({where}){self._spread(frames)} -> {path}", t0)
        return frames

    @staticmethod
    def _spread(frames: Sequence) -> str:
        if not frames:
            return ""
        u = np.array([f.info["uncertainty"] for f in frames])
        return f"; uncertainty max {u.max():.3g} eV/Å, median {np.median(u):.3g}"

    def select(self, k: int, frames: list, n: int, window: Dict[str, Any]) -> list:
        """At most ``n`` of ``frames``; by uncertainty only from ``window["inside"]`` (the indices in the
        trust window, :func:`_trust`)."""
        from mlip.workflows.active_learning.select import select_random, select_uncertain

        path = iteration_dir(self.out_dir, k) / SELECTED_NAME
        if path.is_file():
            chosen = _read_frames(path)
            self.say(k, "select", f"{len(chosen)} frames reused from {path}")
            return chosen
        u = [f.info["uncertainty"] for f in frames]
        if self.settings.selection == "random":
            picked = select_random(len(frames), n, (self.settings.seed, k, 11))
        else:
            inside = window["inside"]
            cutoff = float(self.base_config["model"]["cutoff"])
            picked = [inside[i] for i in select_uncertain([frames[i] for i in inside],
                                                          [u[i] for i in inside], n, cutoff)]
        chosen = [frames[i] for i in picked]
        _write_frames(path, chosen)
        values = [u[i] for i in picked]
        span = f" (uncertainty {min(values):.3g} to {max(values):.3g} eV/Å)" if values else ""
        self.say(k, "select", f"{len(chosen)} of {len(frames)} by {self.settings.selection}{span}"
                              f"{window['text']} -> {path}")
        return chosen

    def label(self, k: int, chosen: list) -> list:
        from mlip.data import read_dataset
        from mlip.workflows.labelling import label_structures, labelling_status, write_labelled

        folder = iteration_dir(self.out_dir, k)
        path = folder / LABELLED_NAME
        if path.is_file():
            labelled = read_dataset(path) if path.stat().st_size else []
            self.say(k, "label", f"{len(labelled)} labelled structures reused from {path}")
            return labelled
        t0 = time.perf_counter()
        labels_dir = folder / LABELS_DIR
        if self.oracle is not None:
            return self._label_by_command(k, folder, t0)
        counts = label_structures(chosen, self.labeller, labels_dir, n_shards=1, shard_index=0,
                                  progress=self.progress)
        _, failed, _ = labelling_status(chosen, labels_dir)
        write_json(labels_dir / "failures.json", {"failed": [{"id": i, "error": e} for i, e in failed]})
        written = write_labelled(chosen, labels_dir, path)[0]
        labelled = read_dataset(path) if written else []
        self.say(k, "label", f"{written} by {self.labeller.name} ({counts['computed']} computed, "
                             f"{counts['skipped']} reused, {len(failed)} failed) -> {path}", t0)
        return labelled

    def _label_by_command(self, k: int, folder: Path, t0: float) -> list:
        """The label stage as ``LAUNCHER -m mlip data label selected.xyz ...`` (resumable as that
        command is); RuntimeError naming the command when it fails."""
        import json
        import shlex
        import subprocess

        from mlip.data import read_dataset

        spec, settings, launcher = self.oracle
        path = folder / LABELLED_NAME
        command = [*launcher, "-m", "mlip", "data", "label", str(folder / SELECTED_NAME), "--calculator", spec,
                   *[a for key, value in sorted(settings.items()) for a in ("--setting",
                                                                            f"{key}={json.dumps(value)}")],
                   "--out-dir", str(folder / LABELS_DIR), "-o", str(path)]
        if not self.progress:
            command.append("--no-progress")
        try:
            code = subprocess.run(command).returncode
        except OSError as err:
            code = f"not started: {err.strerror or err}"
        if code != 0 or not path.is_file():
            why = code if code != 0 else f"no {LABELLED_NAME} written"
            raise RuntimeError(f"iteration {k} label: the oracle's command failed ({why}): "
                               f"{shlex.join(command)}")
        labelled = read_dataset(path) if path.stat().st_size else []
        self.say(k, "label", f"{len(labelled)} by {spec} through {shlex.join(launcher)} -> {path}", t0)
        return labelled

    def evaluate(self, k: int, record: Dict[str, Any]) -> Dict[str, Any]:
        from mlip.workflows.active_learning.quality import committee_errors

        path = iteration_dir(self.out_dir, k) / METRICS_NAME
        stored = read_json(path)
        if isinstance(stored, dict):
            self.say(k, "evaluate", f"reused {path}")
            return stored
        t0 = time.perf_counter()
        if self.heldout:
            potentials = load_committee(committee_paths(iteration_dir(self.out_dir, k), self.n))
            found = committee_errors(potentials, self.heldout, batch_size=self.settings.score_batch_size,
                                     progress=self.progress)
            record["heldout"] = {"n": len(self.heldout), "rank_correlation": found["rank_correlation"],
                                 **found["metrics"], "per_config_type": found["per_config_type"]}
            m = record["heldout"]
            text = (f"held-out forces MAE {m['forces_mae_meV_per_A']:.1f} meV/Å, energy "
                    f"{m['energy_mae_meV_per_atom']:.2f} meV/atom; rank correlation of uncertainty and force "
                    f"error {found['rank_correlation']:.2f} ({len(self.heldout)} structures)")
        else:
            text = "no held-out file: label and training counts only"
        write_json(path, record)
        self.say(k, "evaluate", f"{text} -> {path}", t0)
        return record


def _labelled_so_far(out_dir: Path, k: int) -> list:
    """The labelled frames of iterations 1 … k (read from their ``labelled.xyz``)."""
    from mlip.data import read_dataset

    samples = []
    for j in range(1, k + 1):
        path = iteration_dir(out_dir, j) / LABELLED_NAME
        if path.is_file() and path.stat().st_size:
            samples.extend(read_dataset(path))
    return samples


def _selected_count(out_dir: Path, k: int) -> int:
    path = iteration_dir(out_dir, k) / SELECTED_NAME
    return len(_read_frames(path)) if path.is_file() else 0


def _trust(settings: LearnSettings, frames: Sequence) -> Dict[str, Any]:
    """The trust window of an iteration's candidates (:func:`.select.trust_window`): ``inside`` (the
    indices selection by uncertainty picks from), ``record`` (the counts and the ids above ``trust_hi``,
    for metrics.json; empty without a window) and ``text`` (for the select line)."""
    from mlip.workflows.active_learning.select import trust_window

    lo, hi = settings.trust_lo, settings.trust_hi
    inside, below, above = trust_window([f.info["uncertainty"] for f in frames], lo, hi)
    window = {"inside": [int(i) for i in inside], "record": {}, "text": ""}
    if lo is None and hi is None:
        return window
    window["record"] = {"trust_lo": lo, "trust_hi": hi, "in_trust_window": int(inside.size),
                        "below_trust_lo": int(below.size), "above_trust_hi": int(above.size),
                        "above_trust_hi_ids": [str(frames[i].info.get("id", i)) for i in above]}
    bounds = f"[{'0' if lo is None else f'{lo:g}'}, {'∞' if hi is None else f'{hi:g}'}] eV/Å"
    window["text"] = (f"; trust window {bounds}: {inside.size} in it, {below.size} below (accurate), "
                      f"{above.size} above (failed exploration, not labelled)")
    return window


#: the entries of ``learn.json`` that name files
PATH_KEYS = ("initial", "heldout", "seeds", "pool", "committee", "finetune_from")


def _portable(path: Union[str, Path, None], out_dir: Path) -> Optional[str]:
    """A file named in ``learn.json``, relative to the run folder: the record holds no path of the
    machine that made it, and a folder moved or cloned with the files it names resumes."""
    if path is None:
        return None
    return os.path.relpath(Path(path).resolve(), Path(out_dir).resolve()).replace(os.sep, "/")


def _portable_model(settings: Dict[str, Any], out_dir: Path) -> Dict[str, Any]:
    """The settings as recorded: a ``model`` that names a config file, relative to the run folder (a
    shipped model's name stays as it is)."""
    from mlip.io import jsonable

    model = settings["model"]
    if os.path.isabs(model) or Path(model).is_file():
        settings = {**settings, "model": _portable(model, out_dir)}
    return jsonable(settings)


def _check_folder(out_dir: Path, record: Dict[str, Any], resume: bool) -> None:
    """Refuse a folder that holds another run (unless ``resume``) or a resume that changes a setting other
    than :data:`RESUMABLE` (ValueError naming it)."""
    from mlip.io import first_difference, jsonable

    recorded = read_json(out_dir / SETTINGS_NAME)
    if recorded is None:
        if resume:
            raise ValueError(f"nothing to resume: {out_dir / SETTINGS_NAME} does not exist")
        taken = sorted(p.name for p in out_dir.glob("iter-*")) if out_dir.is_dir() else []
        if taken:
            raise ValueError(f"out_dir {str(out_dir)!r} holds {', '.join(taken[:3])} but no {SETTINGS_NAME}: "
                             "not an active-learning folder; choose another out_dir")
        return
    if not resume:
        raise ValueError(f"out_dir {str(out_dir)!r} already holds an active-learning run ({SETTINGS_NAME}); "
                         "continue it with --resume (resume=True) or choose another out_dir")

    # a setting added since the folder was made (trust_lo, trust_hi) was then at its default
    added = {k: v for k, v in jsonable(LearnSettings().to_dict()).items() if k not in recorded["settings"]}
    recorded = {**recorded, "settings": {**added, **recorded["settings"]}}
    # a folder made before the paths were recorded relative to it names them absolutely
    for key in PATH_KEYS:
        value = recorded.get(key)
        if isinstance(value, list):
            recorded[key] = [_portable(v, out_dir) if os.path.isabs(v) else v for v in value]
        elif isinstance(value, str) and os.path.isabs(value):
            recorded[key] = _portable(value, out_dir)
    model = recorded["settings"].get("model")
    if isinstance(model, str) and os.path.isabs(model):
        recorded["settings"] = {**recorded["settings"], "model": _portable(model, out_dir)}

    def fixed(rec):
        return {**rec, "settings": {k: v for k, v in rec["settings"].items() if k not in RESUMABLE}}

    changed = first_difference(fixed(recorded), fixed(record))
    if changed is not None:
        key, before, now = changed
        raise ValueError(f"cannot resume {str(out_dir)!r}: it was made with {key} = {before!r}, this run "
                         f"gives {now!r}; only {', '.join(RESUMABLE)} may change (or choose another out_dir)")


def _read_inputs(initial, heldout, seeds, pool):
    """The labelled initial and held-out data, the seeds (the initial structures when none are given) and
    the fixed pool, as lists; ValueError naming a missing or unreadable file."""
    import ase.io

    from mlip.data import read_dataset
    from mlip.training.samples import atoms_of

    def need(path, what):
        if not Path(path).is_file():
            raise ValueError(f"{what} {str(path)!r} does not exist")

    need(initial, "initial data")
    initial_samples = list(read_dataset(initial))
    if not initial_samples:
        raise ValueError(f"initial data {str(initial)!r} holds no structure")
    elements = sorted({int(z) for s in initial_samples for z in atoms_of(s).numbers})
    from mlip.elements import to_symbols

    symbols = to_symbols(elements)
    heldout_samples = None
    if heldout is not None:
        need(heldout, "held-out data")
        heldout_samples = list(read_dataset(heldout, species=symbols))
    if seeds is not None:
        need(seeds, "seed structures")
        seed_frames = ase.io.read(str(seeds), ":")
    else:
        seed_frames = [atoms_of(s).copy() for s in initial_samples]
    seed_frames = [a for a in seed_frames if len(a) >= 2 or a.pbc.any()]  # not isolated atoms
    for what, frames in (("seed structures", seed_frames),):
        for k, a in enumerate(frames):
            extra = sorted(set(a.get_chemical_symbols()) - set(symbols))
            if extra:
                raise ValueError(f"{what}: structure {k} has {', '.join(extra)}, which the initial data "
                                 f"(and so the committee) lack ({', '.join(symbols)})")
    if not seed_frames and pool is None:
        raise ValueError("no seed structure to explore from, only isolated atoms (give seeds or a pool)")
    pool_frames = None
    if pool is not None:
        need(pool, "candidate pool")
        pool_frames = ase.io.read(str(pool), ":")
        for k, a in enumerate(pool_frames):
            extra = sorted(set(a.get_chemical_symbols()) - set(symbols))
            if extra:
                raise ValueError(f"candidate pool: structure {k} has {', '.join(extra)}, which the initial "
                                 f"data lack ({', '.join(symbols)})")
            a.calc = None
            a.info.setdefault("id", f"pool-{k:05d}")
    return initial_samples, heldout_samples, seed_frames, pool_frames, symbols


def learn(initial: Union[str, Path], oracle: str = "emt", out_dir: Union[str, Path] = "learn", *,
          heldout: Union[str, Path, None] = None, seeds: Union[str, Path, None] = None,
          pool: Union[str, Path, None] = None, oracle_settings: Optional[Dict[str, Any]] = None,
          settings: Union[LearnSettings, Dict[str, Any], None] = None, resume: bool = False,
          progress: bool = True, log: Callable[[str], None] = print, command: Optional[str] = None,
          committee: Optional[Sequence[Union[str, Path]]] = None,
          oracle_launcher: Optional[Sequence[str]] = None,
          finetune_from: Union[str, Path, None] = None) -> LearnResult:
    """Run (or, with ``resume``, continue) the active-learning loop in ``out_dir`` (module docstring).

    Args:
        initial: labelled structures (any file :func:`mlip.data.read_dataset` reads) to train the first
            committee on; its elements are the committee's.
        oracle: the labeller (:func:`mlip.workflows.labelling.labeller`: ``emt``, ``gpaw``, ``chgnet`` or
            an ASE calculator class ``package.module:Class``), with keyword ``oracle_settings``.
        heldout: labelled structures to evaluate every iteration's committee on (never trained on).
        seeds: structures to explore from (default: the initial structures, less isolated atoms).
        pool: a fixed file of candidates scored and selected from in every iteration, in place of the
            exploration (the benchmark's "same pool" comparison, or candidates of your own).
        settings: a :class:`LearnSettings` or a mapping of its fields (``explore`` a mapping of
            :class:`ExploreSettings`' fields).
        resume: continue the run in ``out_dir`` (a new run refuses a folder that holds one).
        progress: progress bars; ``log`` receives one line per stage.
        command: the command line recorded in the folder's run lock, which a second run is shown
            (default: this process's).
        committee: checkpoints trained elsewhere to start from, one per member, in place of iteration
            0's training (each must be able to warm-start a member of ``settings.model``: the same
            architecture, species in the order of the initial data's atomic numbers, cutoff and
            hyperparameters).
        finetune_from: a pre-trained checkpoint of ``settings.model``'s architecture from which iteration
            0 fine-tunes every member (``settings.epochs`` on the initial data, each from its own seed:
            its order of the data and its validation part), instead of training from random weights: a
            committee of a model too costly to train from scratch N times. Excludes ``committee``.
        oracle_launcher: a command that starts a Python in which the oracle labels (e.g.
            ``["mpiexec", "-n", "2", "gpaw", "python"]``); the label stage then runs ``mlip data label``
            as it. How the oracle is run, not what it computes: a resumed run may give another.

    Raises ValueError naming the problem for bad settings or inputs, a folder holding another run, or a
    resume that changes a setting other than when to stop.
    """
    from mlip.io import json_roundtrip, jsonable
    from mlip.run_lock import folder_lock
    from mlip.training import TrainConfig
    from mlip.workflows.distill import student_config
    from mlip.workflows.labelling import labeller

    if not isinstance(settings, LearnSettings):
        data = dict(settings or {})
        explore = data.pop("explore", None)
        unknown = sorted(set(data) - set(LearnSettings.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown learn setting(s) {', '.join(unknown)}")
        settings = LearnSettings(**data, explore=explore if isinstance(explore, ExploreSettings)
                                 else ExploreSettings.from_dict(explore))
    settings.check()
    lab = labeller(oracle, oracle_settings)
    out_dir = Path(out_dir)
    initial_samples, heldout_samples, seed_frames, pool_frames, symbols = _read_inputs(
        initial, heldout, seeds, pool)
    base = student_config(settings.model, symbols)
    TrainConfig.from_dict({**base, "data": {"train": "-"}}, where="committee model")  # a bad config fails now
    record = json_roundtrip({
        "initial": _portable(initial, out_dir), "oracle": oracle,
        "oracle_settings": dict(oracle_settings or {}),
        "heldout": _portable(heldout, out_dir), "seeds": _portable(seeds, out_dir),
        "pool": _portable(pool, out_dir),
        "elements": symbols, "model_config": base, "settings": _portable_model(settings.to_dict(), out_dir),
        "committee": None if committee is None else [_portable(p, out_dir) for p in committee]})
    if finetune_from is not None:  # recorded only when given: folders made before it still resume
        record["finetune_from"] = _portable(finetune_from, out_dir)
        if committee is not None:
            raise ValueError("finetune_from and committee exclude each other: the first committee is either "
                             "fine-tuned from one checkpoint or given")
        check_adoptable(base, [finetune_from])
    if committee is not None and len(committee) != settings.committee:
        raise ValueError(f"{len(committee)} committee checkpoints given for a committee of "
                         f"{settings.committee}")
    if committee is not None:
        check_adoptable(base, committee)
    with folder_lock(out_dir, command=command):
        _check_folder(out_dir, record, resume)
        write_json(out_dir / SETTINGS_NAME, record)
        run = _Run(out_dir, settings, lab, base, initial_samples, heldout_samples, seed_frames, pool_frames,
                   progress, log, None if committee is None else [Path(p) for p in committee],
                   None if not oracle_launcher else (oracle, dict(oracle_settings or {}),
                                                     [str(a) for a in oracle_launcher]),
                   None if finetune_from is None else Path(finetune_from))
        return _loop(run)


def _loop(run: _Run) -> LearnResult:
    """Iteration 0, then iterations until a stop condition (module docstring)."""
    settings, out_dir = run.settings, run.out_dir
    members = run.train(0, run.initial)
    iterations = [run.evaluate(0, {"iteration": 0, "labels": 0, "n_train": len(run.initial)})]
    labels, k, stopped = 0, 0, ""
    while True:
        remaining = settings.label_budget - labels
        if k >= settings.max_iterations:
            stopped = f"max_iterations ({settings.max_iterations}) reached"
            break
        if remaining <= 0:
            stopped = f"label budget of {settings.label_budget} spent"
            break
        k += 1
        frames = run.explore(k, members)
        top = max((f.info["uncertainty"] for f in frames), default=0.0)
        if not frames or (settings.threshold is not None and top < settings.threshold):
            stopped = (f"the exploration of iteration {k} found nothing" if not frames else
                       f"the exploration of iteration {k} stayed below the threshold "
                       f"({top:.3g} < {settings.threshold:g} eV/Å)")
            iterations.append({"iteration": k, "labels": labels, "explored": len(frames),
                               "max_uncertainty": top, "stopped": stopped})
            break
        window = _trust(settings, frames)
        if settings.selection == "uncertainty" and not window["inside"]:
            w = window["record"]
            stopped = (f"nothing of the exploration of iteration {k} is in the trust window "
                       f"({w['below_trust_lo']} below trust_lo, {w['above_trust_hi']} above trust_hi)")
            iterations.append({"iteration": k, "labels": labels, "explored": len(frames),
                               "max_uncertainty": top, **w, "stopped": stopped})
            break
        chosen = run.select(k, frames, min(settings.per_iteration, remaining), window)
        labels += len(chosen)
        labelled = run.label(k, chosen)
        members = run.train(k, run.initial + _labelled_so_far(out_dir, k))
        u = np.array([f.info["uncertainty"] for f in frames])
        iterations.append(run.evaluate(k, {
            "iteration": k, "labels": labels, "selected": len(chosen), "labelled": len(labelled),
            "n_train": len(run.initial) + len(_labelled_so_far(out_dir, k)), "explored": len(frames),
            "max_uncertainty": float(u.max()), "median_uncertainty": float(np.median(u)),
            "selected_uncertainty": [float(f.info["uncertainty"]) for f in chosen], **window["record"]}))
    summary = out_dir / SUMMARY_NAME
    write_json(summary, {"stopped": stopped, "labels": labels, "iterations": iterations,
                         "committee": [str(p) for p in members]})
    run.log(f"stop: {stopped}; {labels} labels in {k} iteration(s); committee: {len(members)} members in "
            f"{members[0].parent} (member-*.safetensors) -> {summary}")
    return LearnResult(out_dir=out_dir, iterations=iterations, stopped=stopped, labels=labels,
                       committee=list(members), summary=summary)


__all__ = ["LABELLED_NAME", "LearnResult", "METRICS_NAME", "POOL_NAME", "SELECTED_NAME", "SETTINGS_NAME",
           "SUMMARY_NAME", "iteration_dir", "learn"]
