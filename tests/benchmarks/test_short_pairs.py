"""benchmarks/accuracy/short_pairs.py: the shortest pair and the force along it, on structures whose answer
is known, and the comparison of a model with labels it reproduces exactly or not at all."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.io import write

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy" / "short_pairs.py"


def _compressed_copper(d: float) -> Atoms:
    """A 32-atom Cu cell with atom 1 moved along its bond to atom 0 until they are ``d`` Å apart."""
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True).repeat((2, 2, 2))
    i, j = 0, int(np.argmin(atoms.get_distances(0, range(1, len(atoms)), mic=True))) + 1
    vector = atoms.get_distance(i, j, mic=True, vector=True)
    atoms.positions[j] = atoms.positions[i] + vector / np.linalg.norm(vector) * d
    atoms.info["moved"] = j
    return atoms


def test_the_shortest_pair_and_its_repulsion(script):
    atoms = _compressed_copper(2.0)
    i, j, d, u = script.shortest_pair(atoms, 29, 2.2)
    assert d == pytest.approx(2.0) and {i, j} == {0, atoms.info["moved"]}
    assert np.allclose(atoms.get_distance(i, j, mic=True, vector=True), d * u)  # u points from i to j
    atoms.calc = EMT()
    assert script.bond_force(atoms.get_forces(), i, j, u) > 1.0  # pushed apart
    assert script.shortest_pair(atoms, 29, 1.9) is None  # none that close
    assert script.shortest_pair(atoms, 14, 2.2) is None  # no Si at all


def test_a_model_is_compared_with_the_labels_it_is_scored_on(script, tmp_path):
    """The labels are EMT's; the shipped embedded-atom model was trained on EMT: it is close, not exact,
    and the record's numbers are its own minus the labels', per config_type."""
    frames = []
    for k, d in enumerate((2.0, 2.1, 2.3)):
        atoms = _compressed_copper(d)
        atoms.calc = EMT()
        atoms.arrays["REF_forces"] = atoms.get_forces()
        atoms.info["REF_energy"] = atoms.get_potential_energy()
        atoms.calc = None
        atoms.info.update(config_type="compressed" if d < 2.2 else "rattled", id=f"cu-{k}")
        frames.append(atoms)
    data = tmp_path / "labels.xyz"
    write(data, frames, format="extxyz")
    out = tmp_path / "short.json"
    assert script.main(["--model", "embedded-atom-emt", "--data", str(data), "--element", "Cu",
                        "--below", "2.2", "--json", str(out)]) == 0
    record = json.loads(out.read_text())
    assert [p["id"] for p in record["pairs"]] == ["cu-0", "cu-1"]  # 2.3 Å is not under --below
    summary = record["summary"]
    assert set(summary) == {"all", "compressed"} and summary["all"]["n"] == 2
    for pair in record["pairs"]:
        model = pair["models"]["embedded-atom-emt"]
        assert model != pair["label"] and abs(model - pair["label"]) < 0.5 * abs(pair["label"])
    diff = np.mean([p["models"]["embedded-atom-emt"] - p["label"] for p in record["pairs"]])
    assert summary["all"]["models"]["embedded-atom-emt"]["mean_difference_eV_per_A"] == pytest.approx(diff)


def test_a_missing_file_is_one_line(script, tmp_path):
    with pytest.raises(SystemExit, match="no such file"):
        script.main(["--model", "embedded-atom-emt", "--data", str(tmp_path / "nothing.xyz")])


def test_a_frame_without_labels_is_one_line(script, tmp_path):
    write(tmp_path / "bare.xyz", [_compressed_copper(2.0)], format="extxyz")
    with pytest.raises(SystemExit, match="no energy label"):
        script.main(["--model", "embedded-atom-emt", "--data", str(tmp_path / "bare.xyz"), "--element", "Cu"])
