"""One writer per output folder (:mod:`mlip.run_lock`): the lock itself, then every command that writes a
folder, with a real second process, a killed holder and Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from ase.build import bulk
from ase.io import write

from mlip.run_lock import LOCK_NAME, FolderInUseError, folder_lock, shard_lock_name
from mlip.testing.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
CU_CIF = ROOT / "examples" / "structures" / "cu_fcc.cif"
EMT = "ase.calculators.emt:EMT"
DEAD_PID = 2 ** 22 + 12345  # above Linux's largest PID (pid_max <= 2**22): no process has it


def dead_holder_record(command: str = "mlip md cu.cif --out-dir md") -> str:
    return json.dumps({"pid": DEAD_PID, "host": "node7", "since": "2025-01-02 03:04:05", "command": command})


# ---------------------------------------------------------------------------------------- the lock
def test_a_second_holder_is_refused_naming_the_first(tmp_path):
    folder = tmp_path / "out"
    with folder_lock(folder, command="mlip md cu.cif --out-dir out"):
        record = json.loads((folder / LOCK_NAME).read_text())
        assert record["pid"] == os.getpid() and record["command"] == "mlip md cu.cif --out-dir out"
        with pytest.raises(FolderInUseError, match=rf"out is in use by PID {os.getpid()} on host .* "
                                                   r"\(mlip md cu.cif --out-dir out\), since 20"):
            with folder_lock(folder):
                pass
    assert not (folder / LOCK_NAME).exists()  # released: the file goes, the next run gets the folder
    with folder_lock(folder):
        pass


def test_the_lock_is_released_on_an_exception_and_a_folder_left_empty_is_removed(tmp_path):
    folder = tmp_path / "a" / "b"
    with pytest.raises(KeyboardInterrupt):
        with folder_lock(folder):
            assert folder.is_dir()
            raise KeyboardInterrupt
    assert not (tmp_path / "a").exists()  # created by the run, nothing written: gone
    with pytest.raises(RuntimeError):
        with folder_lock(folder):
            (folder / "result.json").write_text("{}")
            raise RuntimeError
    assert sorted(p.name for p in folder.iterdir()) == ["result.json"]


def test_a_dead_holders_lock_is_taken_over_with_a_note(tmp_path):
    folder = tmp_path / "md"
    folder.mkdir()
    (folder / LOCK_NAME).write_text(dead_holder_record())
    notes = []
    with folder_lock(folder, note=notes.append):
        assert json.loads((folder / LOCK_NAME).read_text())["pid"] == os.getpid()
    assert len(notes) == 1
    assert f"taking over the lock of PID {DEAD_PID} on host node7 (mlip md cu.cif --out-dir md)" in notes[0]
    assert "ended without releasing it" in notes[0]


def test_shards_share_a_folder_but_each_shard_has_one_process(tmp_path):
    folder = tmp_path / "run"
    with folder_lock(folder, shard=(0, 2), command="shard zero"), folder_lock(folder, shard=(1, 2)):
        with pytest.raises(FolderInUseError,
                           match=r"shard 0 of 2 of .*run is in use by PID \d+ .*shard zero"):
            with folder_lock(folder, shard=(0, 2)):
                pass
        with pytest.raises(FolderInUseError, match=r"run is in use by sharded runs \(shard 0 of 2: PID .*"
                                                   r"shard zero.*; shard 1 of 2: PID"):
            with folder_lock(folder):  # a whole-folder run beside the shards
                pass
    assert not folder.exists()  # the last shard out removed the shared file, then the empty folder it made
    with folder_lock(folder, command="whole run"):
        with pytest.raises(FolderInUseError, match="run is in use by PID .*whole run"):
            with folder_lock(folder, shard=(1, 2)):
                pass
    with folder_lock(folder, shard=(0, 1)):  # one shard of one is the whole folder
        with pytest.raises(FolderInUseError):
            with folder_lock(folder):
                pass


def test_a_dead_shards_lock_is_taken_over(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / shard_lock_name(1, 4)).write_text(dead_holder_record("mlip data label s.xyz --shard-index 1"))
    notes = []
    with folder_lock(folder, shard=(1, 4), note=notes.append):
        pass
    assert len(notes) == 1 and "(shard 1 of 4): taking over the lock of PID" in notes[0]
    assert not any(folder.iterdir())


def test_a_filesystem_without_locks_runs_unlocked_after_a_note(tmp_path, monkeypatch):
    import errno
    import fcntl

    def no_locks(fd, operation):  # what flock answers on some network filesystems
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    notes = []
    with folder_lock(tmp_path / "nfs", note=notes.append):
        (tmp_path / "nfs" / "result.json").write_text("{}")
    assert notes == [f"NOTE: {tmp_path / 'nfs'} is on a filesystem without file locks: a second run into it "
                     f"would not be refused"]
    assert [p.name for p in (tmp_path / "nfs").iterdir()] == ["result.json"]


def test_a_file_in_the_way_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("afile").write_text("")
    with pytest.raises(NotADirectoryError, match="^afile is a file, not a folder$"):
        with folder_lock("afile"):
            pass
    with pytest.raises(NotADirectoryError,
                       match="^cannot create folder afile/x: afile is a file, not a folder$"):
        with folder_lock("afile/x"):
            pass


# ---------------------------------------------------------------------------------------- every command
def _kappa_batch_file(tmp):
    atoms = bulk("Cu", "fcc", a=3.6)
    atoms.info.update(material_id="cu", fc2_supercell=[2, 2, 2], fc3_supercell=[2, 2, 2],
                      q_point_mesh=[4, 4, 4])
    write(tmp / "kappa.extxyz", atoms)
    return tmp / "kappa.extxyz"


def _discovery_file(tmp):
    atoms = bulk("Cu", "fcc", a=3.6)
    atoms.info["material_id"] = "cu"
    write(tmp / "initial.extxyz", atoms)
    return tmp / "initial.extxyz"


def _train_config(tmp):
    config = dict(model=dict(name="platonic", species=["Cu"], cutoff=4.0, channels=4, num_layers=1,
                             num_heads=1, head_dim=2),
                  data=dict(train=str(tmp / "train.extxyz")), epochs=1, out_dir=str(tmp / "held"))
    (tmp / "train.yaml").write_text(yaml.safe_dump(config))
    return tmp / "train.yaml"


def _labelled(tmp):
    from ase.calculators.emt import EMT as EMTCalc
    from ase.calculators.singlepoint import SinglePointCalculator

    atoms = bulk("Cu", "fcc", a=3.6)
    atoms.calc = EMTCalc()
    atoms.calc = SinglePointCalculator(atoms, energy=atoms.get_potential_energy(), forces=atoms.get_forces(),
                                       stress=atoms.get_stress())
    write(tmp / "labelled.extxyz", atoms)
    return tmp / "labelled.extxyz"


# Each: the command line of a command that writes the folder ``held`` (``tmp``: a scratch folder).
FOLDER_COMMANDS = {
    "md": lambda tmp: ["md", CU_CIF, "--model", EMT, "--steps", "2", "--out-dir", tmp / "held"],
    "train": lambda tmp: ["train", _train_config(tmp)],
    "phonons": lambda tmp: ["phonons", CU_CIF, "--model", EMT, "--out-dir", tmp / "held"],
    "kappa": lambda tmp: ["kappa", CU_CIF, "--model", EMT, "--out-dir", tmp / "held"],
    "kappa-batch": lambda tmp: ["kappa", _kappa_batch_file(tmp), "--batch", "--model", EMT,
                                "--out-dir", tmp / "held"],
    "discovery-relax": lambda tmp: ["discovery", "relax", _discovery_file(tmp), "--model", EMT,
                                    "--out-dir", tmp / "held"],
    "discovery-join": lambda tmp: ["discovery", "join", tmp / "run", "--elemental-refs", tmp / "refs.json",
                                   "--out-dir", tmp / "held"],
    "discovery-metrics": lambda tmp: ["discovery", "metrics", tmp / "d.csv.gz", "--reference", tmp / "s.csv",
                                      "--out-dir", tmp / "held"],
    "discovery-emt-benchmark": lambda tmp: ["discovery", "emt-benchmark", tmp / "held", "-n", "4"],
    "discovery-teacher-benchmark": lambda tmp: ["discovery", "teacher-benchmark", tmp / "held",
                                                "--calculator", "emt"],
    "data-label": lambda tmp: ["data", "label", _discovery_file(tmp), "--calculator", "emt",
                               "--out-dir", tmp / "held", "-o", tmp / "l.xyz"],
    "distill": lambda tmp: ["distill", "Cu", "--teacher", "emt", "--out-dir", tmp / "held"],
    "eval": lambda tmp: ["eval", EMT, _labelled(tmp), "--out-dir", tmp / "held"],
    "learn": lambda tmp: ["learn", _labelled(tmp), "--oracle", "emt", "--out-dir", tmp / "held"],
}


def test_every_command_that_writes_a_folder_is_listed():
    """The commands whose arguments name an output folder (``out_dir``) are the ones above."""
    import argparse
    import importlib

    from mlip.cli import build_parser
    from mlip.cli.data import DATA_COMMANDS

    found = set()

    def walk(parser, name):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, subparser in action.choices.items():
                    walk(subparser, f"{name}-{sub}".strip("-"))
            elif action.dest == "out_dir":
                found.add(name)

    walk(build_parser(), "")
    for sub, module in DATA_COMMANDS.items():  # each data command parses its own arguments
        module = importlib.import_module(module)
        if hasattr(module, "build_parser"):
            walk(module.build_parser(), f"data-{sub}")
    assert found == {name.replace("kappa-batch", "kappa") for name in FOLDER_COMMANDS}


@pytest.mark.parametrize("command", sorted(FOLDER_COMMANDS))
def test_a_command_into_a_folder_another_run_holds_is_refused_at_once(command, tmp_path, monkeypatch,
                                                                       capsys):
    monkeypatch.chdir(tmp_path)
    argv = FOLDER_COMMANDS[command](tmp_path)
    with folder_lock(tmp_path / "held", command="mlip md other.cif --out-dir held"):
        code, _, err = run_cli(capsys, *argv)
        assert code == 2, err
        assert err.strip().splitlines() == [err.strip()] and err.startswith("mlip: error: "), err
        assert f"held is in use by PID {os.getpid()} on host" in err, err
        assert "(mlip md other.cif --out-dir held)" in err and "wait for it to end" in err, err
        assert sorted(p.name for p in (tmp_path / "held").iterdir()) == [LOCK_NAME]  # nothing written


def test_shards_of_data_label_share_the_folder_but_not_a_shard(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    structures = tmp_path / "s.xyz"
    write(structures, [bulk("Cu", "fcc", a=a) for a in (3.5, 3.6, 3.7, 3.8)])
    base = ["data", "label", structures, "--calculator", "emt", "--out-dir", tmp_path / "lab", "-o",
            tmp_path / "l.xyz", "--shards", "2", "--no-progress"]
    with folder_lock(tmp_path / "lab", shard=(0, 2), command="mlip data label s.xyz --shard-index 0"):
        code, _, err = run_cli(capsys, *base, "--shard-index", "0")
        assert code == 2 and "shard 0 of 2 of" in err and "--shard-index 0" in err, err
        code, out, err = run_cli(capsys, *base, "--shard-index", "1")  # the other shard runs beside it
        assert code == 0, err
        assert "shard 2/2: 2 structures" in out
    code, _, err = run_cli(capsys, *base, "--shard-index", "0")
    assert code == 0, err
    assert (tmp_path / "l.xyz").is_file()
    assert not list((tmp_path / "lab").glob(".mlip*"))


@pytest.mark.parametrize("world_size, rank, writes", [("1", "1", True), ("2", "0", True), ("2", "1", False)])
def test_of_the_torchrun_ranks_of_a_training_rank_0_alone_locks(world_size, rank, writes, tmp_path,
                                                                monkeypatch, capsys):
    import mlip.training

    held = []

    def training(config, **kwargs):  # what the trainer would find: the folder locked by this process or not
        held.append((Path(config.out_dir) / LOCK_NAME).exists())
        return mlip.training.TrainResult(history=[], best=None, last=None, epochs_run=0)

    monkeypatch.setattr(mlip.training, "train", training)  # a rank > 0 would wait for the process group
    monkeypatch.setenv("WORLD_SIZE", world_size)
    monkeypatch.setenv("RANK", rank)
    code, _, err = run_cli(capsys, "train", _train_config(tmp_path), "--no-progress")
    assert code == 0, err
    assert held == [writes]


def test_a_process_that_does_not_write_takes_no_lock(tmp_path, monkeypatch, capsys):
    """The MPI ranks > 0 of a GPAW labelling compute every structure but write nothing: a lock held on the
    folder does not stop them (rank 0, which writes, holds it)."""
    from mlip.workflows.labelling import Labeller

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(Labeller, "is_writer", property(lambda self: False))
    argv = FOLDER_COMMANDS["data-label"](tmp_path) + ["--no-progress"]
    with folder_lock(tmp_path / "held", command="rank 0"):
        code, _, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert not (tmp_path / "held" / "results").exists()  # computed, not written


# ---------------------------------------------------------------------------------------- real processes
def _default_sigint():
    """In the child before it starts: Ctrl-C (SIGINT) interrupts it. A shell without job control starts
    background commands with SIGINT ignored (``pytest … &`` in a script), and a child would inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def mlip_process(*argv, cwd, **kwargs) -> subprocess.Popen:
    env = dict(os.environ, OMP_NUM_THREADS="1", MLIP_DEBUG="0")
    return subprocess.Popen([sys.executable, "-m", "mlip", *map(str, argv)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint, **kwargs)


def wait_for(condition, timeout=120.0):
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.2)


def long_md(tmp_path, out_dir="md") -> subprocess.Popen:
    proc = mlip_process("md", CU_CIF, "--model", EMT, "--steps", "10000000", "--no-progress", "--out-dir",
                        out_dir, cwd=tmp_path)
    traj = tmp_path / out_dir / "md.traj"
    try:
        wait_for(lambda: (traj.exists() and traj.stat().st_size > 0) or proc.poll() is not None)
    except BaseException:  # never leave a run of 10 million steps behind
        proc.kill()
        proc.communicate()
        raise
    assert proc.poll() is None, proc.communicate()
    return proc


def test_two_md_runs_into_one_folder_the_second_is_refused_and_ctrl_c_releases(tmp_path):
    first = long_md(tmp_path)
    try:
        second = mlip_process("md", CU_CIF, "--model", EMT, "--steps", "2", "--no-progress", "--out-dir",
                              "md", cwd=tmp_path)
        out, err = second.communicate(timeout=300)
        assert second.returncode == 2, err
        assert err.strip() == err.strip().splitlines()[0]
        assert err.startswith(f"mlip: error: md is in use by PID {first.pid} on host ")
        assert "(mlip md " in err and "--steps 10000000" in err and ", since " in err, err
    finally:
        first.send_signal(signal.SIGINT)
        try:
            _, err = first.communicate(timeout=120)
        except subprocess.TimeoutExpired:  # Ctrl-C did not stop it: fail, but leave no run behind
            first.kill()
            first.communicate()
            raise
    assert first.returncode == 130, err
    assert not (tmp_path / "md" / LOCK_NAME).exists()  # released on Ctrl-C


def test_a_killed_md_run_leaves_a_lock_taken_over_and_files_the_next_run_explains(tmp_path, capsys,
                                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    killed = long_md(tmp_path)
    killed.kill()  # SIGKILL: no clean-up at all
    killed.communicate(timeout=60)
    assert json.loads((tmp_path / "md" / LOCK_NAME).read_text())["pid"] == killed.pid
    argv = ["md", CU_CIF, "--model", EMT, "--steps", "2", "--no-progress", "--out-dir", "md"]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2
    note, error = err.strip().splitlines()
    assert note.startswith(f"NOTE: md: taking over the lock of PID {killed.pid} on host ")
    assert error.startswith("mlip: error: md holds md.traj, md.log of an earlier run that did not finish (no "
                            "md_summary.json: it was stopped or failed)"), error
    assert "pass --overwrite to replace them" in error
    assert not (tmp_path / "md" / LOCK_NAME).exists()
    code, _, err = run_cli(capsys, *argv, "--overwrite")
    assert code == 0, err
    assert (tmp_path / "md" / "md_summary.json").is_file()
