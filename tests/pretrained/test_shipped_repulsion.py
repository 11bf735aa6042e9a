"""Every shipped model is repulsive at short range: its dimers rise monotonically down to 0.1 Å and a
4000 K NVT run does not fuse atoms."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.data import atomic_numbers, covalent_radii
from ase.io import read

import mlip
from mlip import pretrained
from mlip.graph import batch_atoms
from mlip.repulsion import ZBLRepulsion

SHIPPED = sorted(pretrained.TRAINED)


def dimer_energies(potential, pairs, distances):
    """Energies (float64) [len(pairs), len(distances)] of each a–b dimer of ``pairs`` at each of its
    ``distances`` [len(pairs), n], batched a few pairs at a time (a model of 89 elements has 4,005 pairs).

    Every distance lies within the cutoff, so every dimer's neighbour list is its one pair of atoms: the
    graph of a batch is built (neighbour lists included) for the first batch of each size, and later
    batches of that size put their elements and positions into it (the edge vectors are formed from the
    positions). Building 240,000 neighbour lists of two atoms cost the 89-element model half its time."""
    assert float(distances.max()) < potential.cutoff
    out, graphs = [], {}
    for start in range(0, len(pairs), 16):
        chunk = pairs[start:start + 16]
        dimers = [Atoms([a, b], positions=[[0, 0, 0], [0, 0, r]])
                  for (a, b), row in zip(chunk, distances[start:start + 16]) for r in row]
        if len(dimers) not in graphs:
            graphs[len(dimers)] = batch_atoms(dimers, potential.cutoff, dtype=torch.float64)
            assert graphs[len(dimers)].n_edges == 2 * len(dimers)
        graph = dataclasses.replace(
            graphs[len(dimers)], numbers=torch.from_numpy(np.concatenate([d.numbers for d in dimers])),
            positions=torch.from_numpy(np.concatenate([d.positions for d in dimers])))
        energies = potential(graph, compute_forces=False, compute_stress=False)["energy"].detach().numpy()
        out.append(energies.reshape(len(chunk), -1))
    return np.concatenate(out)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_dimer_of_a_shipped_model_rises_monotonically_to_0_1_angstrom(name):
    potential = pretrained.load(name).double()
    assert isinstance(potential.repulsion, ZBLRepulsion)
    pairs = list(itertools.combinations_with_replacement(potential.species, 2))
    bonds = [covalent_radii[atomic_numbers[a]] + covalent_radii[atomic_numbers[b]] for a, b in pairs]
    # 300 distances a pair; 60 (steps under 0.04 Å) for a model of many elements (89: 4,005 pairs)
    n = 300 if len(pairs) <= 100 else 60
    distances = np.array([np.linspace(0.6 * bond, 0.1, n) for bond in bonds])
    energies = dimer_energies(potential, pairs, distances)
    falling = []
    for (a, b), r, e in zip(pairs, distances, energies):
        rises = np.diff(e) > 0
        if not rises.all():
            where = r[1:][~rises]
            falling.append(f"{a}-{b} between {where.min():.3f} and {where.max():.3f} Å")
    assert not falling, f"{name}: E(r) falls as r decreases for " + "; ".join(falling)


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_hot_nvt_does_not_fuse_atoms(name, tmp_path):
    """The run of the reliability report: 32 Cu atoms, NVT at 4000 K, 600 steps of 1 fs, friction 0.05 (a
    model without copper: 32 atoms of its first element's crystal, e.g. diamond Si 2×2×1 conventional)."""
    from ase.build import bulk, make_supercell

    from mlip.workflows.md import run_md

    potential = pretrained.load(name)
    if "Cu" in potential.species:
        atoms = make_supercell(read("examples/structures/cu_fcc.cif"), 2 * np.eye(3))
    else:
        cell = bulk(potential.species[0], cubic=True)
        atoms = cell.repeat((2, 2, 1) if len(cell) == 8 else (2, 2, 2))
    assert len(atoms) == 32
    calc = mlip.MLIPCalculator(potential, device="cpu", dtype="float32")
    trajectory = tmp_path / "md.traj"
    run_md(atoms, calc, ensemble="nvt", temperature=4000.0, steps=600, friction=0.05, seed=0,
           trajectory=str(trajectory), log_interval=1, progress=False)
    frames = read(trajectory, ":")
    assert len(frames) >= 600
    shortest = min(float(np.min(f.get_all_distances(mic=True)[np.triu_indices(len(f), 1)])) for f in frames)
    assert shortest > 1.5, f"{name}: atoms came {shortest:.2f} Å close at 4000 K"
