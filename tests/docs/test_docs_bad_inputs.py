"""docs/bad-inputs.md is true: every row of its table is run here, through ``mlip.cli.main``.

Each row carries a hidden case id (``<!-- case: ID -->`` in its first cell) naming a function below
that sets the mistake up in a fresh folder and returns the command line. The row's exit status must
be the one ``main`` returns; for status 2 (bad input) and 1 (a failure at run time) stderr must be exactly
one line, ``mlip: error: ...``, holding the row's message fragment (the text between backticks in its
second cell, ``…`` standing for any text); for status 0 (a note) and 3 (a relaxation that did not
converge) stderr must hold the fragment and no error line. A row without a case, or a case without a row,
fails.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shlex
import sys
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pytest
import yaml
from ase import Atoms
from ase.build import bulk
from ase.calculators.emt import EMT as EMTCalc
from ase.calculators.singlepoint import SinglePointCalculator
from ase.io import write

from mlip.testing.datasets import emt_cells
from mlip.testing.structures import disordered_cuau_cif
from mlip.cli import main
from mlip.run_lock import folder_lock

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "bad-inputs.md"
CU_CIF = ROOT / "examples" / "structures" / "cu_fcc.cif"
EMT = "ase.calculators.emt:EMT"
TRAINED = "embedded-atom-emt"  # the cheapest shipped model; trained, so no UNTRAINED note

# Installed tests have no docs/ beside them; in a source checkout a missing table fails.
pytestmark = pytest.mark.skipif(not (ROOT / "pyproject.toml").is_file(), reason="not a source checkout")

# | <!-- case: ID --> input | `message fragment` | exit status |
ROW = re.compile(r"^\|(?P<input>.*<!-- case: (?P<case>[\w-]+) -->[^|]*)"
                 r"\|(?P<message>[^|]*)\|(?P<status>[^|]*)\|\s*$")


def documented_rows() -> dict:
    """case id → (message fragment, exit status) of every row of the table in docs/bad-inputs.md."""
    table = [line for line in DOC.read_text(encoding="utf-8").splitlines() if line.startswith("|")]
    assert len(table) > 2 and re.fullmatch(r"\|[\s|:-]+\|", table[1]), "docs/bad-inputs.md: no table"
    rows = {}
    for line in table[2:]:  # below the header and the | --- | line: every row must name its case
        match = ROW.match(line)
        assert match, f"docs/bad-inputs.md: a row without <!-- case: ID --> or not of 3 cells: {line!r}"
        case = match["case"]
        assert case not in rows, f"docs/bad-inputs.md: case {case!r} appears twice"
        fragments = re.findall(r"`([^`]+)`", match["message"])
        assert len(fragments) == 1, f"docs/bad-inputs.md, case {case}: one `fragment` per message cell"
        rows[case] = (fragments[0], int(match["status"].strip()))
    return rows


#: options a case may add to the command its row writes: where the output goes, a cheap model where the row
#: names none, no progress bar, fewer steps (each with the number of values it takes). Anything else the
#: case runs, such as a --format, must be written in the row: the row runs as written.
INCIDENTAL = {"--model": 1, "-o": 1, "--out-dir": 1, "--no-progress": 0, "--steps": 1}


def written_command(case: str) -> "list | None":
    """The command a row writes (the first backticked ``mlip …`` of its input cell) as tokens without
    ``mlip``, or None for a row that describes its input in words."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    line = next(line for line in lines if f"<!-- case: {case} -->" in line)
    spans = re.findall(r"`([^`]+)`", ROW.match(line)["input"])
    written = [span for span in spans if span.startswith("mlip ")]
    return shlex.split(written[0])[1:] if written else None


def assert_runs_as_written(written: list, argv: list) -> None:
    """``argv`` (what a case runs) is the row's command ``written``: its tokens in order (a path by its
    name), where the row writes ``…`` any tokens, and besides them only the :data:`INCIDENTAL` options."""
    def same(arg: str, word: str) -> bool:
        return arg == word or (os.sep in arg and Path(arg).name == word)

    def skip_incidental(i: int, word: "str | None") -> int:
        while i < len(argv) and argv[i] in INCIDENTAL and not (word is not None and same(argv[i], word)):
            i += 1 + INCIDENTAL[argv[i]]
        return i

    i = 0
    for j, word in enumerate(written):
        if word in ("…", "..."):  # the row leaves out what comes here, up to its next word
            following = written[j + 1] if j + 1 < len(written) else None
            while i < len(argv) and (following is None or not same(argv[i], following)):
                i += 1
            continue
        i = skip_incidental(i, word)
        assert i < len(argv) and same(argv[i], word), \
            f"the row writes `mlip {' '.join(written)}` but its case runs `mlip {' '.join(argv)}` ({word!r})"
        i += 1
    assert skip_incidental(i, None) == len(argv), \
        f"the row writes `mlip {' '.join(written)}` but its case runs `mlip {' '.join(argv)}` (more options)"


def fragment_pattern(fragment: str) -> "re.Pattern":
    """The fragment as a pattern: its text literally, each ``…`` (a path or list the table leaves out)
    standing for any text on the same line."""
    return re.compile(".*?".join(re.escape(part) for part in fragment.split("…")))


# ------------------------------------------------------------------------------ helpers
def labelled(path: Path, structures, emt: bool = True) -> Path:
    """An extxyz of ``structures`` with EMT energy, forces and stress (zeros where ``emt`` is false)."""
    frames = []
    for atoms in structures:
        if emt:
            atoms.calc = EMTCalc()
            e, f, s = atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()
        else:
            e, f, s = 0.0, np.zeros((len(atoms), 3)), np.zeros(6)
        atoms.calc = SinglePointCalculator(atoms, energy=e, forces=f, stress=s)
        frames.append(atoms)
    write(path, frames, format="extxyz")
    return path


def train_config(tmp: Path, name: str = "train.yaml", model=None, data=None, **top) -> Path:
    """A tiny training config; its data file is written when ``data`` is not given."""
    if data is None:
        train_file = tmp / "train.extxyz"
        if not train_file.exists():
            labelled(train_file, emt_cells(8, label=False))
        data = dict(train=str(train_file), valid_fraction=0.25)
    hyperparameters = dict(name="platonic", species=["Cu", "Au"], cutoff=4.0, channels=4, num_layers=1,
                           num_heads=1, head_dim=2)
    hyperparameters.update(model or {})
    cfg = dict(model=hyperparameters, data=data, epochs=1, batch_size=4, out_dir=str(tmp / "run"))
    cfg.update(top)
    path = tmp / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def hide_module(monkeypatch, missing: str) -> None:
    """Make ``import missing`` fail as if the package were not installed."""
    for name in list(sys.modules):
        if name == missing or name.startswith(missing + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, missing, None)


def run_setup(*argv) -> None:
    """A command that must succeed to set a case up."""
    assert main([str(a) for a in argv]) == 0


# ------------------------------------------------------------------------------ the cases
# Each takes a fresh folder and pytest's monkeypatch, and returns the command line to run.
def case_missing_file(tmp, monkeypatch):
    return ["relax", tmp / "nosuch.cif", "--model", EMT, "-o", tmp / "r.extxyz"]


def case_garbage_file(tmp, monkeypatch):
    garbage = tmp / "g.cif"
    garbage.write_text("this is\nnot a cif file\n_cell_length_a x\n")
    return ["relax", garbage, "--model", EMT, "-o", tmp / "r.extxyz"]


def case_empty_file(tmp, monkeypatch):
    path = tmp / "empty.xyz"
    path.write_text("")
    return ["relax", path, "--model", EMT, "-o", tmp / "r.extxyz"]


def case_partial_occupancy(tmp, monkeypatch):
    (tmp / "cuau.cif").write_text(disordered_cuau_cif(cu=0.5, au=0.5))
    return ["relax", tmp / "cuau.cif", "--model", EMT, "-o", tmp / "r.extxyz"]


def case_majority_species_tie(tmp, monkeypatch):
    return case_partial_occupancy(tmp, monkeypatch) + ["--majority-species"]


def case_unknown_extension(tmp, monkeypatch):
    path = tmp / "structure.txt"
    write(path, bulk("Cu", "fcc", a=3.6, cubic=True), format="vasp")
    return ["relax", path, "--model", EMT, "-o", tmp / "r.extxyz"]


def case_unknown_format(tmp, monkeypatch):
    return ["relax", CU_CIF, "--format", "nosuch", "--model", EMT, "-o", tmp / "r.extxyz"]


def case_index_beyond_file(tmp, monkeypatch):
    return ["md", CU_CIF, "--index", "7", "--model", EMT, "--steps", "2", "--out-dir", tmp / "md"]


def case_nan_positions(tmp, monkeypatch):
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True)
    atoms.positions[1] = np.nan
    write(tmp / "nan.extxyz", atoms)
    return ["relax", tmp / "nan.extxyz", "--model", EMT, "-o", tmp / "r.extxyz"]


def case_unknown_model(tmp, monkeypatch):
    return ["relax", CU_CIF, "--model", "nosuch-model", "-o", tmp / "r.extxyz"]


def case_element_not_in_model(tmp, monkeypatch):
    write(tmp / "fe.extxyz", bulk("Fe", "bcc", a=2.87, cubic=True))
    return ["relax", tmp / "fe.extxyz", "--model", TRAINED, "-o", tmp / "r.extxyz"]


def case_eval_element_not_in_model(tmp, monkeypatch):
    data = labelled(tmp / "fe.extxyz", [bulk("Fe", "bcc", a=2.87, cubic=True)], emt=False)
    return ["eval", TRAINED, data, "--out-dir", tmp / "ev"]


def case_eval_on_cif(tmp, monkeypatch):
    return ["eval", EMT, CU_CIF, "--out-dir", tmp / "ev"]


def case_tiny_cell(tmp, monkeypatch):
    write(tmp / "tiny.extxyz", Atoms("Cu", cell=[0.1] * 3, pbc=True))
    return ["relax", tmp / "tiny.extxyz", "--model", TRAINED, "--no-progress", "-o", tmp / "r.extxyz"]


def case_coincident_atoms(tmp, monkeypatch):
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True)
    atoms.positions[1] = atoms.positions[0]
    write(tmp / "dup.extxyz", atoms)
    return ["relax", tmp / "dup.extxyz", "--model", TRAINED, "--no-progress", "-o", tmp / "r.extxyz"]


def case_relax_not_converged(tmp, monkeypatch):
    atoms = bulk("Cu", "fcc", a=3.7, cubic=True)
    atoms.rattle(0.1, seed=0)
    write(tmp / "cu.extxyz", atoms)
    return ["relax", tmp / "cu.extxyz", "--model", EMT, "--steps", "2", "--fmax", "0.001", "--no-progress",
            "-o", tmp / "r.extxyz"]


def case_compile_foreign_calculator(tmp, monkeypatch):
    return ["relax", CU_CIF, "--model", EMT, "--compile", "--no-progress", "-o", tmp / "r.extxyz"]


def case_md_out_dir_holds_run(tmp, monkeypatch):
    base = ["md", CU_CIF, "--model", EMT, "--steps", "2", "--no-progress", "--out-dir", tmp / "md"]
    run_setup(*base)
    return base


MD = ["md", CU_CIF, "--model", EMT, "--steps", "2", "--no-progress", "--out-dir", "md"]  # in the case's tmp
_held = ExitStack()  # the run locks a case holds while its command runs, released after each test


@pytest.fixture(autouse=True)
def _release_held_locks():
    yield
    _held.close()


def case_md_unfinished_run(tmp, monkeypatch):
    Path("md").mkdir()
    Path("md/md.log").write_text("Time[ps]      Etot[eV]     Epot[eV]    Ekin[eV]    T[K]\n")
    Path("md/md.traj").write_bytes(b"- of ulmASE-Trajectory")  # cut short by the kill
    return MD


def case_md_empty_leftovers(tmp, monkeypatch):
    Path("md").mkdir()
    Path("md/md.log").write_text("")
    Path("md/md.traj").write_text("")
    return MD


def case_md_out_dir_in_use(tmp, monkeypatch):
    _held.enter_context(folder_lock("md", command="mlip md cu_fcc.cif --model default --out-dir md"))
    return MD


def case_md_lock_of_killed_run(tmp, monkeypatch):
    Path("md").mkdir()
    Path("md/.mlip.lock").write_text(json.dumps({  # a PID above Linux's largest: no process has it
        "pid": 2 ** 22 + 1, "host": "node7", "since": "2025-01-02 03:04:05", "command": "mlip md x.cif"}))
    return MD


def case_shard_in_use(tmp, monkeypatch):
    _one_structure(tmp)
    argv = ["data", "label", "s.xyz", "--calculator", "emt", "--out-dir", "run", "-o", "l.xyz",
            "--shards", "2", "--shard-index", "0"]
    _held.enter_context(folder_lock("run", shard=(0, 2), command=" ".join(["mlip", *map(str, argv)])))
    return argv


def case_relax_output_exists(tmp, monkeypatch):
    argv = ["relax", CU_CIF, "--model", EMT, "--no-progress", "-o", "r.extxyz"]
    run_setup(*argv)
    return argv


def case_eval_out_dir_holds_results(tmp, monkeypatch):
    labelled(tmp / "cu.extxyz", [bulk("Cu", "fcc", a=a, cubic=True) for a in (3.55, 3.65)])
    run_setup("eval", EMT, "cu.extxyz", "--out-dir", "ev")
    return ["eval", TRAINED, "cu.extxyz", "--out-dir", "ev"]


def case_out_dir_is_a_file(tmp, monkeypatch):
    Path("notes.txt").write_text("mine")
    return MD[:-1] + ["notes.txt"]


def case_read_only_out_dir(tmp, monkeypatch):
    ro = tmp / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    if os.geteuid() == 0:  # root writes anywhere: give it the kernel's answer to any other user
        real_open = os.open

        def open_as_a_user(path, flags, *args, **kwargs):
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and Path(path).absolute().parent == ro:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", open_as_a_user)
    return MD[:-1] + ["ro"]


def case_disk_full(tmp, monkeypatch):
    Path("full.extxyz").symlink_to("/dev/full")  # every write: ENOSPC
    return ["relax", CU_CIF, "--model", EMT, "--no-progress", "-o", "full.extxyz", "--overwrite"]


def case_md_implausible_temperature(tmp, monkeypatch):
    return ["md", CU_CIF, "--temperature", "1e9", "--model", EMT, "--out-dir", tmp / "md"]


def case_md_implausible_timestep(tmp, monkeypatch):
    return ["md", CU_CIF, "--timestep", "1000", "--model", EMT, "--out-dir", tmp / "md"]


def case_md_option_of_another_ensemble(tmp, monkeypatch):
    return ["md", CU_CIF, "--pressure", "5", "--model", EMT, "--out-dir", tmp / "md"]


def case_md_exploded(tmp, monkeypatch):
    return ["md", CU_CIF, "--supercell", "2", "--timestep", "60", "--allow-extreme", "--seed", "0", "--model", EMT,
            "--no-progress", "--out-dir", tmp / "md"]


def case_md_too_large_for_memory(tmp, monkeypatch):
    return ["md", CU_CIF, "--supercell", "60", "60", "60", "--no-progress", "--out-dir", tmp / "md"]


def crafted_checkpoint(tmp: Path, name: str, **change) -> Path:
    """A small Platonic checkpoint with the header entries ``change`` (tensors as written)."""
    from mlip.checkpoint import read_header, save_potential, write_with_header
    from mlip.models import create_model

    good = save_potential(create_model("platonic", species=["Cu"], cutoff=4.0, channels=4, num_layers=1),
                          tmp / "good.safetensors")
    header = read_header(good)
    header.update({k: v for k, v in change.items() if k != "hyperparameters"})
    header["hyperparameters"].update(change.get("hyperparameters", {}))
    return write_with_header(good, tmp / name, header)


def case_info_unknown_architecture(tmp, monkeypatch):
    return ["info", crafted_checkpoint(tmp, "crafted.safetensors", architecture="os:system")]


def case_info_directory(tmp, monkeypatch):
    (tmp / "runs").mkdir()
    return ["info", "runs"]  # the test runs in tmp


def case_header_asks_too_much(tmp, monkeypatch):
    return ["info", crafted_checkpoint(tmp, "huge.safetensors", hyperparameters=dict(channels=10**6))]


def case_create_misspelt_hyperparameter(tmp, monkeypatch):
    return ["create", "platonic", "--species", "Cu", "--cutoff", "4", "--set", "chanels=8",
            "-o", tmp / "x.safetensors"]


def case_train_out_dir_holds_run(tmp, monkeypatch):
    path = train_config(tmp)
    run_setup("train", path, "--no-progress")
    return ["train", path, "--no-progress"]


def case_resume_changed_batch_size(tmp, monkeypatch):
    run_setup("train", train_config(tmp, max_minutes=0), "--no-progress")
    return ["train", train_config(tmp, name="changed.yaml", batch_size=2), "--resume", "--no-progress"]


def case_resume_without_run(tmp, monkeypatch):
    return ["train", train_config(tmp), "--resume", "--no-progress"]


def case_session_minutes_not_positive(tmp, monkeypatch):
    return ["train", train_config(tmp), "--session-minutes", "0"]


def case_train_data_missing(tmp, monkeypatch):
    return ["train", train_config(tmp, data=dict(train=str(tmp / "missing.extxyz"))), "--no-progress"]


def case_misspelt_hyperparameter(tmp, monkeypatch):
    return ["train", train_config(tmp, model=dict(chanels=8))]


def case_unknown_repulsion(tmp, monkeypatch):
    return ["train", train_config(tmp, model=dict(repulsion="lj"))]


def case_unknown_term(tmp, monkeypatch):
    return ["train", train_config(tmp, model=dict(terms={"lj": {}}))]


def case_misspelt_key(tmp, monkeypatch):
    return ["train", train_config(tmp, epoch=3)]


def case_wrong_type(tmp, monkeypatch):
    return ["train", train_config(tmp, epochs="two")]


def case_exponent_without_dot(tmp, monkeypatch):
    return ["train", train_config(tmp, optimizer=dict(lr="1e-3"))]


def case_wrong_hyperparameter_type(tmp, monkeypatch):
    return ["train", train_config(tmp, model=dict(channels="eight"))]


def case_missing_phonopy(tmp, monkeypatch):
    hide_module(monkeypatch, "phonopy")
    return ["phonons", CU_CIF, "--model", EMT, "--no-relax", "--no-progress", "--out-dir", tmp / "ph"]


def case_missing_phono3py(tmp, monkeypatch):
    hide_module(monkeypatch, "phono3py")
    return ["kappa", CU_CIF, "--model", EMT, "--no-relax", "--no-progress", "--out-dir", tmp / "kappa"]


def case_missing_pymatgen(tmp, monkeypatch):
    hide_module(monkeypatch, "pymatgen")
    return ["discovery", "emt-benchmark", tmp / "emt", "-n", "4", "--no-progress"]


def _one_structure(tmp):
    from ase.build import bulk
    from ase.io import write

    write(tmp / "s.xyz", bulk("Si", "diamond", a=5.43))
    return tmp / "s.xyz"


def case_unknown_calculator(tmp, monkeypatch):
    return ["data", "label", _one_structure(tmp), "--calculator", "vasp", "--out-dir", tmp / "run",
            "-o", tmp / "l.xyz"]


def case_unknown_gpaw_setting(tmp, monkeypatch):
    return ["data", "label", _one_structure(tmp), "--calculator", "gpaw", "--setting", "ecut=300",
            "--out-dir", tmp / "run", "-o", tmp / "l.xyz"]


def case_structures_output_exists(tmp, monkeypatch):
    return ["data", "structures", "Si", "-o", _one_structure(tmp)]


def case_missing_gpaw(tmp, monkeypatch):
    hide_module(monkeypatch, "gpaw")
    return ["data", "label", _one_structure(tmp), "--calculator", "gpaw", "--out-dir", tmp / "run",
            "-o", tmp / "l.xyz"]


CASES = {name[len("case_"):].replace("_", "-"): func for name, func in globals().items()
         if name.startswith("case_")}


# ------------------------------------------------------------------------------ the tests
def test_the_table_and_the_cases_name_the_same_mistakes():
    rows = documented_rows()
    assert len(rows) >= 20
    assert sorted(set(rows) - set(CASES)) == [], "rows of docs/bad-inputs.md without a case function"
    assert sorted(set(CASES) - set(rows)) == [], "case functions without a row in docs/bad-inputs.md"


def test_a_case_runs_its_row_as_written():
    """A case may add where the output goes, a model, --no-progress and --steps to its row's command, and
    fill what the row leaves out with …; anything else (the --format that once made the empty-file row
    pass with another message than the row's command gets) fails."""
    row = ["relax", "empty.xyz"]
    assert_runs_as_written(row, ["relax", "/t/empty.xyz", "--model", EMT, "-o", "/t/r.extxyz"])
    with pytest.raises(AssertionError, match="more options"):
        assert_runs_as_written(row, ["relax", "/t/empty.xyz", "--format", "extxyz", "--model", EMT])
    with pytest.raises(AssertionError, match="'empty.xyz'"):
        assert_runs_as_written(row, ["relax", "/t/other.xyz"])
    assert_runs_as_written(["md", "…", "--out-dir", "md"],
                           ["md", "/r/cu.cif", "--seed", "1", "--out-dir", "/t/md"])


@pytest.mark.parametrize("case", sorted(CASES))
def test_documented_message(case, tmp_path, monkeypatch, capsys):
    rows = documented_rows()
    assert case in rows, f"docs/bad-inputs.md has no row for case {case!r}"
    fragment, status = rows[case]
    monkeypatch.chdir(tmp_path)  # anything a case writes by mistake stays in its folder
    argv = [str(a) for a in CASES[case](tmp_path, monkeypatch)]
    written = written_command(case)
    if written is not None:
        assert_runs_as_written(written, argv)
    capsys.readouterr()  # the setup's output
    code = main(argv)
    err = capsys.readouterr().err
    assert code == status, err
    assert "Traceback" not in err, err
    assert fragment_pattern(fragment).search(err), f"{fragment!r} not in {err!r}"
    if status in (1, 2):
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("mlip: error: "), err
    else:
        assert "mlip: error" not in err, err
