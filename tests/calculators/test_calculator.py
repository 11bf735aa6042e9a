"""The ASE calculator contract, batching, and rejection of bad input."""

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.build import bulk, molecule

import mlip
from mlip.models import create_model
from mlip.testing import STRUCTURES, check_batch_consistency, check_force_training_gradients
from mlip.testing.physics import calc64


def test_default_hyperparameters_build():
    potential = create_model("platonic", species=["Cu", "Au"], cutoff=4.5)
    assert isinstance(potential, mlip.Potential)
    assert potential.species == ["Cu", "Au"]
    atoms = bulk("Cu", "fcc", a=3.6)
    atoms.calc = mlip.MLIPCalculator(potential)
    assert np.isfinite(atoms.get_potential_energy())
    assert atoms.calc.dtype == torch.float32


def test_batched_equals_single(potential64):
    check_batch_consistency(potential64, [f() for f in STRUCTURES.values()])


def test_create_graph_allows_force_training(potential64):
    check_force_training_gradients(potential64, STRUCTURES["triclinic"]())


def test_recomputes_on_every_relevant_change(potential64):
    atoms = STRUCTURES["triclinic"]()
    calc = calc64(potential64)
    atoms.calc = calc
    calls = []
    original = calc.potential.forward

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    calc.potential.forward = counting
    atoms.get_potential_energy()
    atoms.get_forces()
    atoms.get_stress()
    assert len(calls) == 1, "energy, forces and stress come from one evaluation"
    changes = [
        lambda a: a.positions.__setitem__((0, 0), a.positions[0, 0] + 0.01),
        lambda a: a.set_cell(a.cell.array * 1.01, scale_atoms=True),
        lambda a: a.numbers.__setitem__(0, 79 if a.numbers[0] == 29 else 29),
        lambda a: a.set_pbc([True, True, False]),
        lambda a: a.info.__setitem__("charge", 1),
    ]
    for k, change in enumerate(changes):
        change(atoms)
        atoms.get_potential_energy()
        assert len(calls) == k + 2, f"change {k} did not trigger a recalculation"
    atoms.get_potential_energy()
    assert len(calls) == len(changes) + 1


def test_device_and_dtype_options(potential64):
    calc = mlip.MLIPCalculator(potential64, device="cpu", dtype="float32")
    assert next(calc.potential.parameters()).dtype == torch.float32
    assert next(potential64.parameters()).dtype == torch.float64, "the caller's potential is not modified"
    with pytest.raises(ValueError, match="dtype must be"):
        mlip.MLIPCalculator(potential64, dtype="float16")


# ------------------------------------------------------------------------------------ bad input
@pytest.fixture
def cu_calc():
    return mlip.MLIPCalculator(create_model("platonic", species=["Cu", "Au"], cutoff=4.0, channels=4,
                                            num_layers=1), device="cpu", dtype="float64")


def test_unknown_element(cu_calc):
    atoms = bulk("Cu", "fcc", a=3.6) * (2, 1, 1)
    atoms.numbers[0] = 26
    atoms.calc = cu_calc
    with pytest.raises(ValueError, match=r"element\(s\) Fe not supported by this potential \(it was built for Cu, Au\)"):
        atoms.get_potential_energy()


def test_nan_coordinates(cu_calc):
    atoms = bulk("Cu", "fcc", a=3.6) * (2, 1, 1)
    atoms.positions[1, 2] = np.nan
    atoms.calc = cu_calc
    with pytest.raises(ValueError, match=r"positions contain NaN or inf \(atoms \[1\]\)"):
        atoms.get_forces()


def test_zero_volume_periodic_cell(cu_calc):
    atoms = Atoms("Cu2", positions=[[0, 0, 0], [1.5, 1.5, 0]], cell=[[3, 0, 0], [0, 3, 0], [0, 0, 0]], pbc=True)
    atoms.calc = cu_calc
    with pytest.raises(ValueError, match="periodic cell has zero volume"):
        atoms.get_potential_energy()
    flat = Atoms("Cu2", positions=[[0, 0, 0], [1.5, 1.5, 0]], cell=[[3, 0, 0], [6, 0, 0], [0, 0, 10]],
                 pbc=[True, True, False])
    flat.calc = cu_calc
    with pytest.raises(ValueError, match="linearly dependent"):
        flat.get_potential_energy()


def test_empty_structure(cu_calc):
    atoms = Atoms(cell=np.eye(3) * 5, pbc=True)
    atoms.calc = cu_calc
    with pytest.raises(ValueError, match="empty structure"):
        atoms.get_potential_energy()


def test_slab_with_zero_vacuum_vector_is_fine(cu_calc):
    """pbc=[T,T,F] with a zero third cell vector is a valid slab (no stress: no volume)."""
    atoms = Atoms("Cu2", positions=[[0, 0, 0], [1.3, 1.3, 1.8]], cell=[[2.6, 0, 0], [0, 2.6, 0], [0, 0, 0]],
                  pbc=[True, True, False])
    atoms.calc = cu_calc
    assert np.isfinite(atoms.get_potential_energy())
    assert np.isfinite(atoms.get_forces()).all()


def test_isolated_atom_and_molecule_far_away(cu_calc):
    atoms = Atoms("Cu", positions=[[1e4, 1e4, -1e4]])
    atoms.calc = cu_calc
    e_atom = atoms.get_potential_energy()
    assert np.isfinite(e_atom)
    assert np.abs(atoms.get_forces()).max() == 0.0
    # float32 evaluation far from the origin is as accurate as near it (positions are recentred).
    mol = molecule("H2O")
    mol.numbers[:] = 29
    ref_calc = mlip.MLIPCalculator(cu_calc.potential, device="cpu", dtype="float32")
    mol.calc = ref_calc
    e_near = mol.get_potential_energy()
    mol.positions += 1e5
    assert mol.get_potential_energy() == pytest.approx(e_near, rel=1e-6)


def test_malloc_tuning_can_be_disabled(monkeypatch):
    import platform

    from mlip import allocator

    monkeypatch.setattr(allocator, "_applied", None)
    monkeypatch.setenv("MLIP_TUNE_MALLOC", "0")
    assert allocator.tune_malloc() is False
    monkeypatch.setattr(allocator, "_applied", None)
    monkeypatch.delenv("MLIP_TUNE_MALLOC")
    applied = allocator.tune_malloc()
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert applied is True
