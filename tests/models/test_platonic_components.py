"""The Platonic building blocks, each against its definition."""

import itertools

import numpy as np
import pytest
import torch

from mlip.models.platonic import GroupLinear, get_group
from mlip.models.platonic.rope import frame_vectors
from mlip.nn import PolynomialEnvelope

GROUPS = ["tetrahedral", "octahedral", "icosahedral"]


@pytest.mark.parametrize("name", GROUPS)
def test_group_elements_are_rotations_and_tables_are_correct(name):
    g = get_group(name)
    R = g.elements
    assert R.dtype == torch.float64
    assert g.order == {"tetrahedral": 12, "octahedral": 24, "icosahedral": 60}[name]
    eye = torch.eye(3, dtype=torch.float64)
    assert torch.allclose(R @ R.transpose(1, 2), eye.expand_as(R), atol=1e-14)
    assert torch.allclose(torch.linalg.det(R), torch.ones(g.order, dtype=torch.float64), atol=1e-14)
    assert torch.equal(R[0], eye)
    # Distinct elements.
    d = ((R[:, None] - R[None]) ** 2).sum((-1, -2)) + torch.eye(g.order, dtype=torch.float64)
    assert d.min() > 1e-3
    # Cayley table: R_a R_b = R_cayley[a,b]; inverse table: R_inv[a] = R_aᵀ.
    prod = torch.einsum("aij,bjk->abik", R, R)
    assert torch.allclose(prod, R[g.cayley], atol=1e-13)
    assert torch.allclose(R[g.inverse], R.transpose(1, 2), atol=1e-14)
    # Each row of the Cayley table is a permutation (group axioms).
    for row in g.cayley:
        assert sorted(row.tolist()) == list(range(g.order))


def test_octahedral_contains_tetrahedral_and_icosahedral_contains_tetrahedral():
    T = get_group("T").elements
    for big in ("O", "I"):
        B = get_group(big).elements
        for r in T:
            assert ((B - r) ** 2).sum((-1, -2)).min() < 1e-20


@pytest.mark.parametrize("name", GROUPS)
def test_group_linear_parameter_count_is_one_over_G(name):
    g = get_group(name)
    cin, cout = 5, 3
    layer = GroupLinear(g, cin, cout)
    dense = torch.nn.Linear(g.order * cin, g.order * cout)
    n_layer = sum(p.numel() for p in layer.parameters())
    n_dense = sum(p.numel() for p in dense.parameters())
    assert n_layer * g.order == n_dense


@pytest.mark.parametrize("name", GROUPS)
def test_group_linear_definition_and_equivariance(name):
    g = get_group(name)
    torch.manual_seed(0)
    layer = GroupLinear(g, 3, 2).double()
    torch.nn.init.normal_(layer.bias)
    x = torch.randn(4, g.order, 3, dtype=torch.float64)
    y = layer(x)
    # Definition: y_h = Σ_g K[g⁻¹h] x_g + b.
    for h in range(g.order):
        ref = sum(layer.kernel[g.cayley[g.inverse[a], h]] @ x[:, a].T for a in range(g.order)).T + layer.bias
        assert torch.allclose(y[:, h], ref, atol=1e-12)
    # Equivariance to left translation: x'_a = x_{k a} ⇒ y'_h = y_{k h}.
    for k in range(g.order):
        perm = g.cayley[k]
        assert torch.allclose(layer(x[:, perm]), y[:, perm], atol=1e-12)


def test_frame_vectors_and_rope_angles():
    g = get_group("T")
    r = torch.randn(7, 3, dtype=torch.float64)
    fv = frame_vectors(g.elements, r)
    for a in range(g.order):
        assert torch.allclose(fv[:, a], r @ g.elements[a], atol=1e-14)  # R_gᵀ r as row vectors
    # Rotating the input by R_k permutes frames: R_gᵀ (R_k r) = R_{k⁻¹g}ᵀ r.
    k = 5
    fv_rot = frame_vectors(g.elements, r @ g.elements[k].T)
    perm = g.cayley[g.inverse[k]]
    assert torch.allclose(fv_rot, fv[:, perm], atol=1e-14)


def test_envelope_is_c2_at_cutoff():
    env = PolynomialEnvelope(5.0, exponent=5)
    r = torch.tensor([0.0, 2.5, 5.0 - 1e-6, 5.0, 6.0], dtype=torch.float64, requires_grad=True)
    phi = env(r)
    d = r.detach() / 5.0
    closed = (1 - d) ** 3 * (1 + 3 * d + 6 * d**2 + 10 * d**3 + 15 * d**4)  # factorised form
    assert torch.allclose(phi.detach()[:3], closed[:3], atol=1e-13)
    assert phi[0] == 1.0 and phi[3] == 0.0 and phi[4] == 0.0
    (d1,) = torch.autograd.grad(phi.sum(), r, create_graph=True)
    (d2,) = torch.autograd.grad(d1.sum(), r)
    # At 1 − d = 2e-7: φ ~ 35(1−d)³ ≈ 3e-19 (float64 cancellation leaves ~1e-15), φ′ ~ 1e-13, φ″ ~ 1e-6.
    phi, d1, d2 = phi.detach(), d1.detach(), d2.detach()
    assert abs(float(phi[2])) < 1e-13 and abs(float(d1[2])) < 1e-9 and abs(float(d2[2])) < 1e-3
    assert float(d1[3]) == 0.0


def test_parameter_count_matches_hyperparameters():
    """Count the Platonic model's parameters from its hyperparameters by hand."""
    from mlip.models import create_model

    G, C, L, H, D, m, R, S = 12, 8, 2, 2, 4, 4, 8, 3
    p = create_model("platonic", species=["Cu", "Au", "Ni"], cutoff=5.0, group="T", channels=C, num_layers=L,
                     num_heads=H, head_dim=D, ffn_multiplier=m, num_radial=R)
    gl = lambda i, o: G * i * o + o  # noqa: E731
    per_block = (
        2 * 2 * C  # two layer norms
        + 3 * gl(C, H * D) + gl(H * D, C)  # q, k, v, out
        + H * (D // 2) * 3  # RoPE frequencies
        + R * H + H  # radial bias
        + gl(C, m * C) + gl(m * C, C)  # feed-forward
    )
    expected = S * C + L * per_block + 2 * C + gl(C, C) + gl(C, 1)
    assert p.num_parameters() == expected
    # The neighbour-density embedding adds one bias-free (S·R → C) map.
    with_density = create_model("platonic", species=["Cu", "Au", "Ni"], cutoff=5.0, group="T", channels=C,
                                num_layers=L, num_heads=H, head_dim=D, ffn_multiplier=m, num_radial=R, density=True)
    assert with_density.num_parameters() == expected + S * R * C
    # Its logarithmic densities add the raw weights V [S, S·K, 16] (K = 8 rates) and a bias-free 16 → C map.
    with_log = create_model("platonic", species=["Cu", "Au", "Ni"], cutoff=5.0, group="T", channels=C,
                            num_layers=L, num_heads=H, head_dim=D, ffn_multiplier=m, num_radial=R, density=True,
                            density_log_densities=True)
    assert with_log.num_parameters() == expected + S * R * C + S * S * 8 * 16 + 16 * C
    with pytest.raises(ValueError, match="density_log_densities needs density"):
        create_model("platonic", species=["Cu"], cutoff=5.0, density_log_densities=True)


def test_neighbour_density_matches_a_sum_over_an_ase_neighbour_list():
    """ρ_i[Z, n] = Σ_{j ≠ i within r_c, all periodic images, Z_j = Z} φ(r_ij) B_n(r_ij), checked
    against ASE's neighbour list in a cell smaller than the cutoff (an atom sees its own images)."""
    from ase.build import bulk
    from ase.neighborlist import neighbor_list

    import mlip
    from mlip.graph import edge_vectors
    from mlip.models.platonic import NeighborDensityEmbedding
    from mlip.nn import BesselBasis

    cutoff, R = 4.5, 5
    species = ["Cu", "Au", "Ni"]
    atoms = bulk("Cu", "fcc", a=3.7, cubic=True)
    atoms.symbols[[1, 3]] = "Au"
    atoms.rattle(0.1, seed=3)
    graph = mlip.batch_atoms([atoms], cutoff, dtype=torch.float64)
    index = torch.tensor([species.index(s) for s in atoms.get_chemical_symbols()])
    length = edge_vectors(graph.positions, graph.cell, graph.batch, graph.edge_index, graph.shifts).norm(dim=-1)
    ii, jj, dd = neighbor_list("ijd", atoms, cutoff)
    env, basis = PolynomialEnvelope(cutoff), BesselBasis(cutoff, R)
    layer = NeighborDensityEmbedding(len(species), R, channels=4, avg_neighbors=10.0).double()
    radial = basis(length) * env(length).unsqueeze(-1)
    got = layer.densities(index, graph.edge_index, radial)

    expected = np.zeros((len(atoms), len(species), R))
    d = torch.tensor(dd)
    terms = (basis(d) * env(d).unsqueeze(-1)).numpy()
    for a, b, t in zip(ii, jj, terms):
        expected[a, int(index[b])] += t
    assert len(ii) > 12 * len(atoms)  # images of the 4-atom cell are counted
    assert np.allclose(got.numpy(), expected.reshape(len(atoms), -1), atol=1e-12)
    assert np.abs(expected[:, 2]).max() == 0.0  # no Ni: its block stays empty
    out = layer(index, graph.edge_index, radial)
    assert torch.allclose(out, got @ layer.linear.weight.T / 10.0, atol=1e-12)


def test_logarithmic_neighbour_densities_follow_their_definition():
    """With ``log_densities`` the embedding adds U · u_i, u_i = ln(1 + σ_i/ε)/ln(1/ε) and
    σ_i = softplus(V_{Z_i})ᵀ vec(Σ_j onehot(Z_j) ⊗ φ(r_ij) exp(−η (r_ij − 2.5 Å))) / n_avg, summed here
    pair by pair over ASE's neighbour list (every periodic image of a cell smaller than the cutoff);
    an atom alone gets u = 0, and without the lengths the layer refuses to guess."""
    import math

    from ase import Atoms
    from ase.build import bulk
    from ase.neighborlist import neighbor_list

    import mlip
    from mlip.graph import edge_vectors
    from mlip.models.platonic import NeighborDensityEmbedding
    from mlip.nn import BesselBasis

    cutoff, R, S = 4.5, 5, 3
    species = ["Cu", "Au", "Ni"]
    atoms = bulk("Cu", "fcc", a=3.7, cubic=True)
    atoms.symbols[[1, 3]] = "Au"
    atoms.symbols[2] = "Ni"
    atoms.rattle(0.1, seed=4)
    graph = mlip.batch_atoms([atoms], cutoff, dtype=torch.float64)
    index = torch.tensor([species.index(s) for s in atoms.get_chemical_symbols()])
    length = edge_vectors(graph.positions, graph.cell, graph.batch, graph.edge_index, graph.shifts).norm(dim=-1)
    env, basis = PolynomialEnvelope(cutoff), BesselBasis(cutoff, R)
    layer = NeighborDensityEmbedding(S, R, channels=4, avg_neighbors=10.0, log_densities=True,
                                      num_log_densities=6).double()
    radial = basis(length) * env(length).unsqueeze(-1)
    out = layer(index, graph.edge_index, radial, length, env(length))

    rates = torch.tensor([1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0], dtype=torch.float64)
    ii, jj, dd = neighbor_list("ijd", atoms, cutoff)
    positive = torch.zeros(len(atoms), S, 8, dtype=torch.float64)
    for a, b, d in zip(ii, jj, dd):
        r = torch.tensor(d, dtype=torch.float64)
        positive[a, int(index[b])] += torch.exp(-rates * (r - 2.5)) * env(r)
    linear = layer.linear(layer.densities(index, graph.edge_index, radial) / 10.0)
    for i in range(len(atoms)):
        v = torch.nn.functional.softplus(layer.log_density.weights[int(index[i])])  # [S·8, 6]
        sigma = positive[i].reshape(-1) @ v / 10.0
        assert (sigma > 0).all()
        u = torch.log1p(sigma / 1e-4) / math.log(1e4)
        torch.testing.assert_close(out[i], linear[i] + layer.log_density.linear(u), rtol=1e-12, atol=1e-14)
    # in the crystal the logarithmic part U · u is not negligible; an atom alone has u = 0, so none
    assert (out - linear).abs().max() > 0.05
    lone = mlip.batch_atoms([Atoms("Au", positions=[[0, 0, 0]])], cutoff, dtype=torch.float64)
    none = layer(torch.tensor([1]), lone.edge_index, torch.zeros((0, R), dtype=torch.float64),
                 torch.zeros(0, dtype=torch.float64), torch.zeros(0, dtype=torch.float64))
    assert torch.equal(none, torch.zeros(1, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="edge lengths"):
        layer(index, graph.edge_index, radial)


def test_attention_cutoff_equal_to_cutoff_is_the_plain_model_and_bad_values_are_rejected():
    """``attention_cutoff = cutoff`` builds the same weights and energies as ``None`` (one radius for the
    density sums and attention); a radius above the cutoff, or one without the density embedding (whose
    far edges would then reach nothing), is refused with a message naming it."""
    from ase.build import bulk

    import mlip
    from mlip.models import create_model

    kwargs = dict(species=["Cu", "Au"], cutoff=4.5, group="T", channels=4, num_layers=1, num_heads=2,
                  head_dim=4, density=True, seed=3)
    plain = create_model("platonic", **kwargs).double()
    same = create_model("platonic", attention_cutoff=4.5, **kwargs).double()
    reach = create_model("platonic", attention_cutoff=3.5, **kwargs).double()
    atoms = bulk("Cu", "fcc", a=3.7, cubic=True)
    atoms.symbols[[1, 3]] = "Au"
    atoms.rattle(0.1, seed=3)
    energies = [mlip.MLIPCalculator(p, dtype="float64").get_potential_energy(atoms) for p in (plain, same, reach)]
    assert energies[1] == energies[0]
    assert abs(energies[2] - energies[0]) > 1e-6  # attention now sees fewer edges
    assert reach.model.attention_cutoff == 3.5 and reach.model.radial.cutoff == 3.5
    assert reach.model.density_radial.cutoff == 4.5
    with pytest.raises(ValueError, match="attention_cutoff"):
        create_model("platonic", attention_cutoff=5.0, **kwargs)
    with pytest.raises(ValueError, match="density"):
        create_model("platonic", **{**kwargs, "density": False, "attention_cutoff": 3.5})


def test_generic_orientation_is_a_rotation_away_from_crystal_axes():
    """R₀ of "generic" is a proper rotation, and (the claim of the module's docstring) no lattice
    direction [uvw] with |u|, |v|, |w| ≤ 3, of a cubic or a hexagonal cell, lies within 1.8° of a rotation
    axis of the turned tetrahedral or octahedral group; "aligned" puts [100] and [111] on them."""
    from mlip.models.platonic.orientation import orientation_matrix

    r0 = orientation_matrix("generic").numpy()
    assert np.allclose(r0 @ r0.T, np.eye(3), atol=1e-15) and np.linalg.det(r0) == pytest.approx(1.0, abs=1e-15)
    hexagonal = np.array([[1.0, 0.0, 0.0], [-0.5, 3**0.5 / 2, 0.0], [0.0, 0.0, 1.633]])
    uvw = np.array([v for v in itertools.product(range(-3, 4), repeat=3) if any(v)], dtype=float)
    directions = np.concatenate([uvw, uvw @ hexagonal])
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    # Rotation axes of the octahedral group (which contains the tetrahedral one): 4-fold [100],
    # 3-fold [111], 2-fold [110].
    axes = np.array([v for v in itertools.product(range(-1, 2), repeat=3) if any(v)], dtype=float)
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)

    def closest_degrees(r):
        cosines = np.abs(directions @ (axes @ r.T).T).clip(max=1.0)
        return np.degrees(np.arccos(cosines.max()))

    assert closest_degrees(np.eye(3)) == pytest.approx(0.0, abs=1e-6)
    assert closest_degrees(r0) > 1.8
    with pytest.raises(ValueError, match="orientation 'sideways'"):
        orientation_matrix("sideways")


#: a small tetrahedral model for the tests that compare two evaluations of the same weights
SMALL_T = dict(species=["Cu", "Au"], cutoff=4.5, group="T", channels=4, num_layers=1, num_heads=2, head_dim=4,
               seed=5)


def _cu_au_cell():
    from ase.build import bulk

    atoms = bulk("Cu", "fcc", a=3.7, cubic=True)
    atoms.symbols[[1, 3]] = "Au"
    atoms.rattle(0.1, seed=3)
    return atoms


def _props(potential, atoms):
    """(energy, forces, 3×3 stress) of ``atoms`` by ``potential`` in float64."""
    import mlip

    atoms = atoms.copy()
    atoms.calc = mlip.MLIPCalculator(potential, dtype="float64")
    return atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress(voigt=False)


def _turned(atoms, r):
    """``atoms`` rotated by ``r`` (positions and cell)."""
    b = atoms.copy()
    b.positions = atoms.positions @ r.T
    b.set_cell(atoms.cell.array @ r.T, scale_atoms=False)
    return b


def test_generic_orientation_is_the_aligned_model_on_a_turned_input():
    """Same weights: E_generic(x) = E_aligned(R₀ᵀx), forces and stress turned back by R₀; and the
    generic model is invariant to R₀R_gR₀ᵀ but not to the aligned group's R_g."""
    from mlip.models import create_model
    from mlip.models.platonic.orientation import orientation_matrix

    generic = create_model("platonic", **SMALL_T).double()
    aligned = create_model("platonic", orientation="aligned", **SMALL_T).double()
    assert generic.model.orientation == "generic"
    r0 = orientation_matrix("generic").numpy()
    atoms = _cu_au_cell()
    e, f, s = _props(generic, atoms)
    e_a, f_a, s_a = _props(aligned, _turned(atoms, r0.T))
    assert e == pytest.approx(e_a, rel=1e-12)
    assert np.allclose(f, f_a @ r0.T, atol=1e-10)
    assert np.allclose(s, r0 @ s_a @ r0.T, atol=1e-10)
    group = get_group("tetrahedral").elements.numpy()
    h = group[5]  # a rotation of the aligned group (not the identity)
    e_inv, _, _ = _props(generic, _turned(atoms, r0 @ h @ r0.T))
    e_not, _, _ = _props(generic, _turned(atoms, h))
    assert e_inv == pytest.approx(e, rel=1e-12)
    assert abs(e_not - e) > 1e-6


@pytest.mark.parametrize("supergroup, k", [("octahedral", 2), ("icosahedral", 5)])
def test_coset_representatives_cover_the_supergroup_once(supergroup, k):
    from mlip.models.platonic.groups import coset_representatives

    reps = coset_representatives("tetrahedral", supergroup).numpy()
    t, big = get_group("tetrahedral").elements.numpy(), get_group(supergroup).elements.numpy()
    products = np.concatenate([c @ t for c in reps])  # every c_k R_g
    assert reps.shape == (k, 3, 3) and np.allclose(reps[0], np.eye(3))
    distance = np.sum((products[:, None] - big[None]) ** 2, axis=(2, 3))  # [K·12, |S|]
    assert (distance.min(axis=1) < 1e-20).all() and len(set(distance.argmin(axis=1))) == len(big)
    with pytest.raises(ValueError, match="not a proper subgroup"):
        coset_representatives("octahedral", "icosahedral")


def test_the_coset_average_is_the_mean_of_the_network_over_turned_inputs():
    """Same weights: E_avg(x) = mean_k E(Q_kᵀx) with Q_k = R₀c_kR₀ᵀ (the plain model seeing the input
    turned into each coset's frames), to float64 rounding; the averaged model adds no parameter, and
    is exactly invariant to the icosahedral group turned by R₀, which the plain model is not."""
    from mlip.models import create_model
    from mlip.models.platonic.groups import coset_representatives
    from mlip.models.platonic.orientation import orientation_matrix

    plain = create_model("platonic", **SMALL_T).double()
    averaged = create_model("platonic", average_over="I", **SMALL_T).double()
    assert averaged.model.average_over == "icosahedral"
    assert plain.state_dict().keys() == averaged.state_dict().keys()
    averaged.load_state_dict(plain.state_dict())
    atoms = _cu_au_cell()

    def energy(potential, a):
        return _props(potential, a)[0]

    r0 = orientation_matrix("generic").numpy()
    qs = [r0 @ c @ r0.T for c in coset_representatives("tetrahedral", "icosahedral").numpy()]
    e_avg = energy(averaged, atoms)
    assert e_avg == pytest.approx(np.mean([energy(plain, _turned(atoms, q.T)) for q in qs]), abs=1e-12)
    five_fold = qs[1]
    assert abs(energy(averaged, _turned(atoms, five_fold)) - e_avg) < 1e-11
    assert abs(energy(plain, _turned(atoms, five_fold)) - energy(plain, atoms)) > 1e-6
    with pytest.raises(ValueError, match="average_over 'icosahedral'"):
        create_model("platonic", **{**SMALL_T, "group": "O"}, average_over="icosahedral")
