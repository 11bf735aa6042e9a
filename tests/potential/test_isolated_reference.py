"""Isolated-atom reference energies: with ``isolated_reference`` an atom with no neighbours has exactly
its reference energy whatever the weights, only per-element constants differ from the plain
potential (forces and stress are untouched), the mode survives a checkpoint, and training with
``reference_energies: isolated_atoms`` takes the energies from the data's isolated atoms."""

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.calculators.singlepoint import SinglePointCalculator

import mlip
from mlip.checkpoint import CheckpointError
from mlip.graph import batch_atoms, edge_vectors
from mlip.models import create_model
from mlip.training import TrainConfig, train

MODELS = {
    "platonic": dict(channels=4, num_layers=1, num_heads=1, head_dim=2),
    "equiformer_v3": dict(lmax=1, mmax=1, channels=8, num_layers=1, num_heads=2, num_radial=8),
}
REFERENCE = [-1.25, 3.5]  # eV, for Cu and Au


def make(arch, isolated=True, seed=0):
    potential = create_model(arch, species=["Cu", "Au"], cutoff=4.0, reference_energies=REFERENCE, scale=0.7,
                             seed=seed, **MODELS[arch])
    potential.isolated_reference = isolated
    return potential.double()


def energy_forces_stress(potential, atoms):
    atoms = atoms.copy()
    atoms.calc = mlip.MLIPCalculator(potential, dtype="float64")
    stress = atoms.get_stress() if atoms.cell.rank == 3 else None
    return atoms.get_potential_energy(), atoms.get_forces(), stress


def crystal():
    atoms = bulk("Cu", "fcc", a=3.7, cubic=True)
    atoms.numbers[[1, 2]] = 79
    atoms.rattle(0.05, seed=3)
    return atoms


@pytest.mark.parametrize("arch", sorted(MODELS))
def test_isolated_atoms_have_exactly_their_reference_energy(arch):
    for seed in (0, 1):  # any weights
        potential = make(arch, seed=seed)
        for symbol, reference in zip(("Cu", "Au"), REFERENCE):
            for atoms in (Atoms(symbol), Atoms(symbol, cell=[11.0] * 3, pbc=True)):  # free, or a big box
                energy, forces, _ = energy_forces_stress(potential, atoms)
                assert energy == pytest.approx(reference, abs=1e-12)
                assert np.abs(forces).max() < 1e-12
        plain = make(arch, isolated=False, seed=seed)  # without the mode: reference + scale · model_iso
        assert abs(energy_forces_stress(plain, Atoms("Au"))[0] - REFERENCE[1]) > 1e-6


@pytest.mark.parametrize("arch", sorted(MODELS))
def test_only_per_element_constants_change(arch):
    """E_on − E_off = −scale · Σ_i model_iso[Z_i]; forces and stress are identical."""
    on, off = make(arch, True), make(arch, False)
    atoms = crystal()
    e_on, f_on, s_on = energy_forces_stress(on, atoms)
    e_off, f_off, s_off = energy_forces_stress(off, atoms)
    with torch.no_grad():
        iso = on.isolated_model_energies(torch.float64).numpy()
    counts = np.array([(atoms.numbers == 29).sum(), (atoms.numbers == 79).sum()])
    assert e_on - e_off == pytest.approx(-0.7 * float(counts @ iso), abs=1e-10)
    np.testing.assert_allclose(f_on, f_off, atol=1e-12)
    np.testing.assert_allclose(s_on, s_off, atol=1e-12)


def test_the_mode_survives_a_checkpoint_and_old_files_read_without_it(tmp_path):
    on, off = make("platonic", True), make("platonic", False)
    for potential in (on, off):  # the repulsion term's own version (3) is tested in test_repulsion.py
        potential.set_repulsion(None)
    mlip.save_potential(on, tmp_path / "on.safetensors")
    mlip.save_potential(off, tmp_path / "off.safetensors")
    header_on, header_off = mlip.read_header(tmp_path / "on.safetensors"), mlip.read_header(tmp_path / "off.safetensors")
    # Version 2 only when the mode is on, so a package that does not know it refuses such a file.
    assert header_on["format_version"] == 2 and header_on["isolated_reference"] is True
    assert header_off["format_version"] == 1 and "isolated_reference" not in header_off
    loaded = mlip.load_potential(tmp_path / "on.safetensors")
    assert loaded.isolated_reference is True and mlip.load_potential(tmp_path / "off.safetensors").isolated_reference is False
    atoms = crystal()
    assert energy_forces_stress(loaded.double(), atoms)[0] == pytest.approx(energy_forces_stress(on, atoms)[0], abs=1e-9)


def test_a_malformed_isolated_reference_flag_is_refused(tmp_path):
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file
    import json

    path = tmp_path / "on.safetensors"
    mlip.save_potential(make("platonic", True), path)
    with safe_open(str(path), framework="pt") as fh:
        meta = dict(fh.metadata())
    header = json.loads(meta["mlip"])
    header["isolated_reference"] = "yes"
    meta["mlip"] = json.dumps(header)
    save_file(load_file(str(path)), str(tmp_path / "bad.safetensors"), metadata=meta)
    with pytest.raises(CheckpointError, match="isolated_reference must be true or false"):
        mlip.load_potential(tmp_path / "bad.safetensors")


def labelled(atoms):
    atoms = atoms.copy()
    atoms.calc = EMT()
    energy, forces = atoms.get_potential_energy(), atoms.get_forces()
    stress = atoms.get_stress() if atoms.pbc.all() else None
    atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=forces, stress=stress)
    return atoms


def dataset(with_gold=True):
    samples = [labelled(Atoms("Cu"))] + ([labelled(Atoms("Au"))] if with_gold else [])
    for k in range(10):
        atoms = crystal()
        atoms.rattle(0.05, seed=k)
        samples.append(labelled(atoms))
    return samples


def run_config(tmp_path, name, **extra):
    data = dict(model=dict(name="platonic", species=["Cu", "Au"], cutoff=4.0, **MODELS["platonic"]),
                epochs=2, batch_size=4, out_dir=str(tmp_path / name), optimizer=dict(lr=5e-3, ema_decay=0.5),
                reference_energies="isolated_atoms")
    data.update(extra)
    return TrainConfig.from_dict(data)


def test_training_takes_the_isolated_atoms_of_the_data(tmp_path):
    samples = dataset()
    # The isolated Au atom is on the validation side: reference energies come from both sides.
    result = train(run_config(tmp_path, "iso"), samples[:1] + samples[2:10], samples[1:2] + samples[10:],
                   progress=False)
    potential = mlip.load_potential(result.best)
    assert potential.isolated_reference is True
    emt = [labelled(Atoms(s)).get_potential_energy() for s in ("Cu", "Au")]
    np.testing.assert_allclose(potential.reference_energies.numpy(), emt, atol=1e-12)
    for symbol, expected in zip(("Cu", "Au"), emt):  # a float32 run stores its buffers in float32 (~1e-8 eV)
        assert energy_forces_stress(potential.double(), Atoms(symbol))[0] == pytest.approx(expected, abs=1e-6)


def test_init_from_a_least_squares_checkpoint_switches_it_over(tmp_path):
    samples = dataset()
    first = train(run_config(tmp_path, "ls", reference_energies="least_squares", epochs=1), samples[:10],
                  samples[10:], progress=False)
    assert mlip.load_potential(first.best).isolated_reference is False
    second = train(run_config(tmp_path, "switched", init_from=str(first.best), epochs=1,
                              optimizer=dict(lr=0.0, ema_decay=0.5)), samples[:10], samples[10:], progress=False)
    potential = mlip.load_potential(second.best)
    assert potential.isolated_reference is True
    assert energy_forces_stress(potential.double(), Atoms("Au"))[0] == pytest.approx(
        labelled(Atoms("Au")).get_potential_energy(), abs=1e-6)


def test_init_from_an_isolated_atom_checkpoint_keeps_its_mode(tmp_path):
    """A later least-squares stage (the default) keeps the checkpoint's reference energies, and with
    them their isolated-atom meaning: the energies do not move."""
    samples = dataset()
    first = train(run_config(tmp_path, "iso", epochs=1), samples[:10], samples[10:], progress=False)
    second = train(run_config(tmp_path, "kept", reference_energies="least_squares", init_from=str(first.best),
                              epochs=1, optimizer=dict(lr=0.0, ema_decay=0.5)), samples[:10], samples[10:],
                   progress=False)
    before, after = mlip.load_potential(first.best), mlip.load_potential(second.best)
    assert after.isolated_reference is True
    atoms = crystal()
    assert energy_forces_stress(after.double(), atoms)[0] == pytest.approx(
        energy_forces_stress(before.double(), atoms)[0], abs=1e-9)


def test_missing_or_inconsistent_isolated_atoms_are_named(tmp_path):
    samples = dataset(with_gold=False)
    with pytest.raises(ValueError, match="none for Au"):
        train(run_config(tmp_path, "missing"), samples[:8], samples[8:], progress=False)
    other = labelled(Atoms("Cu"))
    other.calc.results["energy"] += 0.5
    with pytest.raises(ValueError, match="isolated Cu atoms disagree"):
        train(run_config(tmp_path, "clash"), dataset() + [other], [], progress=False)
    # An atom with periodic images inside the cutoff is not isolated.
    small_box = labelled(Atoms("Au", cell=[3.0] * 3, pbc=True))
    with pytest.raises(ValueError, match="none for Au"):
        train(run_config(tmp_path, "box"), samples + [small_box], [], progress=False)
    with pytest.raises(ValueError, match="reference_energies must be"):
        run_config(tmp_path, "typo", reference_energies="isolated")


def test_the_calculator_caches_the_isolated_atoms_and_follows_new_weights():
    """A calculator reuses model_iso while its (frozen) weights stay the same, gives the numbers of
    the uncached expression, and recomputes after its weights change; the user's potential keeps
    trainable weights."""
    potential = make("equiformer_v3", seed=3)
    calc = mlip.MLIPCalculator(potential, device="cpu", dtype="float64")
    assert all(p.requires_grad for p in potential.parameters())
    assert not any(p.requires_grad for p in calc.potential.parameters())
    atoms = crystal()
    calls = []
    original = calc.potential.isolated_model_energies
    calc.potential.isolated_model_energies = lambda *a, **k: calls.append(1) or original(*a, **k)

    def energy_now(pot):
        graph = batch_atoms([atoms], pot.cutoff, dtype=torch.float64)
        return float(pot(graph, compute_forces=False, compute_stress=False)["energy"].detach())

    for shift in (0.0, 0.01, 0.02):
        atoms.positions[0, 0] += shift
        atoms.calc = calc
        assert atoms.get_potential_energy() == pytest.approx(energy_now(potential), abs=1e-10)
    assert len(calls) == 1  # three positions, one isolated-atom forward pass
    # new weights (an in-place update, as load_state_dict or an optimizer does) are seen
    with torch.no_grad():
        for p in potential.parameters():
            p.add_(0.01 * torch.randn_like(p))
    calc.potential.load_state_dict(potential.state_dict())
    calc.reset()
    assert atoms.get_potential_energy() == pytest.approx(energy_now(potential), abs=1e-10)
    assert len(calls) == 2


def test_training_keeps_the_isolated_atoms_in_the_graph():
    """With trainable weights and grad mode on, model_iso is recomputed in every forward pass, so
    two training steps back-propagate through their own graphs and the gradient includes
    -scale * d(model_iso)/dw (checked against the gradient with the offsets computed by hand)."""
    potential = make("equiformer_v3", seed=4)
    graph = batch_atoms([crystal()], potential.cutoff, dtype=torch.float64)
    grads = []
    for _ in range(2):
        potential.zero_grad()
        potential(graph, compute_forces=False, compute_stress=False)["energy"].sum().backward()
        grads.append([p.grad.clone() for p in potential.parameters() if p.grad is not None])
    for a, b in zip(*grads):
        assert torch.equal(a, b)
    potential.zero_grad()
    species = potential.species_index(graph.numbers)
    vec = edge_vectors(graph.positions, graph.cell, graph.batch, graph.edge_index, graph.shifts)
    by_hand = potential.model(species, graph.edge_index, vec, graph.batch, 1) * potential.scale + (
        potential.reference_energies - potential.scale * potential.isolated_model_energies()
    )[species]
    by_hand.sum().backward()
    expected = [p.grad for p in potential.parameters() if p.grad is not None]
    assert len(expected) == len(grads[0])
    for a, b in zip(grads[0], expected):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
