"""examples/recipes/train_on_budget.py: the epochs are those that fit the budget, and the run trains them."""

import json
import re
import tempfile
from pathlib import Path
from typing import Optional

import numpy as np
import pytest
from ase.io import write

from mlip.testing.datasets import emt_cells, emt_isolated_atom
from mlip.testing.scripts import script_module
from mlip.training.samples import atoms_of

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "recipes" / "train_on_budget.py"
#: the training frame that the seed-0 shuffle puts last: no calibration subset but the largest holds it
LAST_IN_THE_SHUFFLE = int(np.random.default_rng(0).permutation(48)[-1])




def _config(tmp_path, isolated_atoms: bool = False, **data) -> Path:
    """48 training frames (one ``compressed``, the rest ``crystal``), 8 validation frames; with
    ``isolated_atoms`` an isolated Cu and Au atom follow the training frames, and the reference energies
    are theirs."""
    frames = emt_cells(48, seed=1)
    for k, atoms in enumerate(frames):
        atoms.info["config_type"] = "compressed" if k == LAST_IN_THE_SHUFFLE else "crystal"
    if isolated_atoms:
        for atoms in (emt_isolated_atom("Cu"), emt_isolated_atom("Au")):
            atoms.info["config_type"] = "isolated_atom"
            frames.append(atoms)
    write(tmp_path / "train.xyz", frames)
    write(tmp_path / "valid.xyz", emt_cells(8, seed=2))
    config = dict(model=dict(name="platonic", species=["Cu", "Au"], cutoff=4.0, channels=4, num_layers=1,
                             num_heads=1, head_dim=2),
                  data=dict(train="train.xyz", valid="valid.xyz", **data), epochs=1000, batch_size=8,
                  out_dir=str(tmp_path / "unused"), optimizer=dict(lr=5e-3, ema_decay=0.5),
                  reference_energies="isolated_atoms" if isolated_atoms else "least_squares")
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def _run(tmp_path, monkeypatch, minutes: str, *options, epochs: Optional[int] = None,
         isolated_atoms: bool = False, **data) -> Path:
    """The script (with ``options``) on ``_config(tmp_path, **data)`` for ``minutes``, its scratch
    folders in ``tmp_path/scratch``; ``epochs`` replaces those the calibration fitted. Returns the run's
    folder."""
    config = _config(tmp_path, isolated_atoms, **data)
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    out = tmp_path / "run"
    with script_module(SCRIPT) as script:
        if epochs is not None:
            fit_epochs = script.fit_epochs

            def fitted(config, *args):
                fit_epochs(config, *args)
                config.epochs = epochs

            monkeypatch.setattr(script, "fit_epochs", fitted)
        code = script.main([str(config), "--minutes", minutes, "--data-dir", str(tmp_path),
                            "--out-dir", str(out), "--calibration-steps", "8", *options])
    assert code == 0
    return out


def test_the_epochs_fit_the_budget_and_are_trained(tmp_path, capsys, monkeypatch):
    out = _run(tmp_path, monkeypatch, "0.05")
    scratch = tmp_path / "scratch"
    printed = capsys.readouterr().out
    m = re.search(r"calibration: (\d+) ms per step, ([\d.]+) s per epoch \(([\d.e-]+) s of validation\): "
                  r"(\d+) epochs in 0.05 min", printed)
    assert m, printed
    per_epoch, validation, epochs = float(m.group(2)), float(m.group(3)), int(m.group(4))
    assert 0 < validation <= per_epoch + 0.05  # the seconds per epoch are printed to 0.1
    # 0.05 min = 3 s: epochs · (seconds per epoch) <= 3, the printed seconds rounded to 0.1
    assert 1 <= epochs < 1000 and (epochs == 1 or epochs * (per_epoch - 0.05) <= 3)
    history = json.loads((out / "metrics.json").read_text())
    assert 1 <= len(history) <= epochs and (out / "best.safetensors").is_file()
    assert json.loads((out / "config.json").read_text())["epochs"] == epochs
    assert not list(scratch.glob("calibrate-*"))  # the calibration runs' folders are gone


def test_excluded_kinds_are_left_out_of_the_calibration_and_the_run(tmp_path, capsys, monkeypatch):
    """data.exclude_config_types: a calibration subset without the excluded kind is no error, and the
    run trains without it (47 of 48 frames), saying so."""
    out = _run(tmp_path, monkeypatch, "0.02", exclude_config_types=["compressed"])
    assert "left out 1 training and 0 validation frames of config_type compressed" in capsys.readouterr().out
    assert json.loads((out / "config.json").read_text())["data"]["exclude_config_types"] == ["compressed"]


def test_the_calibration_keeps_isolated_atom_references(tmp_path, capsys, monkeypatch):
    """reference_energies: isolated_atoms costs the isolated atoms' energies in every training step, so
    the calibration trains with them: every calibration subset holds both isolated atoms, with the
    config's references (not a least-squares fit, which would leave that cost out)."""
    import mlip.training as training
    import mlip.training.budget as budget

    train, seen = training.train, []

    def spy(config, train_samples, valid_samples, **kwargs):
        symbols = sorted(a.get_chemical_symbols()[0] for a in map(atoms_of, train_samples) if len(a) == 1)
        seen.append((config.reference_energies, symbols, len(train_samples)))
        return train(config, train_samples=train_samples, valid_samples=valid_samples, **kwargs)

    monkeypatch.setattr(budget, "train", spy)  # the calibration's runs
    monkeypatch.setattr(training, "train", spy)  # the run: the script imports it from there
    _run(tmp_path, monkeypatch, "0.02", epochs=1, isolated_atoms=True)
    assert len(seen) == 3, seen  # two calibration subsets (2 and 6 steps of 8) and the run
    # at least the 2 and 6 steps of 8 frames that --calibration-steps 8 asks for, and the whole run
    assert [n >= least for (_, _, n), least in zip(seen, (16, 48, 50))] == [True] * 3, seen
    assert all(kind == "isolated_atoms" and symbols == ["Au", "Cu"] for kind, symbols, _ in seen), seen


def test_a_killed_run_resumes_with_its_calibrated_epochs(tmp_path, capsys, monkeypatch):
    """--resume: no new calibration, the run's saved epochs, and the epochs after the last finished one."""
    import mlip.training.loop as loop

    train_epoch, calls = loop._train_epoch, []

    def killed_in_the_third_epoch(*args, **kwargs):  # after the two calibration runs and epochs 1, 2
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return train_epoch(*args, **kwargs)

    monkeypatch.setattr(loop, "_train_epoch", killed_in_the_third_epoch)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, monkeypatch, "1", epochs=4)
    out = tmp_path / "run"
    assert json.loads((out / "config.json").read_text())["epochs"] == 4
    assert len(json.loads((out / "metrics.json").read_text())) == 2
    capsys.readouterr()

    monkeypatch.setattr(loop, "_train_epoch", train_epoch)
    _run(tmp_path, monkeypatch, "1", "--resume")
    printed = capsys.readouterr().out
    assert "calibration:" not in printed and f"resuming {out}: 4 epochs in 1 min" in printed
    assert [entry["epoch"] for entry in json.loads((out / "metrics.json").read_text())] == [1, 2, 3, 4]
    assert not list((tmp_path / "scratch").glob("calibrate-*"))


def test_resume_refuses_a_folder_without_a_run_or_another_budget(tmp_path, capsys, monkeypatch):
    with pytest.raises(SystemExit):
        _run(tmp_path, monkeypatch, "0.02", "--resume")
    assert "nothing to resume in" in capsys.readouterr().err
    _run(tmp_path, monkeypatch, "0.02", epochs=1)
    with pytest.raises(SystemExit):
        _run(tmp_path, monkeypatch, "0.05", "--resume")
    assert "was not fitted to 0.05 min (its max_minutes: 0.021" in capsys.readouterr().err
