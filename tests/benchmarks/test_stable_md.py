"""benchmarks/accuracy/stable_md.py: the pair-distribution analysis on structures whose answer is known, and
a run that resumes from its last finished segment."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from ase.build import bulk
from ase.calculators.lj import LennardJones

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy" / "stable_md.py"


def test_diamond_has_four_neighbours_at_the_bond_length(script):
    atoms = bulk("Si", "diamond", a=5.43, cubic=True).repeat((3, 3, 3))
    distances = script.pair_distances(atoms)
    r, g = script.rdf(script.pair_histogram(distances), 1, len(atoms), atoms.get_volume())
    structure = script.liquid_structure(r, g, len(atoms) / atoms.get_volume())
    assert structure["first_peak_A"] == pytest.approx(5.43 * np.sqrt(3) / 4, abs=script.DR)
    assert structure["coordination"] == pytest.approx(4.0, abs=1e-9)
    assert script.closest_pair(distances) == pytest.approx(5.43 * np.sqrt(3) / 4)


def test_the_liquid_cell_has_the_density_of_liquid_silicon(script):
    liquid = script.silicon_cell(True)
    grams_per_cm3 = liquid.get_masses().sum() * 1.66053906660 / liquid.get_volume()
    assert len(liquid) == 216 and grams_per_cm3 == pytest.approx(script.LIQUID_DENSITY)


def test_a_run_goes_on_from_its_last_finished_segment(script, tmp_path, monkeypatch):
    import mlip.workflows.md as md

    calls = []
    real = md.run_md

    def counting(*args, **kwargs):
        calls.append(kwargs["steps"])
        if len(calls) == 3 and crash:
            raise KeyboardInterrupt  # killed during the NVE segment
        return real(*args, **kwargs)

    monkeypatch.setattr(md, "run_md", counting)
    calc = LennardJones(sigma=2.1, epsilon=0.02, rc=4.0, smooth=True)
    folder = tmp_path / "T300"
    # 0.008 ps of NVT in two 0.004-ps segments (2 steps of 2 fs each), then 0.002 ps of NVE (2 steps of 1 fs)
    crash = True
    with pytest.raises(KeyboardInterrupt):
        script.run_temperature(calc, folder, 300.0, False, 0.008, 0.004, 0.002, 0, False)
    crash = False
    script.run_temperature(calc, folder, 300.0, False, 0.008, 0.004, 0.002, 0, False)
    assert calls == [2, 2, 2, 2]  # only the killed segment ran again
    summary = script.report(tmp_path, [300.0], 0.008)
    row = summary["temperatures"]["300"]
    assert row["nvt_ps"] == pytest.approx(0.008) and row["closest_pair_A"] > 2.0
    assert row["nve_ps"] == pytest.approx(0.002) and np.isfinite(row["nve_drift_meV_per_atom_per_ps"])
    assert json.loads((folder / "segment-000.json").read_text())["stage"] == "nvt"
    assert sorted(p.name for p in folder.glob("segment-*.extxyz")) == ["segment-002.extxyz"]  # the last only
