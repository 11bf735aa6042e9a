"""The committee of an active-learning iteration: N members trained with the package's trainer from
seeds ``seed`` … ``seed + N − 1``, each warm-started from its own weights of the previous iteration.

Member k of an iteration folder is trained in ``training/member-k/`` (the trainer's checkpoints, train
state and metrics; its one line per epoch goes to ``training/member-k/train.log``), and its best weights
are copied to ``member-k.safetensors`` when it has finished: that file is what later stages and
iterations load, and its presence is what a resumed run skips. A member killed during training resumes
from its train state. A loop may also start from members trained elsewhere (:func:`adopt_committee`).
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from mlip.io import atomic_write

TRAINING_DIR = "training"


def member_path(folder: Path, k: int) -> Path:
    """Where member ``k``'s finished weights lie in an iteration folder."""
    return Path(folder) / f"member-{k}.safetensors"


def committee_paths(folder: Path, n: int) -> List[Path]:
    return [member_path(folder, k) for k in range(n)]


def is_trained(folder: Path, n: int) -> bool:
    """Whether every member of the committee in ``folder`` has finished."""
    return all(p.is_file() for p in committee_paths(folder, n))


def member_config(base: Dict[str, Any], k: int, seed: int, epochs: int, out_dir: Path,
                  init_from: Optional[Path]):
    """The :class:`mlip.training.TrainConfig` of member ``k``: ``base`` (a training config mapping with
    the model's species) with the member's seed, epochs, folder and starting weights."""
    from mlip.training import TrainConfig

    config = {k_: v for k_, v in base.items() if k_ not in ("data", "out_dir", "init_from")}
    config.update(seed=int(seed) + k, epochs=int(epochs), out_dir=str(out_dir))
    if init_from is not None:
        config["init_from"] = str(init_from)
    return TrainConfig.from_dict(config, where=f"committee member {k}")


def train_committee(base: Dict[str, Any], samples: Sequence, folder: Path, n: int, seed: int, epochs: int,
                    previous: Optional[Sequence[Path]] = None, progress: bool = True,
                    on_member: Optional[Callable[[int], None]] = None) -> List[Path]:
    """Train (or resume, or skip where finished) the ``n`` members on ``samples`` (labelled Atoms or
    samples) in ``folder``; ``previous``: the members of the last iteration to start from (None: random
    weights). Each member splits off its own validation part (the config's ``data.valid_fraction``,
    seeded by its seed). Returns the paths of the members' weights."""
    from mlip.data.splits import train_valid_split
    from mlip.training import train
    from mlip.training.run_dir import STATE_NAME

    paths = committee_paths(folder, n)
    for k, path in enumerate(paths):
        if path.is_file():
            continue
        out_dir = Path(folder) / TRAINING_DIR / f"member-{k}"
        config = member_config(base, k, seed, epochs, out_dir, None if previous is None else previous[k])
        train_part, valid_part = train_valid_split(list(samples), config.data.valid_fraction, config.seed)
        resume = (out_dir / STATE_NAME).is_file()
        out_dir.mkdir(parents=True, exist_ok=True)
        with open(out_dir / "train.log", "a") as log, contextlib.redirect_stdout(log):
            result = train(config, train_part, valid_part, resume=resume, progress=progress)
        atomic_write(path, lambda tmp, best=result.best: shutil.copyfile(best, tmp))
        if on_member is not None:
            on_member(k)
    return paths


def check_adoptable(base: Dict[str, Any], sources: Sequence[Path]) -> None:
    """ValueError naming the first of the checkpoints ``sources`` that cannot warm-start a member of the
    training config ``base`` (the trainer's ``init_from`` check: architecture, species in order, cutoff,
    hyperparameters, terms), or that does not exist."""
    from mlip.models import create_model
    from mlip.training.initial_model import load_initial_weights

    model = {k: v for k, v in base["model"].items() if k != "name"}
    for source in sources:
        if not Path(source).is_file():
            raise ValueError(f"committee member {str(source)!r} does not exist")
        load_initial_weights(create_model(base["model"]["name"], **model), str(source))


def adopt_committee(sources: Sequence[Path], folder: Path) -> List[Path]:
    """Copy the trained checkpoints ``sources`` (checked by :func:`check_adoptable`) into ``folder`` as its
    committee: iteration 0 of a loop that starts from models trained elsewhere. Copies made are kept."""
    paths = committee_paths(folder, len(sources))
    for source, path in zip(sources, paths):
        if not path.is_file():
            atomic_write(path, lambda tmp, source=source: shutil.copyfile(source, tmp))
    return paths


def load_committee(paths: Sequence[Path]) -> list:
    """The members' potentials."""
    from mlip.pretrained import load_potential

    return [load_potential(str(p)) for p in paths]


__all__ = ["TRAINING_DIR", "adopt_committee", "check_adoptable", "committee_paths", "is_trained",
           "load_committee", "member_config", "member_path", "train_committee"]
