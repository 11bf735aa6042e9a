"""The training and validation structures of a run: given, or read from ``config.data`` and split."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

from mlip.data.splits import train_valid_split
from mlip.training.config import TrainConfig
from mlip.training.samples import config_type_of, labels_of, loss_weights, without_config_types


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


def training_sets(config: TrainConfig, train_samples: Optional[Sequence], valid_samples: Optional[Sequence],
                  report: bool) -> Tuple[list, list]:
    """The run's ``(training, validation)`` structures: those given, else ``config.data``'s (the
    validation set read, or split off the training set by ``valid_fraction``), less the
    ``exclude_config_types`` (their counts printed when ``report``). ValueError for no or an empty
    training set, or a training structure without labels."""
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
                                                             valid_samples, report)
    if not train_samples:
        raise ValueError("the training set is empty")
    for i, s in enumerate(train_samples):
        labels_of(s, f"training structure {i}")
        loss_weights(s, f"training structure {i}")
    for i, s in enumerate(valid_samples):
        loss_weights(s, f"validation structure {i}")
    return train_samples, valid_samples
