"""The training loop: it learns, it resumes bit for bit, and its pieces do what they say."""

import hashlib
import json
import math

import numpy as np
import pytest
import torch
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.calculators.singlepoint import SinglePointCalculator

import mlip
from mlip.testing.datasets import emt_cells, emt_isolated_atom
from mlip.training import TrainConfig, fit_reference_energies, train
from mlip.training.ema import ExponentialMovingAverage
from mlip.training.provenance import machine_paths
from mlip.training.schedule import warmup_cosine


def config(tmp_path, name, **extra):
    data = dict(model=dict(name="platonic", species=["Cu", "Au"], cutoff=4.0, channels=4, num_layers=1, num_heads=1,
                           head_dim=2),
                epochs=4, batch_size=8, out_dir=str(tmp_path / name), optimizer=dict(lr=5e-3, ema_decay=0.5))
    data.update(extra)
    return TrainConfig.from_dict(data)


@pytest.fixture(scope="module")
def samples():
    return emt_cells(40)


def test_training_lowers_the_loss_and_writes_checkpoints(tmp_path, samples):
    result = train(config(tmp_path, "run"), samples[:32], samples[32:], progress=False)
    losses = [h["train_loss"] for h in result.history]
    assert losses[-1] < 0.7 * losses[0], losses
    # On held-out structures the best epoch (best.safetensors) beats the first. Not the last epoch's force
    # MAE: for this 4-channel model after 4 epochs on 32 structures it moves by ±10 % from epoch to epoch
    # (it ended above epoch 1 in 1 of 6 runs: 3 seeds × 2 group orientations), while the training loss falls
    # in every one.
    valid = [h["valid_loss"] for h in result.history]
    assert min(valid[1:]) < valid[0], valid
    for name in ("best.safetensors", "last.safetensors", "train_state.safetensors", "metrics.json"):
        assert (tmp_path / "run" / name).is_file()
    assert len(json.loads((tmp_path / "run" / "metrics.json").read_text())) == 4
    potential = mlip.load_potential(result.best)
    header = mlip.read_header(result.best)
    assert header["metadata"]["trained"] is True and header["metadata"]["training"]["n_train"] == 32
    atoms = samples[0].copy()
    atoms.calc = mlip.MLIPCalculator(potential, dtype="float64")
    assert math.isfinite(atoms.get_potential_energy())


def test_zero_weights_skip_the_derivatives_in_training_steps(tmp_path, samples, monkeypatch):
    # Energy only: training steps ask for neither forces nor stress and build no double-backward graph;
    # validation still measures every error; the energy term still learns.
    calls = []
    forward = mlip.Potential.forward

    def spy(self, graph, compute_forces=True, compute_stress=True, create_graph=False):
        calls.append((compute_forces, compute_stress, create_graph))
        return forward(self, graph, compute_forces, compute_stress, create_graph)

    monkeypatch.setattr(mlip.Potential, "forward", spy)
    cfg = config(tmp_path, "energy", loss=dict(forces_weight=0.0, stress_weight=0.0))
    result = train(cfg, samples[:32], samples[32:], progress=False)
    # 4 epochs × (4 training batches, energy only, + 1 validation batch of 8 with forces and stress)
    assert calls == 4 * ([(False, False, False)] * 4 + [(True, True, False)]), calls
    assert all(math.isfinite(h["valid_forces_mae_meV_per_A"]) for h in result.history)
    losses = [h["train_loss"] for h in result.history]
    assert losses[-1] < 0.7 * losses[0], losses


def test_a_killed_run_resumes_bit_for_bit(tmp_path, samples):
    full = train(config(tmp_path, "full"), samples[:32], samples[32:], progress=False)
    # max_minutes=0 stops after the first epoch, as a crash after its checkpoint would.
    first = train(config(tmp_path, "resumed", max_minutes=0), samples[:32], samples[32:], progress=False)
    assert first.epochs_run == 1
    rest = train(config(tmp_path, "resumed"), samples[:32], samples[32:], resume=True, progress=False)
    assert rest.resumed_from == 1 and len(rest.history) == 4
    a, b = mlip.load_potential(full.last), mlip.load_potential(rest.last)
    for (key, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), key
    assert [h["train_loss"] for h in full.history] == [h["train_loss"] for h in rest.history]


def test_resume_errors(tmp_path, samples):
    with pytest.raises(ValueError, match="nothing to resume"):
        train(config(tmp_path, "none"), samples[:8], samples[8:10], resume=True, progress=False)
    train(config(tmp_path, "bad", epochs=1), samples[:8], samples[8:10], progress=False)
    (tmp_path / "bad" / "train_state.safetensors").write_bytes(b"garbage")
    with pytest.raises(mlip.CheckpointError, match="cannot resume"):
        train(config(tmp_path, "bad", epochs=2), samples[:8], samples[8:10], resume=True, progress=False)


def test_reference_energies_recover_per_element_energies():
    rng = np.random.default_rng(3)
    true = {29: -3.5, 79: -2.25, 13: -1.0}
    samples = []
    for _ in range(12):
        atoms = bulk("Cu", "fcc", a=3.6, cubic=True) * (1, 1, 2)
        atoms.numbers = rng.choice([29, 79, 13], size=len(atoms))
        energy = sum(true[z] for z in atoms.numbers)
        atoms.calc = SinglePointCalculator(atoms, energy=energy)
        samples.append(atoms)
    fitted = fit_reference_energies(samples, [29, 79, 13])
    assert np.allclose(fitted, [-3.5, -2.25, -1.0], atol=1e-6)


def test_schedule_and_ema():
    factors = [warmup_cosine(s, 100, 10, 0.01) for s in range(120)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    assert factors[55] == pytest.approx(0.01 + 0.99 * 0.5, abs=1e-12)  # half way through the cosine
    assert factors[100] == pytest.approx(0.01) and factors[119] == pytest.approx(0.01)
    assert all(a >= b for a, b in zip(factors[9:], factors[10:]))
    layer = torch.nn.Linear(2, 1)
    ema = ExponentialMovingAverage(layer, decay=0.75)
    w0 = layer.weight.detach().clone()
    with torch.no_grad():
        layer.weight.add_(4.0)
    ema.update(layer)
    assert torch.allclose(ema.shadow["weight"], w0 + 1.0)  # 0.75·w0 + 0.25·(w0 + 4)
    with ema.swapped(layer):
        assert torch.allclose(layer.weight, w0 + 1.0)
    assert torch.allclose(layer.weight, w0 + 4.0)


def test_config_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown key"):
        TrainConfig.from_dict({"model": {"name": "platonic", "species": ["Cu"], "cutoff": 4}, "epoch": 3})
    with pytest.raises(ValueError, match="unknown optimizer key"):
        TrainConfig.from_dict({"model": {"name": "platonic", "species": ["Cu"], "cutoff": 4}, "optimizer": {"lrr": 1}})
    with pytest.raises(ValueError, match="model needs 'cutoff'"):
        TrainConfig.from_dict({"model": {"name": "platonic", "species": ["Cu"]}})
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        TrainConfig.from_yaml(bad)


def test_labels_are_checked(tmp_path, samples):
    broken = samples[0].copy()
    broken.calc = SinglePointCalculator(broken, energy=float("nan"), forces=np.zeros((4, 3)))
    with pytest.raises(ValueError, match="training structure 1: energy label is not finite"):
        train(config(tmp_path, "x"), [samples[1], broken], progress=False)
    heavy = samples[2].copy()
    heavy.calc = samples[2].calc
    heavy.info["config_stress_weight"] = -2
    with pytest.raises(ValueError, match="validation structure 0: config_stress_weight -2 is not a finite"):
        train(config(tmp_path, "y"), [samples[1]], [heavy], progress=False)


def test_mlip_train_command(tmp_path, samples, capsys):
    import ase.io
    import yaml

    from mlip.cli import main

    data = tmp_path / "train.extxyz"
    ase.io.write(data, samples[:16])
    cfg = config(tmp_path, "cli", epochs=2).to_dict()
    cfg["data"]["train"] = str(data)
    cfg["data"]["valid_fraction"] = 0.25
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert main(["train", str(path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "done: 2 epochs" in out and "forces_mae_meV_per_A" in out
    history = json.loads((tmp_path / "cli" / "metrics.json").read_text())
    assert len(history) == 2 and history[0]["epoch"] == 1
    # the checkpoint names its data file and its content, and holds no path of this machine
    training = mlip.read_header(tmp_path / "cli" / "best.safetensors")["metadata"]["training"]
    assert training["config"]["data"]["train"] == "train.extxyz" and training["config"]["out_dir"] == "cli"
    assert training["files"] == {"data.train": {"name": "train.extxyz", "bytes": data.stat().st_size,
                                                "sha256": hashlib.sha256(data.read_bytes()).hexdigest()}}
    assert machine_paths(mlip.read_header(tmp_path / "cli" / "best.safetensors")) == []
    # A config with a typo is a clean error.
    path.write_text(yaml.safe_dump(dict(cfg, epochz=3)))
    assert main(["train", str(path)]) == 2
    assert "unknown key 'epochz' (did you mean 'epochs'?)" in capsys.readouterr().err


def test_rotated_samples_carry_the_labels_of_the_rotated_structure(samples):
    """Augmentation rotates labels as EMT itself sees the rotated structure: E unchanged, F → RF,
    σ → RσRᵀ (EMT is exactly rotation invariant, so only rounding separates the two)."""
    from mlip.training.augmentation import RotatedSample, random_rotation

    rng = np.random.default_rng(3)
    for sample in samples[:3]:
        rotation = random_rotation(rng)
        assert np.allclose(rotation @ rotation.T, np.eye(3), atol=1e-12) and np.isclose(np.linalg.det(rotation), 1)
        rotated = RotatedSample(sample, rotation)
        atoms = rotated.atoms.copy()
        atoms.calc = EMT()
        assert atoms.get_potential_energy() == pytest.approx(rotated.energy, abs=1e-9)
        assert np.allclose(atoms.get_forces(), rotated.forces, atol=1e-9)
        assert np.allclose(atoms.get_stress(), rotated.stress, atol=1e-9)
        assert not np.allclose(rotated.forces, sample.get_forces(), atol=1e-3)  # it did rotate


@pytest.mark.parametrize("schedule", ["cosine", "wsd"])
def test_two_processes_give_the_same_update_as_one(tmp_path, samples, schedule):
    """torchrun with 2 CPU processes (gloo) trains to the same weights as one process on the same
    global batches (float64: only the order of floating-point sums differs). With the wsd schedule the
    main process's plateau decision reaches the other: the same decay, the same last epoch."""
    import subprocess
    import sys

    import ase.io
    import yaml

    data = tmp_path / "train.extxyz"
    ase.io.write(data, samples[:24])
    cfgs = {}
    for name in ("one", "two"):
        # With rotation augmentation: each structure's orientation must not depend on the process count.
        # wsd: the rule fires after epoch 2 (any improvement is below 100 %), one epoch of decay follows
        extra = dict(epochs=2) if schedule == "cosine" else dict(
            epochs=6, optimizer=dict(lr=5e-3, ema_decay=0.5, schedule="wsd", decay_fraction=0.5),
            plateau=dict(window=1, min_improvement=1.0))
        cfg = config(tmp_path, name, dtype="float64", eval_dtype="float64", augment_rotations=True,
                     **extra).to_dict()
        cfg["data"]["train"] = str(data)
        cfg["data"]["valid_fraction"] = 0.25
        cfgs[name] = tmp_path / f"{name}.yaml"
        cfgs[name].write_text(yaml.safe_dump(cfg))
    env = dict(__import__("os").environ, OMP_NUM_THREADS="1")
    single = subprocess.run([sys.executable, "-m", "mlip", "train", str(cfgs["one"]), "--no-progress"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert single.returncode == 0, single.stderr[-2000:]
    double = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                             "-m", "mlip", "train", str(cfgs["two"]), "--no-progress"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert double.returncode == 0, double.stderr[-2000:]
    a = mlip.load_potential(tmp_path / "one" / "last.safetensors")
    b = mlip.load_potential(tmp_path / "two" / "last.safetensors")
    moved = False
    init = mlip.models.create_model("platonic", species=["Cu", "Au"], cutoff=4.0, seed=0, channels=4,
                                    num_layers=1, num_heads=1, head_dim=2)
    for (key, x), y, x0 in zip(a.state_dict().items(), b.state_dict().values(), init.state_dict().values()):
        # atol 1e-9: parameters whose exact gradient is zero (a softmax is blind to a per-node shift of
        # its logits, e.g. the radial-bias bias) follow rounding noise, which AdamW's division by
        # √v + ε (ε = 1e-8) turns into steps of ~lr·1e-15/1e-8 ≈ 1e-10 whose sign depends on summation order.
        assert torch.allclose(x, y, rtol=1e-9, atol=1e-9), key
        moved = moved or not torch.allclose(x.double(), x0.double())
    assert moved  # training changed the weights, so the comparison means something
    la = json.loads((tmp_path / "one" / "metrics.json").read_text())
    lb = json.loads((tmp_path / "two" / "metrics.json").read_text())
    assert [h["train_loss"] for h in la] == pytest.approx([h["train_loss"] for h in lb], rel=1e-9)
    assert len(la) == len(lb) == (2 if schedule == "cosine" else 3)


def test_mlip_eval_reports_errors_and_a_parity_plot(tmp_path, samples, capsys):
    import ase.io

    from mlip.cli import main

    data = tmp_path / "test.extxyz"
    ase.io.write(data, samples[:6])
    # EMT evaluated on its own labels: every error is zero (the plumbing check) up to the 8 decimals
    # that extxyz keeps (1e-8 eV, eV/Å: 1e-5 meV).
    assert main(["eval", "ase.calculators.emt:EMT", str(data), "--out-dir", str(tmp_path / "emt")]) == 0
    metrics = json.loads((tmp_path / "emt" / "metrics.json").read_text())
    assert metrics["n_structures"] == 6
    assert metrics["energy_mae_meV_per_atom"] < 1e-4 and metrics["forces_mae_meV_per_A"] < 1e-4
    assert metrics["stress_mae_meV_per_A3"] < 1e-4
    assert {"forces_mae_Cu_meV_per_A", "forces_mae_Au_meV_per_A"} <= set(metrics)
    assert (tmp_path / "emt" / "parity.png").stat().st_size > 1000
    # A trained checkpoint gives the errors that an independent evaluation gives.
    result = train(config(tmp_path, "run", epochs=1), samples[:16], samples[16:20], progress=False)
    assert main(["eval", str(result.best), str(data), "--out-dir", str(tmp_path / "model")]) == 0
    metrics = json.loads((tmp_path / "model" / "metrics.json").read_text())
    potential = mlip.load_potential(result.best).double()
    errors = []
    for atoms in samples[:6]:
        a = atoms.copy()
        a.calc = mlip.MLIPCalculator(potential, dtype="float64")
        errors.append(np.abs(a.get_forces() - atoms.get_forces()).reshape(-1))
    assert metrics["forces_mae_meV_per_A"] == pytest.approx(1e3 * np.concatenate(errors).mean(), rel=1e-9)
    capsys.readouterr()


def test_evaluate_groups_equals_evaluating_each_group_on_its_own(samples):
    """evaluate_groups: one prediction pass gives, for all structures and for each group (a structure
    may count in two), exactly the metrics evaluate gives on that set alone (float64)."""
    from mlip.training.evaluation import evaluate, evaluate_groups

    potential = mlip.create_model("platonic", ["Cu", "Au"], 4.0, seed=0, channels=4, num_layers=1, num_heads=1,
                                  head_dim=2)
    test = samples[:7]
    test[2] = test[2].copy()  # without a stress label: it counts for energies and forces only
    test[2].calc = SinglePointCalculator(test[2], energy=samples[2].get_potential_energy(),
                                         forces=samples[2].get_forces())

    def group_of(atoms):
        gold = "gold-rich" if (atoms.numbers == 79).mean() > 0.25 else "copper-rich"
        return [gold, "first three"] if atoms is test[0] or atoms is test[1] or atoms is test[2] else gold

    overall, groups = evaluate_groups(potential, test, group_of, batch_size=3, dtype="float64")
    assert overall == pytest.approx(evaluate(potential, test, dtype="float64"), rel=1e-12)
    members = {}
    for atoms in test:
        names = group_of(atoms)
        for name in [names] if isinstance(names, str) else names:
            members.setdefault(name, []).append(atoms)
    assert list(groups) == sorted(members) and "first three" in groups and len(groups) >= 2
    for name, frames in members.items():
        n, metrics = groups[name]
        assert n == len(frames)
        expected = evaluate(potential, frames, dtype="float64")
        assert set(metrics) == set(expected)
        for key, value in expected.items():
            assert metrics[key] == pytest.approx(value, rel=1e-12, nan_ok=True), (name, key)


def test_aligned_energies_remove_per_element_offsets_and_leave_forces(samples):
    """align_energies: labels of "another code" (EMT shifted by +1.0 eV per Cu and −0.5 eV per Au atom)
    against EMT itself. The fitted offsets are those constants, the aligned energy error vanishes, and
    forces and stress are the same with or without alignment; without it, the energy error is the shift."""
    from mlip.training.evaluation import evaluate_groups

    shift = {29: 1.0, 79: -0.5}
    shifted = []
    for atoms in samples[:12]:
        a = atoms.copy()
        results = dict(atoms.calc.results)
        results["energy"] += sum(shift[int(z)] for z in a.numbers)
        a.calc = SinglePointCalculator(a, **results)
        shifted.append(a)
    plain, _ = evaluate_groups(EMT(), shifted, lambda a: "all", dtype="float64")
    aligned, groups = evaluate_groups(EMT(), shifted, lambda a: "all", dtype="float64", align_energies=True)
    assert aligned["energy_offset_Cu_eV"] == pytest.approx(1.0, abs=1e-6)
    assert aligned["energy_offset_Au_eV"] == pytest.approx(-0.5, abs=1e-6)
    assert aligned["energy_mae_meV_per_atom"] < 1e-3 and groups["all"][1]["energy_mae_meV_per_atom"] < 1e-3
    assert plain["energy_mae_meV_per_atom"] > 100
    for key in ("forces_mae_meV_per_A", "stress_mae_meV_per_A3"):
        assert aligned[key] == plain[key] and plain[key] < 1e-9


def test_batches_mixing_crystals_and_clusters_train_with_finite_gradients(tmp_path, samples):
    """A cluster has no stress (NaN); training a stress loss on a batch that holds one must not turn
    the gradients into NaN."""
    from ase import Atoms

    cluster = Atoms("Cu3", positions=[[0, 0, 0], [2.5, 0, 0], [1.2, 2.1, 0]])
    cluster.calc = EMT()
    e, f = cluster.get_potential_energy(), cluster.get_forces()
    cluster.calc = SinglePointCalculator(cluster, energy=e, forces=f)
    mixed = [cluster] + samples[:7]
    result = train(config(tmp_path, "mixed", epochs=2, batch_size=8), mixed, samples[8:10], progress=False)
    assert all(math.isfinite(h["train_loss"]) for h in result.history)
    potential = mlip.load_potential(result.last)
    assert all(torch.isfinite(p).all() for p in potential.parameters())


def test_init_from_continues_from_a_checkpoint_and_refuses_another_model(tmp_path, samples):
    """init_from (fine-tuning, or a second stage with other loss weights) starts from the given
    weights, keeps their reference energies and output scale, and refuses a checkpoint whose
    architecture differs from the config's model."""
    first = train(config(tmp_path, "stage1", epochs=2), samples[:32], samples[32:], progress=False)
    start = mlip.load_potential(first.best)
    # lr = 0: the weights (EMA included) stay exactly those of the checkpoint
    frozen = train(config(tmp_path, "stage2", epochs=1, init_from=str(first.best),
                          optimizer=dict(lr=0.0, ema_decay=0.5), loss=dict(energy_weight=50.0)),
                   samples[:8], samples[32:], progress=False)
    after = mlip.load_potential(frozen.last)
    for (key, x), y in zip(start.state_dict().items(), after.state_dict().values()):
        assert torch.equal(x, y), key
    # different training samples would have fitted other reference energies; they were kept
    refit = fit_reference_energies(samples[:8], start.atomic_numbers.tolist())
    assert not np.allclose(refit, start.reference_energies.numpy())
    training = mlip.read_header(frozen.last)["metadata"]["training"]
    # recorded by name and content, not by where it lay (mlip.training.provenance)
    assert training["config"]["init_from"] == "best.safetensors"
    assert training["output_scale_from"] == "kept from best.safetensors"
    assert not machine_paths(mlip.read_header(frozen.last)["metadata"])
    assert training["files"]["init_from"] == {"name": "best.safetensors", "bytes": first.best.stat().st_size,
                                              "sha256": hashlib.sha256(first.best.read_bytes()).hexdigest()}
    # stage 2 starts from the validation errors of the checkpoint it was given
    best = mlip.read_header(first.best)["metadata"]["metrics"]
    assert frozen.history[0]["valid_forces_mae_meV_per_A"] == pytest.approx(best["valid_forces_mae_meV_per_A"],
                                                                            rel=1e-6)
    with pytest.raises(ValueError, match="init_from .*hyperparameters"):
        train(config(tmp_path, "wrong", init_from=str(first.best),
                     model=dict(name="platonic", species=["Cu", "Au"], cutoff=4.0, channels=8, num_layers=1,
                                num_heads=1, head_dim=2)), samples[:8], samples[32:], progress=False)


def test_init_from_a_platonic_model_shipped_averaged_trains_the_configs_form(tmp_path, samples):
    """A Platonic checkpoint shipped averaged over its cosets (average_over) starts a run of the config's
    form, with the same weights: the average chooses how the weights are evaluated, not which there are."""
    from mlip.checkpoint import save_with_hyperparameters

    model = dict(name="platonic", species=["Cu", "Au"], cutoff=4.0, channels=4, num_layers=1, num_heads=1,
                 head_dim=2)
    first = train(config(tmp_path, "plain", epochs=1, model=model), samples[:8], samples[32:], progress=False)
    shipped = tmp_path / "averaged.safetensors"
    averaged = save_with_hyperparameters(first.best, shipped, average_over="icosahedral")
    assert averaged.hyperparameters["average_over"] == "icosahedral"
    frozen = train(config(tmp_path, "from-averaged", epochs=1, model=model, init_from=str(shipped),
                          optimizer=dict(lr=0.0, ema_decay=0.5)), samples[:8], samples[32:], progress=False)
    after = mlip.load_potential(frozen.last)
    assert after.hyperparameters["average_over"] is None
    for (key, x), y in zip(mlip.load_potential(first.best).state_dict().items(), after.state_dict().values()):
        assert torch.equal(x, y), key


GROW_MODELS = {
    "platonic": dict(name="platonic", species=["Cu", "Au"], cutoff=4.0, channels=4, num_layers=1, num_heads=1,
                     head_dim=2),
    "equiformer_v3": dict(name="equiformer_v3", species=["Cu", "Au"], cutoff=4.0, lmax=1, mmax=1, channels=8,
                          num_layers=1, num_heads=2, num_radial=8),
}


@pytest.mark.parametrize("arch", sorted(GROW_MODELS))
def test_init_grow_starts_a_deeper_model_at_the_checkpoints_energies(tmp_path, samples, arch):
    """init_grow: a 1-block checkpoint grown to 3 blocks gives the same energies and forces (float64,
    to round-off) before training, keeps the checkpoint's blocks, and the appended blocks then train
    (their zeroed output maps receive gradients and move away from zero)."""
    small = dict(GROW_MODELS[arch])
    first = train(config(tmp_path, "small", epochs=1, model=small), samples[:16], samples[32:],
                  progress=False)
    deep = dict(small, num_layers=3)
    grown = train(config(tmp_path, "grown", epochs=1, model=deep, init_from=str(first.last), init_grow=True,
                         optimizer=dict(lr=0.0, ema_decay=0.5)), samples[:8], samples[32:], progress=False)
    a, b = mlip.load_potential(first.last), mlip.load_potential(grown.last)
    assert b.hyperparameters["num_layers"] == 3 and a.hyperparameters["num_layers"] == 1
    calc_a = mlip.MLIPCalculator(a, dtype="float64")
    calc_b = mlip.MLIPCalculator(b, dtype="float64")
    for atoms in samples[32:35]:
        e_a, e_b = calc_a.get_potential_energy(atoms), calc_b.get_potential_energy(atoms)
        assert e_b == pytest.approx(e_a, abs=1e-10 * len(atoms))
        np.testing.assert_allclose(calc_b.get_forces(atoms), calc_a.get_forces(atoms), atol=1e-10)
    for key, x in a.state_dict().items():
        assert torch.equal(b.state_dict()[key], x), key
    # with a learning rate, the appended blocks leave the identity
    moved = train(config(tmp_path, "moved", epochs=1, model=deep, init_from=str(first.last), init_grow=True,
                         optimizer=dict(lr=5e-3, ema_decay=0.0)), samples[:16], samples[32:], progress=False)
    c = mlip.load_potential(moved.last)
    blocks = c.model.blocks
    zeroed = [p for blk in blocks[1:] for p in blk.state_dict().values()]
    assert all(torch.isfinite(p).all() for p in zeroed)
    for module in blocks[2].residual_outputs():
        assert any(p.abs().max() > 0 for p in module.parameters()), module


def test_init_grow_refuses_other_changes_and_shallower_targets(tmp_path, samples):
    first = train(config(tmp_path, "two", epochs=1, model=dict(GROW_MODELS["platonic"], num_layers=2)),
                  samples[:8], samples[32:], progress=False)
    with pytest.raises(ValueError, match="grown deeper"):
        train(config(tmp_path, "shallower", init_from=str(first.last), init_grow=True),
              samples[:8], samples[32:], progress=False)
    with pytest.raises(ValueError, match="hyperparameters"):
        train(config(tmp_path, "wider", init_from=str(first.last), init_grow=True,
                     model=dict(GROW_MODELS["platonic"], num_layers=3, channels=8)),
              samples[:8], samples[32:], progress=False)
    with pytest.raises(ValueError, match="init_grow needs init_from"):
        config(tmp_path, "alone", init_grow=True)


@pytest.mark.parametrize("arch", sorted(GROW_MODELS))
def test_init_embedded_atom_from_starts_at_the_fitted_terms_energies(tmp_path, samples, arch):
    """init_embedded_atom_from: a transformer with the embedded-atom term declared starts with exactly the energies,
    forces and stress (float64, to round-off) of the embedded_atom checkpoint it is given (its term, scale
    and references copied, its final readout zeroed); with a learning rate, that readout then trains."""
    log = arch == "equiformer_v3"  # one transformer takes the term with logarithmic densities, one without
    term = dict(name="embedded_atom", species=["Cu", "Au"], cutoff=4.0, log_densities=log)
    isolated = [emt_isolated_atom("Cu"), emt_isolated_atom("Au")]
    first = train(config(tmp_path, "term", epochs=1, model=term, reference_energies="isolated_atoms"),
                  samples[:16] + isolated, samples[32:], progress=False)
    model = dict(GROW_MODELS[arch], terms={"embedded_atom": {"log_densities": log}})
    start = train(config(tmp_path, "start", epochs=1, model=model, init_embedded_atom_from=str(first.last),
                         optimizer=dict(lr=0.0, ema_decay=0.5)), samples[:8], samples[32:], progress=False)
    a, b = mlip.load_potential(first.last), mlip.load_potential(start.last)
    assert a.isolated_reference and b.isolated_reference
    assert float(b.scale) == float(a.scale) and torch.equal(b.reference_energies, a.reference_energies)
    calc_a = mlip.MLIPCalculator(a, dtype="float64")
    calc_b = mlip.MLIPCalculator(b, dtype="float64")
    for atoms in samples[32:35]:
        assert calc_b.get_potential_energy(atoms) == pytest.approx(calc_a.get_potential_energy(atoms),
                                                                   abs=1e-10 * len(atoms))
        np.testing.assert_allclose(calc_b.get_forces(atoms), calc_a.get_forces(atoms), atol=1e-10)
        np.testing.assert_allclose(calc_b.get_stress(atoms), calc_a.get_stress(atoms), atol=1e-10)
    moved = train(config(tmp_path, "moved", epochs=1, model=model, init_embedded_atom_from=str(first.last),
                         optimizer=dict(lr=5e-3, ema_decay=0.0)), samples[:16], samples[32:], progress=False)
    readout = mlip.load_potential(moved.last).model.final_readout()
    assert any(p.abs().max() > 0 for p in readout.parameters())


def test_freeze_embedded_atom_trains_the_network_and_leaves_the_term(tmp_path, samples):
    """freeze_embedded_atom: after a run with a learning rate, every parameter of the term is bitwise
    the fitted one (init_embedded_atom_from) and the network has moved; refused without a network
    beside a term."""
    term = dict(name="embedded_atom", species=["Cu", "Au"], cutoff=4.0, log_densities=True)
    first = train(config(tmp_path, "term", epochs=1, model=term), samples[:8], samples[32:], progress=False)
    model = dict(GROW_MODELS["platonic"], terms={"embedded_atom": {"log_densities": True}})
    run = train(config(tmp_path, "frozen", epochs=1, model=model, init_embedded_atom_from=str(first.last),
                       freeze_embedded_atom=True, optimizer=dict(lr=5e-3, ema_decay=0.0)),
                samples[:16], samples[32:], progress=False)
    fitted, trained = mlip.load_potential(first.last), mlip.load_potential(run.last)
    fitted_term = fitted.model.embedded_atom.state_dict()  # the embedded_atom architecture
    for name, value in trained.terms["embedded_atom"].state_dict().items():
        assert torch.equal(value, fitted_term[name]), name
    assert any(p.abs().max() > 0 for p in trained.model.final_readout().parameters())
    for bad, message in ((GROW_MODELS["platonic"], "no embedded-atom term"), (term, "no embedded-atom term")):
        with pytest.raises(ValueError, match=message):
            train(config(tmp_path, "bad", epochs=1, model=bad, freeze_embedded_atom=True), samples[:8],
                  samples[32:], progress=False)


def test_init_embedded_atom_from_refuses_what_does_not_fit(tmp_path, samples):
    term = dict(name="embedded_atom", species=["Cu", "Au"], cutoff=4.0)
    first = train(config(tmp_path, "term", epochs=1, model=term), samples[:8], samples[32:], progress=False)
    plain = train(config(tmp_path, "plain", epochs=1), samples[:8], samples[32:], progress=False)
    with_term = dict(GROW_MODELS["platonic"], terms={"embedded_atom": {}})
    cases = [
        (dict(model=GROW_MODELS["platonic"], init_embedded_atom_from=str(first.last)), "no embedded-atom term"),
        (dict(model=with_term, init_embedded_atom_from=str(plain.last)), "embedded_atom architecture"),
        (dict(model=dict(with_term, cutoff=4.5), init_embedded_atom_from=str(first.last)), "cutoff"),
        (dict(model=dict(with_term, species=["Au", "Cu"]), init_embedded_atom_from=str(first.last)), "species"),
    ]
    for extra, message in cases:
        with pytest.raises(ValueError, match=message):
            train(config(tmp_path, "bad", epochs=1, **extra), samples[:8], samples[32:], progress=False)
    bigger = train(config(tmp_path, "bigger", epochs=1, model=dict(term, hidden=32)), samples[:8], samples[32:],
                   progress=False)
    with pytest.raises(ValueError, match="hyperparameters differ"):
        train(config(tmp_path, "bad", epochs=1, model=with_term, init_embedded_atom_from=str(bigger.last)),
              samples[:8], samples[32:], progress=False)
    # same tensor shapes, other normalisation: refused as well
    other = train(config(tmp_path, "other", epochs=1, model=dict(term, avg_neighbors=8.0)), samples[:8],
                  samples[32:], progress=False)
    with pytest.raises(ValueError, match="hyperparameters differ"):
        train(config(tmp_path, "bad", epochs=1, model=with_term, init_embedded_atom_from=str(other.last)),
              samples[:8], samples[32:], progress=False)
    # a term without logarithmic densities into a model whose term has them, and the other way round
    with pytest.raises(ValueError, match="hyperparameters differ"):
        train(config(tmp_path, "bad", epochs=1, model=dict(with_term, terms={"embedded_atom": {"log_densities": True}}),
                     init_embedded_atom_from=str(first.last)), samples[:8], samples[32:], progress=False)
    logged = train(config(tmp_path, "logged", epochs=1, model=dict(term, log_densities=True)), samples[:8],
                   samples[32:], progress=False)
    with pytest.raises(ValueError, match="hyperparameters differ"):
        train(config(tmp_path, "bad", epochs=1, model=with_term, init_embedded_atom_from=str(logged.last)),
              samples[:8], samples[32:], progress=False)
    with pytest.raises(ValueError, match="exclude each other"):
        config(tmp_path, "both", model=with_term, init_from=str(first.last), init_embedded_atom_from=str(first.last))


def test_example_training_configs_parse_and_chain_their_stages():
    """examples/recipes/<model>/stage*.yaml are valid configs; a stage's init_from (init_embedded_atom_from) is
    the best checkpoint of an earlier stage's out_dir, with the same model (an embedded_atom model of the same
    species and cutoff)."""
    from pathlib import Path

    recipes = Path(__file__).resolve().parents[2] / "examples" / "recipes"
    configs = {str(p.relative_to(recipes)): TrainConfig.from_yaml(p) for p in sorted(recipes.glob("*/stage*.yaml"))}
    assert len(configs) >= 2
    best = {f"{c.out_dir}/best.safetensors": c for c in configs.values()}
    for name, c in configs.items():
        if c.init_from:
            assert c.init_from in best, (name, c.init_from)
            if c.init_grow:  # a deeper model grown from the earlier stage: only num_layers may differ
                earlier = dict(best[c.init_from].model)
                assert earlier.pop("num_layers") < c.model["num_layers"], name
                assert earlier == {k: v for k, v in c.model.items() if k != "num_layers"}, name
            else:
                assert best[c.init_from].model == c.model, name
        if c.init_embedded_atom_from:  # the term trained alone, same species and cutoff
            assert c.init_embedded_atom_from in best, (name, c.init_embedded_atom_from)
            term = best[c.init_embedded_atom_from].model
            assert term["name"] == "embedded_atom" and "embedded_atom" in c.model.get("terms", {}), name
            assert (term["species"], term["cutoff"]) == (c.model["species"], c.model["cutoff"]), name


def test_every_recipe_config_parses():
    """Every YAML under examples/recipes (stages, long runs, pre-training, v2) is a valid config."""
    from pathlib import Path

    recipes = Path(__file__).resolve().parents[2] / "examples" / "recipes"
    paths = sorted(recipes.rglob("*.yaml"))
    assert len(paths) >= 10
    for path in paths:
        config = TrainConfig.from_yaml(path)
        assert config.model["name"] and config.data.train and config.out_dir, path


def test_validation_without_stress_labels_trains_and_checkpoints(tmp_path, samples):
    """A validation set with no stress labels (molecules, clusters) has no stress error: the run
    goes on, and the checkpoint header stores null for it (JSON has no NaN)."""
    valid = []
    for atoms in samples[32:]:
        a = atoms.copy()
        a.pbc = False
        a.calc = SinglePointCalculator(a, energy=atoms.get_potential_energy(), forces=atoms.get_forces())
        valid.append(a)
    result = train(config(tmp_path, "nostress", epochs=1), samples[:16], valid, progress=False)
    metrics = mlip.read_header(result.last)["metadata"]["metrics"]
    assert metrics["valid_stress_mae_meV_per_A3"] is None
    assert metrics["valid_forces_mae_meV_per_A"] > 0
    assert json.loads((tmp_path / "nostress" / "metrics.json").read_text())[0]["valid_stress_mae_meV_per_A3"] is None


def test_exclude_config_types_leaves_those_frames_out_and_refuses_unknown_kinds(tmp_path, samples, capsys):
    """data.exclude_config_types drops the named kinds from both sides (a teacher's compressed dimers
    without a repulsive wall), says how many, and a misspelt kind is an error, not a no-op."""
    def tagged(atoms, kind):
        a = atoms.copy()
        a.calc = SinglePointCalculator(a, **atoms.calc.results)
        a.info["config_type"] = kind
        return a

    train_set = [tagged(a, "compressed" if i % 4 == 0 else "crystal") for i, a in enumerate(samples[:16])]
    valid_set = [tagged(a, "compressed" if i % 2 == 0 else "crystal") for i, a in enumerate(samples[32:38])]
    run = config(tmp_path, "excl", epochs=1, data=dict(exclude_config_types=["compressed"]))
    result = train(run, train_set, valid_set, progress=False)
    header = mlip.read_header(result.last)["metadata"]["training"]
    assert (header["n_train"], header["n_valid"]) == (12, 3)
    assert "left out 4 training and 3 validation frames of config_type compressed" in capsys.readouterr().out
    typo = config(tmp_path, "typo", epochs=1, data=dict(exclude_config_types=["compresed"]))
    message = r"no frame has config_type 'compresed' \(present: compressed, crystal\)"
    with pytest.raises(ValueError, match=message):
        train(typo, train_set, valid_set, progress=False)
