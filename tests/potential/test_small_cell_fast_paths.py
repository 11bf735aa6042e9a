"""The per-call shortcuts for small structures give what the full computation gives, and notice changes."""

from __future__ import annotations

import pytest
import torch
from ase.build import bulk

from mlip.graph import batch_atoms
from mlip.models import create_model
from mlip.models.platonic.group_linear import GroupLinear
from mlip.models.platonic.groups import get_group
from mlip.repulsion import ZBLRepulsion


def _edges(vectors):
    n = len(vectors)
    return torch.stack([torch.arange(n) % 2, (torch.arange(n) + 1) % 2])


@pytest.mark.parametrize("distance", [0.3, 1.2, 1.925, 3.0])
def test_repulsion_skip_equals_the_full_path(distance):
    term = ZBLRepulsion([29, 79]).double()
    vectors = torch.tensor([[distance, 0.1, 0.0], [-distance, -0.1, 0.0]], dtype=torch.float64,
                           requires_grad=True)
    species, edges = torch.tensor([0, 1]), _edges(vectors)
    fast = term(species, edges, vectors)
    # skipped, the term is a constant zero (no graph), which the potential adds to the network's energies
    g_fast = torch.autograd.grad(fast.sum(), vectors)[0] if fast.requires_grad else torch.zeros_like(vectors)
    term.skip_beyond_sq = float("inf")  # never skip: the branch-free path of the GPU
    full = term(species, edges, vectors)
    (g_full,) = torch.autograd.grad(full.sum(), vectors)
    assert torch.equal(fast, full)
    assert torch.equal(g_fast, g_full)
    assert (distance < 0.95 * term.max_range()) == bool(full.abs().sum() > 0)  # within reach or not


def test_group_linear_reuses_frozen_weights_until_they_change():
    layer = GroupLinear(get_group("tetrahedral"), 3, 2).requires_grad_(False)
    first = layer.dense_weight()
    assert layer.dense_weight() is first
    assert torch.equal(first, layer.assemble_dense_weight())
    layer.kernel.mul_(2.0)  # in place, as an optimizer step or load_state_dict
    assert torch.equal(layer.dense_weight(), layer.assemble_dense_weight())
    assert not torch.equal(layer.dense_weight(), first)
    layer.requires_grad_(True)  # training: assembled on every call, differentiable
    assert layer.dense_weight().requires_grad


def test_species_index_notices_changed_numbers():
    pot = create_model("platonic", species=["Cu", "Au"], cutoff=4.0, seed=0)
    graph = batch_atoms([bulk("Cu", "fcc", a=3.6, cubic=True)], 4.0)
    numbers = graph.numbers
    assert pot.species_index(numbers).tolist() == [0, 0, 0, 0]
    numbers[1] = 79
    assert pot.species_index(numbers).tolist() == [0, 1, 0, 0]
    numbers[2] = 47
    with pytest.raises(ValueError, match="Ag"):
        pot.species_index(numbers)
