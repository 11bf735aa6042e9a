"""benchmarks/accuracy/mace_baseline.py's pieces that run without MACE: the timed MD cells and the table."""

from __future__ import annotations

from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy" / "mace_baseline.py"


@pytest.mark.parametrize("kind, sizes, pure, guest", [("cu-au", [256, 500], "Cu", "Au"),
                                                      ("si-ge", [216, 512], "Si", "Ge")])
def test_md_cells_are_a_crystal_and_a_half_and_half_alloy(script, kind, sizes, pure, guest):
    crystal, alloy = script.md_cells(kind)
    assert [len(crystal), len(alloy)] == sizes
    assert set(crystal.get_chemical_symbols()) == {pure}
    assert alloy.get_chemical_symbols().count(guest) == len(alloy) // 2
    again = script.md_cells(kind)[1]  # seeded: the same cell on every run, for both programs
    assert again.get_chemical_symbols() == alloy.get_chemical_symbols()
    assert abs(again.positions - alloy.positions).max() == 0


def test_the_table_has_the_columns_of_the_cells_timed(script):
    md = {str(n): {"ms_per_step": 2.0 * n, "atom_steps_per_s": 500.0} for n in (216, 512)}
    row = {"model": "m", "n_parameters": 1234, "test": {"energy_mae_meV_per_atom": 1.5}, "md": md,
           "cost_vs_mace_216": 0.5, "cost_vs_mace_512": 2.0, "aim_met": "no"}
    text = script.table([row], [216, 512])
    assert "ms/step 216" in text and "cost vs MACE 512" in text
    assert "| m | 1,234 | 1.50 | – | – | 432.0 | 1024.0 | 500 | 500 | 0.50 | 2.00 | no |" in text
