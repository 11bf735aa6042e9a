"""OS errors (a file where a folder should be, a read-only folder, a full disk) get one line,
``mlip: error: PATH: REASON``, with exit status 2, or 1 when the machine ran out of something."""

from __future__ import annotations

import errno
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mlip.testing.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
CU_CIF = ROOT / "examples" / "structures" / "cu_fcc.cif"
EMT = "ase.calculators.emt:EMT"


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mlip: error: ") and "Traceback" not in err, err
    return lines[0][len("mlip: error: "):]


def mlip(*argv, cwd, preexec_fn=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1", MPLCONFIGDIR=str(cwd))
    env.pop("MLIP_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "mlip", *map(str, argv)], cwd=cwd, env=env, text=True,
                          capture_output=True, preexec_fn=preexec_fn, timeout=600)


@pytest.mark.parametrize("argv", [
    ["md", CU_CIF, "--model", EMT, "--steps", "2"],
    ["phonons", CU_CIF, "--model", EMT, "--no-relax"],
    ["eval", EMT, CU_CIF],
])
def test_a_file_where_the_output_folder_should_be_is_named(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("afile").write_text("mine")
    code, _, err = run_cli(capsys, *argv, "--out-dir", "afile")
    assert code == 2 and one_error_line(err) == "afile is a file, not a folder"
    code, _, err = run_cli(capsys, *argv, "--out-dir", "afile/sub")
    assert code == 2
    assert one_error_line(err) == "cannot create folder afile/sub: afile is a file, not a folder"
    assert Path("afile").read_text() == "mine"


def _without_root_overrides():
    """In the child: drop root's licence to write anywhere (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH from
    the bounding set, so the program it runs has neither), so that a read-only folder is read-only."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_a_read_only_output_folder_is_refused_before_any_work(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    preexec = _without_root_overrides if os.geteuid() == 0 else None
    probe = subprocess.run([sys.executable, "-c", f"open({str(folder / 'x')!r}, 'w')"], preexec_fn=preexec,
                           capture_output=True)
    if probe.returncode == 0:
        pytest.skip("this user writes into a folder of mode 0555 (root without a way to drop its override)")
    data = tmp_path / "absent.extxyz"  # eval would read it only after the folder check
    for argv in (["md", CU_CIF, "--model", EMT, "--steps", "2", "--no-progress"], ["eval", EMT, data]):
        result = mlip(*argv, "--out-dir", "ro", cwd=tmp_path, preexec_fn=preexec)
        assert result.returncode == 2, result.stderr
        assert one_error_line(result.stderr) == "ro: Permission denied (an output folder must be writable)"
    assert list(folder.iterdir()) == []


def _file_size_limit():
    """In the child: files cannot grow beyond 4 kB (writes fail with EFBIG, as on a full disk)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


def test_a_full_disk_is_one_line_naming_the_file_with_exit_status_1(tmp_path):
    result = mlip("create", "platonic", "--species", "Cu", "--cutoff", "4", "-o", "m.safetensors",
                  cwd=tmp_path, preexec_fn=_file_size_limit)
    assert result.returncode == 1, result.stderr
    assert one_error_line(result.stderr) == "m.safetensors: File too large"  # safetensors' own error type
    assert not (tmp_path / "m.safetensors").exists()
    result = mlip("md", CU_CIF, "--model", EMT, "--steps", "100", "--log-interval", "1", "--no-progress",
                  "--out-dir", "md", cwd=tmp_path, preexec_fn=_file_size_limit)
    assert result.returncode == 1, result.stderr
    assert one_error_line(result.stderr) == "File too large (writing into md)"  # ASE names no file


def test_os_error_messages_and_statuses():
    from mlip.cli.common import os_error_message

    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "run/best.safetensors")
    assert os_error_message(full) == ("run/best.safetensors: No space left on device", 1)
    denied = PermissionError(errno.EACCES, os.strerror(errno.EACCES), "out")
    assert os_error_message(denied) == ("out: Permission denied", 2)
    renamed = OSError(errno.EXDEV, os.strerror(errno.EXDEV), "a", None, "b")
    assert os_error_message(renamed) == ("a: Invalid cross-device link -> b", 2)
    own = FileNotFoundError("missing.extxyz: no such file")
    assert os_error_message(own) == ("missing.extxyz: no such file", 2)
