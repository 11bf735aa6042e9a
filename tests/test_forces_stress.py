"""Forces and stress are the exact derivatives of the energy (central finite differences, float64)."""

import numpy as np
import pytest
from ase.calculators.fd import calculate_numerical_forces, calculate_numerical_stress

from conftest import STRUCTURES, calc64

# Central differences with h = 1e-5 Å (or strain 1e-5) have truncation error h²·|E'''|/6 ≲ 1e-9 (for
# |E'''| ≲ 100 eV/Å³, the steep untrained models included) and rounding error ~1e-16·|E|/h ≲ 1e-9
# for |E| ≲ 100 eV: the 1e-6 relative tolerance sits well above both.
RTOL = 1e-6


@pytest.mark.parametrize("name", sorted(set(STRUCTURES) - {"small_fcc"}))
def test_forces_match_finite_differences(potential64, name):
    atoms = STRUCTURES[name]()
    atoms.calc = calc64(potential64)
    forces = atoms.get_forces()
    assert np.abs(forces).max() > 1e-3, "forces too small for a meaningful comparison"
    numeric = calculate_numerical_forces(atoms, eps=1e-5)
    err = np.abs(forces - numeric).max()
    assert err <= RTOL * np.abs(forces).max(), f"max |F - F_fd| = {err:.3e}"
    # Newton's third law for a translation-invariant energy.
    assert np.abs(forces.sum(axis=0)).max() < 1e-10 * max(1.0, np.abs(forces).max()) * len(atoms)


def test_one_atom_cell_has_zero_force(potential64):
    atoms = STRUCTURES["small_fcc"]()
    atoms.calc = calc64(potential64)
    assert np.abs(atoms.get_forces()).max() < 1e-12  # translation invariance with a single atom


@pytest.mark.parametrize("name", ["triclinic", "small_fcc", "small_pair", "slab"])
def test_stress_matches_finite_differences(potential64, name):
    atoms = STRUCTURES[name]()
    atoms.calc = calc64(potential64)
    stress = atoms.get_stress()
    assert stress.shape == (6,)
    assert np.abs(stress).max() > 1e-5, "stress too small for a meaningful comparison"
    numeric = calculate_numerical_stress(atoms, eps=1e-5, voigt=True)
    err = np.abs(stress - numeric).max()
    assert err <= RTOL * np.abs(stress).max(), f"max |σ - σ_fd| = {err:.3e}"


def test_stress_not_available_without_cell(potential64):
    from ase.calculators.calculator import PropertyNotImplementedError

    atoms = STRUCTURES["molecule"]()
    atoms.calc = calc64(potential64)
    with pytest.raises(PropertyNotImplementedError, match="stress needs a cell"):
        atoms.get_stress()


def test_energies_sum_and_free_energy(potential64):
    atoms = STRUCTURES["triclinic"]()
    atoms.calc = calc64(potential64)
    e = atoms.get_potential_energy()
    assert atoms.get_potential_energies().sum() == pytest.approx(e, rel=1e-12, abs=1e-12)
    assert atoms.calc.get_property("free_energy", atoms) == e


def test_stress_is_symmetric_tensor_of_strain_derivative(potential64):
    """σ = (1/V) ∂E/∂ε for the full 3×3 strain, checked off-diagonal with ASE's Voigt order."""
    atoms = STRUCTURES["triclinic"]()
    atoms.calc = calc64(potential64)
    s = atoms.get_stress(voigt=False)
    assert np.allclose(s, s.T, atol=1e-14)
    e0_cell = atoms.cell.array.copy()
    pos0 = atoms.get_positions()
    h = 1e-5
    for a, b in [(1, 2), (0, 2), (0, 1)]:
        vals = []
        for sign in (1, -1):
            eps = np.zeros((3, 3))
            eps[a, b] = eps[b, a] = sign * h / 2  # symmetric shear with ε_ab + ε_ba = ±h
            deform = np.eye(3) + eps
            atoms.set_cell(e0_cell @ deform, scale_atoms=False)
            atoms.set_positions(pos0 @ deform)
            vals.append(atoms.get_potential_energy())
        atoms.set_cell(e0_cell, scale_atoms=False)
        atoms.set_positions(pos0)
        numeric = (vals[0] - vals[1]) / (2 * h) / atoms.get_volume()
        assert s[a, b] == pytest.approx(numeric, rel=1e-6, abs=1e-12)
