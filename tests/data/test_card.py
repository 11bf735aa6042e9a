"""mlip.data.card and ``mlip data card``: label ranges, provenance and cost of a labelled set."""

import json

import numpy as np
import pytest
from ase.build import bulk
from ase.units import GPa

from mlip.data import Sample, read_dataset
from mlip.data.card import data_card, format_data_card
from mlip.testing.cli import run_cli
from mlip.testing.datasets import emt_cells
from mlip.workflows.labelling import label_structures, labeller, write_labelled


def _sample(energy, forces, stress, config_type, seconds=None, settings="{}"):
    atoms = bulk("Cu", "fcc", a=3.6).repeat((1, 1, len(forces)))
    atoms.info.update(config_type=config_type, calculator="emt", calculator_version="3.23",
                      calculator_settings=settings)
    if seconds is not None:
        atoms.info["label_wall_time_s"] = seconds
    return Sample(atoms=atoms, energy=energy, forces=np.asarray(forces, float),
                  stress=None if stress is None else np.asarray(stress, float))


def test_label_ranges_follow_their_definitions():
    a = _sample(-2.0, [[3.0, 4.0, 0.0], [0.0, 0.0, 1.0]], [GPa, -2 * GPa, 0, 0, 0, 0], "bulk", 10.0)
    b = _sample(-9.0, [[0.0, 0.0, 0.5], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], None, "bulk", 30.0)
    c = _sample(1.0, [[0.0, 2.0, 0.0]], None, "dimer")
    card = data_card([a, b, c])
    bulk_labels = card["labels_by_config_type"]["bulk"]
    assert bulk_labels["energy_per_atom_eV"] == {"min": -3.0, "median": -2.0, "max": -1.0}
    assert bulk_labels["max_force_eV_per_A"]["max"] == 5.0  # |(3, 4, 0)|
    assert bulk_labels["max_force_eV_per_A"]["min"] == 0.5
    assert bulk_labels["stress_component_GPa"]["min"] == pytest.approx(-2.0)
    assert bulk_labels["stress_component_GPa"]["max"] == pytest.approx(1.0)
    assert bulk_labels["label_wall_time_s"]["total"] == 40.0
    assert "stress_component_GPa" not in card["labels_by_config_type"]["dimer"]
    assert "label_wall_time_s" not in card["labels_by_config_type"]["dimer"]
    assert card["labels"]["energy_per_atom_eV"]["max"] == 1.0
    assert card["provenance"] == [{"calculator": "emt", "calculator_version": "3.23",
                                   "calculator_settings": {}, "frames": 3}]
    text = format_data_card(card)
    assert "| bulk | 2 |" in text and "| dimer | 1 |" in text and "**all**" in text


def test_distinct_settings_are_listed_apart():
    one = _sample(-1.0, [[0.0, 0.0, 0.0]], None, "x", settings='{"ecut": 400}')
    two = _sample(-1.0, [[0.0, 0.0, 0.0]], None, "x", settings='{"ecut": 500}')
    card = data_card([one, two, two])
    assert [(p["calculator_settings"]["ecut"], p["frames"]) for p in card["provenance"]] == [(400, 1), (500, 2)]


def test_empty_set_is_refused():
    with pytest.raises(ValueError, match="empty"):
        data_card([])


def test_cli_card_of_a_labelled_file(tmp_path, capsys):
    cells = emt_cells(3, seed=1, label=False)
    for k, atoms in enumerate(cells):
        atoms.info.update(id=f"c{k}", config_type="rattled")
    label_structures(cells, labeller("emt"), tmp_path / "run", progress=False)
    write_labelled(cells, tmp_path / "run", tmp_path / "set.xyz")
    code, out, _ = run_cli(capsys, "data", "card", tmp_path / "set.xyz", "-o", tmp_path / "card.json",
                           "--markdown", tmp_path / "card.md")
    assert code == 0 and "| rattled | 3 |" in out and "Labelled by emt" in out
    card = json.loads((tmp_path / "card.json").read_text())
    samples = read_dataset(tmp_path / "set.xyz")
    want = min(s.energy / len(s.atoms) for s in samples)
    assert card["labels"]["energy_per_atom_eV"]["min"] == pytest.approx(want)
    assert card["labels"]["label_wall_time_s"]["frames"] == 3
    assert (tmp_path / "card.md").read_text().strip() == out.strip()
    code, _, err = run_cli(capsys, "data", "card", tmp_path / "set.xyz", "-o", tmp_path / "card.json")
    assert code == 2 and "exist" in err
    code, _, err = run_cli(capsys, "data", "card", tmp_path / "missing.xyz")
    assert code == 2 and "does not exist" in err
