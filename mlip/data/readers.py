"""Readers of labelled structures: extended XYZ, ASE databases and MPtrj JSON, behind :func:`read_dataset`.

Every reader is a generator of :class:`~mlip.data.Sample` that holds one frame at a time in memory.
Label lookup (extxyz and ASE db): with a key left at ``None`` the reader takes ASE's standard name
(``energy``, ``forces``, ``stress``) and, when that is absent, the common ``REF_`` prefixed one
(``REF_energy``, ...); an explicit key is used as given. Energy and forces are required; stress is
optional (molecules and clusters have none). Any problem raises ``ValueError`` whose message starts
with ``<file>: frame <index>`` (plus the ids where the format has them).
"""

from __future__ import annotations

import gzip
import io
import re
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Union

from mlip.data.sample import Sample, frame_location, make_sample

__all__ = ["detect_format", "iter_ase_db", "iter_extxyz", "read_dataset", "FORMATS"]

FORMATS = ("extxyz", "db", "mptrj")
_FORMAT_ALIASES = {
    "extxyz": "extxyz", "xyz": "extxyz",
    "db": "db", "ase-db": "db", "ase_db": "db", "sqlite": "db",
    "mptrj": "mptrj", "json": "mptrj",
}
_MISSING = object()

PathLike = Union[str, Path]


def detect_format(path: PathLike) -> str:
    """``extxyz`` for .xyz/.extxyz(.gz), ``db`` for .db, ``mptrj`` for .json(.gz); ValueError otherwise."""
    name = str(path).lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith((".xyz", ".extxyz")):
        return "extxyz"
    if name.endswith(".db"):
        return "db"
    if name.endswith(".json"):
        return "mptrj"
    raise ValueError(
        f"{path}: cannot tell the format of labelled data from the extension; extxyz (.xyz, .extxyz), "
        f"ASE databases (.db) and MPtrj JSON (.json) are read, each optionally .gz: rename the file or "
        f"name the format ({', '.join(FORMATS)})"
    )


def _allowed_numbers(species) -> Optional[List[int]]:
    if species is None:
        return None
    from mlip.elements import to_atomic_numbers

    return to_atomic_numbers(species)


def _candidates(key: Optional[str], default: str) -> List[str]:
    return [default, "REF_" + default] if key is None else [key]


def _open_text(path: PathLike):
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, "r", encoding="utf-8")


# --------------------------------------------------------------------------------------------- extxyz
def _xyz_frame_texts(fh, source) -> Iterator[str]:
    """Split an (ext)xyz stream into the text of one frame at a time."""
    index = 0
    while True:
        line = fh.readline()
        if not line:
            return
        if not line.strip():
            continue  # blank lines between or after frames
        try:
            natoms = int(line.split()[0])
            if natoms < 0 or len(line.split()) != 1:
                raise ValueError
        except ValueError:
            raise ValueError(
                f"{frame_location(source, index)}: expected the number of atoms on the frame's first line, "
                f"got {line.strip()[:80]!r}"
            ) from None
        lines = [line]
        for k in range(natoms + 1):
            nxt = fh.readline()
            if not nxt:
                raise ValueError(
                    f"{frame_location(source, index)}: file ends inside the frame (truncated: "
                    f"{max(k - 1, 0)} of {natoms} atom lines)"
                )
            lines.append(nxt)
        yield "".join(lines)
        index += 1


_STRESS_KEY = re.compile(r"(?<![A-Za-z0-9_-])stress=")


def _parse_xyz_frame(text: str):
    """One extxyz frame with ASE's parser; a Voigt-6 ``stress=`` (which ASE refuses) is accepted too."""
    import ase.io

    try:
        return ase.io.read(io.StringIO(text), format="extxyz", index=0)
    except ValueError as err:
        if "stress" not in str(err) or "3x3" not in str(err):
            raise
    # ASE insists that a key named ``stress`` holds 9 values; read a 6-value one under another name.
    header, comment, rest = text.split("\n", 2)
    atoms = ase.io.read(io.StringIO("\n".join([header, _STRESS_KEY.sub("_mlip_voigt_stress=", comment), rest])),
                        format="extxyz", index=0)
    atoms.info["stress"] = atoms.info.pop("_mlip_voigt_stress")
    return atoms


def _atoms_lookup(atoms, candidates):
    results = atoms.calc.results if atoms.calc is not None and hasattr(atoms.calc, "results") else {}
    for key in candidates:
        for where in (results, atoms.info, atoms.arrays):
            if key in where:
                return key, where[key]
    return None, _MISSING


def iter_extxyz(
    path: PathLike,
    energy_key: Optional[str] = None,
    forces_key: Optional[str] = None,
    stress_key: Optional[str] = None,
    read_stress: bool = True,
    species: Optional[Sequence[Union[str, int]]] = None,
    group_key: str = "group",
) -> Iterator[Sample]:
    """Stream the frames of an extended XYZ file (optionally gzipped), one :class:`Sample` at a time.

    Labels may sit in the calculator block ASE builds (``energy``, ``forces``, ``stress``), in
    ``atoms.info`` (per-frame keys) or ``atoms.arrays`` (per-atom columns). Stress may be Voigt-6,
    3×3 or 9 flat values. ``group_key`` names the per-frame key used as the sample's group.
    """
    allowed = _allowed_numbers(species)
    source = str(path)
    with _open_text(path) as fh:
        for index, text in enumerate(_xyz_frame_texts(fh, source)):
            where = frame_location(source, index)
            try:
                atoms = _parse_xyz_frame(text)
            except KeyError as err:  # an unknown chemical symbol
                raise ValueError(f"{where}: cannot parse the extxyz frame: unknown element or key {err}") from None
            except Exception as err:  # ASE raises XYZError/ValueError/IndexError on other bad frames
                raise ValueError(f"{where}: cannot parse the extxyz frame ({type(err).__name__}: {err})") from None
            yield _sample_from_atoms(atoms, source, index, energy_key, forces_key, stress_key, read_stress,
                                     allowed, group_key)


def _sample_from_atoms(atoms, source, index, energy_key, forces_key, stress_key, read_stress, allowed,
                       group_key, frame_id=None) -> Sample:
    group = atoms.info.get(group_key) if group_key else None
    where = frame_location(source, index, group=group)
    e_key, energy = _atoms_lookup(atoms, _candidates(energy_key, "energy"))
    f_key, forces = _atoms_lookup(atoms, _candidates(forces_key, "forces"))
    s_key, stress = _atoms_lookup(atoms, _candidates(stress_key, "stress")) if read_stress else (None, _MISSING)
    for value, key, what in ((energy, energy_key, "energy"), (forces, forces_key, "forces")):
        if value is _MISSING:
            looked = " or ".join(repr(k) for k in _candidates(key, what))
            raise ValueError(f"{where}: no {what} label (looked for {looked})")
    for key in (e_key, f_key, s_key):
        if key is not None:
            atoms.info.pop(key, None)
            if key in atoms.arrays and key not in ("positions", "numbers"):
                del atoms.arrays[key]
    try:
        return make_sample(
            atoms, energy, forces, None if stress is _MISSING else stress, source=source, index=index,
            group=group, frame_id=frame_id, allowed_numbers=allowed, names=(e_key, f_key, s_key or "stress"),
        )
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


# ------------------------------------------------------------------------------------------- ASE db
def _row_lookup(row, candidates):
    for key in candidates:
        if key in row:
            value = row[key]
            if value is not None:
                return key, value
        data = row.data
        if key in data:
            return key, data[key]
    return None, _MISSING


def iter_ase_db(
    path: PathLike,
    energy_key: Optional[str] = None,
    forces_key: Optional[str] = None,
    stress_key: Optional[str] = None,
    read_stress: bool = True,
    species: Optional[Sequence[Union[str, int]]] = None,
    group_key: str = "group",
    selection=None,
) -> Iterator[Sample]:
    """Stream the rows of an ASE database (``ase.db.connect``), optionally filtered by ``selection``.

    Labels come from the row's standard fields (``energy``, ``forces``, ``stress``), its key-value
    pairs (scalars such as ``REF_energy``) or its ``data`` dict (arrays such as ``REF_forces``).
    ``Sample.frame_id`` is ``"id=<row id>"``.
    """
    import ase.db

    path = Path(path)
    if not path.exists():  # ase.db.connect would silently create an empty database
        raise FileNotFoundError(f"{path}: no such file")
    with open(path, "rb") as fh:
        head = fh.read(16)
    if head and head != b"SQLite format 3\x00":  # sqlite3 would fail later with a bare DatabaseError
        raise ValueError(f"{path}: not an ASE database (an SQLite file); is the format right?")
    allowed = _allowed_numbers(species)
    source = str(path)
    db = ase.db.connect(str(path), type="db")
    rows = db.select(selection) if selection is not None else db.select()
    for index, row in enumerate(rows):
        frame_id = f"id={row.id}"
        group = row.get(group_key) if group_key else None
        where = frame_location(source, index, id=row.id, group=group)
        try:
            atoms = row.toatoms()
        except Exception as err:
            raise ValueError(f"{where}: cannot build the structure ({type(err).__name__}: {err})") from None
        atoms.calc = None
        atoms.info = dict(row.key_value_pairs)
        e_key, energy = _row_lookup(row, _candidates(energy_key, "energy"))
        f_key, forces = _row_lookup(row, _candidates(forces_key, "forces"))
        s_key, stress = _row_lookup(row, _candidates(stress_key, "stress")) if read_stress else (None, _MISSING)
        for value, key, what in ((energy, energy_key, "energy"), (forces, forces_key, "forces")):
            if value is _MISSING:
                looked = " or ".join(repr(k) for k in _candidates(key, what))
                raise ValueError(f"{where}: no {what} label (looked for {looked})")
        for key in (e_key, f_key, s_key):
            if key is not None:
                atoms.info.pop(key, None)
        try:
            yield make_sample(
                atoms, energy, forces, None if stress is _MISSING else stress, source=source, index=index,
                group=group, frame_id=frame_id, allowed_numbers=allowed, names=(e_key, f_key, s_key or "stress"),
            )
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None


# ------------------------------------------------------------------------------------- entry point
def read_dataset(
    path: PathLike,
    format: Optional[str] = None,
    *,
    energy_key: Optional[str] = None,
    forces_key: Optional[str] = None,
    stress_key: Optional[str] = None,
    read_stress: bool = True,
    species: Optional[Sequence[Union[str, int]]] = None,
    stream: bool = False,
    **kwargs,
) -> Union[List[Sample], Iterator[Sample]]:
    """Read labelled structures from ``path``: a list of :class:`Sample`, or a generator with ``stream=True``.

    Args:
        path: ``.xyz``/``.extxyz`` (optionally ``.gz``), ``.db`` (ASE database) or ``.json``/``.json.gz``
            (MPtrj layout ``{mp_id: {frame_id: {...}}}``).
        format: ``"extxyz"``, ``"db"`` or ``"mptrj"`` to override the extension.
        energy_key: where the energy label is. ``None`` means the format's default: extxyz/db ``energy``
            with a ``REF_energy`` fallback; MPtrj ``uncorrected_total_energy``.
        forces_key: where the force labels are (``None``: ``forces``, ``REF_forces``; MPtrj ``force``).
        stress_key: where the stress label is (``None``: ``stress``, ``REF_stress``; MPtrj ``stress``,
            in kbar with VASP's sign, converted to ASE's eV/Å³).
        read_stress: ``False`` ignores stress labels altogether.
        species: when given, frames with other elements are rejected (ValueError naming the frame).
        stream: return a generator that holds one frame at a time (use for big files such as MPtrj).
        **kwargs: format-specific options: ``group_key`` (extxyz/db), ``selection`` (db),
            ``chunk_size`` (mptrj).

    Energies are eV, forces eV/Å [n_atoms, 3], stress eV/Å³ Voigt-6 (xx, yy, zz, yz, xz, xy) with ASE's
    sign, or ``None``.
    """
    fmt = detect_format(path) if format is None else _FORMAT_ALIASES.get(str(format).lower())
    if fmt is None:
        raise ValueError(f"unknown dataset format {format!r}; choose one of {FORMATS}")
    common = dict(energy_key=energy_key, forces_key=forces_key, stress_key=stress_key, read_stress=read_stress,
                  species=species)
    if fmt == "extxyz":
        gen = iter_extxyz(path, **common, **kwargs)
    elif fmt == "db":
        gen = iter_ase_db(path, **common, **kwargs)
    else:
        from mlip.data.mptrj import iter_mptrj

        gen = iter_mptrj(path, **common, **kwargs)
    if stream:
        return gen
    return list(gen)

