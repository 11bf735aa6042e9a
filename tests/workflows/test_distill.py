"""``mlip distill`` / :func:`mlip.workflows.distill.distill`: EMT distilled into a student at tiny counts."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import ase.io
import numpy as np
import pytest
import yaml

from mlip.cli import main
from mlip.workflows.distill import distill

ELEMENTS = ["Cu", "Au"]
COUNTS = {"prototype": 10, "random_alloy": 10, "rattled": 10}
#: the cheapest student: the embedded-atom architecture, as a training config of its own
STUDENT = {"model": {"name": "embedded_atom", "species": ["Al"], "cutoff": 5.0}, "batch_size": 8,
           "reference_energies": "isolated_atoms", "optimizer": {"lr": 0.01}}


@pytest.fixture
def student_yaml(tmp_path) -> Path:
    path = tmp_path / "student.yaml"
    path.write_text(yaml.safe_dump(STUDENT))
    return path


def run(out_dir, student, **kwargs):
    lines = []
    args = dict(counts=COUNTS, epochs=1, progress=False, student=student, log=lines.append)
    args.update(kwargs)
    return distill(ELEMENTS, "emt", out_dir, **args), lines


def test_end_to_end_with_emt(tmp_path, student_yaml):
    out = tmp_path / "d"
    result, lines = run(out, student_yaml, epochs=2)
    stages = [line.split(":")[0] for line in lines]
    assert stages == ["structures", "labels", "split", "training", "evaluation"]
    # every stage's file, in the one folder
    files = (result.structures, result.labelled, *result.parts.values(), result.student,
             result.evaluation_path)
    for path in files:
        assert path.parent == out and path.is_file()
    structures = ase.io.read(result.structures, ":")
    assert len(structures) == sum(COUNTS.values()) + len(ELEMENTS)
    # the labels are the teacher's
    from ase.calculators.emt import EMT

    labelled = ase.io.read(result.labelled, ":")
    frame = labelled[5]
    reference = frame.copy()
    reference.calc = EMT()
    assert frame.info["calculator"] == "emt"
    assert np.isclose(frame.info["REF_energy"], reference.get_potential_energy(), atol=1e-8)
    # the split: disjoint, complete, every kind in train, the isolated atoms in train
    parts = {name: ase.io.read(path, ":") for name, path in result.parts.items()}
    ids = [f.info["id"] for part in parts.values() for f in part]
    assert sorted(ids) == sorted(f.info["id"] for f in labelled)
    assert {f.info["config_type"] for f in parts["train"]} == {"isolated_atom", *COUNTS}
    assert all(f.info["config_type"] != "isolated_atom" for f in parts["test"] + parts["valid"])
    # the student: the given architecture for the distilled elements, with the repulsion term
    from mlip import MLIPCalculator, load_potential

    potential = load_potential(result.student)
    assert potential.architecture == "embedded_atom"
    assert sorted(potential.species) == sorted(ELEMENTS)
    assert potential.repulsion is not None
    # the evaluation is the student's error against the teacher's test labels
    evaluation = json.loads(result.evaluation_path.read_text())
    assert evaluation == result.evaluation
    assert evaluation["n_test"] == len(parts["test"]) > 0
    calc = MLIPCalculator(potential, dtype="float64")
    errors = []
    for atoms in parts["test"]:
        copy = atoms.copy()
        copy.calc = calc
        errors.append(abs(copy.get_potential_energy() - atoms.info["REF_energy"]) / len(atoms))
    assert math.isclose(evaluation["energy_mae_meV_per_atom"], 1e3 * np.mean(errors), rel_tol=1e-6)
    kinds = Counter(f.info["config_type"] for f in parts["test"])
    assert {k: v["n"] for k, v in evaluation["per_config_type"].items()} == dict(kinds)
    for key in ("forces_mae_meV_per_A", "stress_mae_meV_per_A3"):
        assert math.isfinite(evaluation[key])


def test_every_stage_resumes(tmp_path, student_yaml):
    out = tmp_path / "d"
    first, _ = run(out, student_yaml)
    structures_mtime = first.structures.stat().st_mtime_ns
    # a labelling killed part-way: two results lost
    results = sorted((out / "labels" / "results").rglob("*.json"))
    for path in results[:2]:
        path.unlink()
    second, lines = run(out, student_yaml, epochs=2)
    assert first.structures.stat().st_mtime_ns == structures_mtime
    assert "reused" in lines[0]
    assert "(2 computed," in lines[1]
    history = json.loads((out / "training" / "metrics.json").read_text())
    assert [h["epoch"] for h in history] == [1, 2]  # epoch 1 kept, epoch 2 added
    changes = json.loads((out / "training" / "config_changes.json").read_text())
    assert changes["resumes"][0]["changes"] == {"epochs": [1, 2]}
    assert second.evaluation["n_test"] == first.evaluation["n_test"]


@pytest.mark.parametrize("change, key", [
    ({"seed": 1}, "seed"),
    ({"counts": {**COUNTS, "rattled": 11}}, "counts.rattled"),
    ({"fractions": (0.7, 0.1, 0.2)}, "fractions"),
    ({"student": "embedded-atom-emt"}, "student"),
])
def test_a_changed_setting_is_refused(tmp_path, student_yaml, change, key):
    out = tmp_path / "d"
    run(out, student_yaml)
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match=rf"was made with {key} = .*use the same {key} to resume"):
        run(out, **{"student": student_yaml, **change})
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == before


def test_a_time_budget_sets_the_epochs(tmp_path, student_yaml):
    out = tmp_path / "d"
    result, lines = run(out, student_yaml, epochs=None, minutes=0.02)
    history = json.loads((out / "training" / "metrics.json").read_text())
    fitted = max(1, math.floor(0.02 / history[0]["minutes"]))
    config = json.loads((out / "training" / "config.json").read_text())
    assert config["epochs"] == fitted and config["max_minutes"] == 0.02
    assert any(f"{fitted} epochs fit in 0.02 min" in line for line in lines) or fitted == 1


def test_shipped_student_takes_the_shipped_architecture(tmp_path):
    from mlip.pretrained import load
    from mlip.workflows.distill import STUDENT_LOSS, student_config

    config = student_config("equiformer_v3-emt", ["Si", "Ge"])
    shipped = load("equiformer_v3-emt").metadata["training"]["config"]["model"]
    assert config["model"] == {**shipped, "species": ["Si", "Ge"]}
    assert config["loss"] == STUDENT_LOSS and "init_from" not in config


def test_three_elements_give_binary_and_ternary_alloys():
    from mlip.data.structures import generate_structures

    frames = generate_structures(["Cu", "Ag", "Au"], {"random_alloy": 30}, progress=False)
    mixtures = Counter(len(set(f.symbols)) for f in frames if f.info["config_type"] == "random_alloy")
    assert mixtures[2] > 0 and mixtures[3] > 0
    pairs = {tuple(sorted(set(f.symbols))) for f in frames if len(set(f.symbols)) == 2}
    assert pairs == {("Ag", "Au"), ("Ag", "Cu"), ("Au", "Cu")}


def test_cli(tmp_path, student_yaml, capsys):
    out = tmp_path / "d"
    argv = ["distill", *ELEMENTS, "--teacher", "emt", "--out-dir", str(out), "--student", str(student_yaml),
            "--epochs", "1", "--no-progress"]
    argv += [a for k, n in COUNTS.items() for a in ("--count", f"{k}={n}")]
    assert main(argv) == 0
    stdout = capsys.readouterr().out.splitlines()
    stages = [line.split(":")[0] for line in stdout if not line.startswith("epoch ")]
    assert stages == ["structures", "labels", "split", "training", "evaluation", "student"]
    assert (out / "student.safetensors").is_file()
    # the student drives MD through the calculator
    cif = tmp_path / "cu.cif"
    from ase.build import bulk

    ase.io.write(cif, bulk("Cu", "fcc", a=3.6, cubic=True))
    assert main(["md", str(cif), "--model", str(out / "student.safetensors"), "--steps", "3",
                 "--out-dir", str(tmp_path / "md"), "--no-progress"]) == 0
    capsys.readouterr()
    # a changed setting: one line, status 2
    assert main(argv[:-2] + ["--count", "rattled=3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mlip: error: out_dir") and "counts.rattled" in err[0]


@pytest.mark.parametrize("kwargs, message", [
    ({"teacher": "nosuch"}, "unknown calculator 'nosuch'"),
    ({"elements": ["Cu", "Xx"]}, "unknown element"),
    ({"student": "nosuch-model"}, "unknown student 'nosuch-model'"),
    ({"student": "platonic-untrained"}, "unknown student 'platonic-untrained'"),
    ({"counts": {"prototype": 3}}, "the test part would be empty"),
    ({"epochs": 0}, "epochs must be >= 1"),
    ({"fractions": (0.5, 0.1, 0.1)}, "fractions must sum to 1"),
    ({"settings": {"x": 1}}, "the emt calculator takes no settings"),
])
def test_bad_input_is_refused_before_anything_is_written(tmp_path, student_yaml, kwargs, message):
    args = dict(elements=ELEMENTS, teacher="emt", counts=COUNTS, student=student_yaml, progress=False,
                log=lambda line: None)
    args.update(kwargs)
    out = tmp_path / "d"
    with pytest.raises(ValueError, match=message):
        distill(args.pop("elements"), args.pop("teacher"), out, **args)
    assert not out.exists()


def test_a_folder_that_is_not_a_distillation_is_refused(tmp_path, student_yaml):
    out = tmp_path / "d"
    out.mkdir()
    (out / "structures.xyz").write_text("mine")
    with pytest.raises(ValueError, match="not a distillation folder"):
        run(out, student_yaml)
    assert (out / "structures.xyz").read_text() == "mine"
