"""The memory an evaluation needs, estimated before its graph is built (mlip.calculators.memory)."""

from __future__ import annotations

import pytest
import torch
from ase.build import bulk
from ase.cluster import Icosahedron
from ase.neighborlist import neighbor_list

import mlip
from mlip.calculators.memory import InsufficientMemoryError, MemoryCheck, available_memory, saved_bytes
from mlip.graph_builder import GraphBuilder
from mlip.structure_checks import estimate_edges


@pytest.mark.parametrize("atoms", [bulk("Cu", "fcc", a=3.61, cubic=True).repeat(3),
                                   bulk("Cu", "fcc", a=4.5, cubic=True).repeat((3, 3, 1)),
                                   Icosahedron("Cu", 6)], ids=["crystal", "expanded", "cluster"])
def test_the_edge_estimate_is_close_to_the_neighbour_list(atoms):
    """Within 30 % (a density misses the shells of a crystal: 18 neighbours of fcc at a = 4.5 Å within 5 Å,
    the second shell inside and the third outside, against 23 on average)."""
    edges = len(neighbor_list("i", atoms, 5.0))
    assert 0.7 * edges <= estimate_edges(atoms, 5.0) <= 1.3 * edges


@pytest.mark.parametrize("name", ["embedded-atom-emt", "platonic-emt"])
@pytest.mark.parametrize("a", [3.3, 3.61, 4.5])
def test_the_estimate_bounds_what_autograd_saves(name, a):
    """The estimate (from a probe crystal) is at least what the evaluation of the structure itself saves
    for its backward pass, and not wildly more (measured peaks are 1.1-2 times below the estimate)."""
    potential = mlip.load_potential(name).float()
    atoms = bulk("Cu", "fcc", a=a, cubic=True).repeat(3)
    _, estimate = MemoryCheck(potential, torch.float32, torch.device("cpu")).estimate(atoms)
    graph = GraphBuilder(potential.cutoff, dtype=torch.float32)(atoms)
    saved = saved_bytes(potential, graph)
    assert saved < estimate < 4 * saved


def test_a_structure_too_large_for_the_memory_is_refused_before_its_graph_is_built():
    """864,000 Cu atoms with the default model would need terabytes: refused at once, naming the estimate
    and the memory available (no neighbour list of 66 million edges is built first)."""
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True).repeat((60, 60, 60))
    atoms.calc = mlip.load_calculator("default", device="cpu")
    room, _ = available_memory(torch.device("cpu"))
    message = r"^864,000 atoms with about 77 neighbours each within the cutoff \(6 Å\) would need .* GB is"
    with pytest.raises(InsufficientMemoryError, match=message):
        atoms.get_forces()
    assert room < 1e12  # what makes the test hold: no machine that runs it has a terabyte free
    unchecked = mlip.load_calculator("default", device="cpu", check_memory=False)
    assert unchecked._graph_builder().check_size is None
