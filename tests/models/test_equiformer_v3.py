"""EquiformerV3 building blocks against their definitions, the published size, and its symmetries."""

import math

import numpy as np
import pytest
import torch
from ase import Atoms

import mlip
from mlip.models import config_path, create_model, create_model_from_config
from mlip.so3 import m_primary_order, num_truncated_coefficients, wigner_D

from mlip.testing import build_potential
from mlip.testing.physics import calc64
from mlip.testing.rotations import random_rotations, rotation_about_y

DTYPE = torch.float64


def feats(*shape, seed=0):
    return torch.randn(*shape, dtype=DTYPE, generator=torch.Generator().manual_seed(seed))


def rotate(D, x):
    """Apply D [K, K] to features [N, K, C]."""
    return torch.einsum("kl,nlc->nkc", D, x)


# ---------------------------------------------------------------------------------------- sizes
def test_published_mp_configuration_has_the_published_parameter_count():
    potential = create_model_from_config(config_path("equiformer_v3_mp"))
    assert potential.architecture == "equiformer_v3" and len(potential.species) == 89
    assert potential.num_parameters() == 30_278_113
    # The OMat24 model differs only by a 64-function radial basis (8 edge MLPs × 54 × 128 weights).
    assert create_model_from_config(config_path("equiformer_v3_mp"), num_radial=64).num_parameters() == 30_333_409


def test_small_model_builds_and_evaluates():
    potential = create_model("equiformer_v3", species=["Cu", "Au"], cutoff=4.5, lmax=2, mmax=2, channels=16,
                             num_layers=2)
    atoms = Atoms("CuAu", positions=[[0, 0, 0], [0, 0, 2.5]])
    atoms.calc = mlip.MLIPCalculator(potential)
    assert np.isfinite(atoms.get_potential_energy())
    assert potential.num_parameters() < 200_000


@pytest.mark.parametrize("bad, match", [
    (dict(lmax=2, mmax=3), "mmax"),
    (dict(activation="relu"), "activation"),
    (dict(norm="batch"), "norm"),
    (dict(num_embeddings=1), "num_embeddings"),
])
def test_bad_hyperparameters_are_rejected(bad, match):
    with pytest.raises(ValueError, match=match):
        create_model("equiformer_v3", species=["Cu", "Au"], cutoff=4.0, channels=8, num_layers=1, **bad)


# ---------------------------------------------------------------------------------------- blocks
def test_so2_linear_commutes_with_rotations_about_the_edge():
    from mlip.models.equiformer_v3.so2_linear import SO2Linear

    lmax, mmax = 4, 2
    layer = SO2Linear(6, 5, lmax, mmax, extra=3).double()
    with torch.no_grad():
        layer.m0.bias.normal_()
    rows = m_primary_order(lmax, mmax)
    D = wigner_D(rotation_about_y(1.234)[None], lmax)[0][rows][:, rows]
    x = feats(7, num_truncated_coefficients(lmax, mmax), 6)
    y, extra = layer(x)
    y_rot, extra_rot = layer(rotate(D, x))
    assert (y_rot - rotate(D, y)).abs().max() < 1e-12
    assert (extra_rot - extra).abs().max() < 1e-12
    assert y.abs().max() > 0.1


def test_so2_linear_acts_like_complex_multiplication():
    """For m > 0, (y₊, y₋) = (W_r x₊ − W_i x₋, W_r x₋ + W_i x₊)."""
    from mlip.models.equiformer_v3.so2_linear import SO2Linear

    layer = SO2Linear(2, 3, lmax=1, mmax=1).double()
    x = feats(4, 4, 2)  # m-primary for L1 M1: [l0m0, l1m0, l1m+1, l1m-1]
    y, _ = layer(x)
    w = layer.m_pos[0].weight  # [2·1·3, 1·2]: W_r over W_i
    w_r, w_i = w[:3], w[3:]
    assert torch.allclose(y[:, 2], x[:, 2] @ w_r.T - x[:, 3] @ w_i.T, atol=1e-14)
    assert torch.allclose(y[:, 3], x[:, 3] @ w_r.T + x[:, 2] @ w_i.T, atol=1e-14)


@pytest.mark.parametrize("norm", ["merged", "separate"])
def test_norms_are_equivariant_and_normalise(norm):
    from mlip.models.equiformer_v3.layer_norm import make_norm

    lmax = 3
    layer = make_norm(norm, lmax, 6).double()
    with torch.no_grad():
        layer.weight.normal_()
        layer.bias.normal_()
    D = wigner_D(random_rotations(1)[0][None], lmax)[0]
    x = feats(5, 16, 6) * 3 + 1
    assert (layer(rotate(D, x)) - rotate(D, layer(x))).abs().max() < 1e-12
    plain = make_norm(norm, lmax, 6).double()
    y = plain(x)
    if norm == "merged":
        # One normaliser for all degrees: the degree-weighted mean square of the output is 1.
        var = sum((y[:, l * l:(l + 1) ** 2] ** 2).mean(dim=-1).sum(dim=-1) / (2 * l + 1) for l in range(lmax + 1))
        assert torch.allclose(var / (lmax + 1), torch.ones(5, dtype=DTYPE), atol=1e-4)
    else:
        for l in range(lmax + 1):
            ms = (y[:, l * l:(l + 1) ** 2] ** 2).mean(dim=(1, 2))
            assert torch.allclose(ms, torch.ones(5, dtype=DTYPE), atol=1e-4)
    assert torch.allclose(y[:, 0].mean(dim=-1), torch.zeros(5, dtype=DTYPE), atol=1e-12)


@pytest.mark.parametrize("activation", ["swiglu_s2", "gate"])
def test_feed_forward_is_equivariant(activation):
    from mlip.models.equiformer_v3.feed_forward import FeedForward

    lmax = 3
    ffn = FeedForward(lmax, 6, 12, activation).double()
    D = wigner_D(random_rotations(1, seed=3)[0][None], lmax)[0]
    x = feats(4, 16, 6)
    y = ffn(x)
    assert (ffn(rotate(D, x)) - rotate(D, y)).abs().max() < 1e-11
    assert y[:, 1:].abs().max() > 1e-3  # the higher degrees are not trivially zero


@pytest.mark.parametrize("activation", ["swiglu_s2", "gate"])
def test_attention_layer_is_equivariant(activation):
    """Rotating positions and input features rotates the output features of one attention layer."""
    from mlip.models.equiformer_v3.attention import EdgeAttention
    from mlip.nn import GaussianBasis, PolynomialEnvelope
    from mlip.so3 import edge_rotation

    lmax, mmax, c, cutoff = 3, 2, 6, 3.0
    layer = EdgeAttention(lmax, mmax, c, 2, 4, 3, 4, 5, 6, 3, activation).double()
    pos = feats(9, 3, seed=4) * 1.5
    species = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2])
    i, j = torch.meshgrid(torch.arange(9), torch.arange(9), indexing="ij")
    keep = (i != j) & ((pos[j] - pos[i]).norm(dim=-1) < cutoff)
    edge_index = torch.stack([i[keep], j[keep]])
    x = feats(9, (lmax + 1) ** 2, c, seed=5)
    rbf_fn, env_fn = GaussianBasis(cutoff, 6), PolynomialEnvelope(cutoff)

    def run(p, features):
        vec = p[edge_index[1]] - p[edge_index[0]]
        wig = wigner_D(edge_rotation(vec), lmax, rows=m_primary_order(lmax, mmax))
        d = vec.norm(dim=-1)
        return layer(features, edge_index, species, rbf_fn(d), env_fn(d), wig)

    R = random_rotations(1, seed=6)[0]
    D = wigner_D(R[None], lmax)[0]
    y = run(pos, x)
    assert (run(pos @ R.T, rotate(D, x)) - rotate(D, y)).abs().max() < 1e-11
    assert y[:, 1:].abs().max() > 1e-3


def test_smooth_cutoff_softmax():
    from mlip.models.equiformer_v3.attention import smooth_cutoff_softmax

    logits = feats(6, 2, seed=7)
    centre = torch.tensor([0, 0, 0, 1, 1, 2])
    ones = torch.ones(6, dtype=DTYPE)
    alpha = smooth_cutoff_softmax(logits, ones, centre, 3)
    # With w ≡ 1 it is the ordinary softmax over each node's incoming edges.
    for node in range(3):
        sel = centre == node
        assert torch.allclose(alpha[sel], torch.softmax(logits[sel], dim=0), atol=1e-14)
    # An edge with w = 0 (at or beyond the cutoff) has weight 0 and leaves the others unchanged.
    w = torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0, 1.0], dtype=DTYPE)
    alpha0 = smooth_cutoff_softmax(logits, w, centre, 3)
    assert alpha0[2].abs().max() == 0
    assert torch.allclose(alpha0[:2], torch.softmax(logits[:2], dim=0), atol=1e-14)


# ---------------------------------------------------------------------------------------- the model
def chiral_cluster():
    """Four different atoms at the corners of an irregular tetrahedron: its mirror image is distinct."""
    return Atoms("CuAuHC", positions=[[0.0, 0.0, 0.0], [2.1, 0.2, 0.1], [0.3, 1.9, -0.2], [0.4, 0.5, 2.3]])


def test_energy_is_rotation_invariant_but_not_reflection_invariant():
    potential = build_potential("equiformer-v3")
    atoms = chiral_cluster()
    atoms.calc = calc64(potential)
    e = atoms.get_potential_energy()
    rotated = atoms.copy()
    rotated.positions = atoms.positions @ random_rotations(1, seed=8)[0].numpy().T
    rotated.calc = calc64(potential)
    rotation_error = abs(rotated.get_potential_energy() - e)
    assert rotation_error <= 1e-12 * abs(e)
    mirrored = atoms.copy()
    mirrored.positions[:, 0] *= -1
    mirrored.calc = calc64(potential)
    # Only the W_i parts of the SO(2) convolutions (and what follows from them) see handedness, so
    # in an untrained model the enantiomers differ by ~3e-9 of the energy (with the logarithmic-density
    # scalars this architecture carries, which are mirror symmetric; ~1e-7 without them): still far
    # more than the bound on the rounding error of a rotation above.
    mirror_difference = abs(mirrored.get_potential_energy() - e)
    assert mirror_difference > 1e-10 * abs(e), "the docstring says enantiomers differ"
    assert mirror_difference > 1e4 * rotation_error


def test_two_evaluations_are_bit_identical():
    from mlip.testing import STRUCTURES

    potential = build_potential("equiformer-v3")
    graph = mlip.batch_atoms([STRUCTURES["triclinic"](), STRUCTURES["slab"]()], potential.cutoff, dtype=DTYPE)
    first, second = potential(graph), potential(graph)
    for key in ("energy", "forces", "stress"):
        assert torch.equal(first[key], second[key]), key


def test_isolated_atom_has_only_the_embedding_energy():
    potential = build_potential("equiformer-v3")
    atoms = Atoms("Cu", positions=[[0.0, 0.0, 0.0]])
    atoms.calc = calc64(potential)
    e1 = atoms.get_potential_energy()
    far = Atoms("Cu2", positions=[[0.0, 0.0, 0.0], [0.0, 0.0, 10.0]])
    far.calc = calc64(potential)
    assert far.get_potential_energy() == pytest.approx(2 * e1, rel=1e-12)
    assert np.abs(far.get_forces()).max() == 0


def test_ablation_switches_change_the_model():
    kwargs = dict(species=["Cu"], cutoff=4.0, seed=0, lmax=2, mmax=1, channels=8, num_layers=1)
    atoms = Atoms("Cu3", positions=[[0, 0, 0], [2.2, 0, 0], [0.4, 2.1, 0.3]])
    energies = {}
    for act in ("swiglu_s2", "gate"):
        for norm in ("merged", "separate"):
            atoms.calc = calc64(create_model("equiformer_v3", activation=act, norm=norm, **kwargs).double())
            energies[act, norm] = atoms.get_potential_energy()
    assert len({round(e, 12) for e in energies.values()}) == 4
    assert all(math.isfinite(e) for e in energies.values())


def test_attention_cutoff_splits_the_model_into_a_short_transformer_and_a_long_term():
    """With ``attention_cutoff`` r_a < r_c, the energy is exactly that of the same weights without the
    term on the graph to r_a, plus the embedded-atom term on the graph to r_c; ``attention_cutoff = r_c``
    is the plain model; a radius above r_c, or a shorter one with neither the term nor the logarithmic
    density embedding (its far edges would reach nothing), is refused with a message naming it."""
    from ase.build import bulk

    from mlip.nn import EmbeddedAtomEnergy

    kwargs = dict(species=["Cu", "Au"], lmax=2, mmax=1, channels=8, num_layers=1, num_heads=2, num_radial=6,
                  terms={"embedded_atom": {}}, seed=5)
    plain = create_model("equiformer_v3", cutoff=4.5, **kwargs).double()
    same = create_model("equiformer_v3", cutoff=4.5, attention_cutoff=4.5, **kwargs).double()
    reach = create_model("equiformer_v3", cutoff=4.5, attention_cutoff=3.5, **kwargs).double()
    assert reach.model.attention_cutoff == 3.5 and reach.model.envelope.cutoff == 3.5
    short = create_model("equiformer_v3", cutoff=3.5, **{**kwargs, "terms": None}).double()
    short.model.load_state_dict(reach.model.state_dict())
    term = EmbeddedAtomEnergy(2, 4.5).double()
    term.load_state_dict(reach.terms["embedded_atom"].state_dict())

    atoms = bulk("Cu", "fcc", a=3.7, cubic=True)
    atoms.symbols[[1, 3]] = "Au"
    atoms.rattle(0.1, seed=3)

    def per_atom(model, cutoff):
        g = mlip.batch_atoms([atoms], cutoff, dtype=DTYPE)
        vec = mlip.edge_vectors(g.positions, g.cell, g.batch, g.edge_index, g.shifts)
        species = torch.as_tensor((atoms.numbers == 79).astype(np.int64))
        with torch.no_grad():
            if isinstance(model, EmbeddedAtomEnergy):
                return model(species, g.edge_index, vec)
            return model(species, g.edge_index, vec, g.batch, 1)

    torch.testing.assert_close(per_atom(reach.model_energies, 4.5),
                               per_atom(short.model, 3.5) + per_atom(term, 4.5), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(per_atom(same.model, 4.5), per_atom(plain.model, 4.5), rtol=0, atol=0)
    with pytest.raises(ValueError, match="attention_cutoff"):
        create_model("equiformer_v3", cutoff=4.5, attention_cutoff=5.0, **kwargs)
    with pytest.raises(ValueError, match=r"log_density_embedding=True or an energy term \(terms\)"):
        create_model("equiformer_v3", cutoff=4.5, attention_cutoff=3.5, **{**kwargs, "terms": None})


@pytest.mark.parametrize("attention_cutoff", [None, 3.5])
def test_log_density_embedding_adds_the_logarithmic_densities_to_the_initial_scalars(attention_cutoff):
    """With ``log_density_embedding`` the features entering the first block differ from those of the same
    weights without the option by U · u_i in the l = 0 row only, u_i = ln(1 + σ_i/ε)/ln(1/ε) and
    σ_i = softplus(V_{Z_i})ᵀ vec(Σ_j onehot(Z_j) ⊗ φ(r_ij) exp(−η (r_ij − 2.5 Å))) / n_avg summed pair by
    pair over ASE's neighbour list to the graph's cutoff (every periodic image of a cell smaller than the
    cutoff), φ the envelope ending there; with ``attention_cutoff`` r_a < r_c the rest of the input is that
    of the plain model on the graph to r_a (the densities need no embedded-atom term to reach further).
    It adds V [S, S·8, D] and U [C, D] to the parameters, and bad sizes are refused."""
    from ase.build import bulk
    from ase.neighborlist import neighbor_list

    from mlip.nn import PolynomialEnvelope

    cutoff, S, D, C = 4.5, 3, 5, 8
    kwargs = dict(species=["Cu", "Au", "Ni"], lmax=2, mmax=1, channels=C, num_layers=1,
                  num_heads=2, num_radial=6, seed=2)
    # the plain model on the attention graph: to r_a when the densities reach further
    plain = create_model("equiformer_v3", cutoff=attention_cutoff or cutoff, **kwargs).double()
    with_log = create_model("equiformer_v3", cutoff=cutoff, attention_cutoff=attention_cutoff,
                            log_density_embedding=True, num_log_densities=D, avg_neighbors=10.0,
                            **kwargs).double()
    assert with_log.model.attention_cutoff == (attention_cutoff or cutoff)
    assert with_log.num_parameters() == plain.num_parameters() + S * S * 8 * D + D * C
    missing, unexpected = plain.model.load_state_dict(with_log.model.state_dict(), strict=False)
    assert not missing and sorted(unexpected) == ["log_density.linear.weight", "log_density.weights"]

    atoms = bulk("Cu", "fcc", a=3.7, cubic=True)
    atoms.symbols[[1, 3]] = "Au"
    atoms.symbols[2] = "Ni"
    atoms.rattle(0.1, seed=4)
    species = torch.tensor([kwargs["species"].index(s) for s in atoms.get_chemical_symbols()])

    def block_input(model, graph_cutoff):
        g = mlip.batch_atoms([atoms], graph_cutoff, dtype=DTYPE)
        vec = mlip.edge_vectors(g.positions, g.cell, g.batch, g.edge_index, g.shifts)
        seen = []
        handle = model.blocks[0].register_forward_pre_hook(lambda module, args: seen.append(args[0].detach()))
        with torch.no_grad():
            energies = model(species, g.edge_index, vec, g.batch, 1)
        handle.remove()
        return seen[0], energies

    x_log, e_log = block_input(with_log.model, cutoff)
    x_plain, e_plain = block_input(plain.model, plain.model.cutoff)

    rates = torch.tensor([1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0], dtype=DTYPE)
    ii, jj, dd = neighbor_list("ijd", atoms, cutoff)
    assert len(ii) > 12 * len(atoms)  # images of the 4-atom cell are counted
    assert (dd > 3.5).sum() >= 6 * len(atoms)  # the second shell lies between r_a and r_c
    envelope = PolynomialEnvelope(cutoff)
    positive = torch.zeros(len(atoms), S, 8, dtype=DTYPE)
    for a, b, d in zip(ii, jj, dd):
        r = torch.tensor(d, dtype=DTYPE)
        positive[a, int(species[b])] += torch.exp(-rates * (r - 2.5)) * envelope(r)
    model = with_log.model
    with torch.no_grad():
        for i in range(len(atoms)):
            v = torch.nn.functional.softplus(model.log_density.weights[int(species[i])])  # [S·8, D]
            sigma = positive[i].reshape(-1) @ v / 10.0
            u = torch.log1p(sigma / 1e-4) / math.log(1e4)
            torch.testing.assert_close(x_log[i, 0], x_plain[i, 0] + model.log_density.linear(u), rtol=1e-12, atol=1e-13)
    assert torch.equal(x_log[:, 1:], x_plain[:, 1:])
    assert (x_log[:, 0] - x_plain[:, 0]).abs().max() > 0.05  # not negligible in a crystal
    assert (e_log - e_plain).abs().max() > 1e-6  # and it reaches the energy
    for bad in (dict(num_log_densities=0), dict(avg_neighbors=0.0)):
        with pytest.raises(ValueError, match="log_density_embedding"):
            create_model("equiformer_v3", cutoff=cutoff, log_density_embedding=True, **kwargs, **bad)
