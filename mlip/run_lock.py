"""One writer per output folder: a lock that a run holds in its folder for as long as it runs.

``with folder_lock(folder):`` creates ``folder`` if needed and takes an exclusive ``fcntl.flock`` on
``folder/.mlip.lock``, a file holding the holder's PID, host, start time and command line (one JSON line).
A second run into the folder meets the lock and fails at once with :class:`FolderInUseError`, whose
message names the holder. Leaving the block, however it is left (an exception, Ctrl-C), releases the
lock and removes the file, and the folder too when the run created it and left it empty.

The kernel drops a process's flocks when the process ends, however it ends, so a lock file left by a run
killed with SIGKILL is free and still holds the dead run's record: the next run takes it over with a
one-line note naming that run.

Sharded campaigns (``shard=(index, count)``, count > 1: ``--shard-index``/``--n-shards``, Slurm arrays,
torchrun ranks) write one folder from many processes at once, each item to a file of its own. Each
shard takes a shared lock on ``.mlip.lock`` (any number of shards, but no whole-folder run beside them)
and an exclusive one on ``.mlip.shard-<index>-of-<count>.lock`` (one process per shard). Processes that
compute without writing (the MPI ranks > 0 of a GPAW calculation, the torchrun ranks > 0 of a training)
take no lock: their callers leave them out.

On a filesystem without ``flock`` (some network mounts) a second run cannot be refused: the block runs
unlocked after a note saying so.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import socket
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Tuple, Union

LOCK_NAME = ".mlip.lock"
#: errno values of a filesystem that cannot flock
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS}


class FolderInUseError(ValueError):
    """Another run holds the folder (or the shard); the message names it."""


def shard_lock_name(index: int, count: int) -> str:
    """The file of the exclusive lock of shard ``index`` (0-based) of ``count``."""
    return f".mlip.shard-{index}-of-{count}.lock"


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _command_line() -> str:
    return shlex.join([Path(sys.argv[0]).name or "python", *sys.argv[1:]]) if sys.argv else "python"


def _record(command: str) -> bytes:
    """This process's record: PID, host, start time, command line."""
    return (json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                        "since": time.strftime("%Y-%m-%d %H:%M:%S"), "command": command}) + "\n").encode()


def _describe(text: str) -> Optional[str]:
    """``PID 123 on host h (mlip md ...), since ...`` from a record; None for an empty file."""
    if not text.strip():
        return None
    try:
        rec = json.loads(text)
        return f"PID {rec['pid']} on host {rec['host']} ({rec['command']}), since {rec['since']}"
    except (ValueError, TypeError, KeyError):
        return "a process whose lock record is unreadable"


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _holders(folder: Path) -> str:
    """Who holds ``folder``'s lock: the whole-folder holder's record, else the shards' records."""
    whole = _describe(_read(folder / LOCK_NAME))
    if whole:
        return whole
    shards = []
    for path in sorted(folder.glob(".mlip.shard-*-of-*.lock")):
        described = _describe(_read(path))
        if described:
            index, count = path.name[len(".mlip.shard-"):-len(".lock")].split("-of-")
            shards.append(f"shard {index} of {count}: {described}")
    return "sharded runs (" + "; ".join(shards) + ")" if shards else "another run, which has just started"


def _open_locked(path: Path, mode: int) -> Optional[int]:
    """A descriptor of ``path`` (created if absent) holding flock ``mode``, or None when another process
    holds a conflicting lock. A file removed by its holder between our open and our lock is left for the
    new one at the same path."""
    import fcntl

    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        try:
            current = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            current = False
        if current:
            return fd
        os.close(fd)


def _take_over(fd: int, what: str, note: Callable[[str], None]) -> None:
    """Note the record a dead holder left in the file of ``fd`` (which we now hold), and clear it."""
    earlier = _describe(os.pread(fd, 1 << 16, 0).decode(errors="replace"))
    if earlier:
        note(f"NOTE: {what}: taking over the lock of {earlier}, which ended without releasing it")
    os.ftruncate(fd, 0)


class _Held:
    """The locks one :func:`folder_lock` holds: (path, descriptor, exclusive), in the order taken."""

    def __init__(self):
        self.locks: List[Tuple[Path, int, bool]] = []

    def take(self, path: Path, exclusive: bool, what: str, in_use: Callable[[], str],
             note: Callable[[str], None]) -> int:
        """Lock ``path`` (exclusive or shared) and take over a dead holder's record (``what``: the
        folder or shard, for the note); FolderInUseError(``in_use()``) when another process holds it.
        Returns the descriptor."""
        import fcntl

        fd = _open_locked(path, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        if fd is None:
            raise FolderInUseError(in_use())
        self.locks.append((path, fd, exclusive))
        _take_over(fd, what, note)
        return fd

    def release(self) -> None:
        import fcntl

        for path, fd, exclusive in reversed(self.locks):
            try:
                if not exclusive:  # a shard's shared lock: the last shard out removes the file
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    if not os.path.samestat(os.fstat(fd), os.stat(path)):
                        continue
                path.unlink()
            except OSError:  # other shards still hold it, or it is gone
                pass
            finally:
                os.close(fd)
        self.locks = []


def _make_folder(folder: Path) -> List[Path]:
    """Create ``folder`` and its missing parents; returns the folders created, deepest first. A file in
    the way is a NotADirectoryError naming it."""
    created = []
    path = folder
    while not path.exists() and path != path.parent:
        created.append(path)
        path = path.parent
    if not path.is_dir():
        raise NotADirectoryError(f"{folder} is a file, not a folder" if path == folder
                                 else f"cannot create folder {folder}: {path} is a file, not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    return created


def _writable(err: OSError, folder: Path) -> OSError:
    """``err`` of creating the lock file, as an error naming the folder that must be writable."""
    if err.errno is None:
        return err
    return type(err)(err.errno, f"{err.strerror} (an output folder must be writable)", str(folder))


@contextmanager
def folder_lock(folder: Union[str, Path], shard: Optional[Tuple[int, int]] = None,
                command: Optional[str] = None,
                note: Callable[[str], None] = _stderr) -> Iterator[Path]:
    """Hold ``folder``'s run lock for the block (see the module docstring); yields the folder.

    Args:
        folder: the output folder, created with its parents if absent.
        shard: (index, count) of a sharded run; None or a count of 1: the whole folder.
        command: the command line recorded for others to see (default: ``sys.argv``).
        note: receives the one-line notes (a dead holder's lock taken over, no locking possible).

    Raises :class:`FolderInUseError` (a ValueError) when another process holds the folder or the shard,
    NotADirectoryError when a file is in the way, OSError when the folder is not writable.
    """
    folder = Path(folder)
    created = _make_folder(folder)
    held = _Held()
    record = _record(command or _command_line())
    whole = shard is None or shard[1] <= 1
    try:
        try:
            fd = held.take(folder / LOCK_NAME, whole, str(folder),
                           lambda: f"{folder} is in use by {_holders(folder)}", note)
            if not whole:
                index, count = shard
                path = folder / shard_lock_name(index, count)
                fd = held.take(path, True, f"{folder} (shard {index} of {count})",
                               lambda: f"shard {index} of {count} of {folder} is in use by "
                                       f"{_describe(_read(path)) or 'another run'}", note)
            os.pwrite(fd, record, 0)
        except OSError as err:
            if err.errno not in _NO_LOCKS:
                raise _writable(err, folder) from None
            held.release()
            for path in folder.glob(".mlip*.lock"):  # the empty files the failed flock left
                if path.stat().st_size == 0:
                    path.unlink(missing_ok=True)
            note(f"NOTE: {folder} is on a filesystem without file locks: a second run into it "
                 f"would not be refused")
        yield folder
    finally:
        held.release()
        for path in created:  # a run that wrote nothing leaves no folder behind
            try:
                path.rmdir()
            except OSError:  # not empty (or gone)
                break


__all__ = ["FolderInUseError", "LOCK_NAME", "folder_lock", "shard_lock_name"]
