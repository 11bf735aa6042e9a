"""Random-rotation augmentation of labelled structures.

A model that is invariant only to a finite group (the Platonic Transformer) learns the remaining
rotations from data: every structure of a batch is presented in a random orientation. Positions
and cell rotate as r → R r, forces as F → R F and the stress as σ → R σ Rᵀ; the energy is unchanged.
The neighbour graph (i, j, integer cell shift) is the same in every orientation.
"""

from __future__ import annotations

import numpy as np
from ase import Atoms
from ase.stress import full_3x3_to_voigt_6_stress, voigt_6_to_full_3x3_stress

from mlip.training.samples import Labels, atoms_of, labels_of


def random_rotation(rng: np.random.Generator) -> np.ndarray:
    """A rotation matrix [3, 3] drawn uniformly from SO(3) (Haar measure, via a unit quaternion)."""
    q = rng.normal(size=4)
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


class RotatedSample:
    """``sample`` rotated by ``rotation`` [3, 3]: an object with ``atoms``, ``energy``, ``forces``
    and ``stress`` that :func:`mlip.training.samples.labels_of` accepts."""

    def __init__(self, sample, rotation: np.ndarray):
        labels: Labels = labels_of(sample)
        src = atoms_of(sample)
        self.atoms = Atoms(numbers=src.numbers, positions=src.positions @ rotation.T,
                           cell=np.asarray(src.cell) @ rotation.T, pbc=src.pbc, info=dict(src.info))
        self.energy = labels.energy
        self.forces = None if labels.forces is None else labels.forces @ rotation.T
        self.stress = None
        if labels.stress is not None:
            full = rotation @ voigt_6_to_full_3x3_stress(labels.stress) @ rotation.T
            self.stress = full_3x3_to_voigt_6_stress(full)


def rotate_batch(samples, rng: np.random.Generator) -> list:
    """Each sample of a batch in its own random orientation."""
    return [RotatedSample(s, random_rotation(rng)) for s in samples]
