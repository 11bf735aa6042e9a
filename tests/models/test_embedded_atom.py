"""The embedded-atom energy term against its definition, and its symmetries."""

import math

import numpy as np
import pytest
import torch
from ase.build import bulk

import mlip
from mlip.nn import BesselBasis, EmbeddedAtomEnergy, PolynomialEnvelope

CUTOFF = 4.0


def term(seed=0, log_densities=False):
    torch.manual_seed(seed)
    return EmbeddedAtomEnergy(num_species=2, cutoff=CUTOFF, num_radial=5, num_densities=3, hidden=8,
                              avg_neighbors=4.0, log_densities=log_densities).double()


def graph_of(atoms):
    g = mlip.batch_atoms([atoms], CUTOFF, dtype=torch.float64)
    species = torch.as_tensor((atoms.numbers == 79).astype(np.int64))
    vec = mlip.edge_vectors(g.positions, g.cell, g.batch, g.edge_index, g.shifts)
    return species, g.edge_index, vec


def alloy(seed=0):
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True) * (2, 1, 1)
    atoms.rattle(0.1, seed=seed)
    atoms.numbers[[1, 4, 6]] = 79
    return atoms


@pytest.mark.parametrize("log_densities", [False, True])
def test_densities_and_energy_follow_the_definition(log_densities):
    # ρ_i = W_{Z_i}ᵀ (Σ_{j≠i} onehot(Z_j) ⊗ φ(r_ij) B(r_ij)) / n_avg, summed here atom by atom with ASE's
    # own distances (minimum-image-free: every periodic image within the cutoff), then the MLP; with
    # log_densities also u_i = ln(1 + σ_i/ε)/ln(1/ε), σ_i = softplus(V_{Z_i})ᵀ (Σ_j onehot(Z_j) ⊗ φ g) / n_avg.
    model = term(log_densities=log_densities)
    atoms = alloy()
    species, edge_index, vec = graph_of(atoms)
    rho = model.densities(species, edge_index, vec)
    basis, env = BesselBasis(CUTOFF, 5).double(), PolynomialEnvelope(CUTOFF, 5).double()
    from ase.neighborlist import neighbor_list

    rates = torch.tensor([1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0], dtype=torch.float64)
    ii, jj, dd = neighbor_list("ijd", atoms, CUTOFF)
    hidden = model.density_in(rho) + model.element(species)
    for i in range(len(atoms)):
        sums = torch.zeros(2, 5, dtype=torch.float64)
        positive = torch.zeros(2, 8, dtype=torch.float64)
        for j, d in zip(jj[ii == i], dd[ii == i]):
            r = torch.tensor(d, dtype=torch.float64)
            sums[int(atoms.numbers[j] == 79)] += basis(r) * env(r)
            positive[int(atoms.numbers[j] == 79)] += torch.exp(-rates * (r - 2.5)) * env(r)
        z = int(atoms.numbers[i] == 79)
        expected = sums.reshape(-1) @ model.density_weights[z] / 4.0
        torch.testing.assert_close(rho[i], expected, rtol=1e-12, atol=1e-14)
        if log_densities:
            sigma = positive.reshape(-1) @ torch.nn.functional.softplus(model.log_density.weights[z]) / 4.0
            assert (sigma > 0).all()
            u = torch.log1p(sigma / 1e-4) / math.log(1e4)
            hidden[i] = hidden[i] + model.log_density.linear(u)
    energies = model(species, edge_index, vec)
    torch.testing.assert_close(energies, model.mlp(hidden).squeeze(-1), rtol=1e-12, atol=1e-14)
    # an atom alone: zero densities, the element's constant
    lone = model(torch.tensor([1]), torch.zeros((2, 0), dtype=torch.int64), torch.zeros((0, 3), dtype=torch.float64))
    torch.testing.assert_close(lone, model.mlp(model.density_in.bias + model.element.weight[1]).reshape(1))


@pytest.mark.parametrize("log_densities", [False, True])
def test_invariant_under_rotation_and_permutation_and_smooth_at_the_cutoff(log_densities):
    model = term(1, log_densities)
    atoms = alloy(1)
    species, edge_index, vec = graph_of(atoms)
    total = model(species, edge_index, vec).sum()
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    q *= np.sign(np.linalg.det(q))
    turned = atoms.copy()
    turned.set_cell(atoms.cell @ q.T, scale_atoms=True)
    perm = rng.permutation(len(atoms))
    turned = turned[perm]
    s2, e2, v2 = graph_of(turned)
    torch.testing.assert_close(model(s2, e2, v2).sum(), total, rtol=1e-12, atol=0)
    # a dimer pulled through the cutoff: energy and force reach the isolated value with zero slope
    def dimer(d):
        r = torch.tensor([[0.0, 0.0, d]], dtype=torch.float64, requires_grad=True)
        index = torch.tensor([[0, 1], [1, 0]])
        e = model(torch.tensor([0, 1]), index, torch.cat([r, -r])).sum()
        (g,) = torch.autograd.grad(e, r)
        return float(e.detach()), float(g[0, 2])

    e_far, f_far = dimer(CUTOFF + 1e-9)
    with torch.no_grad():
        lone = float(model(torch.tensor([0, 1]), torch.zeros((2, 0), dtype=torch.int64),
                           torch.zeros((0, 3), dtype=torch.float64)).sum())
    assert e_far == pytest.approx(lone, abs=1e-12) and f_far == 0.0
    # C²: the energy leaves its isolated value as h³ and the force as h². Near σ = 0, ln(1 + σ/ε) is
    # σ/ε: the logarithmic densities multiply the constant by up to 1/(ε ln(1/ε)) ≈ 10³, not the order.
    bound = 50.0 * (1e3 if log_densities else 1.0)
    for h in (1e-2, 1e-3):
        e, f = dimer(CUTOFF - h)
        assert abs(e - lone) < bound * h**3 and abs(f) < bound * h**2, (h, e - lone, f)


@pytest.mark.parametrize("bad", [dict(num_radial=0), dict(num_densities=0), dict(avg_neighbors=0.0)])
def test_bad_sizes_are_refused(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        EmbeddedAtomEnergy(num_species=2, cutoff=CUTOFF, **bad)
