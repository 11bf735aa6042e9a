"""CommitteeCalculator: the members' mean and spread, computed in one pass, equal to the members' own."""

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.build import bulk, fcc111
from ase.calculators.calculator import PropertyNotImplementedError

import mlip
from mlip.calculators import MLIPCalculator
from mlip.calculators.committee import CommitteeCalculator, committee_outputs, committee_predictions
from mlip.models import create_model

SMALL = dict(hidden=16, num_radial=8, num_densities=4)


def members(n=3, cutoff=4.5, species=("Cu", "Au")):
    return [create_model("embedded_atom", species=list(species), cutoff=cutoff, seed=s, **SMALL)
            for s in range(n)]


def bulk_cuau():
    atoms = bulk("Cu", cubic=True).repeat(2)
    atoms.rattle(0.1, seed=1)
    atoms.numbers[:5] = 79
    return atoms


def slab():
    atoms = fcc111("Au", (2, 2, 3), vacuum=5.0)
    atoms.rattle(0.05, seed=2)
    return atoms


def cluster():
    return Atoms("Cu3Au", positions=[[0, 0, 0], [2.5, 0, 0], [0, 2.5, 0], [1.2, 1.2, 2.0]])  # no cell


def member_results(potentials, atoms):
    energies, forces, stresses = [], [], []
    for potential in potentials:
        a = atoms.copy()
        a.calc = MLIPCalculator(potential, dtype="float64")
        energies.append(a.get_potential_energy())
        forces.append(a.get_forces())
        if atoms.cell.rank == 3:
            stresses.append(a.get_stress())
    return np.array(energies), np.array(forces), np.array(stresses)


@pytest.mark.parametrize("make", [bulk_cuau, slab, cluster])
def test_mean_and_spread_are_the_members(make):
    potentials = members()
    atoms = make()
    energies, forces, stresses = member_results(potentials, atoms)
    atoms.calc = CommitteeCalculator(potentials, dtype="float64")
    assert atoms.get_potential_energy() == pytest.approx(energies.mean(), abs=1e-10)
    np.testing.assert_allclose(atoms.get_forces(), forces.mean(axis=0), atol=1e-10)
    calc = atoms.calc
    assert calc.get_energy_uncertainty(atoms) == pytest.approx(np.std(energies), abs=1e-10)
    per_atom = np.sqrt(((forces - forces.mean(axis=0)) ** 2).sum(axis=-1).mean(axis=0))
    np.testing.assert_allclose(calc.get_forces_uncertainty(atoms), per_atom, atol=1e-10)
    assert calc.get_forces_uncertainty(atoms).shape == (len(atoms),)
    assert per_atom.max() > 1e-4  # the members differ: the spread is not trivially zero
    np.testing.assert_allclose(calc.get_property("committee_energies", atoms), energies, atol=1e-10)
    np.testing.assert_allclose(calc.results["energies"].sum(), energies.mean(), atol=1e-10)
    if atoms.cell.rank == 3:
        np.testing.assert_allclose(atoms.get_stress(), stresses.mean(axis=0), atol=1e-12)
    else:
        with pytest.raises(PropertyNotImplementedError, match="non-zero volume"):
            atoms.get_stress()


def test_identical_members_have_no_spread():
    potential = members(1)[0]
    atoms = bulk_cuau()
    atoms.calc = CommitteeCalculator([potential, potential], dtype="float64")
    assert atoms.calc.get_energy_uncertainty(atoms) == 0.0
    assert np.all(atoms.calc.get_forces_uncertainty(atoms) == 0.0)


def test_one_pass_for_energy_forces_stress_and_uncertainty():
    atoms = bulk_cuau()
    calc = CommitteeCalculator(members(2), dtype="float64")
    atoms.calc = calc
    calls = []
    original = calc.potentials[0].differentiable_energy

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    calc.potentials[0].differentiable_energy = counting
    atoms.get_potential_energy()
    atoms.get_forces()
    atoms.get_stress()
    calc.get_forces_uncertainty(atoms)
    assert len(calls) == 1
    atoms.positions[0, 0] += 0.01
    calc.get_forces_uncertainty(atoms)
    assert len(calls) == 2


def test_batched_graph_gives_each_structures_results():
    potentials = [p.to(torch.float64) for p in members(2)]
    structures = [bulk_cuau(), slab(), cluster()]
    graph = mlip.batch_atoms(structures, potentials[0].cutoff, dtype=torch.float64)
    out = committee_outputs(potentials, graph)
    assert out["energy"].shape == (2, 3) and out["forces"].shape == (2, graph.n_atoms, 3)
    start = 0
    for k, atoms in enumerate(structures):
        energies, forces, _ = member_results(potentials, atoms)
        np.testing.assert_allclose(out["energy"][:, k].numpy(), energies, atol=1e-10)
        np.testing.assert_allclose(out["forces"][:, start:start + len(atoms)].numpy(), forces, atol=1e-10)
        start += len(atoms)
    assert torch.isnan(out["stress"][:, 2]).all()  # the cluster has no volume


def test_predictions_of_many_structures_are_the_calculators():
    potentials = members(3)
    structures = [bulk_cuau(), slab(), cluster(), slab()]
    predicted = committee_predictions(potentials, structures, batch_size=3, dtype="float64")
    assert len(predicted) == len(structures)
    for atoms, result in zip(structures, predicted):
        calc = CommitteeCalculator(potentials, dtype="float64")
        calc.calculate(atoms, ["energy", "forces"])
        assert result["energy"] == pytest.approx(calc.results["energy"], abs=1e-10)
        np.testing.assert_allclose(result["forces"], calc.results["forces"], atol=1e-10)
        assert result["energy_uncertainty"] == pytest.approx(calc.results["energy_uncertainty"], abs=1e-10)
        np.testing.assert_allclose(result["forces_uncertainty"], calc.results["forces_uncertainty"],
                                   atol=1e-10)
        if "stress" in calc.results:
            np.testing.assert_allclose(result["stress"], calc.results["stress"], atol=1e-12)
    assert potentials[0].reference_energies.dtype == torch.float64  # the originals are untouched
    assert next(potentials[0].parameters()).dtype == torch.float32


def test_bad_committees_are_refused():
    with pytest.raises(ValueError, match="at least two"):
        CommitteeCalculator(members(1))
    with pytest.raises(ValueError, match="different cutoffs"):
        CommitteeCalculator(members(1, cutoff=4.0) + members(1, cutoff=5.0))
    atoms = bulk("Ag", cubic=True)
    atoms.calc = CommitteeCalculator(members(2))
    with pytest.raises(ValueError, match="Ag"):
        atoms.get_potential_energy()
