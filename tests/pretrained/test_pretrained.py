"""The shipped trained models: each loads offline by name and reproduces its model card's errors."""

import json
import math
from pathlib import Path

import pytest

import mlip
from mlip import pretrained
from mlip.training.evaluation import evaluate

KEYS = ("energy_mae_meV_per_atom", "forces_mae_meV_per_A", "stress_mae_meV_per_A3")


def test_trained_models_are_shipped():
    assert {"platonic-emt", "equiformer_v3-emt"} <= set(pretrained.TRAINED)
    assert pretrained.DEFAULT_MODEL in pretrained.TRAINED
    for name, filename in pretrained.TRAINED.items():
        folder = pretrained.pretrained_dir()
        for path in (folder / filename, folder / f"{name}.md", folder / f"{name}.json"):
            assert path.is_file(), path


ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def card_samples():
    """The frames of a card's sample: a labelled file of the repository (``file``) or the EMT
    generator's ``counts`` and ``seed``."""
    from mlip.data import read_dataset
    from mlip.data.emt import generate_emt_dataset

    cache = {}

    def get(sample):
        key = sample.get("file") or (json.dumps(sample["counts"], sort_keys=True), sample["seed"])
        if key not in cache:
            cache[key] = (list(read_dataset(ROOT / sample["file"])) if "file" in sample else
                          generate_emt_dataset(sample["counts"], seed=sample["seed"], progress=False))
        return cache[key]

    return get


@pytest.mark.parametrize("name", sorted(pretrained.TRAINED))
def test_shipped_model_reproduces_its_card(name, card_samples):
    card = json.loads((pretrained.pretrained_dir() / f"{name}.json").read_text())
    potential = pretrained.load(name)
    assert potential.metadata["trained"] is True
    assert sum(p.numel() for p in potential.parameters()) == card["n_parameters"]
    sample = card["card_sample"]
    # frames by category (counts), not a total spread over the categories: the same frames whatever
    # categories the generator gained since
    metrics = evaluate(potential, card_samples(sample), batch_size=16, dtype="float64")
    for key in KEYS:
        # float64 evaluation: only the order of floating-point sums differs between machines.
        assert metrics[key] == pytest.approx(sample["metrics"][key], rel=1e-6), key
    # The card's Markdown states the test-set numbers of its JSON.
    text = (pretrained.pretrained_dir() / f"{name}.md").read_text()
    mae = card["test"]["metrics"]["forces_mae_meV_per_A"]
    assert math.isfinite(mae) and (f"{mae:.1f}" in text or f"{mae:.2f}" in text)


@pytest.mark.parametrize("name", sorted(pretrained.TRAINED))
def test_shipped_calculator_by_name(name):
    from ase.build import bulk

    calc = mlip.load_calculator(name, dtype="float64")
    species = calc.potential.species
    # Cu where the model knows it (the EMT models, the CHGNet student), else its first element's crystal
    cell = bulk("Cu", "fcc", a=3.6, cubic=True) if "Cu" in species else bulk(species[0], cubic=True)
    atoms = cell.repeat(2)
    atoms.rattle(0.02, seed=0)
    atoms.calc = calc
    e, f = atoms.get_potential_energy(), atoms.get_forces()
    assert math.isfinite(e) and abs(f.sum(axis=0)).max() < 1e-9  # Newton's third law
    card = json.loads((pretrained.pretrained_dir() / f"{name}.json").read_text())
    if card.get("reference", "EMT") != "EMT":
        return  # a teacher's energy scale: the card sample (above) holds it to its labels
    # EMT's cohesive energy scale: the model is trained, so it lands near EMT's energy, not at random.
    from ase.calculators.emt import EMT

    ref = atoms.copy()
    ref.calc = EMT()
    assert abs(e - ref.get_potential_energy()) / len(atoms) < 0.05


@pytest.mark.parametrize("name", sorted(pretrained.TRAINED))
def test_shipped_files_hold_no_path_of_the_machine_that_made_them(name):
    """No string of a shipped model's header, card data or card looks like an absolute path (/work/...,
    /home/..., /tmp/..., C:\\...): a checkpoint records its training data by file name (and, since
    mlip.training.provenance, content hash), never where the files lay."""
    from mlip.training.provenance import machine_paths

    folder = pretrained.pretrained_dir()
    assert machine_paths(mlip.read_header(folder / pretrained.TRAINED[name])) == []
    assert machine_paths(json.loads((folder / f"{name}.json").read_text())) == []
    assert machine_paths((folder / f"{name}.md").read_text()) == []
