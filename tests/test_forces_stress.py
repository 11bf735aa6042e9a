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


def richardson(fd, h):
    """Central differences with the h² error term cancelled: (4·D(h/2) − D(h)) / 3, error O(h⁴).

    In a perfect cubic crystal the l > 0 features vanish by symmetry, where a per-degree norm
    x / √(⟨x²⟩ + ε) is steep (third derivative ~ ε^(-3/2)); plain central differences then carry an
    h² truncation error of ~1e-4 relative, which this removes.
    """
    return (4 * fd(h / 2) - fd(h)) / 3


def test_axis_aligned_bonds_in_an_undistorted_cubic_cell(potential64):
    """Simple-cubic lattice, every nearest-neighbour bond along ±x, ±y or ±z (Euler-angle poles).

    A model that detaches the rotation of such bonds (as eSEN/EquiformerV3's reference code does for
    bonds along y) loses their transverse force and shear-stress terms; the species are mixed so
    that these do not all cancel by symmetry.
    """
    from ase import Atoms

    a = 2.5
    grid = np.indices((2, 2, 2)).reshape(3, -1).T
    atoms = Atoms("CuAuCuCuAuAuCuAu", positions=grid * a, cell=np.eye(3) * 2 * a, pbc=True)
    atoms.calc = calc64(potential64)
    stress = atoms.get_stress()
    numeric = richardson(lambda h: calculate_numerical_stress(atoms, eps=h, voigt=True), 2e-5)
    scale = np.abs(stress).max()
    assert scale > 1e-5
    assert np.abs(stress - numeric).max() <= RTOL * scale
    # Move one atom in the xy plane: its own bonds tilt, all other bonds stay axis aligned.
    atoms.positions[0, :2] += [0.15, 0.1]
    forces = atoms.get_forces()
    numeric = richardson(lambda h: calculate_numerical_forces(atoms, eps=h), 2e-5)
    assert np.abs(forces).max() > 1e-3
    assert np.abs(forces - numeric).max() <= RTOL * np.abs(forces).max()
    stress = atoms.get_stress()
    # A real xy shear stress now, large enough that the comparison below resolves it to 1 %.
    assert abs(stress[5]) > 100 * RTOL * np.abs(stress).max()
    numeric = richardson(lambda h: calculate_numerical_stress(atoms, eps=h, voigt=True), 2e-5)
    assert np.abs(stress - numeric).max() <= RTOL * np.abs(stress).max()
