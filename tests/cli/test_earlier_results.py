"""No silent overwrite: ``mlip relax`` and ``mlip eval`` keep an earlier result (of any model) unless told
``--overwrite``, as ``md`` and ``train`` do; what an unfinished ``md`` run left is named, with what to do."""

from __future__ import annotations

import json
from pathlib import Path

from ase.build import bulk
from ase.calculators.emt import EMT as EMTCalc
from ase.calculators.singlepoint import SinglePointCalculator
from ase.io import read, write

from mlip.testing.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
CU_CIF = ROOT / "examples" / "structures" / "cu_fcc.cif"
EMT = "ase.calculators.emt:EMT"
TRAINED = "embedded-atom-emt"


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mlip: error: "), err
    return lines[0]


def test_relax_keeps_an_earlier_result_unless_overwrite(tmp_path, capsys):
    out = tmp_path / "r.extxyz"
    relax = ["relax", CU_CIF, "--fmax", "0.05", "--no-progress", "-o", out]
    assert run_cli(capsys, *relax, "--model", EMT)[0] == 0
    code, _, err = run_cli(capsys, *relax, "--model", TRAINED)  # another model: still refused
    assert code == 2
    assert one_error_line(err) == (f"mlip: error: {out} exist(s); choose another --output (-o) or pass "
                                   f"--overwrite")
    assert read(out).info["model"] == EMT
    code, _, err = run_cli(capsys, *relax, "--model", TRAINED, "--overwrite")
    assert code == 0, err
    assert read(out).info["model"] == TRAINED


def test_relax_keeps_an_earlier_trajectory_unless_overwrite(tmp_path, capsys):
    traj = tmp_path / "opt.traj"
    traj.write_bytes(b"an earlier optimisation")
    code, _, err = run_cli(capsys, "relax", CU_CIF, "--model", EMT, "--no-progress",
                           "-o", tmp_path / "r.extxyz", "--trajectory", traj)
    assert code == 2
    assert f"{traj} exist(s); choose another --output (-o) and --trajectory" in one_error_line(err)
    assert traj.read_bytes() == b"an earlier optimisation" and not (tmp_path / "r.extxyz").exists()


def labelled(path: Path) -> Path:
    frames = []
    for a in (3.55, 3.6, 3.65):
        atoms = bulk("Cu", "fcc", a=a, cubic=True)
        atoms.calc = EMTCalc()
        atoms.calc = SinglePointCalculator(atoms, energy=atoms.get_potential_energy(),
                                           forces=atoms.get_forces(), stress=atoms.get_stress())
        frames.append(atoms)
    write(path, frames, format="extxyz")
    return path


def test_eval_keeps_an_earlier_evaluation_unless_overwrite(tmp_path, capsys):
    data = labelled(tmp_path / "cu.extxyz")
    out = tmp_path / "ev"
    assert run_cli(capsys, "eval", EMT, data, "--out-dir", out)[0] == 0
    first = (out / "metrics.json").read_text()
    code, _, err = run_cli(capsys, "eval", TRAINED, data, "--out-dir", out)
    assert code == 2
    line = one_error_line(err)
    assert line.startswith(f"mlip: error: {out} already holds metrics.json")
    assert f"of an earlier evaluation (model {EMT!r} on {str(data)!r}): choose another --out-dir, or pass " \
           f"--overwrite to replace them" in line
    assert (out / "metrics.json").read_text() == first
    code, _, err = run_cli(capsys, "eval", TRAINED, data, "--out-dir", out, "--overwrite")
    assert code == 0, err
    assert json.loads((out / "metrics.json").read_text())["model"] == TRAINED


def md_argv(out_dir):
    return ["md", CU_CIF, "--model", EMT, "--steps", "2", "--no-progress", "--out-dir", out_dir]


def killed_md_run(tmp_path, log: str, traj: bytes) -> Path:
    """A folder with what a killed ``mlip md`` left: md.log and md.traj, no md_summary.json."""
    out = tmp_path / "md"
    out.mkdir()
    (out / "md.log").write_text(log)
    (out / "md.traj").write_bytes(traj)
    return out


def test_md_names_an_unfinished_earlier_run_and_what_to_do(tmp_path, capsys):
    out = killed_md_run(tmp_path, "Time[ps]      Etot[eV]     Epot[eV]    Ekin[eV]    T[K]\n", b"")
    code, _, err = run_cli(capsys, *md_argv(out))
    assert code == 2
    assert one_error_line(err) == (
        f"mlip: error: {out} holds md.traj, md.log of an earlier run that did not finish (no "
        f"md_summary.json: it was stopped or failed) and MD does not resume: pass --overwrite to replace "
        f"them, or choose another --out-dir")
    assert run_cli(capsys, *md_argv(out), "--overwrite")[0] == 0


def test_md_replaces_the_empty_files_of_a_run_stopped_before_its_first_step(tmp_path, capsys):
    out = killed_md_run(tmp_path, "", b"")
    code, _, err = run_cli(capsys, *md_argv(out))
    assert code == 0, err
    assert (f"NOTE: {out}: replacing the empty md.traj, md.log of an earlier run that was stopped before its "
            f"first step") in err
    assert (out / "md_summary.json").is_file() and (out / "md.traj").stat().st_size > 0
