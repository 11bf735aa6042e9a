"""The compiled training step (``compile: true``): the loss and gradients of the eager step, a run that
uses it and says so, and a compilation failure that falls back to eager steps with a warning."""

import json
import math
import time

import pytest
import torch
import yaml
from ase.calculators.singlepoint import SinglePointCalculator

import mlip
from mlip.calculators.compiled_network import CompileFallbackWarning
from mlip.models import create_model
from mlip.testing.datasets import emt_cells
from mlip.training import TrainConfig
from mlip.training.compiled_step import CompiledStep
from mlip.training.loss import loss_sums, loss_terms
from mlip.training.samples import atoms_of, batch_targets, loss_weights

MODEL = dict(name="platonic", species=["Cu", "Au"], cutoff=4.0, channels=4, num_layers=1, num_heads=1,
             head_dim=2)


def tiny_config(**extra) -> TrainConfig:
    return TrainConfig.from_dict(dict(model=MODEL, loss=dict(kind="huber", huber_delta=0.05), **extra))


@pytest.fixture(scope="module")
def batches():
    """Two batches of different sizes (3 and 5 structures); the second has a structure without stress."""
    cells = emt_cells(8)
    unlabelled = cells[5].copy()
    unlabelled.calc = SinglePointCalculator(unlabelled, energy=cells[5].get_potential_energy(),
                                            forces=cells[5].get_forces())
    return [cells[:3], cells[3:5] + [unlabelled] + cells[6:8]]


def eager_loss_and_gradients(potential, config, scale, graph, target):
    """What an eager training step computes: ``loss_terms`` of the forward pass, then ``backward``."""
    potential.zero_grad(set_to_none=True)
    out = potential(graph, compute_forces=True, compute_stress=True, create_graph=True)
    loss, _ = loss_terms(out, target, scale, config)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in potential.parameters() if p.requires_grad]


@pytest.mark.slow
# one compile per test (minutes on a CPU, and CI's main job has 15): the equality in float64, where it is
# tight; float32's agreement (the dtype runs train in) is measured by benchmarks/speed/training_step.py
@pytest.mark.parametrize("dtype, tolerance", [(torch.float64, 1e-10)])
def test_compiled_loss_and_gradients_equal_the_eager_ones(batches, dtype, tolerance):
    # The gradients compare as one vector (a bias of the attention logits has a gradient of zero up to
    # rounding, ~1e-19, whose relative error alone means nothing). The number of graphs is not tested:
    # dynamic shapes (and no duck sizing of the 3 structures against the 3 coordinates) gave one graph for
    # both batches in float64, but inductor may bound a size's range and compile a second (float32 here).
    name = str(dtype).removeprefix("torch.")
    config = tiny_config(dtype=name, eval_dtype=name)
    args = dict(config.model)
    potential = create_model(args.pop("name"), seed=0, **args).to(dtype)
    step = CompiledStep(potential, config, scale=0.7)
    for chunk in batches:
        graph = mlip.batch_atoms([atoms_of(s) for s in chunk], potential.cutoff, dtype=dtype)
        target = batch_targets(chunk, dtype, "cpu")
        loss, gradients = eager_loss_and_gradients(potential, config, 0.7, graph, target)
        potential.zero_grad(set_to_none=True)
        start = time.perf_counter()
        compiled = step(graph, target)
        print(f"{dtype} batch of {graph.n_graphs}: compiled step {time.perf_counter() - start:.1f} s")
        assert compiled is not None, step.failure
        assert abs(float(compiled) - float(loss)) <= tolerance * abs(float(loss))
        got = torch.cat([p.grad.flatten() for p in potential.parameters() if p.requires_grad])
        want = torch.cat([g.flatten() for g in gradients])
        assert float((got - want).norm()) <= tolerance * float(want.norm())
    assert step.epoch_record() == {"compiled_steps": 2, "eager_steps": 0}


def test_the_static_shape_loss_is_the_loss(batches):
    # All rows labelled: the same numbers to the bit; a row without stress: zeroed rather than dropped (the
    # same sum up to rounding), its NaNs in neither the loss nor the gradient, its count a tensor.
    config = tiny_config()
    args = dict(config.model)
    potential = create_model(args.pop("name"), seed=0, **args).double()
    for chunk, exact in zip(batches, (True, False)):
        graph = mlip.batch_atoms([atoms_of(s) for s in chunk], potential.cutoff, dtype=torch.float64)
        target = batch_targets(chunk, torch.float64, "cpu")
        out = potential(graph, compute_forces=True, compute_stress=True, create_graph=True)
        dropped = loss_sums(out, target, 0.7, config)
        zeroed = loss_sums(out, target, 0.7, config, static_shapes=True)
        assert int(zeroed["stress"][1]) == dropped["stress"][1] == 6 * (len(chunk) - (not exact))
        for key in dropped:
            a, b = float(dropped[key][0].detach()), float(zeroed[key][0].detach())
            assert a == b if exact else math.isclose(a, b, rel_tol=1e-14), (key, a, b)
        loss = sum(s for s, _ in zeroed.values())
        grads = torch.autograd.grad(loss, [p for p in potential.parameters() if p.requires_grad],
                                    allow_unused=True)
        assert all(torch.isfinite(g).all() for g in grads if g is not None)


def write_run(tmp_path, name, **extra):
    """A training config for ``mlip train`` on 8 EMT cells, 4 more to validate (its path): float64 and the
    loss of :func:`tiny_config`, so that its step is the graph of the float64 comparison above (the inductor
    cache then holds its code when both tests run)."""
    import ase.io

    cells = emt_cells(12)
    train, valid = tmp_path / "train.extxyz", tmp_path / "valid.extxyz"
    if not train.exists():
        ase.io.write(train, cells[:8])
        ase.io.write(valid, cells[8:])
    config = dict(tiny_config().to_dict(), epochs=2, batch_size=4, dtype="float64",
                  out_dir=str(tmp_path / name), optimizer=dict(lr=5e-3, ema_decay=0.5),
                  data=dict(train=str(train), valid=str(valid)), **extra)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.slow
def test_mlip_train_with_compile_runs_compiled_steps_and_says_so(tmp_path, capsys):
    from mlip.cli import main

    start = time.perf_counter()
    assert main(["train", str(write_run(tmp_path, "compiled", compile=True)), "--no-progress"]) == 0
    print(f"mlip train with compile: {time.perf_counter() - start:.1f} s")
    out = capsys.readouterr().out
    assert "training steps compiled with torch.compile" in out and "done: 2 epochs" in out
    history = json.loads((tmp_path / "compiled" / "metrics.json").read_text())
    # 8 training structures in batches of 4: 2 steps per epoch, all compiled
    assert [(h["compiled_steps"], h["eager_steps"]) for h in history] == [(2, 0), (2, 0)]
    assert all("compile_failure" not in h and math.isfinite(h["valid_loss"]) for h in history)


def test_a_compile_failure_falls_back_to_the_eager_steps_with_one_warning(tmp_path, monkeypatch, capsys):
    # A graph break under fullgraph=True is a compilation failure (found while tracing, in seconds): the
    # steps run eagerly, the run warns once and its records say so, and it trains exactly as without compile.
    import mlip.training.compiled_step as compiled_step
    from mlip.cli import main

    def loss_sums_with_a_graph_break(*args, **kwargs):
        torch._dynamo.graph_break()
        return loss_sums(*args, **kwargs)

    monkeypatch.setattr(compiled_step, "loss_sums", loss_sums_with_a_graph_break)
    with pytest.warns(CompileFallbackWarning, match="torch.compile failed for the training step") as caught:
        assert main(["train", str(write_run(tmp_path, "fallback", compile=True)), "--no-progress"]) == 0
    assert len([w for w in caught if w.category is CompileFallbackWarning]) == 1
    history = json.loads((tmp_path / "fallback" / "metrics.json").read_text())
    assert [(h["compiled_steps"], h["eager_steps"]) for h in history] == [(0, 2), (0, 2)]
    assert all(h["compile_failure"].startswith("Unsupported") for h in history), history
    assert main(["train", str(write_run(tmp_path, "eager")), "--no-progress"]) == 0
    eager = json.loads((tmp_path / "eager" / "metrics.json").read_text())
    assert "compiled_steps" not in eager[0]
    assert [h["train_loss"] for h in history] == [h["train_loss"] for h in eager]
    fallback_weights = mlip.load_potential(tmp_path / "fallback" / "last.safetensors").state_dict()
    eager_weights = mlip.load_potential(tmp_path / "eager" / "last.safetensors").state_dict()
    assert all(torch.equal(fallback_weights[k], eager_weights[k]) for k in eager_weights)


def test_a_resumed_run_may_switch_compile(tmp_path):
    # How the steps run is not the optimisation: the switch may change on resume (and is recorded), and a
    # run written before the key existed reads as compile: false.
    from mlip.io import write_json
    from mlip.training.run_dir import CONFIG_NAME, _resume_changes, portable_config

    stored = portable_config(tiny_config(out_dir=str(tmp_path)), tmp_path)
    del stored["compile"]
    write_json(tmp_path / CONFIG_NAME, stored)
    assert _resume_changes(tiny_config(out_dir=str(tmp_path)), tmp_path) == {}
    switched = tiny_config(out_dir=str(tmp_path), compile=True)
    assert _resume_changes(switched, tmp_path) == {"compile": [False, True]}


def test_loss_weights_scale_each_frames_terms_in_both_forms(batches):
    """MACE's per-frame ``config_*_weight`` keys: energy weight 0 takes the frame's energy out of the
    energy sum (a label whose energy is off by a constant), ``config_weight`` 2 doubles all three of its
    terms; the counts stay (a term is the mean over the batch, as in MACE); the compiled form's static-shape
    sums weigh alike."""
    config = tiny_config()
    args = dict(config.model)
    potential = create_model(args.pop("name"), seed=0, **args).double()
    chunk = list(batches[0])
    graph = mlip.batch_atoms([atoms_of(s) for s in chunk], potential.cutoff, dtype=torch.float64)
    out = potential(graph, compute_forces=True, compute_stress=True)
    plain = loss_sums(out, batch_targets(chunk, torch.float64, "cpu"), 0.7, config)
    alone = [loss_sums(out_k, batch_targets([s], torch.float64, "cpu"), 0.7, config)
             for s, out_k in zip(chunk, _per_frame(potential, chunk))]
    atoms = [atoms_of(s) for s in chunk]
    atoms[0].info["config_energy_weight"] = 0.0
    atoms[1].info["config_weight"] = 2
    try:
        for static in (False, True):
            weighted = loss_sums(out, batch_targets(chunk, torch.float64, "cpu"), 0.7, config, static_shapes=static)
            for key, first, second in (("energy", 0.0, 2.0), ("forces", 1.0, 2.0), ("stress", 1.0, 2.0)):
                want = float(plain[key][0]) + (first - 1) * float(alone[0][key][0]) \
                    + (second - 1) * float(alone[1][key][0])
                assert math.isclose(float(weighted[key][0]), want, rel_tol=1e-10, abs_tol=1e-15), (key, static)
                assert int(weighted[key][1]) == int(plain[key][1])
    finally:
        for a in atoms[:2]:
            a.info.pop("config_energy_weight", None), a.info.pop("config_weight", None)


def _per_frame(potential, chunk):
    for s in chunk:
        graph = mlip.batch_atoms([atoms_of(s)], potential.cutoff, dtype=torch.float64)
        yield potential(graph, compute_forces=True, compute_stress=True)


@pytest.mark.parametrize("value", [-1.0, float("nan"), "heavy", True])
def test_a_bad_loss_weight_is_refused_naming_the_frame(batches, value):
    atoms = atoms_of(batches[0][0]).copy()
    atoms.calc = atoms_of(batches[0][0]).calc
    atoms.info["config_forces_weight"] = value
    with pytest.raises(ValueError, match=r"^training structure 3: config_forces_weight .* is not a finite number"):
        loss_weights(atoms, "training structure 3")
