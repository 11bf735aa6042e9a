"""User mistakes in configs and a missing optional extra end in one line naming the problem and the fix.

A misspelt key names the closest accepted key first; a value of the wrong type names the expected type;
a workflow whose extra is not installed names the ``pip install 'mlip-torch[EXTRA]'`` to run. None of
them prints a traceback.
"""

import glob
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
import yaml
from ase.build import bulk

from mlip.cli import main
from mlip.models import create_model

ROOT = Path(__file__).resolve().parents[2]


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("mlip: error: "), err
    return lines[0]


def write_config(tmp_path, hyperparameters=None, **top):
    """A training config as tests/training/test_training.py writes them; its data file does not exist, so a
    config that passed validation would fail on reading the data instead."""
    model = dict(name="platonic", species=["Cu", "Au"], cutoff=4.0, channels=4, num_layers=1, num_heads=1,
                 head_dim=2)
    model.update(hyperparameters or {})
    cfg = dict(model=model,
               data=dict(train=str(tmp_path / "absent.xyz")), epochs=2, batch_size=8,
               out_dir=str(tmp_path / "run"))
    cfg.update(top)
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_misspelt_model_hyperparameter_names_the_closest_accepted_one_first(tmp_path, capsys):
    path = write_config(tmp_path, dict(chanels=8))
    assert main(["train", str(path)]) == 2
    line = one_line_error(capsys)
    assert f"{path}: model: unknown hyperparameter 'chanels' for architecture 'platonic'" in line
    assert "(did you mean 'channels'?)" in line
    assert line.split("; accepted: ")[1].startswith("channels, "), line
    # every hyperparameter is listed, not only the close ones
    assert "rope_sigma" in line and "use_key" in line


def test_misspelt_top_level_and_section_keys(tmp_path, capsys):
    path = write_config(tmp_path, epoch=3)
    assert main(["train", str(path)]) == 2
    line = one_line_error(capsys)
    assert "unknown key 'epoch' (did you mean 'epochs'?); accepted: epochs, " in line

    path = write_config(tmp_path, optimizer=dict(ema_decai=0.9))
    assert main(["train", str(path)]) == 2
    line = one_line_error(capsys)
    assert "unknown optimizer key 'ema_decai' (did you mean 'ema_decay'?); accepted: ema_decay, " in line


@pytest.mark.parametrize("top, fragment", [
    (dict(epochs="two"), "epochs must be an integer, got 'two'"),
    (dict(batch_size=8.5), "batch_size must be an integer, got 8.5"),
    (dict(augment_rotations=1), "augment_rotations must be true or false, got 1"),
    (dict(max_minutes="ten"), "max_minutes must be a number or null, got 'ten'"),
    (dict(out_dir=["a"]), "out_dir must be a string, got ['a']"),
    (dict(model=["platonic"]), "model must be a mapping, got ['platonic']"),
    (dict(loss=dict(energy_weight="high")), "loss.energy_weight must be a number, got 'high'"),
    (dict(optimizer=dict(betas=0.9)), "optimizer.betas must be a list, got 0.9"),
    (dict(data=dict(train=3)), "data.train must be a string or null, got 3"),
])
def test_wrong_type_names_the_key_and_the_expected_type(tmp_path, capsys, top, fragment):
    path = write_config(tmp_path, **top)
    assert main(["train", str(path)]) == 2
    assert f"{path}: {fragment}" in one_line_error(capsys)


def test_an_exponent_without_a_dot_is_explained(tmp_path, capsys):
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(dict(model=dict(name="platonic", species=["Cu"], cutoff=4.0)))
                    + "optimizer:\n  lr: 1e-3\n")  # YAML 1.1 (PyYAML): the string '1e-3'
    assert main(["train", str(path)]) == 2
    line = one_line_error(capsys)
    assert "optimizer.lr must be a number, got '1e-3'" in line and "write 1.0e-3" in line


@pytest.mark.parametrize("model, fragment", [
    (dict(channels="eight"), "platonic hyperparameter channels must be an integer, got 'eight'"),
    (dict(num_layers=2.0), "platonic hyperparameter num_layers must be an integer, got 2.0"),
    (dict(use_key="yes please"), "platonic hyperparameter use_key must be true or false, got 'yes please'"),
    (dict(rope_sigma=True), "platonic hyperparameter rope_sigma must be a number, got True"),
    (dict(group=4), "platonic hyperparameter group must be a string, got 4"),
])
def test_wrong_hyperparameter_type_in_a_training_config(tmp_path, capsys, model, fragment):
    path = write_config(tmp_path, model)
    assert main(["train", str(path)]) == 2
    assert f"{path}: model: {fragment}" in one_line_error(capsys)


def test_create_model_checks_hyperparameter_types_against_the_defaults():
    with pytest.raises(TypeError, match="platonic hyperparameter channels must be an integer, got 'eight'"):
        create_model("platonic", species=["Cu"], cutoff=4.0, channels="eight")
    with pytest.raises(TypeError, match=r"unknown hyperparameter 'chanels' .*\(did you mean 'channels'\?\)"):
        create_model("platonic", species=["Cu"], cutoff=4.0, chanels=4)
    # An integer where the default is a float, anything where it is None, numpy scalars: accepted.
    potential = create_model("platonic", species=["Cu"], cutoff=4.0, channels=np.int64(4), num_layers=1,
                             num_heads=1, head_dim=2, avg_neighbors=12, attention_cutoff=4)
    assert potential.hyperparameters["avg_neighbors"] == 12


def test_create_cli_prints_one_line_for_a_misspelt_or_mistyped_hyperparameter(tmp_path, capsys):
    base = ["create", "platonic", "--species", "Cu", "--cutoff", "4", "-o", str(tmp_path / "x.safetensors")]
    assert main(base + ["--set", "chanels=4"]) == 2
    assert "(did you mean 'channels'?); accepted: channels, " in one_line_error(capsys)
    assert main(base + ["--set", "channels=4.5"]) == 2
    assert "channels must be an integer, got 4.5" in one_line_error(capsys)
    assert not (tmp_path / "x.safetensors").exists()


def test_every_shipped_config_and_checkpoint_passes_the_checks():
    from mlip import pretrained
    from mlip.checkpoint import load_potential
    from mlip.models import check_hyperparameters, load_model_config
    from mlip.training import TrainConfig

    examples = sorted(glob.glob(str(ROOT / "examples" / "**" / "*.yaml"), recursive=True)
                      + glob.glob(str(ROOT / "benchmarks" / "configs" / "*.yaml")))
    configs = sorted(glob.glob(str(ROOT / "models" / "configs" / "*.yaml")))
    checkpoints = sorted(glob.glob(str(ROOT / "models" / "pretrained" / "*.safetensors")))
    assert examples and configs and checkpoints
    for path in examples:
        TrainConfig.from_yaml(path)
    for path in configs:
        config = load_model_config(path)
        name = config.pop("name")
        check_hyperparameters(name, {k: v for k, v in config.items() if k not in ("species", "cutoff")})
    for path in checkpoints:
        load_potential(path)
    assert set(pretrained.available()) >= {Path(p).stem for p in checkpoints}


# ------------------------------------------------------------------------------ optional extras
def declared_extras() -> set:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return set(tomllib.load(fh)["project"]["optional-dependencies"])


@pytest.fixture()
def crystal(tmp_path):
    path = tmp_path / "cu.extxyz"
    bulk("Cu", "fcc", a=3.6).write(path)
    return str(path)


EMT = ["--model", "ase.calculators.emt:EMT", "--no-relax", "--no-progress"]


@pytest.mark.parametrize("missing, command, message", [
    ("phonopy", ["phonons", "{crystal}", *EMT, "--out-dir", "{tmp}/ph"],
     "phonopy is not installed (needed for phonon calculations): pip install 'mlip-torch[phonons]'"),
    ("phono3py", ["kappa", "{crystal}", *EMT, "--out-dir", "{tmp}/kappa"],
     "phono3py is not installed (needed for thermal conductivity): pip install 'mlip-torch[phonons]'"),
    ("pymatgen", ["discovery", "emt-benchmark", "{tmp}/emt", "-n", "4", "--no-progress"],
     "pymatgen is not installed (needed for the EMT benchmark's convex hull): "
     "pip install 'mlip-torch[discovery]'"),
])
def test_a_missing_extra_is_one_line_naming_it(tmp_path, capsys, monkeypatch, crystal, missing, command,
                                                message):
    for name in list(sys.modules):  # `import X` raises ImportError while sys.modules[X] is None
        if name == missing or name.startswith(missing + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, missing, None)
    argv = [a.format(crystal=crystal, tmp=tmp_path) for a in command]
    assert main(argv) == 2
    assert one_line_error(capsys) == f"mlip: error: {message}"
    extra = message.split("mlip-torch[")[1].split("]")[0]
    assert extra in declared_extras()


def test_require_names_a_broken_install_differently_from_a_missing_one(monkeypatch):
    from mlip.extras import MissingExtraError, require

    assert require("json", "plot") is sys.modules["json"]
    with pytest.raises(MissingExtraError, match=r"^json cannot be imported: .*json\.absent.*"
                                                r": pip install 'mlip-torch\[plot\]'$"):
        require("json.absent", "plot")
    for name in [m for m in sys.modules if m.startswith("matbench_discovery.")]:  # imported by earlier tests
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matbench_discovery", None)
    with pytest.raises(ImportError, match=r"^matbench-discovery is not installed \(needed for x\): "):
        require("matbench_discovery.metrics", "discovery", "x", package="matbench-discovery")
