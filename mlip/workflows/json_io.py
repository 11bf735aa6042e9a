"""JSON files of the workflows: numpy → JSON-able values, atomic writes, tolerant reads, Atoms ⇄ dict.

Shared by the phonon (:mod:`mlip.workflows.phonons`) and thermal-conductivity
(:mod:`mlip.workflows.kappa`) workflows for their result files and their resumable caches.

* :func:`jsonable` turns numpy arrays and scalars into lists and Python numbers, non-finite floats
  into ``null`` (JSON has no NaN), so that ``json.dumps(..., allow_nan=False)`` accepts the result;
* :func:`write_json` writes a file atomically (:func:`mlip.checkpoint.atomic_write`: a reader never
  sees half a file), optionally gzip-compressed;
* :func:`read_json` reads either form back and answers None for anything unreadable, so that a
  damaged cache file is recomputed rather than fatal;
* :func:`atoms_to_dict` / :func:`atoms_from_dict` store a periodic crystal as
  ``{symbols, cell_A, positions_A, masses_amu}`` (lengths in Å, masses in amu).
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
from ase import Atoms


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


def write_json(path: Union[str, Path], obj: Any, compress: bool = False) -> None:
    """Write :func:`jsonable` ``(obj)`` to ``path`` atomically (parent folders are created).

    Plain: indented UTF-8 JSON (one space). ``compress=True``: compact JSON, gzip-compressed with a
    zero timestamp (the same content gives the same bytes); name the file ``*.json.gz``.
    """
    from mlip.checkpoint import atomic_write

    text = json.dumps(jsonable(obj), indent=None if compress else 1, allow_nan=False)
    if compress:
        data = gzip.compress(text.encode("utf-8"), mtime=0)
        atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))
    else:
        atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


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


__all__ = ["atoms_from_dict", "atoms_to_dict", "jsonable", "read_json", "write_json"]
