"""`mlip train` keeps earlier runs safe: it refuses to overwrite one, resumes only the same optimisation
(recording the changes it accepts), carries the elapsed minutes over, cleans up after a failed start and
prints one line per epoch without the progress bar."""

import json
import re

import pytest

from mlip.testing.datasets import emt_cells
from mlip.cli import main
from mlip.training import TrainConfig, train
from mlip.training.train_state import STATE_KEY


def config_dict(out_dir, **extra):
    data = dict(model=dict(name="platonic", species=["Cu", "Au"], cutoff=4.0, channels=4, num_layers=1,
                           num_heads=1, head_dim=2),
                epochs=2, batch_size=4, out_dir=str(out_dir), optimizer=dict(lr=5e-3, ema_decay=0.5))
    data.update(extra)
    return data


def config(out_dir, **extra):
    return TrainConfig.from_dict(config_dict(out_dir, **extra))


@pytest.fixture(scope="module")
def samples():
    return emt_cells(12)


@pytest.fixture
def yaml_config(tmp_path, samples):
    """Write the training data and a config for `mlip train`; returns a function of the config's extra keys."""
    import ase.io
    import yaml

    data = tmp_path / "train.extxyz"
    ase.io.write(data, samples)

    def write(out_dir, name="train.yaml", **extra):
        cfg = config_dict(out_dir, **extra)
        cfg.setdefault("data", {}).setdefault("train", str(data))
        cfg["data"].setdefault("valid_fraction", 0.25)
        path = tmp_path / name
        path.write_text(yaml.safe_dump(cfg))
        return str(path)

    return write


def set_state_minutes(path, minutes):
    """Rewrite the training state as if the run so far had taken ``minutes``."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(path), framework="pt") as fh:
        header = json.loads(fh.metadata()[STATE_KEY])
        tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    header["minutes"] = minutes
    for record in header["history"]:
        record["minutes"] = minutes
    save_file(tensors, str(path), metadata={STATE_KEY: json.dumps(header)})


# ----------------------------------------------------------------------------------- an earlier run
def test_a_new_run_refuses_an_out_dir_holding_a_run(tmp_path, samples):
    out = tmp_path / "run"
    train(config(out, epochs=1), samples[:8], samples[8:], progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(ValueError, match="already holds a training run") as err:
        train(config(out, epochs=2), samples[:8], samples[8:], progress=False)
    message = str(err.value)
    assert str(out) in message and "--resume" in message and "--overwrite" in message
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing of the run touched
    # --overwrite starts afresh: the earlier run's files are replaced, not mixed in.
    (out / "config_changes.json").write_text('{"resumes": []}')
    result = train(config(out, epochs=2), samples[:8], samples[8:], progress=False, overwrite=True)
    assert result.epochs_run == 2 and result.resumed_from is None
    assert len(json.loads((out / "metrics.json").read_text())) == 2
    assert json.loads((out / "config.json").read_text())["epochs"] == 2
    assert not (out / "config_changes.json").exists()
    with pytest.raises(ValueError, match="resume and overwrite exclude each other"):
        train(config(out), samples[:8], samples[8:], progress=False, resume=True, overwrite=True)


def test_an_existing_empty_out_dir_is_fine(tmp_path, samples):
    out = tmp_path / "empty"
    out.mkdir()
    assert train(config(out, epochs=1), samples[:8], samples[8:], progress=False).epochs_run == 1


def test_mlip_train_refuses_an_earlier_run_unless_told(tmp_path, yaml_config, capsys):
    out = tmp_path / "cli"
    path = yaml_config(out, epochs=1)
    assert main(["train", path, "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["train", path, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"out_dir {str(out)!r} already holds a training run" in err
    assert "--resume" in err and "--overwrite" in err
    assert main(["train", path, "--no-progress", "--overwrite"]) == 0


# ----------------------------------------------------------------------------------- resume
def test_resume_refuses_a_changed_optimisation_and_names_the_keys(tmp_path, samples):
    out = tmp_path / "run"
    train(config(out, max_minutes=0), samples[:8], samples[8:], progress=False)  # stops after epoch 1
    state = (out / "train_state.safetensors").read_bytes()
    with pytest.raises(ValueError, match="cannot resume") as err:
        train(config(out, batch_size=2, loss=dict(forces_weight=10.0)), samples[:8], samples[8:],
              resume=True, progress=False)
    message = str(err.value)
    assert "batch_size: 4 -> 2" in message and "loss.forces_weight: 1.0 -> 10.0" in message
    assert "epochs" not in message.split("only")[0]  # allowed keys are not reported as changes
    for changed in (dict(model=dict(config_dict(out)["model"], channels=8)), dict(seed=1),
                    dict(data=dict(train="other.xyz")), dict(optimizer=dict(lr=1e-3)), dict(dtype="float64")):
        with pytest.raises(ValueError, match="cannot resume"):
            train(config(out, **changed), samples[:8], samples[8:], resume=True, progress=False)
    # Other structures given directly (no data file names them) are caught by their number.
    with pytest.raises(ValueError, match="the data differ from the run's .training set 8 -> 6"):
        train(config(out), samples[:6], samples[8:], resume=True, progress=False)
    assert (out / "train_state.safetensors").read_bytes() == state
    assert not (out / "config_changes.json").exists()


def test_resume_accepts_and_records_harmless_changes(tmp_path, samples, capsys):
    out = tmp_path / "run"
    train(config(out, epochs=1), samples[:8], samples[8:], progress=False)
    result = train(config(out, epochs=2, max_minutes=60.0, device="cpu"), samples[:8], samples[8:],
                   resume=True, progress=False)
    assert result.resumed_from == 1 and len(result.history) == 2
    assert "resuming" in capsys.readouterr().out
    log = json.loads((out / "config_changes.json").read_text())
    assert log == {"resumes": [{"after_epoch": 1, "changes": {"epochs": [1, 2], "max_minutes": [None, 60.0]}}]}
    assert json.loads((out / "config.json").read_text())["epochs"] == 2  # the next resume compares with this
    train(config(out, epochs=3, max_minutes=60.0), samples[:8], samples[8:], resume=True, progress=False)
    log = json.loads((out / "config_changes.json").read_text())
    assert log["resumes"][1] == {"after_epoch": 2, "changes": {"epochs": [2, 3]}}


def test_mlip_train_resume_refuses_another_batch_size(tmp_path, yaml_config, capsys):
    out = tmp_path / "cli"
    assert main(["train", yaml_config(out, max_minutes=0), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["train", yaml_config(out, name="changed.yaml", batch_size=2), "--resume", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "batch_size: 4 -> 2" in err and "max_minutes" not in err.split("only")[0]


def test_elapsed_minutes_continue_across_a_resume(tmp_path, samples, capsys):
    out = tmp_path / "run"
    train(config(out, epochs=3, max_minutes=0), samples[:8], samples[8:], progress=False)
    set_state_minutes(out / "train_state.safetensors", 30.0)  # as if epoch 1 had taken half an hour
    # The budget of 20 minutes is spent: no further epoch.
    spent = train(config(out, epochs=3, max_minutes=20), samples[:8], samples[8:], resume=True,
                  progress=False)
    assert spent.epochs_run == 1 and "no epoch run" in capsys.readouterr().out
    result = train(config(out, epochs=3), samples[:8], samples[8:], resume=True, progress=False)
    assert result.epochs_run == 3
    minutes = [h["minutes"] for h in result.history]
    assert minutes[0] == 30.0 and 30.0 < minutes[1] < minutes[2] < 40.0


# ----------------------------------------------------------------------------------- a failed start
def test_a_failed_start_leaves_no_out_dir(tmp_path, yaml_config, samples, capsys):
    out = tmp_path / "new" / "run"
    path = yaml_config(out, data=dict(train=str(tmp_path / "missing.extxyz")))
    assert main(["train", path, "--no-progress"]) == 2
    assert "missing.extxyz" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    # A bad setting found after out_dir was made (a model without an embedded-atom term to freeze).
    with pytest.raises(ValueError, match="freeze_embedded_atom"):
        train(config(out, freeze_embedded_atom=True), samples[:8], samples[8:], progress=False)
    assert not (tmp_path / "new").exists()
    # A folder the user had stays, as it was.
    mine = tmp_path / "mine"
    mine.mkdir()
    with pytest.raises(ValueError, match="freeze_embedded_atom"):
        train(config(mine, freeze_embedded_atom=True), samples[:8], samples[8:], progress=False)
    assert mine.is_dir() and list(mine.iterdir()) == []


# ----------------------------------------------------------------------------------- batch logs
def test_no_progress_prints_one_line_per_epoch(tmp_path, yaml_config, capsys):
    assert main(["train", yaml_config(tmp_path / "cli"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("epoch")]
    assert len(lines) == 2, out
    for k, line in enumerate(lines, 1):
        assert re.fullmatch(rf"epoch {k}/2: loss \S+ valid \S+ .*forces_mae_meV_per_A=\S+ .*\(\d+\.\d\d min\)",
                            line), line
