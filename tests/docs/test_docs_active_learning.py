"""docs/active-learning.md runs as written: every ``bash`` and ``python`` block of the page, in order, in one
fresh folder (``mlip`` from this interpreter's environment), and what the page says the run leaves there."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "active-learning.md"

pytestmark = pytest.mark.skipif(not DOC.is_file(), reason="docs/ is not beside the tests (installed tests)")


def blocks() -> list:
    """(language, text) of every fenced bash or python block of the page, in order."""
    text = DOC.read_text(encoding="utf-8")
    return [(m[1], m[2]) for m in re.finditer(r"^```(bash|python)\n(.*?)^```", text, flags=re.S | re.M)]


def test_the_page_has_the_walk_through():
    languages = [language for language, _ in blocks()]
    assert languages.count("bash") >= 5 and "python" in languages
    text = "".join(body for _, body in blocks())
    for command in ("mlip data label", "mlip learn", "--resume", "mlip md", "mlip eval"):
        assert command in text, command


@pytest.mark.slow
def test_every_command_of_the_page_runs_as_written(tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "OMP_NUM_THREADS": "1"}
    outputs = []
    for language, body in blocks():
        argv = (["bash", "-euo", "pipefail", "-c", body] if language == "bash"
                else [sys.executable, "-c", body])
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{language} block failed:\n{body}\n{done.stdout}\n{done.stderr}"
        outputs.append(done.stdout)
    run = tmp_path / "learn-run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["labels"] == 30 and summary["stopped"] == "label budget of 30 spent"
    assert [r["iteration"] for r in summary["iterations"]] == [0, 1, 2, 3]
    for name in ("pool.xyz", "selected.xyz", "labelled.xyz", "member-0.safetensors", "metrics.json"):
        assert (run / "iter-003" / name).is_file(), name
    assert len(outputs[-1].split()) == 3  # the committee's energy, its spread and the largest force spread


def test_the_learning_curve_table_quotes_the_records():
    """The table of "What selection by uncertainty buys": each run's force MAE (meV/Å, to 0.1) of the first
    attempt (its record), of the second (trust window) and of the random runs (the first record's two are
    the second's first two), and each attempt's reduction of the mean, to the whole percent; the ceiling
    to 0.1 meV/Å."""
    results = ROOT / "benchmarks" / "results"
    first = json.loads((results / "active-learning-emt-first-attempt.json").read_text())
    second = json.loads((results / "active-learning-emt.json").read_text())
    assert first["curves"]["random"] == second["curves"]["random"][:2]  # the same runs, and one more
    assert second["settings"]["trust_hi"] == 1.0
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("**What selection by uncertainty buys**"):]
    rows = [line for line in section.splitlines() if re.match(r"^\| \d+ \| \d", line)]

    def runs(record, strategy, labels):
        return [next(p for p in curve if p["labels"] == labels)["forces_mae_meV_per_A"]
                for curve in record["curves"][strategy]]

    assert [int(row.split("|")[1]) for row in rows] == [0, 50, 100, 150, 200]
    for row in rows[1:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        labels = int(cells[0])
        columns = [runs(first, "uncertainty", labels), runs(second, "uncertainty", labels),
                   runs(second, "random", labels)]
        for cell, values in zip(cells[1:4], columns):
            assert [float(v) for v in cell.split(", ")] == [round(v, 1) for v in values], (row, values)
        for cell, record in zip(cells[4:], (first, second)):
            reduction = 1 - (sum(runs(record, "uncertainty", labels)) / sum(runs(record, "random", labels)))
            assert cell == f"{100 * reduction:.0f} %".replace("-", "−"), (row, reduction)
    words = " ".join(text.split())
    assert f"reaches {second['ceiling']['forces_mae_meV_per_A']:.1f} meV/Å on the held-out set" in words


def test_the_sige_loop_table_quotes_each_iterations_metrics():
    """"What the loop bought on Si–Ge": each iteration's labels, training structures, exploration
    uncertainties (eV/Å, to 0.001), held-out force MAE (meV/Å, to 0.1), energy MAE (meV/atom, to 0.1) and
    rank correlation (to 0.01), as its ``metrics.json`` records them."""
    run = ROOT / "examples" / "datasets" / "sige-pbe" / "v2" / "learn" / "run"
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("### What the loop bought on Si–Ge"):text.index("### Stable simulation")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
            if re.match(r"^\| \d+ \| \d+ \| \d+ \|", line)]
    assert [int(r[0]) for r in rows] == list(range(len(rows))) and len(rows) >= 3
    for cells in rows:
        metrics = json.loads((run / f"iter-{int(cells[0]):03d}" / "metrics.json").read_text())
        held = metrics["heldout"]
        assert int(cells[1]) == metrics["labels"] and int(cells[2]) == metrics["n_train"], cells
        if metrics["iteration"] > 0:
            assert cells[3] == f"{metrics['max_uncertainty']:.3f} / {metrics['median_uncertainty']:.3f}"
        assert float(cells[4]) == round(held["forces_mae_meV_per_A"], 1), cells
        assert float(cells[5]) == round(held["energy_mae_meV_per_atom"], 1), cells
        assert float(cells[6]) == round(held["rank_correlation"], 2), cells
