"""mlip.workflows.model_card and ``mlip card``: what a model card measures, quotes and renders.

The card of a transformer with an embedded-atom term states how much its network adds to the term
(mean absolute change of the energies and forces when the network's final readout is zeroed). The
measurement must be exactly zero for a network whose readout is zero, positive otherwise, and absent
for a model that is nothing but the term. The shipped cards are this package's output: rendering a card's
JSON gives its Markdown, and ``mlip card`` writes both from a training run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

import mlip.models
from mlip.checkpoint import save_potential
from mlip.data.emt import generate_emt_dataset
from mlip.pretrained import EMT_ELEMENTS
from mlip.workflows.model_card import format_model_card
from mlip.workflows.model_card import markdown, measure, quotes, targets

from mlip.testing import build_potential

#: the shipped cards whose Markdown is exactly the rendering of their JSON (the EMT cards' have a section
#: added by hand since: their short-range term)
RENDERED = ["equiformer_v3-chgnet", "equiformer_v3-sige", "platonic-sige"]
REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def samples():
    return generate_emt_dataset(4, seed=3, progress=False)


@pytest.mark.parametrize("arch", ["equiformer-v3-gate-sepnorm", "platonic-density-reach"])
def test_network_share_is_zero_exactly_when_its_readout_is(samples, tmp_path, arch):
    potential = build_potential(arch, species=EMT_ELEMENTS)
    share = measure.embedded_atom_share(save_potential(potential, tmp_path / "random.safetensors"), samples)
    assert share["n_structures"] == len(samples)
    assert share["network_energy_meV_per_atom_mean_abs"] > 1e-3
    assert share["network_forces_meV_per_A_mean_abs"] > 1e-3
    with torch.no_grad():
        for param in potential.model.final_readout().parameters():
            param.zero_()
    path = save_potential(potential, tmp_path / "term-only.safetensors")
    share = measure.embedded_atom_share(path, samples)
    assert share["network_energy_meV_per_atom_mean_abs"] == 0.0
    assert share["network_forces_meV_per_A_mean_abs"] == 0.0
    whole = measure.errors(potential, samples)
    for key, value in share["term_alone"].items():
        assert value == pytest.approx(whole[key], rel=1e-12, abs=1e-12), key


def test_no_share_for_a_model_without_a_network_or_a_term(samples, tmp_path):
    for arch in ("embedded-atom", "platonic-softmax"):
        path = save_potential(build_potential(arch, species=EMT_ELEMENTS), tmp_path / f"{arch}.safetensors")
        assert measure.embedded_atom_share(path, samples) is None


def test_a_students_card_quotes_its_student_vs_teacher_report(tmp_path):
    """A distilled student's card takes κ, cost, the errors against DFT and the miniature discovery from
    ``student_vs_teacher.json`` as that script writes them, and shows each in its section."""
    errors = {"energy_mae_meV_per_atom": 404.25, "forces_mae_meV_per_A": 638.5, "stress_mae_meV_per_A3": 56.6}
    report = {"stages": {
        "kappa": {"mean_srme": 1.69, "compounds": {
            "NaCl": {"kappa_model": 2.02, "kappa_reference": 1.17, "srme": 1.07},
            "Si": {"kappa_model": None, "kappa_reference": 3.6, "srme": 2.0}}},
        "cost": {"threads": 2,
                 "cells": {"Si-64": {"student_s": 0.05, "teacher_s": 0.2, "teacher_over_student": 4.0}}},
        "dft": {"files": {"sige.xyz": {"n": 80, "student": {"overall": errors},
                                       "teacher": {"overall": dict(errors, forces_mae_meV_per_A=374.0)}}}},
        "discovery": {"n_materials": 40, "RMSD": 0.05, "benchmark": {"systems": ["Na-Cl", "Si-Ge"]},
                      "metrics": {"F1": 0.154, "MAE": 0.333}},
    }}
    path = tmp_path / "student_vs_teacher.json"
    path.write_text(json.dumps(report))
    teacher, discovery = quotes.quote_student_vs_teacher(path, "python svt.py", "CHGNet 0.3.0")
    assert discovery["metrics"]["F1"] == 0.154 and discovery["n_materials"] == 40
    assert discovery["rmsd_A"] == 0.05
    assert teacher["dft"]["errors"]["CHGNet 0.3.0"]["forces_mae_meV_per_A"] == 374.0
    text = "\n".join(markdown.teacher_section(teacher))
    assert "| NaCl | 2.02 | 1.17 | 1.07 |" in text and "| Si | — | 3.6 | 2.00 |" in text
    assert "Mean κ_SRME 1.69." in text
    assert "| Si-64 | 50.0 | 200.0 | 4.0 |" in text
    assert "| student | 404.2 | 638.5 | 56.6 |" in text and "| CHGNet 0.3.0 | 404.2 | 374.0 | 56.6 |" in text
    assert markdown.teacher_section(None) == []


def test_a_card_sample_file_is_read_from_the_repository(samples, tmp_path):
    from ase.io import write

    from mlip.training.samples import atoms_of

    write(tmp_path / "sample.xyz", [atoms_of(s) for s in samples])
    read_back = measure.card_sample_of({"card_sample": {"file": "sample.xyz"}}, tmp_path)
    assert len(read_back) == len(samples)
    potential = build_potential("embedded-atom", species=EMT_ELEMENTS)
    ours, theirs = measure.errors(potential, read_back), measure.errors(potential, samples)
    for key in ("energy_mae_meV_per_atom", "forces_mae_meV_per_A", "stress_mae_meV_per_A3"):
        assert ours[key] == pytest.approx(theirs[key], rel=1e-9), key  # the labels came back


def _dft_report(tmp_path):
    si = {"a_A": 5.5, "B_GPa": 80.0}
    literature = {"kappa_300K_W_per_mK": {"Si": [130.0, 150.0], "source": "ref X"}}
    report = {"reference": "gpaw", "literature": literature,
              "methods": {"gpaw": {"properties": {"lattice": {"Si": {"a_A": 5.477, "B_GPa": 88.9}},
                                                  "elastic": {"Si": {"C11_GPa": 150.0}}}},
                          "mine": {"properties": {"lattice": {"Si": si},
                                                  "elastic": {"Si": {"C11_GPa": 140.0}},
                                                  "vacancy": {"Si": {"formation_energy_relaxed_eV": 3.4}},
                                                  "kappa": {"Si": {"kappa_300K_W_per_mK": 120.0}}}},
                          "other": {"properties": {}}},
              "differences": {"mine": {"phonon_frequency_mae_THz": {"Ge": 0.5, "Si": 0.2}}}}
    path = tmp_path / "dft_validation.json"
    path.write_text(json.dumps(report))
    return path


def test_a_card_quotes_the_dft_validation_with_its_targets(tmp_path):
    """--dft-validation: each property the model has, beside the reference's, with the issue's targets
    (lattice constant within 0.5 %, bulk modulus within 5 %, Si phonons ≤ 0.3 THz) judged; a property
    the reference lacks has no difference; the method must be named when the report has several."""
    path = _dft_report(tmp_path)
    with pytest.raises(ValueError, match="--dft-validation-method"):
        quotes.quote_dft_validation(path, None, "cmd")
    with pytest.raises(ValueError, match="no method 'absent'"):
        quotes.quote_dft_validation(path, "absent", "cmd")
    entry = quotes.quote_dft_validation(path, "mine", "python dv.py")
    assert [r["key"] for r in entry["properties"]] == [
        "lattice.Si.a_A", "lattice.Si.B_GPa", "elastic.Si.C11_GPa", "vacancy.Si.formation_energy_relaxed_eV",
        "kappa.Si.kappa_300K_W_per_mK"]
    text = "\n".join(markdown.dft_section(entry))
    assert "| Si lattice constant (Å) | 5.5 | 5.477 | +0.4 % | within 0.5 % | yes |" in text
    assert "| Si bulk modulus (GPa) | 80 | 88.9 | -10.0 % | within 5 % | no |" in text
    assert "| Si C11 (GPa) | 140 | 150 | -6.7 % | — | — |" in text
    assert "| Si vacancy formation energy (relaxed) (eV) | 3.4 | — | — | — | — |" in text
    assert "| Si κ(300 K) (W/(m·K)) | 120 | 130–150 (published PBE) | — | — | — |" in text and "ref X" in text
    assert "| Si phonon frequency MAE over the band path (THz) | 0.2 | — | — | ≤ 0.3 THz | yes |" in text
    assert text.index("Si phonon") < text.index("Ge phonon") and "`python dv.py`" in text
    assert markdown.dft_section(None) == []


def _targets_file(tmp_path, **changes) -> Path:
    spec = {"source": "issue X", "test": {"energy": 3, "forces": 50},
            "near_equilibrium": {"config_types": ["prototype", "strained"], "forces": 20},
            "properties": {"lattice.Si.a_A": {"percent": 0.2}, "lattice.Ge.a_A": {"percent": 0.2},
                           "vacancy.Si.formation_energy_relaxed_eV": {"absolute": 0.1},
                           "elastic.Si.C11_GPa": {"percent": 8}},
            "phonon_frequency_mae_THz": {"Si": 0.12, "Ge": 0.6}, "kappa_percent_of_published": 20,
            "note": "stress has no target here"}
    spec.update(changes)
    path = tmp_path / "targets.json"
    path.write_text(json.dumps(spec))
    return path


def test_a_targets_file_judges_every_target_and_opens_the_card_with_them(tmp_path):
    """--targets-file: its property targets replace the defaults (relative, absolute, κ within a percent
    of the published range, phonons per element); foundation models of the same report sit beside the
    model; the card's Targets section lists every target met, missed or not measured, with the counts."""
    report = json.loads(_dft_report(tmp_path).read_text())
    report["methods"]["gpaw"]["properties"]["vacancy"] = {"Si": {"formation_energy_relaxed_eV": 3.55}}
    report["methods"]["other"]["properties"] = {"lattice": {"Si": {"a_A": 5.6}}}
    report["differences"]["other"] = {"phonon_frequency_mae_THz": {"Si": 1.5}}
    path = tmp_path / "dft_validation.json"
    path.write_text(json.dumps(report))
    spec = targets.read_targets(_targets_file(tmp_path))
    with pytest.raises(ValueError, match="no method 'absent'"):
        quotes.quote_dft_validation(path, "mine", "cmd", spec, beside=["absent"])
    entry = quotes.quote_dft_validation(path, "mine", "python dv.py", spec, beside=["other"])
    text = "\n".join(markdown.dft_section(entry))
    assert "| property | model | other | gpaw | difference | target | met |" in text
    assert "| Si lattice constant (Å) | 5.5 | 5.6 | 5.477 | +0.4 % | within 0.2 % | no |" in text
    assert "| Si bulk modulus (GPa) | 80 | — | 88.9 | -10.0 % | — | — |" in text  # no target in the file
    assert "| Si C11 (GPa) | 140 | — | 150 | -6.7 % | within 8 % | yes |" in text
    assert ("| Si vacancy formation energy (relaxed) (eV) | 3.4 | — | 3.55 | -4.2 % | within 0.1 eV | no |"
            in text)
    assert ("| Si κ(300 K) (W/(m·K)) | 120 | — | 130–150 (published PBE) | — | within 20 % of the published "
            "range | yes |") in text  # 120 ≥ 0.8 × 130
    assert "| Si phonon frequency MAE over the band path (THz) | 0.2 | 1.5 | — | — | ≤ 0.12 THz | no |" in text
    assert "| Ge phonon frequency MAE over the band path (THz) | 0.5 | — | — | — | ≤ 0.6 THz | yes |" in text

    card = _shipped_card()
    card["test"]["metrics"].update(energy_mae_meV_per_atom=2.5, forces_mae_meV_per_A=60.0)
    card["test"]["near_equilibrium"] = {"config_types": ["prototype", "strained"], "n": 7,
                                        "metrics": {"forces_mae_meV_per_A": 12.0}}
    card.update(targets_file=spec, dft_validation=entry)
    text = format_model_card(card)
    section = text[text.index("## Targets"):]
    section = section[: section.index("\n## ", 1)]
    flat = " ".join(section.split())
    assert "The targets of issue X: 5 met, 4 missed, 2 not measured, of 11." in flat
    assert "stress has no target here." in flat
    assert "| test energy MAE ≤ 3 meV/atom | 2.5 meV/atom | yes |" in section
    assert "| test forces MAE ≤ 50 meV/Å | 60 meV/Å | no |" in section
    assert ("| test force MAE, near equilibrium (prototype, strained; 7 structures) ≤ 20 meV/Å | 12 meV/Å | "
            "yes |") in section
    assert "| Si lattice constant within 0.2 % | 5.5 Å (DFT 5.477) | no |" in section
    assert "| Ge lattice constant within 0.2 % | not measured | — |" in section
    assert ("| Si κ(300 K) within 20 % of the published range | 120 W/(m·K) (published 130–150) | yes |"
            in section)
    assert "| Ge phonon frequency MAE over the band path ≤ 0.6 THz | 0.5 THz | yes |" in section
    assert text.index("## Test errors") < text.index("## Targets") < text.index("Rotations (float64")
    assert "## Targets" not in format_model_card(_shipped_card())


@pytest.mark.parametrize("change, message", [
    ({"source": None}, "an object with a 'source'"),
    ({"tests": {}}, "unknown part(s) tests"),
    ({"test": {"virial": 1}}, "test targets are energy, forces, stress"),
    ({"test": {"energy": -1}}, "test.energy is -1, not a number ≥ 0"),
    ({"near_equilibrium": {"forces": 20}}, "near_equilibrium needs config_types"),
    ({"properties": {"lattice.Si.c_A": {"percent": 1}}}, "property 'lattice.Si.c_A' is not one a card quotes"),
    ({"properties": {"lattice.Si.a_A": {"relative": 1}}}, "one of {\"percent\": x} or {\"absolute\": x}"),
    ({"properties": {"kappa.Si.kappa_300K_W_per_mK": {"percent": 1}}}, "kappa_percent_of_published"),
])
def test_a_bad_targets_file_is_refused_in_one_line_before_anything_is_measured(tmp_path, capsys, change,
                                                                               message):
    from ase.io import write

    from mlip.training.samples import atoms_of

    run = _run_folder(tmp_path / "run", 1.0)
    write(tmp_path / "test.xyz", [atoms_of(s) for s in generate_emt_dataset(1, seed=5, progress=False)])
    path = _targets_file(tmp_path, **change)
    code, _, err = _card(capsys, run, "--name", "eam", "--test", tmp_path / "test.xyz", "--train-command",
                         "one", "--out", tmp_path / "cards", "--targets-file", path)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("mlip: error: "), err
    assert str(path) in lines[0] and message in lines[0], err
    assert not (tmp_path / "cards").exists() or not any((tmp_path / "cards").iterdir())
    code, _, err = _card(capsys, run, "--name", "eam", "--test", tmp_path / "test.xyz", "--train-command",
                         "one", "--out", tmp_path / "cards", "--targets-file", path, "--targets", "1", "2", "3")
    assert code == 2 and "give the test targets in one place" in err


def test_the_issue_55_targets_files_are_valid():
    """The v2 recipes' targets (issue 55's table) read, every property one a card quotes."""
    for model in ("equiformer_v3-sige", "platonic-sige"):
        spec = targets.read_targets(REPOSITORY / "examples" / "recipes" / model / "v2" / "targets.json")
        assert len(spec["properties"]) == 10 and set(spec["phonon_frequency_mae_THz"]) == {"Si", "Ge"}


def test_a_card_quotes_the_mace_baseline_row_of_its_model(tmp_path):
    """--mace-baseline: this model's row and MACE's, errors and ms per MD step of every timed cell."""
    def row(name, e, ms):
        return {"model": name, "n_parameters": 1000, "test": {"energy_mae_meV_per_atom": e,
                                                             "forces_mae_meV_per_A": 2 * e,
                                                             "stress_mae_meV_per_A3": e / 2},
                "md": {"216": {"ms_per_step": ms}, "512": {"ms_per_step": 3 * ms}}, "threads": 1}

    mace = row("MACE", 10.0, 100.0)
    mace["training"] = {"epochs_equivalent": 12.5}
    path = tmp_path / "mace_baseline.json"
    rows = [mace, row("run/best.safetensors", 5.0, 50.0)]
    path.write_text(json.dumps({"minutes": 60, "n_test": 100, "models": rows}))
    with pytest.raises(ValueError, match="no row 'x'"):
        quotes.quote_mace_baseline(path, "x", "cmd")
    entry = quotes.quote_mace_baseline(path, "run/best.safetensors", "cmd")
    text = "\n".join(markdown.mace_section(entry))
    assert "for 60 min (12.5 epochs)" in text and "ms/step, 216 atoms | ms/step, 512 atoms |" in text
    assert "| this model | 1,000 | 5.00 | 10.0 | 2.50 | 50.0 | 150.0 |" in text
    assert "| MACE | 1,000 | 10.0 | 20.0 | 5.00 | 100.0 | 300.0 |" in text


def test_the_si_ge_speed_cells_are_the_mace_baselines():
    cells = measure.speed_structures("si-ge")
    assert list(cells) == ["diamond Si, 216 atoms", "Si-Ge solid solution, 512 atoms"]
    assert set(cells["Si-Ge solid solution, 512 atoms"].get_chemical_symbols()) == {"Si", "Ge"}


@pytest.mark.parametrize("name", RENDERED)
def test_a_shipped_card_is_the_rendering_of_its_numbers(name):
    cards = Path(mlip.models.__file__).parent / "pretrained"
    data = json.loads((cards / f"{name}.json").read_text(encoding="utf-8"))
    assert format_model_card(data) == (cards / f"{name}.md").read_text(encoding="utf-8")


def _run_folder(path: Path, minutes: float) -> Path:
    """A training run's folder as ``mlip train`` leaves it: the shipped embedded-atom model's weights
    (whose header holds its training config and validation errors) and a two-epoch history."""
    path.mkdir()
    shutil.copyfile(Path(mlip.models.__file__).parent / "pretrained" / "embedded-atom-emt.safetensors",
                    path / "best.safetensors")
    (path / "metrics.json").write_text(json.dumps([{"minutes": minutes / 2}, {"minutes": minutes}]))
    return path


def _card(capsys, *argv):
    from mlip.cli import main

    code = main(["card", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_mlip_card_writes_the_card_of_a_training_run(tmp_path, capsys, monkeypatch):
    """``mlip card`` ships the run's weights, measures them and writes NAME.json and NAME.md, the Markdown
    being the rendering of the JSON, with the error budget it is given and the learning curve over every
    stage, plotted beside them; it refuses to replace them without --overwrite."""
    from ase.io import write

    from mlip.data import read_dataset
    from mlip.training.samples import atoms_of

    monkeypatch.chdir(tmp_path)
    first, last = _run_folder(tmp_path / "stage1", 1.0), _run_folder(tmp_path / "stage2", 3.0)
    write(tmp_path / "test.xyz", [atoms_of(s) for s in generate_emt_dataset(3, seed=5, progress=False)])
    argv = [last, "--name", "eam", "--test", "test.xyz", "--earlier-stages", first, "--train-command",
            "one", "--train-command", "two", "--sample-n", 3, "--targets", "3", "-", "1", "--out", "cards",
            "--label-noise", _noise_record(tmp_path), "--label-floor", _floor_record(tmp_path),
            "--label-floor-command", "python study.py"]
    code, out, err = _card(capsys, *argv)
    assert code == 0, err
    data = json.loads((tmp_path / "cards" / "eam.json").read_text())
    assert json.loads(out) == {"name": "eam", "n_parameters": data["n_parameters"],
                               "test": data["test"]["metrics"]}
    assert (tmp_path / "cards" / "eam.md").read_text(encoding="utf-8") == format_model_card(data)
    assert (tmp_path / "cards" / "eam.safetensors").read_bytes() == (last / "best.safetensors").read_bytes()
    assert data["test"]["n_structures"] == 3 and data["card_sample"]["n"] == 3
    assert data["targets"] == {"energy": 3.0, "forces": None, "stress": 1.0}
    assert data["train_command"] == "one\ntwo" and data["training"]["minutes"] == 4.0
    assert [st["run_dir"] for st in data["training"]["stages"]] == ["stage1", "stage2"]
    assert set(data["error_budget"]) == {"label_noise", "label_floor"}
    assert data["error_budget"]["label_floor"]["command"] == "python study.py"
    assert data["learning_curve"]["minutes"] == [0.5, 1.0, 2.5, 4.0]
    assert data["learning_curve"]["plot"] == "eam-learning-curve.png"
    assert (tmp_path / "cards" / "eam-learning-curve.png").read_bytes()[:4] == b"\x89PNG"
    assert set(data["speed"]["md_atom_steps_per_s"]) == set(measure.speed_structures("cu-au"))
    before = (tmp_path / "cards" / "eam.json").read_bytes()
    code, _, err = _card(capsys, *argv)
    assert code == 2 and err.startswith("mlip: error:") and "--overwrite" in err and "eam" in err
    assert (tmp_path / "cards" / "eam.json").read_bytes() == before

    kinds = sorted({s.atoms.info["config_type"] for s in read_dataset(tmp_path / "test.xyz")})[:1]
    spec = {"source": "a test", "test": {"forces": 1000},
            "near_equilibrium": {"config_types": kinds, "forces": 1000}}
    (tmp_path / "targets.json").write_text(json.dumps(spec))
    code, _, err = _card(capsys, *argv[:argv.index("--targets")], *argv[argv.index("--targets") + 4:],
                         "--targets-file", "targets.json", "--overwrite")
    assert code == 0, err
    data = json.loads((tmp_path / "cards" / "eam.json").read_text())
    assert data["targets"] == {"energy": None, "forces": 1000.0, "stress": None}
    near = data["test"]["near_equilibrium"]
    assert near["config_types"] == kinds and 1 <= near["n"] <= 3 and near["metrics"]["forces_mae_meV_per_A"] > 0
    text = (tmp_path / "cards" / "eam.md").read_text(encoding="utf-8")
    assert text == format_model_card(data) and "The targets of a test: 2 met, 0 missed" in text


@pytest.mark.slow
def test_mlip_card_weights_last_ships_the_runs_last_weights_and_says_so(tmp_path, capsys, monkeypatch):
    """--weights last ships last.safetensors (the run's decayed weights) instead of the best epoch's; the
    card keeps the best epoch by validation loss beside the shipped one and names the schedule it ran."""
    from ase.io import write

    from mlip.checkpoint import read_header, write_with_header
    from mlip.training.samples import atoms_of

    monkeypatch.chdir(tmp_path)
    run = _run_folder(tmp_path / "run", 2.0)
    header = read_header(run / "best.safetensors")
    header["metadata"]["epoch"] = 2
    header["metadata"]["training"]["config"]["optimizer"].update(
        schedule="wsd", warmup_epochs=3, decay_fraction=0.2)
    write_with_header(run / "best.safetensors", run / "last.safetensors", header)
    write(tmp_path / "test.xyz", [atoms_of(s) for s in generate_emt_dataset(2, seed=5, progress=False)])
    argv = [run, "--name", "eam", "--test", "test.xyz", "--train-command", "one", "--sample-n", 2,
            "--out", "cards", "--weights", "last"]
    code, _, err = _card(capsys, *argv)
    assert code == 0, err
    data = json.loads((tmp_path / "cards" / "eam.json").read_text())
    assert (tmp_path / "cards" / "eam.safetensors").read_bytes() != (run / "best.safetensors").read_bytes()
    assert read_header(tmp_path / "cards" / "eam.safetensors")["metadata"]["epoch"] == 2
    training = data["training"]
    assert (training["shipped_weights"], training["shipped_epoch"], training["best_epoch"]) == ("last", 2, 4)
    text = (tmp_path / "cards" / "eam.md").read_text(encoding="utf-8")
    assert text == format_model_card(data)
    assert "Shipped: the last, decayed weights (epoch 2); best epoch by validation loss: 4." in text
    assert "constant until the plateau rule fires" in text
    (run / "last.safetensors").unlink()
    code, _, err = _card(capsys, *argv, "--overwrite")
    assert code == 2 and "no last.safetensors" in err


@pytest.mark.parametrize("extra, message", [
    (["--train-command", "two"], "1 stage(s) but 2 training command(s)"),
    (["--reference", "GPAW PBE"], "states its domain"),
    (["--targets", "3", "x", "3"], "--targets: 'x' is neither a number nor '-'"),
    (["--orientation", "generic"], "orientation: the embedded_atom model has no orientation"),
])
def test_mlip_card_refuses_an_incomplete_card_before_measuring(tmp_path, capsys, extra, message):
    """Settings that cannot make a card are refused in one line (status 2) before anything is measured
    or written."""
    from ase.io import write

    from mlip.training.samples import atoms_of

    run = _run_folder(tmp_path / "run", 1.0)
    write(tmp_path / "test.xyz", [atoms_of(s) for s in generate_emt_dataset(1, seed=5, progress=False)])
    code, _, err = _card(capsys, run, "--name", "eam", "--test", tmp_path / "test.xyz", "--train-command",
                         "one", "--out", tmp_path / "cards", *extra)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("mlip: error: ") and message in lines[0], err
    assert not (tmp_path / "cards").exists() or not any((tmp_path / "cards").iterdir())


def test_mlip_card_needs_a_run_folder_and_a_test_file(tmp_path, capsys):
    code, _, err = _card(capsys, tmp_path / "absent", "--name", "x", "--test", "t.xyz",
                         "--train-command", "c")
    assert code == 2 and "run folder" in err and "absent" in err
    run = tmp_path / "run"
    run.mkdir()
    code, _, err = _card(capsys, run, "--name", "x", "--test", "t.xyz", "--train-command", "c",
                         "--out", tmp_path / "cards")
    assert code == 2 and "no best.safetensors" in err
    run = _run_folder(tmp_path / "run2", 1.0)
    code, _, err = _card(capsys, run, "--name", "x", "--test", tmp_path / "t.xyz", "--train-command", "c",
                         "--out", tmp_path / "cards")
    assert code == 2 and "test file" in err and "does not exist" in err


def test_remeasuring_the_speed_rewrites_only_the_speed_of_a_shipped_card(tmp_path):
    """``remeasure_speed`` gives the card new MD-step speeds on its own cells and rewrites its Speed
    section; every other number of the JSON and every other line of the Markdown stay as they were."""
    from mlip.workflows.model_card.make import remeasure_speed

    cards = Path(mlip.models.__file__).parent / "pretrained"
    name = "embedded-atom-emt"
    for suffix in (".json", ".md", ".safetensors"):
        shutil.copyfile(cards / f"{name}{suffix}", tmp_path / f"{name}{suffix}")
    before = json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8"))
    old_md = (tmp_path / f"{name}.md").read_text(encoding="utf-8")
    speed = remeasure_speed(tmp_path, name, repeats=2)
    after = json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8"))
    unchanged = [k for k in before if k != "speed"]
    assert list(after) == list(before) and all(after[k] == before[k] for k in unchanged)
    assert after["speed"] == speed and list(speed["md_atom_steps_per_s"]) == list(measure.speed_structures())
    assert all(rate > 0 for rate in speed["md_atom_steps_per_s"].values())
    assert speed["md_atom_steps_per_s"] != before["speed"]["md_atom_steps_per_s"]
    new_md = (tmp_path / f"{name}.md").read_text(encoding="utf-8")
    old_section, new_section = ("\n".join(markdown.speed_section(d)) for d in (before, after))
    assert old_section in old_md and new_md == old_md.replace(old_section, new_section)
    assert f"- MD step measured {speed['measured']}." in new_md


def test_a_card_with_a_compiled_speed_states_both():
    data = json.loads((Path(mlip.models.__file__).parent / "pretrained" / "platonic-sige.json").read_text())
    data["speed"]["compiled_md_atom_steps_per_s"] = {"diamond Si, 216 atoms": 2160.0}
    lines = markdown.speed_section(data)
    compiled = [line for line in lines if "compiled" in line]
    assert len(compiled) == 1 and compiled[0].startswith("- diamond Si, 216 atoms: ")
    assert compiled[0].endswith(
        "; compiled (`MLIPCalculator(compile=True)`) 2,160 atom·steps/s (100.0 ms/step)")


def test_remeasuring_refuses_a_card_whose_speed_section_was_edited(tmp_path):
    from mlip.workflows.model_card.make import remeasure_speed

    cards = Path(mlip.models.__file__).parent / "pretrained"
    name = "embedded-atom-emt"
    shutil.copyfile(cards / f"{name}.json", tmp_path / f"{name}.json")
    text = (cards / f"{name}.md").read_text(encoding="utf-8").replace("atom·steps/s", "atom steps/s")
    (tmp_path / f"{name}.md").write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="Speed section is not the rendering"):
        remeasure_speed(tmp_path, name)


def _noise_record(tmp_path) -> Path:
    """A label-noise record as ``noise.py --json`` writes it: two kinds, the surface without a stress."""
    def kind(n, std, worst, forces, stress):
        return {"n": n, "energy_std_meV_per_atom": std, "energy_max_meV_per_atom": worst,
                "forces_mae_meV_per_A": forces, "stress_mae_GPa": stress}

    path = tmp_path / "noise.json"
    path.write_text(json.dumps({"command": "python noise.py --json noise.json", "n_compared": 3,
                                "kinds": {"crystal": kind(2, 35.8, 37.0, 16.04, 0.672),
                                          "surface": kind(1, 2.28, 5.16, 50.02, None)}, "rows": []}))
    return path


def _floor_record(tmp_path, chosen="g8") -> Path:
    """A k-point study as ``kpoint_convergence.py report`` writes it: the reference g8 checked against g10
    on two structures; the chosen rule's worst errors per kind against the reference."""
    rules = {name: {"density": density, "gamma_centred": True, "even": False}
             for name, density in (("g2.5", 2.5), ("g8", 8.0), ("g10", 10.0))}
    rows = [{"structure": "a", "config_type": "crystal", "dE_meV_per_atom": -0.453,
             "force_mae_meV_per_A": 1e-6,
             "force_max_meV_per_A": 2e-6, "stress_mae_GPa": 0.0202},
            {"structure": "b", "config_type": "surface", "dE_meV_per_atom": 0.1, "force_mae_meV_per_A": 0.7,
             "force_max_meV_per_A": 1.0, "stress_mae_GPa": None}]
    worst = {"crystal": {"n": 1, "energy_meV_per_atom": 18.3, "forces_meV_per_A": 0.0, "stress_GPa": 0.75}}
    path = tmp_path / "study.json"
    denser = {"rule": "g10", **rules.pop("g10"), "rows": rows}  # described in its check, not among the rules
    path.write_text(json.dumps({"reference": "g8", "rules": rules, "chosen": chosen,
                                "reference_against_denser": denser,
                                "policies": [{"policy": "g2.5", "kinds": worst}]}))
    return path


def _shipped_card(name="equiformer_v3-sige") -> dict:
    """A shipped card without the sections these tests add themselves (targets, error budget)."""
    card = json.loads((Path(mlip.models.__file__).parent / "pretrained" / f"{name}.json").read_text())
    for key in ("targets", "targets_file", "error_budget"):
        card.pop(key, None)
    return card


def test_the_error_budget_sets_the_test_errors_beside_the_label_noise_and_floor(tmp_path):
    """--label-noise and --label-floor: one row per kind of structure, the model's test errors beside v1's
    label noise of that kind (— where a kind has no comparison or no stress), and the k-point rule's
    residual against a denser mesh, worst over the structures checked; each record's command."""
    data = _shipped_card()
    data["test"]["by_config_type"] = {
        "crystal": {"n": 15, "energy_mae_meV_per_atom": 37.5, "forces_mae_meV_per_A": 15.8},
        "cluster": {"n": 8, "energy_mae_meV_per_atom": 29.3, "forces_mae_meV_per_A": 189.0}}
    floor = quotes.quote_label_floor(_floor_record(tmp_path), "python study.py")
    data["error_budget"] = {"label_noise": quotes.quote_label_noise(_noise_record(tmp_path), None),
                            "label_floor": floor}
    text = format_model_card(data)
    section = text[text.index("## Error budget"):]
    section = section[: section.index("\n## ", 1)]
    assert "| crystal | 15 | 37.5 | 15.8 | 2 | 35.8 / 37.0 | 16.0 | 0.67 |" in section
    assert "| cluster | 8 | 29.3 | 189.0 | — | — | — | — |" in section
    assert "| surface | 0 | — | — | 1 | 2.28 / 5.16 | 50.0 | — |" in section  # compared, not tested
    flat = " ".join(section.split())
    assert "`python noise.py --json noise.json`" in flat and "(3 structures," in flat
    assert ("rule `g8` (Γ-centred mesh, density 8 Å⁻¹). Its residual against a denser mesh, `g10` "
            "(Γ-centred mesh, density 10 Å⁻¹), on 2 structure(s) (crystal, surface): |ΔE| up to 0.45 "
            "meV/atom, force MAE up to 0.70 meV/Å, stress MAE up to 0.02 GPa. By `python study.py`.") in flat
    assert text.index("## Test errors") < text.index("## Error budget") < text.index("## Speed")
    cheaper = quotes.quote_label_floor(_floor_record(tmp_path, chosen="g2.5"), "python study.py")
    flat = " ".join(markdown.error_budget_section({**data, "error_budget": {"label_floor": cheaper}}))
    assert "The study's reference `g8` (Γ-centred mesh, density 8 Å⁻¹) has a residual" in flat
    assert "worst per kind (ΔE meV/atom / force meV/Å / stress GPa): crystal 18.3 / 0.00 / 0.75." in flat
    assert markdown.error_budget_section(_shipped_card()) == []


@pytest.mark.parametrize("option, content, message", [
    ("--label-noise", None, "does not exist"),
    ("--label-noise", "{not json", "is not JSON"),
    ("--label-noise", '{"command": "c", "rows": []}', "has no 'kinds'"),
    ("--label-noise", '{"kinds": {"crystal": {"n": 1}}}', "kind 'crystal' has no energy_std_meV_per_atom"),
    ("--label-noise", '{"kinds": {}}', "names no command: give --label-noise-command"),
    ("--label-floor", '{"reference": "g8"}', "has no 'reference_against_denser'"),
    ("--label-floor", '{"reference_against_denser": {"rows": []}}', "give --label-floor-command"),
])
def test_a_bad_error_budget_record_is_refused_in_one_line(tmp_path, capsys, option, content, message):
    from ase.io import write

    from mlip.training.samples import atoms_of

    run = _run_folder(tmp_path / "run", 1.0)
    write(tmp_path / "test.xyz", [atoms_of(s) for s in generate_emt_dataset(1, seed=5, progress=False)])
    record = tmp_path / "record.json"
    if content is not None:
        record.write_text(content)
    code, _, err = _card(capsys, run, "--name", "eam", "--test", tmp_path / "test.xyz", "--train-command",
                         "one", "--out", tmp_path / "cards", option, record)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("mlip: error: "), err
    assert str(record) in lines[0] and message in lines[0], err
    assert not (tmp_path / "cards").exists() or not any((tmp_path / "cards").iterdir())


def _history(*records):
    return [dict({"valid_energy_mae_meV_per_atom": 10.0 / k, "valid_forces_mae_meV_per_A": 100.0 / k}, **r)
            for k, r in enumerate(records, 1)]


def test_the_learning_curve_runs_over_every_stage_to_the_stopping_point(tmp_path, monkeypatch):
    """Per epoch over all stages: stage, epoch and the minutes of all stages so far, the validation energy
    and force MAE; the stop (stage, epoch, minutes, reason from the plateau rule's ``stopped``); its plot,
    or without matplotlib the reason there is none."""
    import sys

    from mlip.workflows.model_card import curve

    first, last = _run_folder(tmp_path / "stage1", 2.0), _run_folder(tmp_path / "stage2", 3.0)
    (first / "metrics.json").write_text(json.dumps(_history({"minutes": 1.0}, {"minutes": 2.0})))
    (last / "metrics.json").write_text(json.dumps(_history(
        {"minutes": 1.0}, {"minutes": 2.5}, {"minutes": 3.0, "stopped": "plateau at epoch 2, decay done"})))
    data = curve.learning_curve([first, last])
    assert data["stage"] == [1, 1, 2, 2, 2] and data["epoch"] == [1, 2, 3, 4, 5]
    assert data["minutes"] == [1.0, 2.0, 3.0, 4.5, 5.0]
    assert data["valid_forces_mae_meV_per_A"] == [100.0, 50.0, 100.0, 50.0, pytest.approx(100 / 3)]
    assert data["stopped"] == {"stage": 2, "epoch": 5, "minutes": 5.0,
                               "reason": "plateau at epoch 2, decay done"}
    png = tmp_path / "eam-learning-curve.png"
    assert curve.plot_learning_curve(data, png, "eam") is None
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    card = dict(_shipped_card(), name="eam", learning_curve=dict(data, plot=png.name))
    flat = " ".join(format_model_card(card).split())
    assert "![learning curve of eam](eam-learning-curve.png)" in flat
    assert ("Stopped after epoch 5 (stage 2) at 5.0 min: plateau at epoch 2, decay done. Validation MAE at "
            "the first and last epochs: energy 10.0 → 3.33 meV/atom, forces 100.0 → 33.3 meV/Å.") in flat
    assert "per epoch are in the training run's `metrics.json`" not in flat

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    png.unlink()
    not_made = curve.plot_learning_curve(data, png, "eam")
    assert "matplotlib is not installed" in not_made and "mlip-torch[plot]" in not_made and not png.exists()
    card["learning_curve"] = dict(data, plot_not_made=not_made)
    assert f"(No plot: {not_made}.)" in format_model_card(card)


@pytest.mark.parametrize("minutes, epochs, reason", [
    ([1.0, 2.0, 3.0, 4.0], 4, "all 4 epochs of its config run"),  # the config of the weights: 4 epochs
    ([12.0, 24.0], 2, "its wall-clock budget max_minutes 20 spent"),  # ... and 20 minutes
    ([1.0, 2.0], 2, None),
])
def test_a_stop_without_the_plateau_rule_is_told_by_the_config(tmp_path, minutes, epochs, reason):
    from mlip.workflows.model_card import curve

    run = _run_folder(tmp_path / "run", 1.0)
    (run / "metrics.json").write_text(json.dumps([{"minutes": m} for m in minutes]))
    data = curve.learning_curve([run])
    assert data["stopped"] == {"stage": 1, "epoch": epochs, "minutes": minutes[-1], "reason": reason}
    assert data["valid_energy_mae_meV_per_atom"] == [None] * epochs
    card = dict(_shipped_card(), learning_curve=dict(data, plot="x.png"))
    text = " ".join(format_model_card(card).split())
    assert f"at {minutes[-1]:.1f} min: {reason or 'no reason recorded'}" in text
    assert "energy — → — meV/atom" in text


@pytest.mark.parametrize("max_minutes, said", [(None, "no wall-clock budget."), (60.0, "wall-clock budget 60.0 min.")])
def test_the_training_line_states_the_wall_clock_budget_or_its_absence(max_minutes, said):
    card = _shipped_card()
    card["training_config"]["max_minutes"] = max_minutes
    text = " ".join(format_model_card(card).split())
    assert said in text and "None min" not in text


def test_the_shipped_weights_of_an_earlier_epoch_are_marked_on_the_learning_curve(tmp_path):
    """``mlip card --weights best`` where the best epoch is not the last: the plot marks that epoch of the
    last stage (counted within the stage) and the card gives its validation MAE; the last epoch is not
    marked twice."""
    from mlip.workflows.model_card import curve

    first, last = _run_folder(tmp_path / "stage1", 2.0), _run_folder(tmp_path / "stage2", 3.0)
    (first / "metrics.json").write_text(json.dumps(_history({"minutes": 1.0}, {"minutes": 2.0})))
    (last / "metrics.json").write_text(json.dumps(_history({"minutes": 1.0}, {"minutes": 2.5}, {"minutes": 3.0})))
    data = curve.learning_curve([first, last])
    assert curve.shipped_index(data, 2) == 3  # the second stage's second epoch, fourth of all
    assert curve.shipped_index(data, 3) is None and curve.shipped_index(data, None) is None
    assert curve.shipped_index(data, 4) is None  # not an epoch of the last stage
    png = tmp_path / "eam-learning-curve.png"
    assert curve.plot_learning_curve(data, png, "eam", shipped_epoch=2) is None and png.is_file()
    card = dict(_shipped_card(), name="eam", learning_curve=dict(data, plot=png.name))
    card["training"] = dict(card["training"], shipped_epoch=2)
    flat = " ".join(format_model_card(card).split())
    assert "The shipped weights are epoch 2's (the green diamond): energy 5.00 meV/atom, forces 50.0 meV/Å." in flat
    card["training"]["shipped_epoch"] = 3
    assert "green diamond" not in format_model_card(card)
