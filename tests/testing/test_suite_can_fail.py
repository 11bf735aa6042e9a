"""The physics suite (mlip.testing.physics) can fail: each check passes for a sound potential and raises
AssertionError, naming the quantity, for one broken in the way the check exists to catch."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import mlip.testing as mt
from mlip import Potential

BASE = "embedded-atom"  # the cheapest architecture of the suite


class AddedTerm(nn.Module):
    """The model plus ``term(species, edge_index, vec, batch, n_graphs)`` per atom [n_atoms]: a broken
    energy whose forces and stress (by autograd) are still its exact derivatives."""

    def __init__(self, model, term):
        super().__init__()
        self.model, self.term = model, term

    def forward(self, species, edge_index, vec, batch, n_graphs):
        return self.model(species, edge_index, vec, batch, n_graphs) + self.term(species, edge_index, vec,
                                                                                 batch, n_graphs)


def scatter_sum(values, index, n):
    """Sums of ``values`` [m] over ``index`` [m] into [n]."""
    return values.new_zeros(n).index_add(0, index, values)


def per_atom(values, edge_index, n_atoms):
    """Sum of edge values [n_edges] onto their first atom [n_atoms]."""
    return scatter_sum(values, edge_index[0], n_atoms)


# per-atom energy terms, each breaking one property
def index_weighted(species, edge_index, vec, batch, n_graphs):  # depends on the order of the atoms
    n = len(species)
    return 0.01 * torch.arange(n, dtype=vec.dtype) * per_atom((vec**2).sum(-1), edge_index, n)


def x_only(species, edge_index, vec, batch, n_graphs):  # prefers the x axis: not rotation invariant
    return 0.01 * per_atom(vec[:, 0] ** 2, edge_index, len(species))


def edge_count(species, edge_index, vec, batch, n_graphs):  # jumps as a neighbour crosses the cutoff
    return 0.01 * per_atom(torch.ones_like(vec[:, 0]), edge_index, len(species))


def size_squared(species, edge_index, vec, batch, n_graphs):  # E ∝ n²: not extensive
    counts = torch.bincount(batch, minlength=n_graphs).to(vec.dtype)
    return 0.01 * counts[batch]


def batch_size(species, edge_index, vec, batch, n_graphs):  # depends on the other structures of a batch
    return vec.new_full((len(species),), 0.01 * n_graphs)


def attractive_core(species, edge_index, vec, batch, n_graphs):  # −1/r²: falls as atoms are pushed together
    return -per_atom(1.0 / (vec**2).sum(-1), edge_index, len(species))


def float32_offset(species, edge_index, vec, batch, n_graphs):  # a different energy in float32
    return vec.new_full((len(species),), 0.1 if vec.dtype == torch.float32 else 0.0)


def detached(model):  # the network's energy cut from the weights (forces could not be trained)
    class Detached(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, species, edge_index, vec, batch, n_graphs):
            with torch.no_grad():
                energy = self.model(species, edge_index, vec.detach(), batch, n_graphs)
            return energy + 0.01 * per_atom((vec**2).sum(-1), edge_index, len(species))

    return Detached()


class ScaledForces(Potential):
    """Forces 1 % (or ``factor``) larger than −∂E/∂r: not conservative."""

    factor = 1.01

    def forward(self, graph, *args, **kwargs):
        out = super().forward(graph, *args, **kwargs)
        if "forces" in out:
            out["forces"] = self.factor * out["forces"]
        return out


class StronglyScaledForces(ScaledForces):
    factor = 1.3


class ScaledStress(Potential):
    """Stress 1 % larger than (1/V) ∂E/∂ε."""

    def forward(self, graph, *args, **kwargs):
        out = super().forward(graph, *args, **kwargs)
        if "stress" in out:
            out["stress"] = 1.01 * out["stress"]
        return out


class AbsolutePositions(Potential):
    """An energy that depends on where the structure is, not only on its shape."""

    def forward(self, graph, *args, **kwargs):
        out = super().forward(graph, *args, **kwargs)
        out["energy"] = out["energy"] + 1e-3 * scatter_sum(graph.positions[:, 0] ** 2, graph.batch,
                                                           graph.n_graphs)
        return out


class Float32Forces(Potential):
    """Forces returned in float32 for float64 input."""

    def forward(self, graph, *args, **kwargs):
        out = super().forward(graph, *args, **kwargs)
        out["forces"] = out["forces"].float()
        return out


def with_term(term, repulsion=True):
    def broken(base):
        base.model = AddedTerm(base.model, term)
        if not repulsion:
            base.set_repulsion(None)
        return base

    return broken


def with_class(cls):
    def broken(base):
        base.__class__ = cls
        return base

    return broken


def with_detached_network(base):
    base.model = detached(base.model)
    return base


# check → (how the potential is broken, what the message names)
CASES = {
    "forces_finite_difference": (mt.check_forces_finite_difference, with_class(ScaledForces), "F - F_fd"),
    "stress_finite_difference": (mt.check_stress_finite_difference, with_class(ScaledStress), "σ - σ_fd"),
    "stress_tensor": (mt.check_stress_tensor, with_class(ScaledStress), "shear derivative"),
    "axis_aligned_bonds": (mt.check_axis_aligned_bonds, with_class(ScaledForces), "F - F_fd"),
    "force_training_gradients": (mt.check_force_training_gradients, with_detached_network, "gradient"),
    "translation_invariance": (mt.check_translation_invariance, with_class(AbsolutePositions),
                               "translated energy"),
    "permutation_invariance": (mt.check_permutation_invariance, with_term(index_weighted), "permuted energy"),
    "rotation_invariance": (mt.check_rotation_invariance, with_term(x_only), "rotation"),
    "image_invariance": (mt.check_image_invariance, with_class(AbsolutePositions), "images"),
    "invariance": (mt.check_invariance, with_term(x_only), "rotation"),
    "small_cell_images": (mt.check_small_cell_images, with_term(size_squared), "supercell energy"),
    "extensivity": (mt.check_extensivity, with_term(size_squared), "far-apart copies"),
    "cutoff_continuity": (mt.check_cutoff_continuity, with_term(edge_count), "energy jumps at the cutoff"),
    "smooth_scan": (mt.check_smooth_scan, with_term(edge_count), "slope of E"),
    "cutoff_smoothness": (mt.check_cutoff_smoothness, with_term(edge_count), "jumps at the cutoff"),
    "validate_outputs": (mt.validate_outputs, with_class(Float32Forces), "forces has dtype torch.float32"),
    "batch_consistency": (mt.check_batch_consistency, with_term(batch_size), "energy in a batch"),
    "float32_matches_float64": (mt.check_float32_matches_float64, with_term(float32_offset),
                                "float32 energy"),
    "save_load": (mt.check_save_load, with_class(AbsolutePositions), "after save → load"),
    "short_range_repulsion": (mt.check_short_range_repulsion, with_term(attractive_core, repulsion=False),
                              "E falls"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_passes_sound_and_fails_broken_potential(name):
    check, breakage, message = CASES[name]
    sound = mt.build_potential(BASE)
    check(sound)
    broken = breakage(copy.deepcopy(sound))
    with pytest.raises(AssertionError, match=message.replace("(", r"\(")):
        check(broken)


def test_nve_fails_for_non_conservative_forces():
    """Forces 30 % off their energy's derivative: the total energy is not conserved."""
    sound = mt.build_potential(BASE, species=["Cu"])
    broken = with_class(StronglyScaledForces)(copy.deepcopy(sound))
    with pytest.raises(AssertionError, match="total energy spread|energy drift|energy fluctuation"):
        mt.check_nve(broken, steps=300)


def test_every_check_is_tested_here():
    """A check added to mlip.testing without a case above would be a check nobody has seen fail."""
    checks = {name[len("check_"):] for name in mt.__all__ if name.startswith("check_")} | {"validate_outputs"}
    assert checks - {"nve"} == set(CASES)
