"""benchmarks/speed/shipped_md_step.py: the JSON record gives wall-clock and CPU time per step for every
model and structure, the command, and a MACE arm timed through the helper's ``time`` command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "speed" / "shipped_md_step.py"


def test_record_has_cpu_times_and_the_command(script, tmp_path, monkeypatch):
    def fake_time_mace(python, model, structures, repeats, threads):
        assert (python, model, threads) == ("mace-python", "m.model", 1)
        return {label: (0.002, 0.001) for label in structures}

    monkeypatch.setattr(script, "time_mace", fake_time_mace)
    monkeypatch.setattr(sys, "argv", ["shipped_md_step.py", "embedded-atom-emt"])
    out = tmp_path / "md.json"
    assert script.main(["embedded-atom-emt", "--rounds", "1", "--repeats", "1", "--json", str(out),
                        "--mace-model", "m.model", "--mace-python", "mace-python"]) == 0
    record = json.loads(out.read_text())
    assert record["command"].startswith("python shipped_md_step.py") and record["compile_s"] == {}
    rows = {(row["model"], row["structure"]): row for row in record["rows"]}
    assert {model for model, _ in rows} == {"embedded-atom-emt", "MACE"}
    for (model, _), row in rows.items():
        assert row["ms_per_step"] > 0 and row["cpu_ms"] > 0 and len(row["rounds_cpu_ms"]) == 1
    mace = rows["MACE", "fcc Cu, 256 atoms"]
    assert mace["ms_per_step"] == 2.0 and mace["cpu_ms"] == 1.0
    assert mace["cpu_vs_embedded-atom-emt"] == 1.0 / rows["embedded-atom-emt", "fcc Cu, 256 atoms"]["cpu_ms"]
