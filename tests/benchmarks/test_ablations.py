"""benchmarks/accuracy/ablations.py: every variant builds a valid training config and model from the EMT
bases and from the Si–Ge ones given with --config."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "accuracy" / "ablations.py"
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


def test_a_killed_variant_resumes_after_its_last_epoch(script, tmp_path, monkeypatch, capsys):
    """A variant killed after two epochs goes on with its planned epochs (no new probe); with another
    budget it starts over."""
    import argparse
    import json

    import mlip.training.loop as loop
    from mlip.testing.datasets import emt_cells

    base = tmp_path / "platonic.yaml"
    base.write_text(json.dumps(dict(model=dict(name="platonic", species=["Cu", "Au"], cutoff=4.0, channels=4,
                                               num_layers=1, num_heads=1, head_dim=2),
                                    batch_size=8, optimizer=dict(lr=5e-3))))
    train_samples, valid_samples = emt_cells(16, seed=1), emt_cells(4, seed=2)
    test_samples = emt_cells(4, seed=3)
    import mlip.training.budget as budget

    # 15 s an epoch: 4 epochs in a minute
    probes = []

    def calibrate(config, train_samples, valid_samples, minutes):
        probes.append(1)
        return budget.Calibration(7.0, 1.0, 15.0, int(minutes * 60 // 15))

    monkeypatch.setattr(budget, "calibrate", calibrate)
    train_epoch, calls = loop._train_epoch, []

    def killed_in_the_third_epoch(*a, **k):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return train_epoch(*a, **k)

    args = argparse.Namespace(out=str(tmp_path / "ablations"), minutes=1.0,
                              bases={**script.BASES, "platonic": base})
    monkeypatch.setattr(loop, "_train_epoch", killed_in_the_third_epoch)
    with pytest.raises(KeyboardInterrupt):
        script.run_variant("platonic-T-linear", args, train_samples, valid_samples, test_samples)
    monkeypatch.setattr(loop, "_train_epoch", train_epoch)
    record = script.run_variant("platonic-T-linear", args, train_samples, valid_samples, test_samples)
    assert "platonic-T-linear: resuming the killed run" in capsys.readouterr().out and len(probes) == 1
    folder = tmp_path / "ablations" / "platonic-T-linear"
    assert [e["epoch"] for e in json.loads((folder / "metrics.json").read_text())] == [1, 2, 3, 4]
    assert record["epochs_planned"] == record["epochs_run"] == 4 and record["model"]["attention"] == "linear"

    args.minutes = 2.0  # another budget: the probe again, and a new run of 8 epochs
    record = script.run_variant("platonic-T-linear", args, train_samples, valid_samples, test_samples)
    assert "resuming" not in capsys.readouterr().out and len(probes) == 2
    assert [e["epoch"] for e in json.loads((folder / "metrics.json").read_text())] == list(range(1, 9))


def test_the_plot_shows_every_finished_variant_and_mace(script, tmp_path, monkeypatch):
    """``--report --plot`` draws a point per finished variant (and MACE) and a learning curve per variant."""
    import json

    for k, name in enumerate(["platonic-T-softmax", "embedded-atom"]):
        (tmp_path / name).mkdir()
        record = {"variant": name, "what": "x", "n_parameters": 10, "seconds_per_step": 0.5, "epochs_run": 2,
                  "minutes": 4.0 + k, "n_train": 8, "n_test": 4,
                  "test": {key: 1.0 + k for key in script.KEYS}}
        (tmp_path / name / "result.json").write_text(json.dumps(record))
        history = [{"epoch": e, "minutes": 2.0 * e, "valid_forces_mae_meV_per_A": 50.0 / e} for e in (1, 2)]
        (tmp_path / name / "metrics.json").write_text(json.dumps(history))
    mace = {"model": "MACE", "n_parameters": 5, "threads": 1, "test": {key: 3.0 for key in script.KEYS},
            "training": {"train_loop_s": 600.0, "epochs_equivalent": 4.0, "torch_threads": 1}}
    (tmp_path / "mace.json").write_text(json.dumps({"models": [mace]}))
    png = tmp_path / "ablations.png"
    assert script.main(["--out", str(tmp_path), "--report", "--mace", str(tmp_path / "mace.json"),
                        "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    import matplotlib.figure

    drawn = []
    savefig = matplotlib.figure.Figure.savefig

    def keep_axes(fig, *args, **kwargs):
        drawn.extend(fig.axes)
        return savefig(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep_axes)
    script.plot(tmp_path, tmp_path / "again.png", tmp_path / "mace.json")
    cost, curves = drawn
    assert sorted(t.get_text() for t in cost.get_legend().get_texts()) == ["MACE", "embedded-atom",
                                                                        "platonic-T-softmax"]
    assert [list(line.get_ydata()) for line in curves.get_lines()] == [[50.0, 25.0], [50.0, 25.0]]
