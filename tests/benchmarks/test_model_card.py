"""benchmarks/model_card.py: the share of a model's network beside its embedded-atom term.

The card of a transformer with an embedded-atom term states how much its network adds to the term
(mean absolute change of the energies and forces when the network's final readout is zeroed). The
measurement must be exactly zero for a network whose readout is zero, positive otherwise, and absent
for a model that is nothing but the term.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from mlip.checkpoint import save_potential
from mlip.data.emt import generate_emt_dataset
from mlip.pretrained import EMT_ELEMENTS

from mlip.testing import build_potential

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "model_card.py"

pytestmark = pytest.mark.skipif(not SCRIPT.is_file(), reason="benchmarks/ is not beside the tests (installed tests)")


@pytest.fixture(scope="module")
def model_card():
    spec = importlib.util.spec_from_file_location("model_card", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def samples():
    return generate_emt_dataset(4, seed=3, progress=False)


@pytest.mark.parametrize("arch", ["equiformer-v3-gate-sepnorm", "platonic-density-reach"])
def test_network_share_is_zero_exactly_when_its_readout_is(model_card, samples, tmp_path, arch):
    potential = build_potential(arch, species=EMT_ELEMENTS)
    share = model_card.embedded_atom_share(save_potential(potential, tmp_path / "random.safetensors"), samples)
    assert share["n_structures"] == len(samples)
    assert share["network_energy_meV_per_atom_mean_abs"] > 1e-3
    assert share["network_forces_meV_per_A_mean_abs"] > 1e-3
    with torch.no_grad():
        for param in potential.model.final_readout().parameters():
            param.zero_()
    path = save_potential(potential, tmp_path / "term-only.safetensors")
    share = model_card.embedded_atom_share(path, samples)
    assert share["network_energy_meV_per_atom_mean_abs"] == 0.0
    assert share["network_forces_meV_per_A_mean_abs"] == 0.0
    whole = model_card.errors(potential, samples)
    for key, value in share["term_alone"].items():
        assert value == pytest.approx(whole[key], rel=1e-12, abs=1e-12), key


def test_no_share_for_a_model_without_a_network_or_a_term(model_card, samples, tmp_path):
    for arch in ("embedded-atom", "platonic-softmax"):
        path = save_potential(build_potential(arch, species=EMT_ELEMENTS), tmp_path / f"{arch}.safetensors")
        assert model_card.embedded_atom_share(path, samples) is None


def test_a_students_card_quotes_its_student_vs_teacher_report(model_card, tmp_path):
    """A distilled student's card takes κ, cost, the errors against DFT and the miniature discovery from
    ``student_vs_teacher.json`` as that script writes them, and shows each in its section."""
    import json

    errors = {"energy_mae_meV_per_atom": 404.25, "forces_mae_meV_per_A": 638.5, "stress_mae_meV_per_A3": 56.6}
    report = {"stages": {
        "kappa": {"mean_srme": 1.69, "compounds": {
            "NaCl": {"kappa_model": 2.02, "kappa_reference": 1.17, "srme": 1.07},
            "Si": {"kappa_model": None, "kappa_reference": 3.6, "srme": 2.0}}},
        "cost": {"threads": 2, "cells": {"Si-64": {"student_s": 0.05, "teacher_s": 0.2, "teacher_over_student": 4.0}}},
        "dft": {"files": {"sige.xyz": {"n": 80, "student": {"overall": errors},
                                       "teacher": {"overall": dict(errors, forces_mae_meV_per_A=374.0)}}}},
        "discovery": {"n_materials": 40, "RMSD": 0.05, "benchmark": {"systems": ["Na-Cl", "Si-Ge"]},
                      "metrics": {"F1": 0.154, "MAE": 0.333}},
    }}
    path = tmp_path / "student_vs_teacher.json"
    path.write_text(json.dumps(report))
    teacher, discovery = model_card.quote_student_vs_teacher(path, "python svt.py", "CHGNet 0.3.0")
    assert discovery["metrics"]["F1"] == 0.154 and discovery["n_materials"] == 40 and discovery["rmsd_A"] == 0.05
    assert teacher["dft"]["errors"]["CHGNet 0.3.0"]["forces_mae_meV_per_A"] == 374.0
    text = "\n".join(model_card.teacher_section(teacher))
    assert "| NaCl | 2.02 | 1.17 | 1.07 |" in text and "| Si | — | 3.6 | 2.00 |" in text
    assert "Mean κ_SRME 1.69." in text
    assert "| Si-64 | 50.0 | 200.0 | 4.0 |" in text
    assert "| student | 404.2 | 638.5 | 56.6 |" in text and "| CHGNet 0.3.0 | 404.2 | 374.0 | 56.6 |" in text
    assert model_card.teacher_section(None) == []


def test_a_card_sample_file_is_read_from_the_repository(model_card, samples, tmp_path):
    from ase.io import write

    from mlip.training.samples import atoms_of

    write(tmp_path / "sample.xyz", [atoms_of(s) for s in samples])
    read_back = model_card.card_sample_of({"card_sample": {"file": "sample.xyz"}}, tmp_path)
    assert len(read_back) == len(samples)
    potential = build_potential("embedded-atom", species=EMT_ELEMENTS)
    ours, theirs = model_card.errors(potential, read_back), model_card.errors(potential, samples)
    for key in ("energy_mae_meV_per_atom", "forces_mae_meV_per_A", "stress_mae_meV_per_A3"):
        assert ours[key] == pytest.approx(theirs[key], rel=1e-9), key  # the labels came back


def _dft_report(tmp_path):
    import json

    si = {"a_A": 5.5, "B_GPa": 80.0}
    literature = {"kappa_300K_W_per_mK": {"Si": [130.0, 150.0], "source": "ref X"}}
    report = {"reference": "gpaw", "literature": literature,
              "methods": {"gpaw": {"properties": {"lattice": {"Si": {"a_A": 5.477, "B_GPa": 88.9}},
                                                  "elastic": {"Si": {"C11_GPa": 150.0}}}},
                          "mine": {"properties": {"lattice": {"Si": si}, "elastic": {"Si": {"C11_GPa": 140.0}},
                                                  "vacancy": {"Si": {"formation_energy_relaxed_eV": 3.4}},
                                                  "kappa": {"Si": {"kappa_300K_W_per_mK": 120.0}}}},
                          "other": {"properties": {}}},
              "differences": {"mine": {"phonon_frequency_mae_THz": {"Ge": 0.5, "Si": 0.2}}}}
    path = tmp_path / "dft_validation.json"
    path.write_text(json.dumps(report))
    return path


def test_a_card_quotes_the_dft_validation_with_its_targets(model_card, tmp_path):
    """--dft-validation: each property the model has, beside the reference's, with the issue's targets
    (lattice constant within 0.5 %, bulk modulus within 5 %, Si phonons ≤ 0.3 THz) judged; a property
    the reference lacks has no difference; the method must be named when the report has several."""
    path = _dft_report(tmp_path)
    with pytest.raises(SystemExit, match="--dft-validation-method"):
        model_card.quote_dft_validation(path, None, "cmd")
    with pytest.raises(SystemExit, match="no method 'absent'"):
        model_card.quote_dft_validation(path, "absent", "cmd")
    entry = model_card.quote_dft_validation(path, "mine", "python dv.py")
    assert [r["key"] for r in entry["properties"]] == [
        "lattice.Si.a_A", "lattice.Si.B_GPa", "elastic.Si.C11_GPa", "vacancy.Si.formation_energy_relaxed_eV",
        "kappa.Si.kappa_300K_W_per_mK"]
    text = "\n".join(model_card.dft_section(entry))
    assert "| Si lattice constant (Å) | 5.5 | 5.477 | +0.4 % | within 0.5 % | yes |" in text
    assert "| Si bulk modulus (GPa) | 80 | 88.9 | -10.0 % | within 5 % | no |" in text
    assert "| Si C11 (GPa) | 140 | 150 | -6.7 % | — | — |" in text
    assert "| Si vacancy formation energy (relaxed) (eV) | 3.4 | — | — | — | — |" in text
    assert "| Si κ(300 K) (W/(m·K)) | 120 | 130–150 (published PBE) | — | — | — |" in text and "ref X" in text
    assert "| Si phonon frequency MAE over the band path (THz) | 0.2 | — | — | ≤ 0.3 THz | yes |" in text
    assert text.index("Si phonon") < text.index("Ge phonon") and "`python dv.py`" in text
    assert model_card.dft_section(None) == []


def test_a_card_quotes_the_mace_baseline_row_of_its_model(model_card, tmp_path):
    """--mace-baseline: this model's row and MACE's, errors and ms per MD step of every timed cell."""
    import json

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
    with pytest.raises(SystemExit, match="no row 'x'"):
        model_card.quote_mace_baseline(path, "x", "cmd")
    entry = model_card.quote_mace_baseline(path, "run/best.safetensors", "cmd")
    text = "\n".join(model_card.mace_section(entry))
    assert "for 60 min (12.5 epochs)" in text and "ms/step, 216 atoms | ms/step, 512 atoms |" in text
    assert "| this model | 1,000 | 5.00 | 10.0 | 2.50 | 50.0 | 150.0 |" in text
    assert "| MACE | 1,000 | 10.0 | 20.0 | 5.00 | 100.0 | 300.0 |" in text


def test_the_si_ge_speed_cells_are_the_mace_baselines(model_card):
    cells = model_card.speed_structures("si-ge")
    assert list(cells) == ["diamond Si, 216 atoms", "Si-Ge solid solution, 512 atoms"]
    assert set(cells["Si-Ge solid solution, 512 atoms"].get_chemical_symbols()) == {"Si", "Ge"}
