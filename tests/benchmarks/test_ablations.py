"""benchmarks/ablations.py: every variant builds a valid training config and model from the EMT bases and
from the Si–Ge ones given with --config."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "ablations.py"
SIGE = {"platonic": ROOT / "examples" / "recipes" / "platonic-sige" / "stage1.yaml",
        "equiformer": ROOT / "examples" / "recipes" / "equiformer_v3-sige" / "stage1.yaml",
        "embedded_atom": ROOT / "benchmarks" / "configs" / "embedded_atom_sige_stage1.yaml"}


@pytest.mark.parametrize("data", ["emt", "sige"])
def test_every_variant_makes_its_model(script, data, tmp_path):
    from mlip.models import create_model
    from mlip.training import TrainConfig

    bases = script.BASES if data == "emt" else SIGE
    species = {"emt": {"Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt"}, "sige": {"Si", "Ge"}}[data]
    for name, (kind, overrides, _) in script.VARIANTS.items():
        cfg = script.variant_config(name, tmp_path, minutes=1.0, epochs=3, bases=bases)
        config = TrainConfig.from_dict(cfg)
        assert config.epochs == 3 and config.out_dir == str(tmp_path / name) and cfg["data"] == {}
        assert {k: config.model[k] for k in overrides} == overrides, name
        assert set(config.model["species"]) == species, name
        args = dict(config.model)
        potential = create_model(args.pop("name"), seed=0, **args)
        assert sum(p.numel() for p in potential.parameters()) > 0, name


def test_a_bad_config_option_is_one_line(script, tmp_path):
    with pytest.raises(SystemExit):
        script.main(["--config", "transformer=x.yaml", "--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        script.main(["--config", f"platonic={tmp_path / 'missing.yaml'}", "--out", str(tmp_path)])


def test_the_table_has_a_row_for_mace_trained_alike(script, tmp_path):
    import json

    mace = {"model": "MACE", "n_parameters": 84720, "threads": 1,
            "test": {"energy_mae_meV_per_atom": 12.34, "forces_mae_meV_per_A": 56.78,
                     "stress_mae_meV_per_A3": 1.234},
            "training": {"train_loop_s": 3600.0, "epochs_equivalent": 48.0, "torch_threads": 1}}
    path = tmp_path / "mace_baseline.json"
    path.write_text(json.dumps({"models": [{"model": "ours"}, mace]}))
    text = script.report(tmp_path, path)  # no variant finished: MACE alone
    assert ("| MACE | mace_run_train, the same data and minutes (1 thread(s)) | 84,720 | — | 1.25 | 48.0 "
            "| 60.0 | 12.3 | 56.8 | 1.23 |") in text
