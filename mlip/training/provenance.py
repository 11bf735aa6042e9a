"""What a checkpoint records of the files its training read: names and content hashes, not paths.

A checkpoint travels: it is shipped, shared, run on other machines. The paths its training was given
(``/home/me/runs/emt-train.xyz``) say nothing there and tell where the file lay on the machine that
trained it, so the training metadata (:func:`training_provenance`) keeps the config with every path
reduced to its file name, and beside it each file read (training and validation data, the checkpoint
a run starts from) by name, size and SHA-256 of its content, which identify the file wherever it is.
"""

from __future__ import annotations

import copy
import hashlib
import re
from pathlib import Path, PurePath, PureWindowsPath
from typing import Dict, List, Optional, Tuple

#: dotted config keys that hold paths: files read (recorded with their hash) and the output folder
FILE_KEYS = ("data.train", "data.valid", "init_from", "init_embedded_atom_from")
FOLDER_KEYS = ("out_dir",)


def file_name(path: str) -> str:
    """The last component of a POSIX or Windows path (``C:\\runs\\a.xyz`` → ``a.xyz``)."""
    name = PurePath(path).name
    return PureWindowsPath(name).name if "\\" in name else name


def file_record(path: str) -> Dict[str, object]:
    """``{"name", "bytes", "sha256"}`` of the file at ``path`` (size and hash None when it cannot be read)."""
    record: Dict[str, object] = {"name": file_name(path), "bytes": None, "sha256": None}
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        record.update(bytes=Path(path).stat().st_size, sha256=digest.hexdigest())
    except OSError:  # given as samples rather than read from the file, or since moved
        pass
    return record


def key_holder(config: dict, key: str) -> Tuple[Optional[dict], str]:
    """(the mapping holding dotted ``key``'s last part, that part), or (None, part) when absent."""
    *parents, last = key.split(".")
    for part in parents:
        config = config.get(part) if isinstance(config, dict) else None
    return (config if isinstance(config, dict) else None), last


def training_provenance(config: dict) -> Tuple[dict, Dict[str, dict]]:
    """(``config`` with every path of :data:`FILE_KEYS` and :data:`FOLDER_KEYS` reduced to its file name,
    ``{dotted key: file_record}`` of each file of :data:`FILE_KEYS` it names). ``config`` is left as it is."""
    portable = copy.deepcopy(config)
    files = {}
    for key in FILE_KEYS + FOLDER_KEYS:
        holder, last = key_holder(portable, key)
        if holder is None or not isinstance(holder.get(last), str):
            continue
        if key in FILE_KEYS:
            files[key] = file_record(holder[last])
        holder[last] = file_name(holder[last])
    return portable, files


#: a token that is an absolute path of some machine: a POSIX path of two or more components (/work/runs/a.xyz,
#: /tmp/x), a home folder (~/x), a Windows drive (C:\\x, D:/x) or a network share (\\\\host\\x)
_MACHINE_PATH = re.compile(r"^(/[^/\s]+/[^\s]*|~[/\\]\S*|[A-Za-z]:[\\/]\S*|\\\\\S+)")
_TOKEN = re.compile(r"[^\s'\"=,;()\[\]{}<>|`]+")


def machine_paths(value) -> List[str]:
    """Every token of the strings in ``value`` (a JSON-like structure of mappings, lists and strings;
    mapping keys included) that looks like an absolute path of a machine (see :data:`_MACHINE_PATH`):
    what shipped metadata must not hold. Units and ratios (``eV/Å``, ``meV/atom/ps``) are not paths."""
    found: List[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += machine_paths(key) + machine_paths(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            found += machine_paths(item)
    elif isinstance(value, str):
        found += [token for token in _TOKEN.findall(value) if _MACHINE_PATH.match(token)]
    return found


__all__ = ["FILE_KEYS", "FOLDER_KEYS", "file_name", "file_record", "key_holder", "machine_paths",
           "training_provenance"]
