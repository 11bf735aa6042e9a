"""benchmarks/student_vs_teacher.py: EMT as the teacher and as its own student on two fcc-metal systems and
fcc Cu; the teacher as its student scores F1 = 1, MAE within rounding and κ_SRME = 0; a rerun computes
nothing; a run of one stage keeps the others' results; bad inputs are refused before anything runs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "student_vs_teacher.py"

pytestmark = pytest.mark.skipif(not SCRIPT.is_file(),
                                reason="benchmarks/ is not beside the tests (installed tests)")
pytest.importorskip("pymatgen")
pytest.importorskip("matbench_discovery")
pytest.importorskip("phono3py")
pytest.importorskip("matplotlib")

#: two systems and a seed whose 6 candidates hold stable and unstable ones (the run checks it)
TINY = ["--teacher", "emt", "--systems", "Cu-Au", "Cu-Pt", "--seed", "1", "-n", "6",
        "--kappa-compounds", "Cu:fcc:3.61", "--kappa-mesh", "5", "--no-progress"]
ROUNDING = 5e-5  # half the last of the 4 decimals of the submission file, eV/atom


@pytest.fixture(scope="module")
def svt():
    spec = importlib.util.spec_from_file_location("student_vs_teacher", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def first_run(svt, tmp_path_factory):
    out = tmp_path_factory.mktemp("svt")
    argv = ["--student", "ase.calculators.emt:EMT", "--out", str(out), *TINY]
    return out, argv, svt.main(argv)


@pytest.mark.slow
def test_teacher_as_student_is_perfect(first_run):
    out, _, report = first_run
    assert json.loads((out / "student_vs_teacher.json").read_text()) == report
    disc = report["stages"]["discovery"]
    assert 1 <= disc["benchmark"]["n_stable"] < disc["n_materials"] == 6
    m = disc["metrics"]
    assert m["F1"] == 1.0 and m["Precision"] == 1.0 and m["Recall"] == 1.0 and m["FP"] == m["FN"] == 0
    assert m["MAE"] <= ROUNDING and m["RMSE"] <= ROUNDING
    assert disc["RMSD"] < 1e-6 and disc["n_rmsd"] == 6
    assert set(disc["per_system"]) <= {"Cu-Au", "Cu-Pt"}
    assert sum(s["n"] for s in disc["per_system"].values()) == 6
    kappa = report["stages"]["kappa"]
    row = kappa["compounds"]["Cu-fcc"]
    assert row["kappa_model"] > 0 and row["srme"] == pytest.approx(0.0, abs=1e-10)
    assert kappa["mean_srme"] == pytest.approx(0.0, abs=1e-10)
    for path in (disc["files"]["parity_plot"], kappa["files"]["bars"]):
        assert Path(path).read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_rerun_computes_nothing_and_one_stage_keeps_the_others(svt, first_run):
    out, argv, report = first_run
    again = svt.main(argv)
    assert again["stages"]["discovery"]["computed"] == {"teacher_relaxations": 0, "student_relaxations": 0}
    assert again["stages"]["kappa"]["computed"] == {"reference": 0, "model": 0}
    assert again["stages"]["discovery"]["metrics"] == report["stages"]["discovery"]["metrics"]
    only = svt.main(argv + ["--stages", "kappa"])
    assert set(only["stages"]) == {"discovery", "kappa"}  # discovery's earlier results kept
    assert only["stages"]["discovery"] == again["stages"]["discovery"]


@pytest.mark.slow
def test_another_student_in_the_same_folder_is_refused(svt, first_run):
    out, _, _ = first_run
    with pytest.raises(ValueError, match="use another folder"):
        svt.main(["--student", "emt", "--out", str(out), *TINY])


@pytest.mark.parametrize("extra, message", [
    (["--systems", "CuAu"], "unknown system 'CuAu'"),
    (["-n", "0"], "-n must be >= 1"),
    (["--kappa-compounds", "Unobtainium"], "unknown compound"),
])
def test_bad_inputs_are_refused_before_anything_runs(svt, tmp_path, extra, message):
    out = tmp_path / "svt"
    with pytest.raises(ValueError, match=message) as info:
        svt.main(["--student", "emt", "--out", str(out), *TINY, *extra])
    assert "\n" not in str(info.value) and not out.exists()


def test_stage_table_runs_in_order(svt):
    assert list(svt.STAGES) == ["discovery", "kappa"]
    with pytest.raises(SystemExit):  # argparse: an unknown stage
        svt.parse_args(["--student", "emt", "--teacher", "emt", "--out", "x", "--stages", "nonsense"])
