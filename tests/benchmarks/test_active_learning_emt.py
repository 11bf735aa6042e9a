"""benchmarks/accuracy/active_learning_emt.py and committee_calibration.py: every stage at smoke sizes, the
record and the plots, a rerun that redoes nothing, and the calibration curve's bins."""

from __future__ import annotations

import json
from pathlib import Path

import ase.io
import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy" / "active_learning_emt.py"
CALIBRATION = SCRIPT.parent / "committee_calibration.py"


@pytest.mark.slow
def test_smoke_run_writes_the_curves_and_resumes(script, tmp_path, capsys):
    work, record, png = tmp_path / "work", tmp_path / "al.json", tmp_path / "al.png"
    argv = ["--smoke", "--work", str(work), "--budgets", "2", "4", "--per-iteration", "2", "--committee", "2",
            "--epochs", "1", "--finetune-epochs", "1", "--json", str(record), "--plot", str(png),
            "--no-progress", "--replicates", "2", "--trust-hi", "50", "--ceiling"]
    assert script.main(argv) == 0
    result = json.loads(record.read_text())
    assert result["smoke"] and result["budgets"] == [2, 4]
    kinds = {"md_1200K", "surface", "vacancy"}
    for strategy in ("uncertainty", "random"):
        assert len(result["curves"][strategy]) == 2  # the replicates, seeds 0 and 1
        for curve in result["curves"][strategy]:
            assert [p["labels"] for p in curve] == [0, 2, 4]
            assert set(curve[-1]["per_config_type"]) == kinds
    assert (work / "random-seed1" / "summary.json").is_file()
    # the trust window is the uncertainty arm's (its own folders), random draws from the whole pool
    assert (work / "uncertainty-trust-seed1" / "summary.json").is_file()
    assert result["settings"]["trust_hi"] == 50
    window = json.loads((work / "uncertainty-trust" / "iter-001" / "metrics.json").read_text())
    assert window["trust_hi"] == 50 and "above_trust_hi" not in json.loads(
        (work / "random" / "iter-001" / "metrics.json").read_text())
    # the ceiling: one member on the initial data and the whole pool, labelled
    top = result["ceiling"]
    assert top["n_train"] == result["pool_size"] + len(ase.io.read(work / "initial.xyz", ":"))
    assert set(top["per_config_type"]) == kinds and np.isfinite(top["forces_mae_meV_per_A"])
    # every run starts from the same committee, so all agree before any label
    first = {json.dumps(curve[0]) for replicates in result["curves"].values() for curve in replicates}
    assert len(first) == 1
    for budget in ("2", "4"):
        row = result["by_budget"][budget]
        u, r = row["uncertainty"]["forces_mae_meV_per_A"], row["random"]["forces_mae_meV_per_A"]
        assert row["uncertainty"]["mean_forces_mae_meV_per_A"] == pytest.approx(np.mean(u))
        assert row["force_error_reduction"] == pytest.approx(1 - np.mean(u) / np.mean(r))
    assert png.stat().st_size > 0
    capsys.readouterr()
    assert script.main(argv) == 0  # a rerun finds every stage done
    out = capsys.readouterr().out
    assert "computed" not in out and " train: 2 members on" not in out, out

    from mlip.testing.scripts import script_module

    with script_module(CALIBRATION) as calibration:
        members = sorted((work / "uncertainty-trust" / "iter-002").glob("member-*.safetensors"))
        cal_json, cal_png = tmp_path / "cal.json", tmp_path / "cal.png"
        assert calibration.main(["--members", *map(str, members), "--heldout", str(work / "heldout.xyz"),
                                 "--json", str(cal_json), "--plot", str(cal_png), "--bins", "3"]) == 0
        found = json.loads(cal_json.read_text())
        assert found["n"] == result["heldout_size"] and len(found["calibration"]) == 3
        assert found["spearman_mean_sigma"] == pytest.approx(
            result["curves"]["uncertainty"][0][-1]["rank_correlation"], abs=1e-9)
        assert cal_png.stat().st_size > 0


def test_calibration_bins_are_equal_groups_by_predicted_error():
    from mlip.testing.scripts import script_module

    with script_module(CALIBRATION) as calibration:
        predicted = [0.4, 0.1, 0.3, 0.2, 0.6, 0.5]
        actual = [4.0, 1.0, 3.0, 2.0, 6.0, 5.0]
        curve = calibration.calibration_curve(predicted, actual, 3)
    assert [c["n"] for c in curve] == [2, 2, 2]
    assert [c["predicted"] for c in curve] == pytest.approx([0.15, 0.35, 0.55])
    assert curve[0]["actual_rms"] == pytest.approx(np.sqrt((1 + 4) / 2))
