"""The README's result tables agree with what the repository ships and measures.

The shipped-models table is written by hand each time a model is re-trained; its parameter counts and
test errors must be those of the model cards (``models/pretrained/NAME.json``, written by
``benchmarks/model_card.py``). The ablation table (an issue requirement) must list every variant that
``benchmarks/ablations.py`` defines, with the numbers of the recorded run in ``benchmarks/results/``;
so must the table against MACE (``benchmarks/mace_baseline.py``'s recorded run) and the one-hour
EquiformerV3 table (its recorded runs, whose last recipe the example files must be).
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CARDS = sorted((ROOT / "models" / "pretrained").glob("*.json"))

pytestmark = pytest.mark.skipif(not README.is_file(), reason="README.md is not beside the tests (installed tests)")


def _row(text: str, first_cell: str) -> list:
    """Cells of the README table row whose first cell starts with ``first_cell``."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].startswith(first_cell):
            return cells
    raise AssertionError(f"README.md has no table row starting with {first_cell!r}")


def test_every_shipped_model_has_a_card():
    assert {p.stem for p in CARDS} >= {"equiformer_v3-emt", "platonic-emt"}


@pytest.mark.parametrize("card_path", CARDS, ids=[p.stem for p in CARDS])
def test_shipped_models_table_matches_the_model_card(card_path):
    card = json.loads(card_path.read_text())
    cells = _row(README.read_text(encoding="utf-8"), f"`{card['name']}`")
    assert int(cells[2].replace(",", "")) == card["n_parameters"]
    numbers = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?) meV/", cells[3])]
    assert len(numbers) == 3, cells[3]
    metrics = card["test"]["metrics"]
    expected = [metrics["energy_mae_meV_per_atom"], metrics["forces_mae_meV_per_A"],
                metrics["stress_mae_meV_per_A3"]]
    # The README rounds to one decimal (stress below 1 meV/Å³ to two): within half a unit of the last digit.
    for shown, measured in zip(numbers, expected):
        assert abs(shown - measured) <= 0.05 + 1e-9, (card["name"], numbers, expected)


ABLATIONS = ROOT / "benchmarks" / "results" / "ablations-60min-2026-12-01.json"


def test_readme_ablation_table_matches_the_recorded_runs():
    """Every variant ``benchmarks/ablations.py`` defines has a README row, and that row quotes the
    recorded run (``benchmarks/results/ablations-*.json``: the variants' result.json and validation
    history): parameters, epochs, minutes, minutes per epoch and the test MAEs, to the README's rounding."""
    spec = importlib.util.spec_from_file_location("ablations", ROOT / "benchmarks" / "ablations.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    runs = json.loads(ABLATIONS.read_text())["variants"]
    text = README.read_text(encoding="utf-8")
    for name in module.VARIANTS:
        cells = _row(text, name)
        run = runs[name]
        assert int(cells[2].replace(",", "")) == run["n_parameters"], (name, cells)
        per_epoch = float(cells[3].split()[0])
        assert int(cells[4]) == run["epochs_run"], (name, cells)
        assert abs(float(cells[5]) - run["minutes"]) <= 0.05 + 1e-9, (name, cells)
        assert abs(per_epoch - run["minutes"] / run["epochs_run"]) <= 0.005 + 1e-9, (name, cells)
        shown = [float(c) for c in cells[-3:]]  # energy, force and stress MAE
        measured = [run["test"][k] for k in module.KEYS]
        for value, exact, half in zip(shown, measured, (0.05, 0.05, 0.005)):
            assert abs(value - exact) <= half + 1e-9, (name, shown, measured)


@pytest.mark.parametrize("card_path", CARDS, ids=[p.stem for p in CARDS])
def test_readme_discovery_scores_match_the_model_card(card_path):
    """The README's summary of the miniature Matbench Discovery ("`NAME` scores F1 …, hull-distance
    MAE … meV/atom") quotes the card's F1 to three decimals and its MAE to 0.1 meV/atom."""
    card = json.loads(card_path.read_text())
    assert "mini_discovery" in card, f"the card of {card['name']} has no miniature-discovery result"
    text = " ".join(README.read_text(encoding="utf-8").split())
    found = re.search(rf"`{re.escape(card['name'])}` (?:scores )?F1 (\d\.\d+), (?:hull-distance )?MAE "
                      r"(\d+(?:\.\d+)?) meV/atom", text)
    assert found, f"README.md does not give {card['name']}'s miniature-discovery F1 and MAE"
    metrics = card["mini_discovery"]["metrics"]
    assert abs(float(found.group(1)) - metrics["F1"]) <= 0.0005 + 1e-9, (found.group(0), metrics["F1"])
    assert abs(float(found.group(2)) - 1000 * metrics["MAE"]) <= 0.05 + 1e-9, (found.group(0), metrics["MAE"])


MACE_RUN = ROOT / "benchmarks" / "results" / "mace-baseline-2026-12-02-e0s-stage-two.json"
#: the one-stage MACE, evaluated and timed in a run of its own
MACE_ONE_STAGE_RUN = ROOT / "benchmarks" / "results" / "mace-baseline-2026-12-02-e0s.json"
#: the README's MACE-table row → (recorded run, that model's entry ("model") in it)
MACE_ROWS = {
    "MACE, Stage Two from epoch 4": (MACE_RUN, "MACE"),
    "MACE, one stage": (MACE_ONE_STAGE_RUN, "MACE"),
    "Platonic, stage-1 settings": (MACE_RUN, "ablations60-compat/platonic-T-softmax.safetensors"),
    "EquiformerV3, stage-1 settings": (MACE_RUN, "ablations60-compat/eqv3-swiglu-merged.safetensors"),
    "EquiformerV3, gate activation": (MACE_RUN, "ablations60-compat/eqv3-gate-merged.safetensors"),
    "`platonic-emt` before its repulsive-core stages": (MACE_RUN, "platonic-emt"),
    "the 9-stage `equiformer_v3-emt` (shipped until 2026-12-03)": (MACE_RUN, "equiformer_v3-emt"),
    "`embedded-atom-emt` (shipped)": (MACE_RUN, "embedded-atom-emt"),
}


def _close(shown: str, exact: float) -> bool:
    """``shown`` is ``exact`` rounded to the digits it shows (half a unit of its last digit)."""
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    return abs(float(shown) - exact) <= 0.5 * 10.0 ** -decimals + 1e-9


def test_readme_mace_table_matches_the_recorded_run():
    """The README's "Against MACE" table quotes ``benchmarks/mace_baseline.py``'s recorded run: parameters,
    the three test MAEs, ms per MD step at 256 and 500 atoms, and the range of the two costs vs MACE
    (the two-stage MACE's, timed in the same run as our models)."""
    records = {path: json.loads(path.read_text()) for path in {path for path, _ in MACE_ROWS.values()}}
    for path, record in records.items():  # both MACE runs took E0 from the training set's isolated atoms, and say so
        assert record["mace_e0s"].startswith("{13: 3.28,"), path
    runs = {path: {m["model"]: m for m in record["models"]} for path, record in records.items()}
    text = README.read_text(encoding="utf-8")
    table = text[text.index("**Against MACE**"):]
    table = table[table.index("\n|"):table.index("\n\n", table.index("\n|"))]
    assert len([line for line in table.splitlines() if line.startswith("|")]) == len(MACE_ROWS) + 2
    for label, (path, key) in MACE_ROWS.items():
        cells = _row(table, label)
        model = runs[path][key]
        assert int(cells[2].replace(",", "")) == model["n_parameters"], (label, cells)
        errors = re.findall(r"(\d+(?:\.\d+)?) meV/", cells[3])
        measured = [model["test"][k] for k in ("energy_mae_meV_per_atom", "forces_mae_meV_per_A",
                                               "stress_mae_meV_per_A3")]
        assert len(errors) == 3 and all(map(_close, errors, measured)), (label, errors, measured)
        steps = [s.strip() for s in cells[4].split("/")]
        timed = [model["md"][n]["ms_per_step"] for n in ("256", "500")]
        assert len(steps) == 2 and all(map(_close, steps, timed)), (label, steps, timed)
        if key == "MACE":
            assert cells[5] == "1"
        else:
            low, high = cells[5].split("–")
            costs = sorted(model[f"cost_vs_mace_{n}"] for n in (256, 500))
            assert _close(low, costs[0]) and _close(high, costs[1]), (label, cells[5], costs)


HOUR_RUN = ROOT / "benchmarks" / "results" / "equiformer-v3-hour-2026-12-02.json"
#: the README's one-hour-table row → that run's entry ("name") in the record; the last is the example files
#: (the shipped equiformer_v3-emt)
HOUR_ROWS = {
    "gate, energy weight 5, 11 + 3 epochs": "gate, energy weight 5, 11 + 3 epochs",
    "gate, energy weight 5, 11 + 6 epochs": "gate, energy weight 5, 11 + 6 epochs",
    "gate, energy weight 20, 11 + 6 epochs": "gate, energy weight 20, 11 + 6 epochs",
    "the same with logarithmic densities to 6 Å, attention 5 Å":
        "gate, energy weight 20, 11 + 6 epochs, log densities to 6 Å, attention 5 Å",
    "the same, 11 + 10 epochs":
        "gate, energy weight 20, 11 + 10 epochs, log densities to 6 Å, attention 5 Å",
    "**the same, batches of 4 (the shipped model)**":
        "gate, energy weight 20, 11 + 10 epochs, log densities to 6 Å, attention 5 Å, batch 4",
}


def test_readme_one_hour_equiformer_table_matches_the_recorded_runs():
    """The README's one-hour EquiformerV3 table quotes the recorded gate runs (minutes per stage and in all,
    test MAEs), and the example files are the recorded recipe of its last row, paths and time limits aside,
    which is the shipped ``equiformer_v3-emt`` (its model card).
    (Its first row, SwiGLU-S² of 2026-11-30, predates the record.)"""
    from mlip.training import TrainConfig

    runs = {r["name"]: r for r in json.loads(HOUR_RUN.read_text())["runs"]}
    text = README.read_text(encoding="utf-8")
    table = text[text.index("| one-hour recipe |"):]
    table = table[:table.index("\n\n")]
    assert len([line for line in table.splitlines() if line.startswith("|")]) == len(HOUR_ROWS) + 3  # + SwiGLU row
    for label, name in HOUR_ROWS.items():
        cells, run = _row(table, label), runs[name]
        parts, total = cells[1].split("=")
        parts = [s.strip() for s in parts.split("+")]
        minutes = [s["minutes"] for s in run["stages"]]
        assert len(parts) == len(minutes) and all(map(_close, parts, minutes)), (label, cells, minutes)
        assert _close(total.strip(), run["minutes"]), (label, cells, run["minutes"])
        shown = [s.strip().strip("*") for s in cells[2].split("/")]
        measured = [run["test"][k] for k in ("energy_mae_meV_per_atom", "forces_mae_meV_per_A",
                                             "stress_mae_meV_per_A3")]
        assert len(shown) == 3 and all(map(_close, shown, measured)), (label, cells, measured)
    recipe = runs[list(HOUR_ROWS.values())[-1]]["stages"]
    examples = [ROOT / "examples" / f"train_equiformer_v3_emt_hour{s}.yaml" for s in ("", "_stage2")]
    assert len(recipe) == len(examples)
    for path, stage in zip(examples, recipe):
        ours, recorded = TrainConfig.from_yaml(path).to_dict(), stage["config"]
        for key in ("model", "loss", "optimizer", "epochs", "batch_size", "seed", "dtype", "reference_energies",
                    "augment_rotations"):
            assert ours[key] == recorded[key], (path.name, key, ours[key], recorded[key])
    # ... and the shipped equiformer_v3-emt is that run: its card's last-stage config and test errors are the record's
    card = json.loads((ROOT / "models" / "pretrained" / "equiformer_v3-emt.json").read_text())
    last = runs[list(HOUR_ROWS.values())[-1]]
    assert card["training_config"] == recipe[-1]["config"]
    for key in ("energy_mae_meV_per_atom", "forces_mae_meV_per_A", "stress_mae_meV_per_A3"):
        assert abs(card["test"]["metrics"][key] - last["test"][key]) <= 1e-6 * max(1.0, abs(last["test"][key])), key
