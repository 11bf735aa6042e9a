"""Streaming reader of MPtrj JSON (the Materials Project trajectory set used by CHGNet and Matbench Discovery).

Layout: ``{mp_id: {frame_id: {"structure": <pymatgen Structure dict>, "uncorrected_total_energy": eV,
"corrected_total_energy": eV, "force": [[fx, fy, fz], ...] eV/Å, "stress": 3×3 kbar, ...}}}``. The real
file is ~10 GB, so it is parsed incrementally: the reader keeps one frame's JSON text (plus one read
chunk) in memory, decoding each frame with :meth:`json.JSONDecoder.raw_decode` as soon as it is complete.

Conventions (as in the EquiformerV3/fairchem conversion of MPtrj): the energy is the *uncorrected*
total energy by default; VASP's stress in kbar (positive = compressive) becomes ASE's sign and units by
``stress_eV_per_Å3 = kbar × (−0.1) × GPa``, with ``GPa = ase.units.GPa`` (1 GPa = 1/160.2177 eV/Å³).
pymatgen is not needed: the Structure dict is read directly (lattice matrix, sites with species and
``xyz`` or ``abc``).
"""

from __future__ import annotations

import codecs
import gzip
import json
from pathlib import Path
from typing import Iterator, Optional, Sequence, Tuple, Union

import numpy as np

from mlip.data.sample import Sample, frame_location, make_sample

__all__ = ["iter_mptrj", "structure_from_dict", "KBAR_TO_EV_PER_A3", "DEFAULT_CHUNK_SIZE"]

DEFAULT_CHUNK_SIZE = 1 << 20


def _kbar_to_ev_per_a3() -> float:
    from ase.units import GPa

    return -0.1 * GPa


#: multiply a VASP stress in kbar by this to get ASE's stress (eV/Å³, ASE sign)
KBAR_TO_EV_PER_A3 = _kbar_to_ev_per_a3()


class _Malformed(Exception):
    pass


class _JSONStream:
    """Incremental tokenizer over a text (or binary UTF-8) stream: whitespace, single characters, values."""

    def __init__(self, fh, chunk_size: int = DEFAULT_CHUNK_SIZE):
        self.fh = fh
        self.chunk_size = max(1, int(chunk_size))
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.decoder = json.JSONDecoder()
        self._utf8 = None

    def _fill(self, n: int) -> None:
        if self.eof:
            return
        if self.pos > 0:  # drop what has been consumed
            self.buf = self.buf[self.pos:]
            self.pos = 0
        data = self.fh.read(n)
        if isinstance(data, (bytes, bytearray)):
            if self._utf8 is None:
                self._utf8 = codecs.getincrementaldecoder("utf-8")()
            data = self._utf8.decode(bytes(data), final=not data)
        if not data:
            self.eof = True
            return
        self.buf += data

    def peek(self) -> Optional[str]:
        """Next non-whitespace character (not consumed), or None at the end of the stream."""
        while True:
            n = len(self.buf)
            while self.pos < n and self.buf[self.pos] in " \t\n\r":
                self.pos += 1
            if self.pos < n:
                return self.buf[self.pos]
            if self.eof:
                return None
            self._fill(self.chunk_size)

    def expect(self, chars: str) -> str:
        c = self.peek()
        if c is None or c not in chars:
            found = "end of file" if c is None else repr(c)
            raise _Malformed(f"expected {' or '.join(repr(x) for x in chars)}, found {found}")
        self.pos += 1
        return c

    def value(self):
        """Decode the next complete JSON value, reading more input as long as it is incomplete."""
        if self.peek() is None:
            raise _Malformed("expected a value, found end of file")
        read = self.chunk_size
        while True:
            try:
                obj, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as err:
                # An error near the end of the buffer may just mean the value continues in the next chunk
                # (a cut string, number or literal); anything earlier is a genuine syntax error.
                incomplete = err.pos >= len(self.buf) - 16 or err.msg.startswith("Unterminated string")
                if self.eof and incomplete:
                    raise _Malformed(f"the file ends inside a value (truncated?): {err.msg}") from None
                if self.eof or not incomplete:
                    raise _Malformed(f"{err.msg} (character {err.pos - self.pos} of the value)") from None
                self._fill(read)
                read *= 2
                continue
            if end == len(self.buf) and not self.eof and not isinstance(obj, (dict, list, str)):
                self._fill(read)  # a number or literal at the very end may continue
                read *= 2
                continue
            self.pos = end
            return obj


def _open_stream(path_or_file):
    if hasattr(path_or_file, "read"):
        return path_or_file, getattr(path_or_file, "name", "<stream>"), False
    path = Path(path_or_file)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8"), str(path), True
    return open(path, "r", encoding="utf-8"), str(path), True


def _iter_frames(stream: _JSONStream) -> Iterator[Tuple[str, str, object]]:
    """Yield (mp_id, frame_id, frame) from ``{mp_id: {frame_id: frame}}``; raises _Malformed with context."""
    stream.expect("{")
    if stream.peek() == "}":
        stream.pos += 1
        return
    while True:
        mp_id = stream.value()
        if not isinstance(mp_id, str):
            raise _Malformed("expected an mp_id string as a top-level key")
        stream.expect(":")
        try:
            stream.expect("{")
        except _Malformed as err:
            raise _Malformed(f"mp_id={mp_id}: the value must be an object of frames ({err})") from None
        if stream.peek() == "}":
            stream.pos += 1
        else:
            while True:
                frame_id = stream.value()
                if not isinstance(frame_id, str):
                    raise _Malformed(f"mp_id={mp_id}: expected a frame id string")
                stream.expect(":")
                try:
                    frame = stream.value()
                except _Malformed as err:
                    raise _Malformed(f"mp_id={mp_id}, frame_id={frame_id}: {err}") from None
                yield mp_id, frame_id, frame
                if stream.expect(",}") == "}":
                    break
        if stream.expect(",}") == "}":
            break
    if stream.peek() is not None:
        raise _Malformed("unexpected data after the top-level object")


def structure_from_dict(d: dict):
    """``ase.Atoms`` from a pymatgen ``Structure.as_dict()`` (or ``Molecule``) without importing pymatgen.

    Uses ``lattice.matrix`` (rows are lattice vectors, Å), ``lattice.pbc`` (default all periodic) and each
    site's single fully occupied species with Cartesian ``xyz`` (or fractional ``abc``). Disordered sites
    (several species or occupancy ≠ 1) and unknown elements raise ValueError.
    """
    from ase import Atoms
    from ase.data import atomic_numbers

    if not isinstance(d, dict):
        raise ValueError("structure must be a pymatgen Structure dict")
    sites = d.get("sites")
    if not isinstance(sites, list) or not sites:
        raise ValueError("structure has no 'sites'")
    lattice = d.get("lattice")
    if lattice is not None:
        try:
            cell = np.array(lattice["matrix"], dtype=np.float64)
        except (KeyError, TypeError, ValueError):
            raise ValueError("structure lattice has no valid 'matrix'") from None
        if cell.shape != (3, 3):
            raise ValueError(f"lattice matrix has shape {list(cell.shape)}, expected [3, 3]")
        pbc = lattice.get("pbc", (True, True, True))
        pbc = [bool(p) for p in pbc]
    else:  # pymatgen Molecule
        cell = np.zeros((3, 3))
        pbc = [False, False, False]
    numbers, positions = [], []
    for k, site in enumerate(sites):
        species = site.get("species") if isinstance(site, dict) else None
        if not isinstance(species, list) or len(species) != 1:
            raise ValueError(f"site {k}: expected exactly one species (disordered sites are not supported)")
        sp = species[0]
        element = sp.get("element")
        occu = sp.get("occu", 1.0)
        if occu is None or abs(float(occu) - 1.0) > 1e-6:
            raise ValueError(f"site {k}: partial occupancy {occu} is not supported")
        if element not in atomic_numbers or element == "X":
            raise ValueError(f"site {k}: unknown element {element!r}")
        numbers.append(atomic_numbers[element])
        if site.get("xyz") is not None:
            positions.append(site["xyz"])
        elif site.get("abc") is not None and lattice is not None:
            positions.append(np.asarray(site["abc"], dtype=np.float64) @ cell)
        else:
            raise ValueError(f"site {k}: no 'xyz' or 'abc' coordinates")
    try:
        pos = np.array(positions, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("site coordinates must be 3 numbers each") from None
    if pos.shape != (len(numbers), 3):
        raise ValueError(f"site coordinates have shape {list(pos.shape)}, expected [{len(numbers)}, 3]")
    return Atoms(numbers=numbers, positions=pos, cell=cell, pbc=pbc)


def iter_mptrj(
    path: Union[str, Path, object],
    energy_key: Optional[str] = None,
    forces_key: Optional[str] = None,
    stress_key: Optional[str] = None,
    read_stress: bool = True,
    species: Optional[Sequence[Union[str, int]]] = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> Iterator[Sample]:
    """Stream an MPtrj JSON file (``.json`` or ``.json.gz``, or an open file object) frame by frame.

    Args:
        energy_key: default ``"uncorrected_total_energy"`` (eV); e.g. ``"corrected_total_energy"``.
        forces_key: default ``"force"`` (eV/Å).
        stress_key: default ``"stress"``: 3×3 in kbar with VASP's sign, converted to ASE's Voigt eV/Å³.
            A frame without it (or with ``null``) gets no stress label.
        chunk_size: characters read at a time.

    Each sample has ``group`` = mp_id and ``frame_id`` = the frame key; ``index`` counts frames over the
    whole file. Errors name the file, the frame index and both ids.
    """
    energy_key = energy_key or "uncorrected_total_energy"
    forces_key = forces_key or "force"
    stress_key = stress_key or "stress"
    allowed = None
    if species is not None:
        from mlip.elements import to_atomic_numbers

        allowed = to_atomic_numbers(species)
    fh, source, owned = _open_stream(path)
    try:
        stream = _JSONStream(fh, chunk_size)
        frames = _iter_frames(stream)
        index = 0
        while True:
            try:
                item = next(frames)
            except StopIteration:
                return
            except _Malformed as err:
                raise ValueError(
                    f"{frame_location(source, index)}: truncated or malformed MPtrj JSON: {err}"
                ) from None
            except (UnicodeDecodeError, OSError, EOFError) as err:  # e.g. a truncated .gz
                raise ValueError(f"{frame_location(source, index)}: cannot read the file ({err})") from None
            mp_id, frame_id, frame = item
            yield _frame_to_sample(frame, mp_id, frame_id, source, index, energy_key, forces_key, stress_key,
                                   read_stress, allowed)
            index += 1
    finally:
        if owned:
            fh.close()


def _frame_to_sample(frame, mp_id, frame_id, source, index, energy_key, forces_key, stress_key, read_stress,
                     allowed) -> Sample:
    where = frame_location(source, index, mp_id=mp_id, frame_id=frame_id)
    if not isinstance(frame, dict):
        raise ValueError(f"{where}: a frame must be a JSON object")
    for key in ("structure", energy_key, forces_key):
        if key not in frame or frame[key] is None:
            raise ValueError(f"{where}: missing key {key!r}")
    try:
        atoms = structure_from_dict(frame["structure"])
        stress = frame.get(stress_key) if read_stress else None
        if stress is not None:
            from mlip.data.sample import as_stress

            stress = as_stress(stress, f"{stress_key} (kbar)") * KBAR_TO_EV_PER_A3
        sample = make_sample(atoms, frame[energy_key], frame[forces_key], stress, source=source, index=index,
                             group=mp_id, frame_id=frame_id, allowed_numbers=allowed,
                             names=(energy_key, forces_key, stress_key))
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    sample.atoms.info["mp_id"] = mp_id
    sample.atoms.info["frame_id"] = frame_id
    return sample
