"""mlip.integrations.torchsim: any Potential as a torch-sim model; batched relaxation of a campaign with it
(mlip.workflows.discovery.batched_relax).

torch-sim needs Python >= 3.12: under an older Python this file is skipped (the ``.ci/run`` job for
Python 3.12 runs it); what ``--batch-size`` says there is tested in tests/cli/test_batch_size.py.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(sys.version_info < (3, 12),
                                reason="torch-sim needs Python >= 3.12 (the .ci/run 3.12 job runs it)")

if sys.version_info >= (3, 12):
    import torch
    from ase.build import bulk
    from ase.stress import voigt_6_to_full_3x3_stress
    from torch_sim.io import atoms_to_state
    from torch_sim.models.interface import validate_model_outputs

    from mlip.calculators import MLIPCalculator
    from mlip.integrations.torchsim import MLIPModel
    from mlip.workflows.discovery.batched_relax import relax_batched
    from mlip.pretrained import load_potential
    from mlip.testing import build_potential
    from mlip.workflows.discovery.emt_benchmark import generate_emt_benchmark
    from mlip.workflows.discovery.inputs import Material, read_structures
    from mlip.workflows.discovery.relax_campaign import run_discovery_relax
    from mlip.workflows.relax import relax
    from mlip.workflows.sharding import load_results, result_path

CPU = "cpu"
#: relaxed energies of the two paths agree to this (eV per atom): both stop below fmax 0.02 eV/Å,
#: at slightly different points of the same basin
ENERGY_TOL = 1e-3
#: validate_model_outputs builds Si, Mg, Fe, benzene (C, H): the shipped EMT models know other elements
TO_EMT_ELEMENTS = {14: 29, 12: 13, 26: 28, 6: 79, 1: 46}


@pytest.fixture(scope="module")
def shipped():
    return load_potential("embedded-atom-emt")


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """A tiny miniature benchmark (seed 0, 6 candidates)."""
    out = tmp_path_factory.mktemp("bench")
    generate_emt_benchmark(out, seed=0, n_candidates=6, progress=False)
    return out


@pytest.mark.parametrize("arch", ["platonic-softmax", "equiformer-v3", "embedded-atom"])
def test_physics_suite_architectures_pass_torch_sims_validation(arch):
    potential = build_potential(arch, species=["Si", "Mg", "Fe", "C", "H"])
    validate_model_outputs(MLIPModel(potential, device=CPU), torch.device(CPU), torch.float64)


def test_a_shipped_model_passes_torch_sims_validation(shipped):
    def emt_elements(state):
        state.atomic_numbers = torch.tensor([TO_EMT_ELEMENTS[int(z)] for z in state.atomic_numbers])
        return state

    validate_model_outputs(MLIPModel(shipped, device=CPU), torch.device(CPU), torch.float64,
                           state_modifier=emt_elements)


def test_outputs_equal_the_calculators_with_torch_sims_conventions(shipped):
    """Column cells in, ASE's stress sign out: a sheared, rattled alloy against MLIPCalculator."""
    atoms = bulk("Cu", "fcc", a=3.7, cubic=True).repeat((2, 1, 1))
    atoms.symbols[[0, 3]] = "Au"
    atoms.set_cell(atoms.cell.array @ np.array([[1.0, 0.03, 0.0], [0.0, 1.02, 0.01], [0.02, 0.0, 0.99]]),
                   scale_atoms=True)
    atoms.rattle(0.05, seed=1)
    atoms.calc = MLIPCalculator(shipped, device=CPU, dtype="float64")
    other = bulk("Ni", "fcc", a=3.5)
    out = MLIPModel(shipped, device=CPU)(atoms_to_state([other, atoms], torch.device(CPU), torch.float64))
    assert out["energy"].shape == (2,) and out["stress"].shape == (2, 3, 3)
    assert float(out["energy"][1]) == pytest.approx(atoms.get_potential_energy(), abs=1e-10)
    np.testing.assert_allclose(out["forces"][1:].numpy(), atoms.get_forces(), atol=1e-10)
    expected = voigt_6_to_full_3x3_stress(atoms.get_stress())
    np.testing.assert_allclose(out["stress"][1].numpy(), expected, atol=1e-12)
    assert not any(t.requires_grad for t in out.values())


def test_batched_relaxation_equals_one_at_a_time(bench, shipped):
    """Every candidate of the benchmark relaxed in batches of 2 structures' atoms: the same energies
    as ASE's FIRE on FrechetCellFilter, converged."""
    materials = read_structures(bench / "initial-structures.json.gz")
    calc = MLIPCalculator(shipped, device=CPU, dtype="float64")
    max_atoms = 2 * max(len(m.atoms) for m in materials)
    batched = {key: outcome for key, outcome, _ in
               relax_batched([(m.material_id, m.atoms) for m in materials], MLIPModel(shipped, device=CPU),
                             fmax=0.02, steps=500, max_atoms=max_atoms)}
    assert sorted(batched) == sorted(m.material_id for m in materials)
    for m in materials:
        one = relax(m.atoms, calc, fmax=0.02, steps=500, progress=False)
        result = batched[m.material_id]
        assert result.converged and one.converged and result.fmax_final < 0.02
        assert abs(result.energy - one.energy) / len(m.atoms) < ENERGY_TOL, m.material_id
        assert result.atoms.get_chemical_formula() == m.atoms.get_chemical_formula()
        relaxed = result.atoms.copy()
        relaxed.calc = calc
        # the structure returned is the one whose energy is reported
        assert relaxed.get_potential_energy() == pytest.approx(result.energy, abs=1e-9)


def test_campaign_in_batches_records_results_failures_and_resumes(bench, shipped, tmp_path):
    """Same record keys as the one-at-a-time path, failures recorded; after a kill (results removed)
    a rerun computes only what is missing; the one-at-a-time path resumes a batched campaign folder
    (same settings)."""
    materials = read_structures(bench / "initial-structures.json.gz")
    overlap = bulk("Cu", "fcc", a=3.6, cubic=True)
    overlap.positions[1] = overlap.positions[0] + [0.05, 0, 0]
    iron = bulk("Fe", "bcc", a=2.87, cubic=True)
    everything = materials + [Material("bad-overlap", overlap), Material("bad-Fe", iron)]
    run = tmp_path / "run"
    first = run_discovery_relax(everything, shipped, run, progress=False, batch_size=3)
    assert first["computed"] == len(everything) and first["failed"] == 2
    results = load_results(run)
    assert "0.050 Å apart" in results["bad-overlap"]["error"]
    assert "Fe not supported" in results["bad-Fe"]["error"]

    one_run = tmp_path / "one"
    run_discovery_relax(everything[:1], shipped, one_run, progress=False)
    reference = load_results(one_run)[materials[0].material_id]
    record = results[materials[0].material_id]
    assert set(record) == set(reference)
    assert abs(record["energy"] - reference["energy"]) / record["n_atoms"] < ENERGY_TOL

    for m in materials[:2]:  # as if killed before these two were written
        result_path(run, m.material_id).unlink()
    again = run_discovery_relax(everything, shipped, run, progress=False, batch_size=3)
    assert (again["skipped"], again["computed"], again["n_done"]) == (len(everything) - 2, 2, len(everything))
    assert run_discovery_relax(everything, shipped, run, progress=False)["computed"] == 0  # one at a time
    assert all(r.get("converged") for k, r in load_results(run).items() if not k.startswith("bad-"))


def test_a_batch_whose_evaluation_raises_is_relaxed_one_at_a_time(bench, shipped, tmp_path):
    """A model failure inside a batch is not blamed on every structure in it."""
    materials = read_structures(bench / "initial-structures.json.gz")[:3]
    calls = {"n": 0}
    original = MLIPModel.forward

    def flaky(self, state, **kwargs):
        calls["n"] += 1
        if calls["n"] == 5:
            raise RuntimeError("simulated failure")
        return original(self, state, **kwargs)

    MLIPModel.forward = flaky
    try:
        counts = run_discovery_relax(materials, shipped, tmp_path / "run", progress=False, batch_size=4)
    finally:
        MLIPModel.forward = original
    assert calls["n"] == 5 and counts["computed"] == 3 and counts["failed"] == 0
    assert all(r["converged"] for r in load_results(tmp_path / "run").values())


def test_batch_size_needs_an_mlip_model(tmp_path):
    from ase.calculators.emt import EMT

    atoms = bulk("Cu", "fcc", a=3.6, cubic=True)
    with pytest.raises(ValueError, match="needs an mlip model"):
        run_discovery_relax([Material("cu", atoms)], EMT(), tmp_path / "run", progress=False, batch_size=2)

