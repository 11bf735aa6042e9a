"""Selection: which candidates of an exploration go to the oracle.

``uncertainty`` (:func:`select_uncertain`): the most uncertain candidates, kept apart from each other.
The candidates are ranked by their uncertainty u (the largest per-atom force uncertainty, eV/Å); the
first is the most uncertain; then, among the ``oversample`` × n most uncertain, each next pick maximises
u · min(1, d / d_ref), d being its fingerprint distance to the nearest frame picked so far and d_ref the
median distance between those candidates: a frame close to one already picked (the next snapshot of the
same MD run) counts for less, a distinct one for its full uncertainty. The fingerprint
(:func:`fingerprint`) is the histogram of interatomic distances per atom up to the cutoff beside the
composition: cheap, invariant to rotations, translations and the order of atoms.

A trust window (:func:`trust_window`, DP-GEN's ``model_devi_f_trust_lo``/``_hi``) may come first: a
candidate whose uncertainty is above ``trust_hi`` (or not a number) is taken for a failed exploration
(atoms pushed together, a melted or exploded cell) rather than a structure worth a label, and one below
``trust_lo`` for a structure the committee already predicts well; selection by uncertainty picks only
from the candidates between the two.

``random`` (:func:`select_random`): n candidates drawn uniformly, the baseline of the benchmark.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

#: bins of the distance histogram of :func:`fingerprint`
BINS = 24
#: weight of the composition beside the distance histogram in :func:`fingerprint`
COMPOSITION_WEIGHT = 3.0


def fingerprint(atoms, elements: Sequence[int], cutoff: float) -> np.ndarray:
    """[BINS + len(elements)]: the number of neighbours per atom in each of BINS distance bins up to
    ``cutoff`` (periodic images included), then the fraction of each element of ``elements`` times
    :data:`COMPOSITION_WEIGHT`."""
    from ase.neighborlist import neighbor_list

    distances = neighbor_list("d", atoms, cutoff) if len(atoms) > 1 or atoms.pbc.any() else np.zeros(0)
    hist = np.histogram(distances, bins=BINS, range=(0.0, cutoff))[0] / max(len(atoms), 1)
    composition = np.array([np.mean(atoms.numbers == z) for z in elements])
    return np.concatenate([hist, COMPOSITION_WEIGHT * composition])


def select_uncertain(frames: Sequence, uncertainty: Sequence[float], n: int, cutoff: float,
                     oversample: int = 4) -> List[int]:
    """Indices of ``n`` frames by uncertainty with diversity (see the module docstring), in the order
    picked. Frames whose uncertainty is not finite are never picked."""
    u = np.asarray(uncertainty, dtype=float)
    finite = np.flatnonzero(np.isfinite(u))
    n = min(int(n), len(finite))
    if n <= 0:
        return []
    ranked = finite[np.argsort(-u[finite], kind="stable")]
    pool = ranked[:max(n, oversample * n)]
    elements = sorted({int(z) for k in pool for z in frames[k].numbers})
    prints = np.stack([fingerprint(frames[k], elements, cutoff) for k in pool])
    distances = np.linalg.norm(prints[:, None, :] - prints[None, :, :], axis=-1)
    off_diagonal = distances[np.triu_indices(len(pool), 1)]
    d_ref = float(np.median(off_diagonal)) if off_diagonal.size else 0.0
    picked = [0]
    nearest = distances[0].copy()
    while len(picked) < n:
        weight = np.minimum(1.0, nearest / d_ref) if d_ref > 0 else np.ones(len(pool))
        score = u[pool] * weight
        score[picked] = -np.inf
        best = int(np.argmax(score))
        picked.append(best)
        nearest = np.minimum(nearest, distances[best])
    return [int(pool[k]) for k in picked]


def trust_window(uncertainty: Sequence[float], lo: Optional[float] = None,
                 hi: Optional[float] = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(inside, below, above): the indices of the candidates whose uncertainty u is in [lo, hi], below
    ``lo``, and above ``hi`` or not finite (a bound of None is no bound)."""
    u = np.asarray(uncertainty, dtype=float)
    finite = np.isfinite(u)
    below = finite & (u < lo) if lo is not None else np.zeros(u.shape, bool)
    above = ~finite | (u > hi) if hi is not None else ~finite
    return np.flatnonzero(~below & ~above), np.flatnonzero(below), np.flatnonzero(above)


def select_random(n_frames: int, n: int, seed: Sequence[int]) -> List[int]:
    """``n`` indices drawn uniformly without replacement from ``n_frames`` (random stream ``seed``)."""
    n = min(int(n), int(n_frames))
    return sorted(int(k) for k in np.random.default_rng(list(seed)).choice(n_frames, size=n, replace=False))


__all__ = ["BINS", "COMPOSITION_WEIGHT", "fingerprint", "select_random", "select_uncertain", "trust_window"]
