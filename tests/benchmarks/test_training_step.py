"""benchmarks/speed/training_step.py: the recipes' training step, its stages and the profile's attribution."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "speed" / "training_step.py"
SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "datasets" / "sige-pbe" / "card-sample.xyz"


def test_both_recipes_are_timed_by_stage_and_profiled(script, tmp_path):
    out = tmp_path / "step.json"
    assert script.main(["--train", str(SAMPLE), "--threads", "1", "--steps", "1", "--warmup", "1",
                        "--rounds", "2", "--profile-steps", "1", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    rows = record["rows"]
    assert list(rows) == list(script.RECIPES) and record["rounds"] == 2
    assert rows[script.RECIPES[0]]["epoch_ratio_to_first"] == 1.0
    for row in rows.values():
        stages = row["stage_seconds_per_step"]
        assert set(stages) == {"graph", "forward with forces and stress", "backward", "optimiser"}
        assert all(v > 0 for v in stages.values())
        assert row["seconds_per_step"] == pytest.approx(sum(stages.values()), rel=0.5)  # median vs mean
        assert row["seconds_per_epoch"] == pytest.approx(row["seconds_per_step"] * row["batches_per_epoch"])
        profile = row["profile"]["stages"]
        assert list(profile) == list(script.STAGES)
        assert sum(s["share"] for s in profile.values()) == pytest.approx(1.0)
        # every stage does work: the double backward is the largest, as in every force-trained model
        assert all(s["self_ms_per_step"] > 0 and s["top_operators"] for s in profile.values())
        assert max(profile, key=lambda s: profile[s]["share"]) == "parameter backward"


def test_stage_attribution_follows_the_enclosing_ranges(script):
    class Event:
        def __init__(self, name, parent=None):
            self.name, self.cpu_parent = name, parent

    model = Event("model")
    assert script.stage_of(Event("aten::mm", model)) == "forward"
    grad = Event("autograd::engine::evaluate_function: MmBackward0", model)
    assert script.stage_of(Event("aten::mm", grad)) == "force backward"
    backward = Event("parameter backward")
    inner = Event("autograd::engine::evaluate_function: MmBackward0", backward)
    assert script.stage_of(Event("aten::mm", inner)) == "parameter backward"
    assert script.stage_of(Event("aten::add_", Event("optimiser"))) == "optimiser"


def test_mace_gets_the_isolated_atoms_of_a_file_labelled_under_other_keys(script, tmp_path):
    """MACE's --E0s come from the samples as mlip reads them: the Si–Ge files keep their labels under
    REF_ keys, which a plain ASE read does not see (the arm once failed there after the recipes' timing)."""
    import numpy as np
    from ase import Atoms
    from ase.io import write

    from mlip.data import read_dataset

    frames = []
    for number, energy in ((14, -0.38), (32, -0.39)):
        atoms = Atoms(numbers=[number], positions=[[0.0, 0.0, 0.0]], cell=[20, 20, 20], pbc=False)
        atoms.info["REF_energy"] = energy
        atoms.arrays["REF_forces"] = np.zeros((1, 3))
        frames.append(atoms)
    write(tmp_path / "atoms.xyz", frames)
    assert script.mace_isolated_e0s(read_dataset(tmp_path / "atoms.xyz")) == "{14: -0.38, 32: -0.39}"
