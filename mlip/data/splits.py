"""Seeded train/validation/test splits, optionally keeping correlated frames (a group) together."""

from __future__ import annotations

from typing import Callable, Hashable, List, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ["split_dataset", "split_indices", "train_valid_split"]


def _check_fractions(fractions) -> np.ndarray:
    f = np.asarray(fractions, dtype=np.float64)
    if f.ndim != 1 or f.size == 0:
        raise ValueError(f"fractions must be a non-empty sequence, got {fractions!r}")
    if not np.all(np.isfinite(f)) or np.any(f < 0):
        raise ValueError(f"fractions must be finite and non-negative, got {list(fractions)}")
    if abs(f.sum() - 1.0) > 1e-6:
        raise ValueError(f"fractions must sum to 1, got {list(fractions)} (sum {f.sum():.6g})")
    return f / f.sum()


def _group_labels(items, n: int, group_by) -> Optional[List[Hashable]]:
    if group_by is None:
        return None
    if isinstance(group_by, str):
        if items is None:
            raise ValueError("group_by given as an attribute name needs the samples, not a count")
        labels = []
        for k, item in enumerate(items):
            value = getattr(item, group_by, None)
            if value is None and hasattr(item, "info"):  # ase.Atoms
                value = item.info.get(group_by)
            if value is None and hasattr(item, "atoms"):
                value = item.atoms.info.get(group_by)
            # No group: the item is its own group.
            labels.append(("__single__", k) if value is None else value)
        return labels
    if callable(group_by):
        if items is None:
            raise ValueError("a group_by function needs the samples, not a count")
        return [group_by(item) for item in items]
    labels = list(group_by)
    if len(labels) != n:
        raise ValueError(f"group_by has {len(labels)} labels for {n} items")
    return labels


def split_indices(
    n: int,
    fractions: Sequence[float] = (0.8, 0.1, 0.1),
    seed: int = 0,
    groups: Optional[Sequence[Hashable]] = None,
) -> Tuple[np.ndarray, ...]:
    """Disjoint index arrays covering ``range(n)``, one per fraction, deterministic for a seed.

    Without groups: a seeded permutation cut at ``round(cumsum(fractions) · n)``, so the sizes are the
    fractions to within one item. With ``groups`` (one hashable label per item): groups are shuffled with
    the seed and each goes, whole, to the split currently furthest below its target item count
    (``fraction · n``), so no group straddles two splits and sizes are within about one group of the
    targets. Every returned array is sorted.
    """
    n = int(n)
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    f = _check_fractions(fractions)
    rng = np.random.default_rng(seed)
    if groups is None:
        perm = rng.permutation(n)
        bounds = np.rint(np.cumsum(f) * n).astype(np.int64)
        bounds[-1] = n
        starts = np.concatenate([[0], bounds[:-1]])
        return tuple(np.sort(perm[a:b]) for a, b in zip(starts, bounds))
    if len(groups) != n:
        raise ValueError(f"groups has {len(groups)} labels for {n} items")
    members: dict = {}
    for i, g in enumerate(groups):  # insertion order: deterministic, independent of hash seeds
        members.setdefault(g, []).append(i)
    order = rng.permutation(len(members))
    keys = list(members)
    targets = f * n
    counts = np.zeros(len(f))
    out: List[List[int]] = [[] for _ in f]
    for gi in order:
        idx = members[keys[gi]]
        k = int(np.argmax(targets - counts))  # first split with the largest deficit
        out[k].extend(idx)
        counts[k] += len(idx)
    return tuple(np.array(sorted(o), dtype=np.int64) for o in out)


def split_dataset(
    samples_or_n: Union[int, Sequence],
    fractions: Sequence[float] = (0.8, 0.1, 0.1),
    seed: int = 0,
    group_by: Union[None, str, Callable, Sequence[Hashable]] = None,
    return_indices: bool = False,
    stratify_by: Union[None, str, Callable, Sequence[Hashable]] = None,
):
    """Split samples (or ``range(n)``) into disjoint, complete, seed-deterministic parts.

    Args:
        samples_or_n: a sequence of samples (:class:`~mlip.data.Sample`, ``ase.Atoms``, anything) or a count.
        fractions: one fraction per part (any number of parts), non-negative, summing to 1.
        seed: the split is a function of (number of items, fractions, seed, groups) only.
        group_by: keep correlated items in the same part: ``"group"`` (``Sample.group``, e.g. the MPtrj
            mp_id or the EMT generator's trajectory/parent id; items without one are their own group),
            another attribute or ``atoms.info`` key name, a function ``item → label``, or a sequence of
            labels (required form when ``samples_or_n`` is a count).
        return_indices: return index arrays instead of lists of samples.
        stratify_by: split each stratum separately (e.g. ``"config_type"``, so every kind of structure is
            in every part in the same proportions), given like ``group_by``; the stratum of a group is
            that of its first item. Strata are split in the order of their sorted labels, each with its
            own seed drawn from ``seed``.

    Returns:
        A tuple with one entry per fraction: lists of the samples (in their original order) or, for a count
        or with ``return_indices=True``, sorted int64 index arrays.
    """
    if isinstance(samples_or_n, (int, np.integer)):
        items, n = None, int(samples_or_n)
    else:
        items = samples_or_n if hasattr(samples_or_n, "__getitem__") else list(samples_or_n)
        n = len(items)
    labels = _group_labels(items, n, group_by)
    if stratify_by is None:
        parts = split_indices(n, fractions, seed, labels)
    else:
        # items without a label form one stratum of their own
        strata = ["(none)" if isinstance(s, tuple) and s and s[0] == "__single__" else str(s)
                  for s in _group_labels(items, n, stratify_by)]
        if labels is not None:  # a group goes with the stratum of its first item
            first: dict = {}
            strata = [first.setdefault(g, s) for g, s in zip(labels, strata)]
        names = sorted(set(strata))
        seeds = np.random.SeedSequence(int(seed)).generate_state(len(names))
        collected: List[List[int]] = [[] for _ in fractions]
        for name, stratum_seed in zip(names, seeds):
            members = np.array([i for i, s in enumerate(strata) if s == name], dtype=np.int64)
            member_groups = None if labels is None else [labels[i] for i in members]
            split = split_indices(len(members), fractions, int(stratum_seed), member_groups)
            for k, part in enumerate(split):
                collected[k].extend(members[part].tolist())
        parts = tuple(np.array(sorted(c), dtype=np.int64) for c in collected)
    if items is None or return_indices:
        return parts
    return tuple([items[int(i)] for i in p] for p in parts)


def train_valid_split(samples: Sequence, valid_fraction: float, seed: int = 0) -> Tuple[list, list]:
    """The training's (train, valid) split: ``valid_fraction`` of the samples in valid (the
    config's ``data.valid_fraction``), seeded by ``seed``; samples that share a ``group`` (one MD
    trajectory, one mp_id) stay on the same side. ``valid_fraction <= 0`` gives ``(samples, [])``."""
    if valid_fraction <= 0:
        return samples, []
    grouped = any(getattr(s, "group", None) is not None for s in samples)
    train_part, valid_part = split_dataset(samples, fractions=(1 - valid_fraction, valid_fraction), seed=seed,
                                           group_by="group" if grouped else None)
    return list(train_part), list(valid_part)
