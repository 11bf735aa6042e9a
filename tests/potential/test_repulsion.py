"""The short-range repulsion term (switched ZBL): its definition, derivatives, declaration in models
and checkpoints, and a repulsive wall for every architecture of the physics suite."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.data import atomic_numbers, covalent_radii

import mlip
from mlip.checkpoint import load_potential, read_header, save_potential
from mlip.graph import batch_atoms
from mlip.models import create_model
from mlip.repulsion import ZBLRepulsion, build_repulsion, smooth_switch, zbl_energy
from mlip.testing import check_short_range_repulsion
from mlip.testing.physics import dimer_curve


def zbl_reference(r, z1, z2):
    """ZBL written out from the book's formula in plain Python (eV, Å)."""
    a = 0.8854 * 0.529177210903 / (z1**0.23 + z2**0.23)
    x = r / a
    phi = (0.18175 * math.exp(-3.1998 * x) + 0.50986 * math.exp(-0.94229 * x)
           + 0.28022 * math.exp(-0.4029 * x) + 0.02817 * math.exp(-0.20162 * x))
    return 14.399645478425668 * z1 * z2 / r * phi


def switch_reference(r, r_in, r_out):
    if r <= r_in:
        return 1.0
    if r >= r_out:
        return 0.0
    t = (r - r_in) / (r_out - r_in)
    return 1.0 - 10 * t**3 + 15 * t**4 - 6 * t**5


@pytest.mark.parametrize("z1,z2", [(1, 1), (29, 29), (14, 32), (8, 79)])
def test_zbl_energy_matches_the_formula(z1, z2):
    r = torch.linspace(0.05, 3.0, 40, dtype=torch.float64)
    got = zbl_energy(r, torch.full_like(r, z1), torch.full_like(r, z2))
    want = torch.tensor([zbl_reference(float(x), z1, z2) for x in r], dtype=torch.float64)
    torch.testing.assert_close(got, want, rtol=1e-13, atol=0)


def test_zbl_tends_to_the_bare_coulomb_repulsion():
    """φ(0) = 1: at r → 0 the screening vanishes and V → e² Z₁Z₂ / (4πε₀ r)."""
    r = torch.tensor([1e-6], dtype=torch.float64)
    v = zbl_energy(r, torch.tensor([29.0], dtype=torch.float64), torch.tensor([29.0], dtype=torch.float64))
    assert float(v * r / (14.399645478425668 * 29 * 29)) == pytest.approx(1.0, abs=1e-4)


def test_switch_is_c2_and_bounded():
    r_in, r_out = torch.tensor(1.0, dtype=torch.float64), torch.tensor(1.5, dtype=torch.float64)
    r = torch.linspace(0.8, 1.7, 181, dtype=torch.float64, requires_grad=True)
    s = smooth_switch(r, r_in, r_out)
    want = torch.tensor([switch_reference(float(x), 1.0, 1.5) for x in r], dtype=torch.float64)
    torch.testing.assert_close(s.detach(), want, rtol=0, atol=1e-14)
    (d1,) = torch.autograd.grad(s.sum(), r, create_graph=True)
    (d2,) = torch.autograd.grad(d1.sum(), r)
    for edge in (1.0, 1.5):  # first and second derivatives vanish at both ends
        near = (r.detach() - edge).abs() < 1e-9
        assert near.any()
        assert d1.detach()[near].abs().max() < 1e-12 and d2[near].abs().max() < 1e-9
    assert bool((d1.detach() <= 0).all())


def pair_sum_reference(atoms, inner, outer):
    """Σ_{i<j} V(r) s(r) over all pairs (minimum image is enough for these cells), in plain Python."""
    energy = 0.0
    n = len(atoms)
    for i, j in itertools.combinations(range(n), 2):
        r = atoms.get_distance(i, j, mic=atoms.pbc.any())
        zi, zj = int(atoms.numbers[i]), int(atoms.numbers[j])
        bond = covalent_radii[zi] + covalent_radii[zj]
        energy += zbl_reference(r, zi, zj) * switch_reference(r, inner * bond, outer * bond)
    return energy


def compressed_cluster():
    # pairs inside the full-strength region, inside the switch and outside it
    return Atoms("CuAuOH", positions=[[0, 0, 0], [1.1, 0, 0], [0, 1.3, 0.2], [0.3, 1.9, 0.9]])


@pytest.mark.parametrize("inner,outer", [(0.5, 0.7), (0.3, 0.9)])
def test_term_is_the_pair_sum(inner, outer):
    atoms = compressed_cluster()
    species = ["Cu", "Au", "O", "H"]
    term = ZBLRepulsion([atomic_numbers[s] for s in species], inner=inner, outer=outer)
    graph = batch_atoms([atoms], cutoff=4.0, dtype=torch.float64)
    index = torch.tensor([species.index(s) for s in atoms.get_chemical_symbols()])
    from mlip.graph import edge_vectors

    vec = edge_vectors(graph.positions, graph.cell, graph.batch, graph.edge_index, graph.shifts)
    energies = term(index, graph.edge_index, vec)
    assert energies.shape == (4,)
    assert float(energies.sum()) == pytest.approx(pair_sum_reference(atoms, inner, outer), rel=1e-12)
    assert float(energies.sum()) > 1.0  # the cluster really holds compressed pairs


def term_only_potential(species, repulsion="zbl"):
    """A potential whose only energy is the repulsion: an embedded-atom model with scale 0."""
    potential = create_model("embedded_atom", species=species, cutoff=4.0, seed=0, repulsion=repulsion)
    with torch.no_grad():
        potential.scale.zero_()
    return potential.double().eval()


def test_energy_forces_stress_of_the_term_against_the_formula_and_finite_differences():
    atoms = compressed_cluster()
    atoms.set_cell([6.0, 6.5, 7.0])
    atoms.pbc = True
    potential = term_only_potential(["Cu", "Au", "O", "H"])
    calc = mlip.MLIPCalculator(potential, device="cpu", dtype="float64")
    atoms.calc = calc
    assert atoms.get_potential_energy() == pytest.approx(pair_sum_reference(atoms, 0.5, 0.7), rel=1e-12)
    forces = atoms.get_forces()
    h = 1e-5
    for i in range(len(atoms)):
        for k in range(3):
            plus, minus = atoms.copy(), atoms.copy()
            plus.positions[i, k] += h
            minus.positions[i, k] -= h
            plus.calc = minus.calc = calc
            fd = -(plus.get_potential_energy() - minus.get_potential_energy()) / (2 * h)
            assert forces[i, k] == pytest.approx(fd, rel=1e-6, abs=1e-6)
    stress = atoms.get_stress(voigt=False)
    volume = atoms.get_volume()
    for a, b in [(0, 0), (1, 1), (2, 2), (0, 1), (1, 2), (0, 2)]:
        energies = []
        for sign in (1, -1):
            strained = atoms.copy()
            eps = np.eye(3)
            eps[a, b] += sign * h / 2
            eps[b, a] += sign * h / 2
            strained.set_cell(atoms.cell @ eps, scale_atoms=True)
            strained.calc = calc
            energies.append(strained.get_potential_energy())
        assert stress[a, b] == pytest.approx((energies[0] - energies[1]) / (2 * h) / volume, rel=1e-6,
                                             abs=1e-8)


def test_term_leaves_bonding_distances_alone():
    """Beyond outer × (R_i + R_j) the term adds nothing: a Cu crystal gets bit-identical results."""
    from ase.build import bulk

    atoms = bulk("Cu", "fcc", a=3.6).repeat((2, 1, 1))
    atoms.rattle(0.05, seed=1)
    results = []
    for repulsion in ("zbl", None):
        potential = create_model("embedded_atom", species=["Cu"], cutoff=4.0, seed=0, repulsion=repulsion)
        atoms.calc = mlip.MLIPCalculator(potential, device="cpu", dtype="float64")
        results.append((atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()))
    assert results[0][0] == results[1][0]
    assert np.array_equal(results[0][1], results[1][1]) and np.array_equal(results[0][2], results[1][2])


def test_repulsion_is_declared_on_by_default_and_can_be_switched_off():
    assert isinstance(create_model("embedded_atom", species=["Cu"], cutoff=4.0).repulsion, ZBLRepulsion)
    assert create_model("embedded_atom", species=["Cu"], cutoff=4.0, repulsion=None).repulsion is None
    assert create_model("embedded_atom", species=["Cu"], cutoff=4.0, repulsion="none").repulsion is None
    custom = create_model("embedded_atom", species=["Cu"], cutoff=4.0,
                          repulsion={"kind": "zbl", "outer": 0.8})
    assert (custom.repulsion.inner, custom.repulsion.outer) == (0.5, 0.8)


@pytest.mark.parametrize("spec,message", [
    ("lj", "repulsion must be"),
    ({"kind": "buckingham"}, "unknown repulsion kind 'buckingham'"),
    ({"kind": "zbl", "inr": 0.4}, "unknown repulsion setting(s) inr"),
    ({"kind": "zbl", "inner": 0.8, "outer": 0.7}, "0 < inner < outer"),
])
def test_bad_repulsion_declarations_are_named(spec, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_repulsion(spec, [29])


def test_a_term_reaching_past_the_cutoff_is_refused():
    with pytest.raises(ValueError, match="beyond the cutoff"):
        create_model("embedded_atom", species=["Cs"], cutoff=2.0)


def test_checkpoints_declare_the_term_and_old_ones_load_without_it(tmp_path):
    potential = create_model("embedded_atom", species=["Cu", "O"], cutoff=4.0, seed=0,
                             repulsion={"kind": "zbl", "inner": 0.4, "outer": 0.75})
    path = save_potential(potential, tmp_path / "zbl.safetensors")
    header = read_header(path)
    assert header["repulsion"] == {"kind": "zbl", "inner": 0.4, "outer": 0.75}
    assert header["format_version"] == 3
    loaded = load_potential(path)
    assert loaded.repulsion.config() == potential.repulsion.config()
    atoms = compressed_cluster()[:1] + Atoms("O", positions=[[0.9, 0, 0]])
    energies = []
    for p in (potential, loaded):
        atoms.calc = mlip.MLIPCalculator(p, device="cpu", dtype="float64")
        energies.append(atoms.get_potential_energy())
    assert energies[0] == energies[1]
    # a checkpoint written before the term existed (no "repulsion" key) loads without one
    old = create_model("embedded_atom", species=["Cu", "O"], cutoff=4.0, seed=0, repulsion=None)
    old_path = save_potential(old, tmp_path / "old.safetensors")
    assert "repulsion" not in read_header(old_path) and read_header(old_path)["format_version"] == 1
    assert load_potential(old_path).repulsion is None


def test_every_architecture_has_a_repulsive_wall(potential64):
    """Whatever the (here random) weights: E rises monotonically as a pair is pushed together."""
    pairs = [("Cu", "Cu"), ("Cu", "Au"), ("H", "H"), ("C", "O"), ("Au", "H")]
    curves = check_short_range_repulsion(potential64, pairs)  # the suite's check: E rises monotonically
    for (a, b), (_, energies) in curves.items():
        # and the wall is the nuclear repulsion's: at 0.1 Å most of ZBL's energy (H–H: 88 eV, Cu–Cu: 53 keV)
        assert energies[-1] - energies[0] > 0.5 * zbl_reference(0.1, atomic_numbers[a], atomic_numbers[b])


def test_without_the_term_a_random_network_has_no_wall():
    """The test above can fail: the same random network without the term does not repel at 0.1 Å."""
    potential = create_model("platonic", species=["Cu"], cutoff=4.0, seed=0, repulsion=None, channels=8,
                             num_layers=2, num_heads=2, head_dim=4).double()
    distances, energies = dimer_curve(potential, "Cu", "Cu")
    assert energies[-1] - energies[0] < 0.5 * zbl_reference(0.1, 29, 29)
