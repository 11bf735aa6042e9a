"""Read the files of Matbench Discovery (or of its miniature EMT version) from local paths.

Nothing is downloaded: the user supplies the files. Accepted forms of a structures file:

* JSON, optionally gzip/bz2/xz-compressed (``.json``, ``.json.gz``, ``.json.bz2``, ...), holding a
  pandas DataFrame as ``DataFrame.to_json`` writes it ("columns" orient, the benchmark's own
  ``wbm-init-structs.json.bz2`` and ``wbm-computed-structure-entries.json.bz2``; also "records",
  "split", "index" and "list" orients) with a ``material_id`` column and a column of pymatgen
  ``Structure.as_dict()`` dicts (``initial_structure``, ``structure``, ``relaxed_structure``) or of
  ``ComputedStructureEntry.as_dict()`` dicts (``computed_structure_entry``, ``entry``); or a plain
  mapping ``{material_id: structure or entry dict}``;
* JSON lines (``.jsonl``, ``.jsonl.gz``): one object per line with ``material_id`` and such a
  column (the benchmark's ``geo-opt.jsonl.gz``);
* any ASE-readable file (``.extxyz``, ``.cif``, ASE ``.traj``/``.db``, ..., compressed too) and
  ``.zip`` archives of such files (``wbm-initial-atoms.extxyz.zip``): the id of a frame is
  ``atoms.info["material_id"]`` (or ``mp_id``), else the file's stem (``<stem>-<k>`` for the k-th
  frame of a multi-frame file).

pymatgen dicts are converted here without pymatgen (lattice matrix and Cartesian site positions,
lengths in Å); disordered sites (partial occupancies) are rejected. Every error names the file and
the entry.

Reference tables (``wbm-summary.csv.gz`` or the miniature benchmark's ``summary.csv.gz``) are CSV
(optionally compressed) or JSON tables with ``material_id`` and per-atom energies in eV/atom:
:func:`read_reference_table`.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import lzma
import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np
from ase import Atoms

from mlip.data.occupancy import require_ordered

PathLike = Union[str, Path]

#: columns that hold a structure or an entry, in order of preference
STRUCTURE_KEYS = ("initial_structure", "structure", "relaxed_structure", "computed_structure_entry", "entry")
#: ids of ASE frames
ATOMS_ID_KEYS = ("material_id", "mp_id")
_JSON_SUFFIXES = (".json", ".jsonl")
_COMPRESSED = (".gz", ".bz2", ".xz")


@dataclass
class Material:
    """One material of a campaign.

    Attributes:
        material_id: the benchmark's id (e.g. ``"wbm-1-1"``).
        atoms: the structure (periodic in three directions; Å).
        entry: the ``ComputedStructureEntry.as_dict()`` it came from, if any (for MP2020
            corrections), else None.
        source: ``"<file>, entry <id or index>"`` for error messages.
    """

    material_id: str
    atoms: Atoms
    entry: Optional[dict] = None
    source: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------------ raw text
def read_bytes(path: PathLike) -> bytes:
    """The content of ``path``, decompressed when it is gzip, bz2 or xz (told by magic bytes)."""
    raw = Path(path).read_bytes()
    try:
        if raw[:2] == b"\x1f\x8b":
            return gzip.decompress(raw)
        if raw[:3] == b"BZh":
            return bz2.decompress(raw)
        if raw[:6] == b"\xfd7zXZ\x00":
            return lzma.decompress(raw)
    except (OSError, EOFError, ValueError, lzma.LZMAError) as err:
        raise ValueError(f"{str(path)!r}: cannot decompress ({err})") from None
    return raw


def _base_suffix(path: Path) -> str:
    """The suffix that names the format (``.json`` for ``x.json.gz``)."""
    suffixes = [s.lower() for s in path.suffixes]
    while suffixes and suffixes[-1] in _COMPRESSED:
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def load_json_file(path: PathLike) -> Any:
    """The JSON value in ``path`` (plain or compressed); a list of objects for JSON lines.

    Raises ValueError naming the file (and line) for anything that is not JSON.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"file {str(path)!r} does not exist")
    try:
        text = read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{str(path)!r} is not UTF-8 text ({err})") from None
    if _base_suffix(path) == ".jsonl":
        rows = []
        for k, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as err:
                    raise ValueError(f"{str(path)!r}, line {k}: not JSON ({err})") from None
        return rows
    try:
        return json.loads(text)
    except ValueError as err:
        raise ValueError(f"{str(path)!r} is not JSON ({err})") from None


# ------------------------------------------------------------------------------ pymatgen dicts
def is_structure_dict(value: Any) -> bool:
    return isinstance(value, dict) and "lattice" in value and "sites" in value


def is_entry_dict(value: Any) -> bool:
    return isinstance(value, dict) and "energy" in value and ("structure" in value or "composition" in value)


def atoms_from_structure_dict(data: Any, where: str) -> Atoms:
    """ASE Atoms from a pymatgen ``Structure.as_dict()`` (lattice rows in Å, site ``xyz`` in Å or
    ``abc`` fractional). Raises ValueError naming ``where`` for anything else or a disordered site."""
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            raise ValueError(f"{where}: structure is a string but not JSON") from None
    if not is_structure_dict(data):
        raise ValueError(f"{where}: not a pymatgen structure dict (needs 'lattice' and 'sites')")
    try:
        lattice = data["lattice"]
        cell = np.array(lattice["matrix"], dtype=float)
        pbc = lattice.get("pbc", (True, True, True))
        symbols, positions = [], []
        for k, site in enumerate(data["sites"]):
            species = site["species"]
            if len(species) != 1 or abs(float(species[0].get("occu", 1.0)) - 1.0) > 1e-6:
                raise ValueError(f"{where}: site {k} is disordered ({species}); only ordered structures can be relaxed")
            symbols.append(str(species[0]["element"]))
            if "xyz" in site:
                positions.append(np.asarray(site["xyz"], dtype=float))
            else:
                positions.append(np.asarray(site["abc"], dtype=float) @ cell)
    except ValueError:
        raise
    except (KeyError, TypeError, IndexError, AttributeError) as err:
        raise ValueError(f"{where}: malformed pymatgen structure dict ({type(err).__name__}: {err})") from None
    if cell.shape != (3, 3):
        raise ValueError(f"{where}: lattice matrix must be 3×3, got shape {cell.shape}")
    try:
        atoms = Atoms(symbols=symbols, positions=np.array(positions).reshape(-1, 3), cell=cell, pbc=pbc)
    except (KeyError, ValueError) as err:
        raise ValueError(f"{where}: invalid structure ({err})") from None
    return atoms


def structure_dict(atoms: Atoms) -> dict:
    """``atoms`` as a pymatgen ``Structure.as_dict()`` (made by pymatgen when it is installed, else
    built here in the same layout: lattice matrix/pbc/a/b/c/angles/volume, sites with species,
    fractional ``abc`` and Cartesian ``xyz``, lengths in Å)."""
    try:
        from pymatgen.io.ase import AseAtomsAdaptor
    except ImportError:
        return _structure_dict_without_pymatgen(atoms)
    return AseAtomsAdaptor.get_structure(_plain(atoms)).as_dict()


def _plain(atoms: Atoms) -> Atoms:
    """Species, cell, pbc and positions only (no calculator, constraints or info to convert)."""
    return Atoms(numbers=atoms.numbers, positions=atoms.positions, cell=atoms.cell.array, pbc=atoms.pbc)


def _structure_dict_without_pymatgen(atoms: Atoms) -> dict:
    cell = np.asarray(atoms.cell.array, dtype=float)
    a, b, c, alpha, beta, gamma = atoms.cell.cellpar()
    frac = np.linalg.solve(cell.T, np.asarray(atoms.positions, dtype=float).T).T
    sites = []
    for symbol, abc, xyz in zip(atoms.get_chemical_symbols(), frac, atoms.positions):
        sites.append({"species": [{"element": symbol, "occu": 1}], "abc": [float(x) for x in abc],
                      "properties": {}, "label": symbol, "xyz": [float(x) for x in xyz]})
    return {
        "@module": "pymatgen.core.structure", "@class": "Structure", "charge": 0,
        "lattice": {"matrix": cell.tolist(), "pbc": [bool(p) for p in atoms.pbc], "a": float(a), "b": float(b),
                    "c": float(c), "alpha": float(alpha), "beta": float(beta), "gamma": float(gamma),
                    "volume": float(abs(np.linalg.det(cell)))},
        "properties": {}, "sites": sites,
    }


# ----------------------------------------------------------------------------------- JSON tables
def json_rows(data: Any, where: str) -> List[Tuple[str, dict]]:
    """Rows (label, dict) of a pandas JSON table in any orient, or of a mapping id → value."""
    if isinstance(data, list):  # records
        rows = []
        for k, row in enumerate(data):
            if not isinstance(row, dict):
                raise ValueError(f"{where}, entry {k}: expected an object, got {type(row).__name__}")
            rows.append((str(row.get("material_id", k)), row))
        return rows
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a JSON table or mapping, got {type(data).__name__}")
    if set(data) >= {"columns", "data"} and isinstance(data["columns"], list):  # split
        index = data.get("index") or list(range(len(data["data"])))
        return [(str(i), dict(zip(data["columns"], row))) for i, row in zip(index, data["data"])]
    if "material_id" in data:
        ids = data["material_id"]
        if isinstance(ids, dict):  # columns
            return [(str(v), {col: (vals.get(k) if isinstance(vals, dict) else None) for col, vals in data.items()})
                    for k, v in ids.items()]
        if isinstance(ids, list):  # list
            n = len(ids)
            bad = [col for col, vals in data.items() if not isinstance(vals, list) or len(vals) != n]
            if bad:
                raise ValueError(f"{where}: columns {bad} do not have {n} values like 'material_id'")
            return [(str(ids[k]), {col: vals[k] for col, vals in data.items()}) for k in range(n)]
    rows = []  # mapping id → structure/entry, or "index" orient id → row
    for key, value in data.items():
        if is_structure_dict(value) or is_entry_dict(value):
            rows.append((str(key), {"material_id": str(key), "structure": value}))
        elif isinstance(value, dict):
            rows.append((str(key), {"material_id": str(key), **value}))
        else:
            raise ValueError(f"{where}, entry {key!r}: expected a structure, an entry or a row, "
                             f"got {type(value).__name__}")
    return rows


def _material_from_value(material_id: str, value: Any, where: str) -> Material:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(f"{where}: structure column holds a string that is not JSON") from None
    if is_entry_dict(value):
        if "structure" not in value:
            raise ValueError(f"{where}: a ComputedEntry without a structure cannot be relaxed")
        return Material(material_id, atoms_from_structure_dict(value["structure"], where), entry=value, source=where)
    return Material(material_id, atoms_from_structure_dict(value, where), source=where)


def _materials_from_json(path: Path, key: Optional[str]) -> List[Material]:
    data = load_json_file(path)
    name = str(path)
    if isinstance(data, dict) and {"ids", "nextid"} <= set(data):  # an ASE JSON database
        return _materials_from_ase(path)
    rows = json_rows(data, repr(name))
    if not rows:
        raise ValueError(f"{name!r} holds no structure")
    columns = set().union(*(set(row) for _, row in rows))
    if key is None:
        key = next((k for k in STRUCTURE_KEYS if k in columns), None)
        if key is None:
            raise ValueError(f"{name!r}: no structure column (expected one of {', '.join(STRUCTURE_KEYS)}; "
                             f"found {', '.join(sorted(map(str, columns)))})")
    elif key not in columns:
        raise ValueError(f"{name!r}: no column {key!r} (found {', '.join(sorted(map(str, columns)))})")
    out = []
    for k, (label, row) in enumerate(rows):
        mid = row.get("material_id")
        mid = str(label if mid is None else mid)
        where = f"{name!r}, entry {mid!r}"
        if row.get(key) is None:
            raise ValueError(f"{where}: no value in column {key!r}")
        out.append(_material_from_value(mid, row[key], where))
    return out


# ------------------------------------------------------------------------------------ ASE files
def _frames_with_ids(frames: Sequence[Atoms], stem: str, name: str) -> List[Material]:
    out = []
    for k, atoms in enumerate(frames):
        mid = next((atoms.info[key] for key in ATOMS_ID_KEYS if key in atoms.info), None)
        if mid is None:
            mid = stem if len(frames) == 1 else f"{stem}-{k}"
        atoms = atoms.copy()
        atoms.calc = None
        out.append(Material(str(mid), atoms, source=f"{name!r}, frame {k} ({str(mid)!r})"))
    return out


def _read_ase(source, name: str, fmt: Optional[str] = None) -> List[Atoms]:
    import ase.io

    try:
        frames = ase.io.read(source, index=":", format=fmt)
    except KeyError as err:
        raise ValueError(f"cannot read {name!r}: unknown element or field {err}") from None
    except Exception as err:  # ASE raises many kinds for malformed files
        raise ValueError(f"cannot read {name!r}: {str(err) or type(err).__name__}") from None
    return list(frames) if isinstance(frames, list) else [frames]


def _materials_from_ase(path: Path) -> List[Material]:
    stem = path.name.split(".")[0]
    return _frames_with_ids(_read_ase(str(path), str(path)), stem, str(path))


def _materials_from_zip(path: Path) -> List[Material]:
    from ase.io.formats import filetype

    out = []
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as err:
        raise ValueError(f"cannot read {str(path)!r}: {err}") from None
    with archive:
        for member in sorted(archive.namelist()):
            if member.endswith("/"):
                continue
            name = f"{path}:{member}"
            text = archive.read(member).decode("utf-8", errors="replace")
            try:
                fmt = filetype(member, read=False)
            except Exception:
                raise ValueError(f"cannot read {name!r}: unknown file format") from None
            frames = _read_ase(io.StringIO(text), name, fmt)
            out.extend(_frames_with_ids(frames, Path(member).name.split(".")[0], name))
    return out


# ------------------------------------------------------------------------------------ public
def _check_crystal(material: Material) -> None:
    atoms = material.atoms
    where = material.source or repr(material.material_id)
    if len(atoms) == 0:
        raise ValueError(f"{where}: the structure has no atoms")
    if not np.all(np.isfinite(atoms.positions)) or not np.all(np.isfinite(atoms.cell.array)):
        raise ValueError(f"{where}: non-finite coordinates or cell")
    if not atoms.pbc.all() or atoms.cell.rank != 3:
        raise ValueError(f"{where}: not a crystal periodic in three directions (pbc={atoms.pbc.tolist()})")
    require_ordered(atoms, where, option=None)  # a CIF's partially occupied site (ASE keeps one species)


def read_structures(paths: Union[PathLike, Iterable[PathLike]], key: Optional[str] = None) -> List[Material]:
    """Every material of ``paths`` (one file or several), in file order.

    Args:
        paths: structures files (see the module docstring for the formats).
        key: the column holding structures or entries in JSON tables (default: the first of
            :data:`STRUCTURE_KEYS` present).

    Raises:
        ValueError: naming the file and the entry, for a missing or unreadable file, a malformed
            structure, a structure that is not a 3-D periodic crystal, or an id that appears twice
            (within a file or across files).
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    materials: List[Material] = []
    seen: Dict[str, str] = {}
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise ValueError(f"structures file {str(path)!r} does not exist")
        if path.is_dir():
            raise ValueError(f"structures file {str(path)!r} is a directory")
        suffix = _base_suffix(path)
        if suffix in _JSON_SUFFIXES:
            found = _materials_from_json(path, key)
        elif suffix == ".zip":
            found = _materials_from_zip(path)
        else:
            found = _materials_from_ase(path)
        if not found:
            raise ValueError(f"structures file {str(path)!r} holds no structure")
        for material in found:
            _check_crystal(material)
            if material.material_id in seen:
                raise ValueError(f"{material.source}: material id {material.material_id!r} appears twice "
                                 f"(also in {seen[material.material_id]})")
            seen[material.material_id] = material.source
        materials.extend(found)
    return materials


#: accepted names of the reference columns (ours first, then the WBM summary's)
E_FORM_COLUMNS = ("e_form_per_atom", "e_form_per_atom_mp2020_corrected", "e_form_per_atom_wbm")
E_HULL_COLUMNS = ("e_above_hull", "e_above_hull_mp2020_corrected_ppd_mp", "each_true")


def _float(value: Any, where: str) -> float:
    if value is None or (isinstance(value, str) and value.strip() in ("", "nan", "NaN", "None", "null")):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: not a number: {value!r}") from None


def _table_rows(path: Path) -> List[dict]:
    suffix = _base_suffix(path)
    if suffix in _JSON_SUFFIXES:
        return [row for _, row in json_rows(load_json_file(path), repr(str(path)))]
    if not path.is_file():
        raise ValueError(f"file {str(path)!r} does not exist")
    try:
        text = read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{str(path)!r} is not a UTF-8 CSV file ({err})") from None
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames or "material_id" not in reader.fieldnames:
        raise ValueError(f"{str(path)!r}: no 'material_id' column (columns: {reader.fieldnames})")
    return list(reader)


def read_table(path: PathLike, columns: Dict[str, Sequence[str]], optional: Sequence[str] = ()) -> Dict[str, dict]:
    """``{material_id: {name: value}}`` of a CSV or JSON table.

    ``columns`` maps each wanted name to the column names accepted for it (first found wins);
    numeric columns only (eV/atom). Names in ``optional`` may be absent (then NaN). Raises
    ValueError naming the file and row for a missing column, a value that is not a number or a
    repeated id.
    """
    path = Path(path)
    rows = _table_rows(path)
    if not rows:
        raise ValueError(f"{str(path)!r} holds no rows")
    present = set().union(*(set(r) for r in rows))
    chosen = {}
    for name, aliases in columns.items():
        col = next((c for c in aliases if c in present), None)
        if col is None and name not in optional:
            raise ValueError(f"{str(path)!r}: no column {' or '.join(map(repr, aliases))} "
                             f"(columns: {', '.join(sorted(map(str, present)))})")
        chosen[name] = col
    out: Dict[str, dict] = {}
    for k, row in enumerate(rows):
        mid = row.get("material_id")
        if mid in (None, ""):
            raise ValueError(f"{str(path)!r}, row {k}: no material_id")
        mid = str(mid)
        if mid in out:
            raise ValueError(f"{str(path)!r}, row {k}: material id {mid!r} appears twice")
        where = f"{str(path)!r}, row {k} ({mid!r})"
        out[mid] = {name: (math.nan if col is None else _float(row.get(col), f"{where}, column {col!r}"))
                    for name, col in chosen.items()}
        if "uniq_proto" in row:
            out[mid]["uniq_proto"] = str(row["uniq_proto"]).strip().lower() in ("true", "1", "1.0")
    return out


def read_reference_table(path: PathLike) -> Dict[str, dict]:
    """``{material_id: {"e_form_per_atom", "e_above_hull"[, "uniq_proto"]}}`` (eV/atom) of a
    reference table: the miniature benchmark's ``summary.csv.gz`` or the benchmark's WBM summary
    (``e_form_per_atom_mp2020_corrected``, ``e_above_hull_mp2020_corrected_ppd_mp``)."""
    table = read_table(path, {"e_form_per_atom": E_FORM_COLUMNS, "e_above_hull": E_HULL_COLUMNS})
    for mid, row in table.items():
        if not (math.isfinite(row["e_form_per_atom"]) and math.isfinite(row["e_above_hull"])):
            raise ValueError(f"{str(path)!r}, material {mid!r}: reference energies must be finite numbers")
    return table


__all__ = [
    "E_FORM_COLUMNS",
    "E_HULL_COLUMNS",
    "Material",
    "STRUCTURE_KEYS",
    "atoms_from_structure_dict",
    "json_rows",
    "load_json_file",
    "read_bytes",
    "read_reference_table",
    "read_structures",
    "read_table",
    "structure_dict",
]
