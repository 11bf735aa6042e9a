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
