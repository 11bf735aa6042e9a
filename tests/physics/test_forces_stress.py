"""Forces and stress are the exact derivatives of the energy (central finite differences, float64):
the derivative checks of the shipped physics suite (mlip.testing.physics) on every architecture."""

import pytest

from mlip.testing import (STRUCTURES, check_axis_aligned_bonds, check_forces_finite_difference,
                          check_stress_finite_difference, check_stress_tensor, validate_outputs)
from mlip.testing.physics import calc64


@pytest.mark.parametrize("name", sorted(set(STRUCTURES) - {"small_fcc"}))
def test_forces_match_finite_differences(potential64, name):
    check_forces_finite_difference(potential64, STRUCTURES[name]())


def test_one_atom_cell_has_zero_force(potential64):
    check_forces_finite_difference(potential64, STRUCTURES["small_fcc"]())


@pytest.mark.parametrize("name", ["triclinic", "small_fcc", "small_pair", "slab"])
def test_stress_matches_finite_differences(potential64, name):
    check_stress_finite_difference(potential64, STRUCTURES[name]())


def test_stress_not_available_without_cell(potential64):
    from ase.calculators.calculator import PropertyNotImplementedError

    atoms = STRUCTURES["molecule"]()
    atoms.calc = calc64(potential64)
    with pytest.raises(PropertyNotImplementedError, match="stress needs a cell"):
        atoms.get_stress()


def test_energies_sum_and_free_energy(potential64):
    """Per-atom energies sum to the energy, free energy = energy; keys, shapes and dtypes of the outputs."""
    validate_outputs(potential64)


def test_stress_is_symmetric_tensor_of_strain_derivative(potential64):
    """σ = (1/V) ∂E/∂ε for the full 3×3 strain, checked off-diagonal with ASE's Voigt order."""
    check_stress_tensor(potential64, STRUCTURES["triclinic"]())


def test_axis_aligned_bonds_in_an_undistorted_cubic_cell(potential64):
    """Simple-cubic lattice, every nearest-neighbour bond along ±x, ±y or ±z (Euler-angle poles).

    A model that detaches the rotation of such bonds (as eSEN/EquiformerV3's reference code does for
    bonds along y) loses their transverse force and shear-stress terms; the species are mixed so
    that these do not all cancel by symmetry.
    """
    check_axis_aligned_bonds(potential64)
