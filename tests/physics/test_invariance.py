"""Symmetries of the energy: translation, permutation, wrapping, the model's rotations, extensivity; the
symmetry checks of the shipped physics suite (mlip.testing.physics) on every architecture."""

import pytest

from mlip.testing import (ARCHITECTURES, STRUCTURES, build_potential, check_extensivity,
                          check_float32_matches_float64, check_image_invariance,
                          check_permutation_invariance, check_rotation_invariance, check_small_cell_images,
                          check_translation_invariance)
from mlip.testing.physics import declared_rotations, evaluate, rotated


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_translation_invariance(potential64, name):
    check_translation_invariance(potential64, STRUCTURES[name]())


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_permutation_invariance(potential64, name):
    check_permutation_invariance(potential64, STRUCTURES[name]())


@pytest.mark.parametrize("name", ["triclinic", "small_fcc", "slab"])
def test_wrapping_and_image_choice(potential64, name):
    check_image_invariance(potential64, STRUCTURES[name]())


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_rotation_invariance(arch, potential64, name):
    """Exact under the model's declared rotations (the Platonic group) or under random ones (the
    continuous-symmetric models); the declaration is the one the architecture table expects."""
    rotations = declared_rotations(potential64)
    assert (rotations is not None) == (ARCHITECTURES[arch][1] == "group")
    assert rotations is None or len(rotations) >= 3
    check_rotation_invariance(potential64, STRUCTURES[name]())


@pytest.mark.parametrize("group", ["tetrahedral", "octahedral", "icosahedral"])
def test_platonic_group_invariance_every_group(group):
    """Every group is exact in float64, the icosahedral one (irrational entries) included."""
    from mlip.models import create_model

    potential = create_model("platonic", species=["Cu", "Au"], cutoff=4.0, seed=1, group=group,
                              channels=4, num_layers=1, num_heads=1, head_dim=4).double()
    frames = potential.model.invariant_rotations.numpy()
    assert len(frames) == {"tetrahedral": 12, "octahedral": 24, "icosahedral": 60}[group]
    check_rotation_invariance(potential, STRUCTURES["triclinic"](), rotations=frames)


def test_platonic_is_not_so3_invariant():
    """Sanity check that the group test can fail: a generic rotation changes the Platonic energy."""
    from scipy.spatial.transform import Rotation

    potential = build_potential("platonic-softmax")
    atoms = STRUCTURES["triclinic"]()
    ref = evaluate(potential, atoms)["energy"]
    R = Rotation.from_rotvec([0.3, -0.2, 0.5]).as_matrix()
    assert abs(evaluate(potential, rotated(atoms, R))["energy"] - ref) > 1e-6 * abs(ref)
    with pytest.raises(AssertionError, match="energy"):
        check_rotation_invariance(potential, atoms, rotations=R[None])


@pytest.mark.parametrize("name", ["triclinic", "small_fcc"])
def test_supercell_extensivity(potential64, name):
    check_small_cell_images(potential64, STRUCTURES[name]())


def test_far_apart_fragments_decouple(potential64):
    """Two molecules further apart than the cutoff: energy is the sum of their energies."""
    check_extensivity(potential64, STRUCTURES["molecule"]())


def test_float32_matches_float64(arch):
    check_float32_matches_float64(build_potential(arch))


def test_icosahedral_exact_after_float32_round_trip():
    """Casting to float32 and back (as a float32 checkpoint used in float64 does) keeps the group exact."""
    from mlip.models import create_model

    potential = create_model("platonic", species=["Cu", "Au"], cutoff=4.0, seed=2, group="icosahedral",
                              channels=4, num_layers=1, num_heads=1, head_dim=4).float().double()
    frames = potential.model.invariant_rotations.numpy()
    check_rotation_invariance(potential, STRUCTURES["triclinic"](), rotations=frames[::7], stress=False)
