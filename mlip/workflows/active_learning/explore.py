"""Exploration: the candidate structures of an iteration, made from seeds with the committee's mean forces.

Tasks (:func:`exploration_tasks`, drawn from the iteration's own random stream, so a resumed iteration
makes the same ones): Langevin MD at every temperature of the schedule, FIRE relaxations of rattled
seeds, strained seeds and rattled seeds (:class:`~mlip.workflows.active_learning.settings.ExploreSettings`).
Each task's frames are written to ``explore/task-NNN.xyz`` as soon as the task ends (atomically), so a
killed exploration resumes after its last finished task. An MD run or relaxation stops early, keeping
its frames, where the committee's largest per-atom force uncertainty passes ``stop_uncertainty`` or the
structure becomes invalid (atoms on top of each other): the frames just before are the ones the
committee knows least.

Every frame carries ``id`` (``it001-t003-f02``: iteration, task, frame), ``config_type``
(``explore_md``, ``explore_relax``, ``explore_strained``, ``explore_rattled``), ``seed_id`` (the seed's
id or index), ``seed_config_type`` and, for MD, ``temperature_K``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Sequence

import numpy as np

from mlip.workflows.active_learning.settings import ExploreSettings

TASKS_DIR = "explore"


@dataclass
class Task:
    """One exploration task: ``kind`` (md, relax, strained, rattled), the index of its seed, its
    temperature (MD only) and the seed of its random stream."""

    index: int
    kind: str
    seed_index: int
    temperature: Optional[float]
    rng_seed: int


def exploration_tasks(settings: ExploreSettings, n_seeds: int, seed: int, iteration: int) -> List[Task]:
    """The tasks of ``iteration`` (deterministic in ``seed`` and ``iteration``)."""
    rng = np.random.default_rng([int(seed), int(iteration), 7])
    plan = [("md", float(t)) for t in settings.temperatures for _ in range(settings.md_runs)] \
        if settings.md_steps else []
    plan += [("relax", None)] * settings.relaxations + [("strained", None)] * settings.strained
    plan += [("rattled", None)] * settings.rattled
    return [Task(i, kind, int(rng.integers(n_seeds)), temperature, int(rng.integers(2**31)))
            for i, (kind, temperature) in enumerate(plan)]


def _clean(atoms, info: dict):
    """A bare copy of ``atoms`` (no calculator, constraints or momenta) with ``info``."""
    from ase import Atoms

    frame = Atoms(atoms.numbers, positions=atoms.positions, cell=atoms.cell, pbc=atoms.pbc)
    if frame.pbc.all():
        frame.wrap()
    frame.info = dict(info)
    return frame


def _too_uncertain(atoms, limit: float) -> bool:
    return float(np.max(atoms.calc.get_forces_uncertainty(atoms))) > limit


def _md(seed_atoms, calc, task: Task, settings: ExploreSettings) -> list:
    """Frames of a Langevin run from ``seed_atoms`` at the task's temperature."""
    from ase import units
    from ase.constraints import FixCom
    from ase.md import velocitydistribution as vd
    from ase.md.langevin import Langevin

    rng = np.random.default_rng(task.rng_seed)
    atoms = seed_atoms.copy()
    atoms.calc = calc
    thermalize = getattr(vd, "thermalize_momenta", None)  # ASE >= 3.29
    if thermalize is not None:
        thermalize(atoms, task.temperature, rng=rng)
    else:  # pragma: no cover - older ASE
        vd.MaxwellBoltzmannDistribution(atoms, temperature_K=task.temperature, rng=rng)
    vd.Stationary(atoms)
    atoms.set_constraint(FixCom())
    dyn = Langevin(atoms, settings.timestep_fs * units.fs, temperature_K=task.temperature,
                   friction=settings.friction / units.fs, fixcm=False, rng=rng)
    frames = []
    try:
        for _ in range(settings.md_steps // settings.md_interval):
            dyn.run(settings.md_interval)
            frames.append(_clean(atoms, {"temperature_K": float(task.temperature)}))
            if _too_uncertain(atoms, settings.stop_uncertainty):
                break
    except (ValueError, RuntimeError):  # atoms on top of each other, a cell too small: the run ends here
        pass
    return frames


def _relax(seed_atoms, calc, task: Task, settings: ExploreSettings) -> list:
    """Frames along a FIRE relaxation of the seed rattled by ``settings.rattle``."""
    from ase.optimize import FIRE

    rng = np.random.default_rng(task.rng_seed)
    atoms = seed_atoms.copy()
    atoms.positions = atoms.positions + rng.normal(scale=settings.rattle, size=atoms.positions.shape)
    atoms.calc = calc
    opt = FIRE(atoms, logfile=None)
    frames = []
    try:
        for _ in range(max(1, settings.relax_steps // settings.relax_interval)):
            frames.append(_clean(atoms, {}))
            if _too_uncertain(atoms, settings.stop_uncertainty):
                break
            if opt.run(fmax=0.01, steps=settings.relax_interval):
                break
    except (ValueError, RuntimeError):
        pass
    return frames


def _perturbed(seed_atoms, task: Task, settings: ExploreSettings) -> list:
    """One strained or rattled copy of the seed (no model needed)."""
    from mlip.data.structures import strain

    rng = np.random.default_rng(task.rng_seed)
    atoms = seed_atoms.copy()
    if task.kind == "strained" and atoms.pbc.all():
        strain(atoms, rng, volume=settings.strain, shear=settings.strain / 2)
        sigma = 0.02
    else:
        sigma = settings.rattle
    atoms.positions = atoms.positions + rng.normal(scale=sigma, size=atoms.positions.shape)
    return [_clean(atoms, {})]


def run_task(task: Task, seeds: Sequence, calc, settings: ExploreSettings, iteration: int) -> list:
    """The frames of ``task`` with their ids and provenance."""
    seed_atoms = seeds[task.seed_index]
    if task.kind == "md":
        frames = _md(seed_atoms, calc, task, settings)
    elif task.kind == "relax":
        frames = _relax(seed_atoms, calc, task, settings)
    else:
        frames = _perturbed(seed_atoms, task, settings)
    seed_id = str(seed_atoms.info.get("id", task.seed_index))
    for j, frame in enumerate(frames):
        frame.info.update({"id": f"it{iteration:03d}-t{task.index:03d}-f{j:02d}",
                           "config_type": f"explore_{task.kind}", "seed_id": seed_id,
                           "seed_config_type": str(seed_atoms.info.get("config_type", ""))})
    return frames


def explore(seeds: Sequence, calc, settings: ExploreSettings, folder: Path, seed: int, iteration: int,
            progress: bool = True, on_task: Optional[Callable[[Task, int], None]] = None) -> list:
    """All frames of ``iteration``'s tasks, each task computed once (its file in ``folder/explore/``
    is reused by a resumed run). ``calc``: the committee's :class:`CommitteeCalculator`."""
    import ase.io

    from mlip.io import atomic_write

    tasks = exploration_tasks(settings, len(seeds), seed, iteration)
    tasks_dir = Path(folder) / TASKS_DIR
    tasks_dir.mkdir(parents=True, exist_ok=True)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(tasks), desc="explore", unit="task", leave=False, dynamic_ncols=True)
    frames = []
    for task in tasks:
        path = tasks_dir / f"task-{task.index:03d}.xyz"
        if path.is_file():
            made = ase.io.read(path, ":") if path.stat().st_size else []
        else:
            made = run_task(task, seeds, calc, settings, iteration)
            # a task that made no frame (an MD run that failed at once) leaves an empty file
            atomic_write(path, lambda tmp, made=made: ase.io.write(tmp, made, format="extxyz") if made
                         else Path(tmp).write_text(""))
        frames.extend(made)
        if on_task is not None:
            on_task(task, len(made))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return frames


__all__ = ["TASKS_DIR", "Task", "explore", "exploration_tasks", "run_task"]
