"""Files: atomic writes, JSON (tolerant reads, numpy → JSON-able values), YAML configs, Atoms ⇄ dict.

* :func:`atomic_write` writes through a temporary file renamed onto the target, so a reader (or a
  run resumed after a crash) never sees half a file;
* :func:`jsonable` turns numpy arrays and scalars into lists and Python numbers, non-finite floats
  into ``null`` (JSON has no NaN), so that ``json.dumps(..., allow_nan=False)`` accepts the result;
* :func:`write_text` and :func:`write_json` write a file atomically, optionally gzip-compressed;
* :func:`read_json` reads either form back and answers None for anything unreadable, so that a
  damaged cache file is recomputed rather than fatal;
* :func:`read_yaml` reads a configuration file with errors that name the file and the problem;
* :func:`atoms_to_dict` / :func:`atoms_from_dict` store a periodic crystal as
  ``{symbols, cell_A, positions_A, masses_amu}`` (lengths in Å, masses in amu).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import secrets
import stat
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
from ase import Atoms


def _create_temporary(path: Path) -> tuple:
    """Create an empty, new temporary file next to ``path``, as ``open(..., "w")`` would create it
    (mode 0666 filtered by the umask, or by the folder's default ACL). Returns (name, that mode).

    The mode is read back from the file rather than computed from ``os.umask``, which can only be read
    by setting it (racy in a threaded program), and is read at every write, so a changed umask counts.
    """
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        try:
            mode = stat.S_IMODE(os.fstat(fd).st_mode)
        finally:
            os.close(fd)
        return str(tmp), mode
    raise FileExistsError(f"cannot create a temporary file next to {str(path)!r}")


def atomic_write(path: Union[str, Path], write) -> None:
    """Call ``write(tmp_path)`` then atomically rename onto ``path`` (no half-written files).

    The file gets the permissions a plain ``open(path, "w")`` would give it (0666 minus the umask),
    whatever ``write`` does: some writers (safetensors) recreate the file private (0600). An OS error
    (disk full, ...) in writing names ``path``, where the writer reported the temporary file or no file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp, mode = _create_temporary(path)
    try:
        write(tmp)
        os.chmod(tmp, mode)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        if os.path.exists(tmp):
            os.unlink(tmp)
        code = _os_errno(err, tmp)
        if code is not None:
            raise OSError(code, os.strerror(code), str(path)) from err
        raise


def _os_errno(err: BaseException, tmp: str) -> Optional[int]:
    """The errno of an OS error met in writing ``tmp`` (naming ``tmp`` or no file), also from a writer
    that reports it in an exception of its own (safetensors, in Rust, ends its message with
    ``(os error N)``); None for any other exception."""
    if isinstance(err, OSError):
        return err.errno if err.filename is None or os.fsdecode(err.filename) == tmp else None
    if isinstance(err, Exception):
        import re

        match = re.search(r"\(os error (\d+)\)", str(err))
        if match:
            return int(match.group(1))
    return None


def jsonable(value: Any) -> Any:
    """``value`` with numpy arrays and scalars turned into lists, ints, floats and bools, tuples
    into lists and dict keys into strings, recursively; non-finite floats (NaN, ±inf) become None.
    Units are whatever the values carry (the caller's keys name them)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


def json_roundtrip(value: Any) -> Any:
    """``value`` as it reads back from JSON (:func:`jsonable`, tuples become lists), so recorded settings
    and new ones compare equal."""
    return json.loads(json.dumps(jsonable(value), sort_keys=True))


def first_difference(old: Any, new: Any, prefix: str = ""):
    """(dotted key, old value, new value) of the first difference of two JSON values (mappings compared key
    by key, in sorted order), or None when they are equal."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            found = first_difference(old.get(key), new.get(key), f"{prefix}{key}.")
            if found is not None:
                return found
        return None
    return None if old == new else (prefix.rstrip("."), old, new)


def write_text(path: Union[str, Path], text: str, compress: bool = False) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (parent folders are created); ``compress=True``
    gzip-compresses it with a zero timestamp (the same text gives the same bytes): name the file
    ``*.gz``."""
    if compress:
        data = gzip.compress(text.encode("utf-8"), mtime=0)
        atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))
    else:
        atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_json(path: Union[str, Path], obj: Any, compress: bool = False) -> None:
    """Write :func:`jsonable` ``(obj)`` to ``path`` atomically (parent folders are created).

    Plain: indented UTF-8 JSON (one space). ``compress=True``: compact JSON, gzip-compressed with a
    zero timestamp (the same content gives the same bytes); name the file ``*.json.gz``.
    """
    write_text(path, json.dumps(jsonable(obj), indent=None if compress else 1, allow_nan=False), compress)


def read_json(path: Union[str, Path]) -> Optional[dict]:
    """The JSON object in ``path`` (plain or gzip-compressed, told apart by the gzip magic bytes),
    or None when the file is missing, unreadable, truncated, not JSON or not a JSON object."""
    try:
        raw = Path(path).read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, EOFError):
        return None
    return data if isinstance(data, dict) else None


def atoms_to_dict(atoms: Atoms) -> dict:
    """A crystal as ``{"symbols", "cell_A" [3, 3] (Å, rows are the lattice vectors),
    "positions_A" [n, 3] (Å, Cartesian), "masses_amu" [n]}``; the arrays are numpy arrays, to be
    passed through :func:`jsonable` (which :func:`write_json` does)."""
    return {
        "symbols": atoms.get_chemical_symbols(),
        "cell_A": np.asarray(atoms.cell.array, dtype=float),
        "positions_A": np.asarray(atoms.positions, dtype=float),
        "masses_amu": np.asarray(atoms.get_masses(), dtype=float),
    }


def atoms_from_dict(data: dict) -> Atoms:
    """The periodic (pbc in all three directions) ASE Atoms stored by :func:`atoms_to_dict`, with
    its masses. Raises KeyError, TypeError or ValueError for a malformed dict."""
    return Atoms(
        symbols=data["symbols"],
        cell=np.array(data["cell_A"], dtype=float),
        positions=np.array(data["positions_A"], dtype=float),
        masses=np.array(data["masses_amu"], dtype=float),
        pbc=True,
    )



def read_yaml(path: Union[str, Path], what: str = "config") -> Any:
    """``yaml.safe_load`` of ``path``; ValueError ``"cannot read <what> ..."`` or ``"<what> ... is not
    valid YAML"`` instead of OSError/YAMLError."""
    import yaml

    path = str(path)
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except OSError as err:
        raise ValueError(f"cannot read {what} {path!r}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise ValueError(f"{what} {path!r} is not valid YAML: {err}") from None


__all__ = ["atomic_write", "atoms_from_dict", "atoms_to_dict", "first_difference", "json_roundtrip",
           "jsonable", "read_json", "read_yaml", "write_json"]
