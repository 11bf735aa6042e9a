"""Symmetries of the energy: translation, permutation, wrapping, the model's rotations, extensivity."""

import numpy as np
import pytest
from ase.build import bulk

from conftest import ARCHITECTURES, STRUCTURES, build_potential, calc64

TOL = 1e-10  # relative, float64: a few hundred ulps of accumulated rounding


def evaluate(potential, atoms):
    atoms = atoms.copy()
    atoms.calc = calc64(potential)
    out = {"energy": atoms.get_potential_energy(), "forces": atoms.get_forces()}
    if atoms.cell.rank == 3:
        out["stress"] = atoms.get_stress(voigt=False)
    return out


def assert_close(a, b, scale, tol=TOL, what=""):
    err = np.abs(np.asarray(a) - np.asarray(b)).max()
    # Scale floor 1e-2 (eV, eV/Å, eV/Å³): a quantity that is zero by symmetry (a force in a perfect
    # crystal) is a cancelling sum of hundreds of edge terms of that size or larger, so it is compared
    # absolutely, to 1e-12.
    assert err <= tol * max(scale, 1e-2), f"{what}: error {err:.3e} vs scale {scale:.3e}"


def evaluate_batch(potential, structures):
    """Energies [n], forces (list of [n_i, 3]) and stresses [n, 3, 3] of many structures in one batch."""
    import torch

    import mlip

    graph = mlip.batch_atoms(structures, potential.cutoff, dtype=torch.float64)
    out = potential(graph)
    counts = [len(a) for a in structures]
    forces = torch.split(out["forces"].detach(), counts)
    voigt = out["stress"].detach().numpy()
    stress = voigt[:, [[0, 5, 4], [5, 1, 3], [4, 3, 2]]]
    return out["energy"].detach().numpy(), [f.numpy() for f in forces], stress


def rotated(atoms, R):
    rot = atoms.copy()
    rot.positions = atoms.positions @ R.T
    rot.set_cell(atoms.cell.array @ R.T, scale_atoms=False)
    return rot


def rotations_for(arch, potential, n_random=3, seed=0):
    """Rotations under which ``arch`` must be exactly invariant."""
    kind = ARCHITECTURES[arch][1]
    if kind == "group":
        return potential.model.invariant_rotations.double().numpy()
    from scipy.spatial.transform import Rotation

    return Rotation.random(n_random, random_state=seed).as_matrix()


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_translation_invariance(potential64, name):
    atoms = STRUCTURES[name]()
    ref = evaluate(potential64, atoms)
    moved = atoms.copy()
    moved.positions += np.array([12.3, -7.7, 4.4])
    out = evaluate(potential64, moved)
    assert_close(out["energy"], ref["energy"], abs(ref["energy"]), what="energy")
    assert_close(out["forces"], ref["forces"], np.abs(ref["forces"]).max(), what="forces")


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_permutation_invariance(potential64, name):
    atoms = STRUCTURES[name]()
    ref = evaluate(potential64, atoms)
    perm = np.random.default_rng(1).permutation(len(atoms))
    out = evaluate(potential64, atoms[perm])
    assert_close(out["energy"], ref["energy"], abs(ref["energy"]), what="energy")
    assert_close(out["forces"], ref["forces"][perm], np.abs(ref["forces"]).max(), what="forces")
    if "stress" in ref:
        assert_close(out["stress"], ref["stress"], np.abs(ref["stress"]).max(), what="stress")


@pytest.mark.parametrize("name", ["triclinic", "small_fcc", "slab"])
def test_wrapping_and_image_choice(potential64, name):
    atoms = STRUCTURES[name]()
    ref = evaluate(potential64, atoms)
    shifted = atoms.copy()
    # Move atoms by whole lattice vectors along periodic directions (another choice of images)...
    rng = np.random.default_rng(2)
    n = rng.integers(-2, 3, size=(len(atoms), 3)) * atoms.pbc
    shifted.positions += n @ atoms.cell.array
    out = evaluate(potential64, shifted)
    assert_close(out["energy"], ref["energy"], abs(ref["energy"]), what="energy (images)")
    assert_close(out["forces"], ref["forces"], np.abs(ref["forces"]).max(), what="forces (images)")
    # ... and wrap them back into the cell.
    shifted.wrap()
    out = evaluate(potential64, shifted)
    assert_close(out["energy"], ref["energy"], abs(ref["energy"]), what="energy (wrapped)")
    assert_close(out["stress"], ref["stress"], np.abs(ref["stress"]).max(), what="stress (wrapped)")


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_rotation_invariance(arch, potential64, name):
    atoms = STRUCTURES[name]()
    ref = evaluate(potential64, atoms)
    rotations = rotations_for(arch, potential64)
    assert len(rotations) >= 3
    energies, forces, stresses = evaluate_batch(potential64, [rotated(atoms, R) for R in rotations])
    for R, e, f, s in zip(rotations, energies, forces, stresses):
        assert_close(e, ref["energy"], abs(ref["energy"]), what="energy")
        assert_close(f, ref["forces"] @ R.T, np.abs(ref["forces"]).max(), what="forces")
        if "stress" in ref:
            assert_close(s, R @ ref["stress"] @ R.T, np.abs(ref["stress"]).max(), what="stress")


@pytest.mark.parametrize("group", ["tetrahedral", "octahedral", "icosahedral"])
def test_platonic_group_invariance_every_group(group):
    """Every group is exact in float64, the icosahedral one (irrational entries) included."""
    from mlip.models import create_model

    potential = create_model("platonic", species=["Cu", "Au"], cutoff=4.0, seed=1, group=group,
                              channels=4, num_layers=1, num_heads=1, head_dim=4).double()
    atoms = STRUCTURES["triclinic"]()
    ref = evaluate(potential, atoms)
    frames = potential.model.invariant_rotations.numpy()
    assert len(frames) == {"tetrahedral": 12, "octahedral": 24, "icosahedral": 60}[group]
    energies, forces, stresses = evaluate_batch(potential, [rotated(atoms, R) for R in frames])
    for R, e, f, s in zip(frames, energies, forces, stresses):
        assert_close(e, ref["energy"], abs(ref["energy"]), what=f"{group} energy")
        assert_close(f, ref["forces"] @ R.T, np.abs(ref["forces"]).max(), what=f"{group} forces")
        assert_close(s, R @ ref["stress"] @ R.T, np.abs(ref["stress"]).max(), what=f"{group} stress")


def test_platonic_is_not_so3_invariant():
    """Sanity check that the group test can fail: a generic rotation changes the Platonic energy."""
    from scipy.spatial.transform import Rotation

    potential = build_potential("platonic-softmax")
    atoms = STRUCTURES["triclinic"]()
    ref = evaluate(potential, atoms)["energy"]
    R = Rotation.from_rotvec([0.3, -0.2, 0.5]).as_matrix()
    assert abs(evaluate(potential, rotated(atoms, R))["energy"] - ref) > 1e-6 * abs(ref)


@pytest.mark.parametrize("name", ["triclinic", "small_fcc"])
def test_supercell_extensivity(potential64, name):
    atoms = STRUCTURES[name]()
    ref = evaluate(potential64, atoms)
    big = atoms * (2, 2, 2)
    out = evaluate(potential64, big)
    assert_close(out["energy"], 8 * ref["energy"], abs(8 * ref["energy"]), what="energy")
    assert_close(out["forces"][: len(atoms)], ref["forces"], np.abs(ref["forces"]).max(), what="forces")
    assert_close(out["stress"], ref["stress"], np.abs(ref["stress"]).max(), what="stress")


def test_far_apart_fragments_decouple(potential64):
    """Two molecules further apart than the cutoff: energy is the sum of their energies."""
    a = STRUCTURES["molecule"]()
    b = STRUCTURES["molecule"]()
    b.positions += np.array([0.0, 0.0, 3 * potential64.cutoff])
    e_a = evaluate(potential64, a)["energy"]
    e_both = evaluate(potential64, a + b)["energy"]
    assert_close(e_both, 2 * e_a, abs(2 * e_a), what="decoupled energy")


def test_float32_matches_float64(arch):
    import mlip

    potential = build_potential(arch)
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True) * (2, 2, 2)
    atoms.rattle(0.05, seed=0)
    atoms.calc = mlip.MLIPCalculator(potential, device="cpu", dtype="float64")
    e64, f64 = atoms.get_potential_energy(), atoms.get_forces()
    atoms.calc = mlip.MLIPCalculator(potential, device="cpu", dtype="float32")
    e32, f32 = atoms.get_potential_energy(), atoms.get_forces()
    # float32 has ~6e-8 relative precision; sums over ~10⁴ terms lose ~2 digits.
    assert e32 == pytest.approx(e64, rel=1e-5)
    assert np.abs(f32 - f64).max() <= 1e-3 * np.abs(f64).max()


def test_icosahedral_exact_after_float32_round_trip():
    """Casting to float32 and back (as a float32 checkpoint used in float64 does) keeps the group exact."""
    from mlip.models import create_model

    potential = create_model("platonic", species=["Cu", "Au"], cutoff=4.0, seed=2, group="icosahedral",
                              channels=4, num_layers=1, num_heads=1, head_dim=4).float().double()
    atoms = STRUCTURES["triclinic"]()
    ref = evaluate(potential, atoms)
    frames = potential.model.invariant_rotations.numpy()
    energies, forces, _ = evaluate_batch(potential, [rotated(atoms, R) for R in frames[::7]])
    for R, e, f in zip(frames[::7], energies, forces):
        assert_close(e, ref["energy"], abs(ref["energy"]), what="energy")
        assert_close(f, ref["forces"] @ R.T, np.abs(ref["forces"]).max(), what="forces")
