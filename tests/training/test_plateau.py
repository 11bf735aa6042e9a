"""Training whose length is not known in advance: the warm-up–stable–decay schedule, the plateau rule that
ends it, runs advanced one session at a time, and a run folder that resumes bit for bit from a copy."""

import json
import shutil

import numpy as np
import pytest
import torch

import mlip
from mlip.cli import main
from mlip.testing.datasets import emt_cells
from mlip.training import TrainConfig, train
from mlip.training.plateau import PlateauState, relative_improvement
from mlip.training.provenance import machine_paths
from mlip.training.schedule import warmup_stable_decay
from mlip.training.train_state import STATE_KEY


def config_dict(out_dir, **extra):
    data = dict(model=dict(name="platonic", species=["Cu", "Au"], cutoff=4.0, channels=4, num_layers=1,
                           num_heads=1, head_dim=2),
                epochs=40, batch_size=4, out_dir=str(out_dir),
                optimizer=dict(lr=5e-3, ema_decay=0.5, schedule="wsd", warmup_epochs=1.0, decay_fraction=0.5),
                plateau=dict(window=2, min_improvement=0.15, smoothing=0.5))
    data.update(extra)
    return data


@pytest.fixture(scope="module")
def samples():
    return emt_cells(16)


def test_warmup_stable_decay_values():
    factors = [warmup_stable_decay(s, 4, None, 0, 0.1) for s in range(10)]
    assert factors == [0.25, 0.5, 0.75, 1.0] + [1.0] * 6  # no plateau yet: constant after the warm-up
    decayed = [warmup_stable_decay(s, 4, 6, 3, 0.1) for s in range(12)]
    assert decayed[:6] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert np.allclose(decayed[6:], [0.7, 0.4, 0.1, 0.1, 0.1, 0.1])  # linear to the floor at the last step


def test_the_plateau_rule_on_a_synthetic_curve():
    # 10 % less per epoch for 30 epochs, then flat with noise of ±0.5 %: the smoothed loss (a = 0.7) lags
    # the bend and falls more than 1 % over 5 epochs until some 15 epochs after it; the rule fires then,
    # never while the curve falls.
    rng = np.random.default_rng(0)
    losses = [0.9 ** min(e, 30) * (1 + 0.005 * rng.uniform(-1, 1)) for e in range(60)]
    state, fired = PlateauState(), None
    for epoch, loss in enumerate(losses, start=1):
        improvement = state.observe(loss, 0.7, 5)
        if epoch <= 5:
            assert improvement is None
        elif improvement < 0.01:
            fired = epoch
            break
    assert fired is not None and 36 < fired < 50, fired
    assert relative_improvement([2.0, 1.5, 1.0], 2) == 0.5 and relative_improvement([1.0, 1.1], 1) < 0
    assert state.fire(fired, 100 * fired, 100, 0.2) == int(np.ceil(0.2 * fired))
    assert state.decay_start == 100 * fired and state.end_epoch == fired + state.decay_steps // 100


def test_a_run_stops_by_the_plateau_rule_and_records_it(tmp_path, samples):
    config = TrainConfig.from_dict(config_dict(tmp_path / "run"))
    result = train(config, samples[:12], samples[12:], progress=False)
    history = result.history
    assert result.finished and "plateau" in result.finished and len(history) < 40
    # The rule, recomputed from the recorded validation losses: the first epoch after the warm-up whose
    # smoothed loss fell by less than 15 % over 2 epochs.
    state = PlateauState()
    improvements = [state.observe(h["valid_loss"], 0.5, 2) for h in history]
    fired = next(e for e, i in enumerate(improvements, start=1) if i is not None and i < 0.15)
    assert [h["plateau_improvement"] for h in history] == improvements
    assert [h["plateau_smoothed_loss"] for h in history] == state.smoothed
    decay_epochs = int(np.ceil(0.5 * fired))
    assert len(history) == fired + decay_epochs and history[-1]["stopped"] == result.finished
    phases = [h["phase"] for h in history]
    assert phases == ["warmup"] + ["stable"] * (fired - 2) + ["decay"] * (decay_epochs + 1)
    lrs = [h["lr"] for h in history]
    assert all(lr == 5e-3 for lr in lrs[1:fired]) and lrs[-1] == pytest.approx(5e-3 * 0.01)
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())[-1]["stopped"] == result.finished
    # Resuming a finished run runs nothing.
    again = train(config, samples[:12], samples[12:], resume=True, progress=False)
    assert again.epochs_run == len(history) and again.finished == result.finished


def _files_text(folder):
    """Every text a run folder holds: its JSON files and the JSON headers of its safetensors files."""
    from safetensors import safe_open

    texts = {}
    for path in sorted(folder.iterdir()):
        if path.suffix == ".json":
            texts[path.name] = json.loads(path.read_text())
        elif path.suffix == ".safetensors":
            with safe_open(str(path), framework="pt") as fh:
                texts[path.name] = fh.metadata()
    return texts


def test_a_copied_run_folder_resumes_bit_for_bit_one_session_at_a_time(tmp_path, samples):
    import ase.io

    ase.io.write(tmp_path / "train.extxyz", samples[:12])
    ase.io.write(tmp_path / "valid.extxyz", samples[12:])
    data = dict(train=str(tmp_path / "train.extxyz"), valid=str(tmp_path / "valid.extxyz"))
    full = train(TrainConfig.from_dict(config_dict(tmp_path / "full", data=data)), progress=False)
    assert full.finished and len(full.history) >= 4
    # One epoch per session (a session shorter than any epoch), each session on a fresh copy of the folder
    # made by the previous one, at a new path, the old copy deleted: only what the folder holds carries over.
    folder, sessions = tmp_path / "session-0", 0
    result = train(TrainConfig.from_dict(config_dict(folder, data=data)), progress=False,
                   session_minutes=1e-9)
    while not result.finished:
        assert result.epochs_run == sessions + 1
        sessions += 1
        copy = tmp_path / f"session-{sessions}"
        shutil.copytree(folder, copy)
        shutil.rmtree(folder)
        folder = copy
        result = train(TrainConfig.from_dict(config_dict(folder, data=data)), resume=True, progress=False,
                       session_minutes=1e-9)
    assert sessions == len(full.history) - 1 and result.finished == full.finished
    for name in ("last.safetensors", "best.safetensors"):
        a, b = mlip.load_potential(tmp_path / "full" / name), mlip.load_potential(folder / name)
        for (key, x), y in zip(a.state_dict().items(), b.state_dict().values()):
            assert torch.equal(x, y), (name, key)
    timeless = [{k: v for k, v in h.items() if k != "minutes"} for h in full.history]
    assert [{k: v for k, v in h.items() if k != "minutes"} for h in result.history] == timeless
    # No file of the folder names a path of this machine, and the config's data paths are the folder's.
    texts = _files_text(folder)
    assert not machine_paths(texts), machine_paths(texts)
    stored = texts["config.json"]
    assert stored["out_dir"] == "." and stored["data"]["train"] == "../train.extxyz"
    assert "plateau" in json.loads(texts["train_state.safetensors"][STATE_KEY])
    assert not (folder / "config_changes.json").exists()  # nothing changed but the folder's place


def test_mlip_train_session_minutes_continues_with_the_same_command(tmp_path, samples, capsys):
    import ase.io
    import yaml

    ase.io.write(tmp_path / "train.extxyz", samples)
    cfg = config_dict("run", data=dict(train="train.extxyz", valid_fraction=0.25), epochs=3)
    cfg["optimizer"]["schedule"] = "cosine"
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(cfg))
    command = ["train", "train.yaml", "--session-minutes", "1e-9", "--no-progress"]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        for epochs in (1, 2, 3):
            assert main(command) == 0
            assert f"done: {epochs} epochs" in capsys.readouterr().out
        assert main(command) == 0  # the run is done: nothing more
        assert "done: 3 epochs" in capsys.readouterr().out
        assert main(["train", "train.yaml", "--session-minutes", "0"]) == 2
        assert "--session-minutes must be positive" in capsys.readouterr().err
        assert main(["train", "train.yaml", "--session-minutes", "5", "--overwrite"]) == 2
        assert "excludes --overwrite" in capsys.readouterr().err


def test_bad_schedule_settings_are_refused(tmp_path):
    cases = ((dict(optimizer=dict(schedule="step")), "optimizer.schedule must be one of cosine, wsd"),
             (dict(optimizer=dict(decay_fraction=0.0)), "decay_fraction"),
             (dict(plateau=dict(window=0)), "plateau.window"),
             (dict(plateau=dict(patience=3)), "plateau key"))
    for extra, message in cases:
        with pytest.raises(ValueError, match=message):
            TrainConfig.from_dict(config_dict(tmp_path, **extra))
