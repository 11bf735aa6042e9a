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
