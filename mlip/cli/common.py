"""What every ``mlip`` subcommand shares: the error type, reading a structure, loading a model.

A :class:`CLIError` is bad command-line input; :func:`mlip.cli.main` reports it as
``mlip: error: <message>`` with exit status 2.
"""

from __future__ import annotations

import errno
import shlex
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

PROG = "mlip"
EXIT_NOT_CONVERGED = 3  # mlip relax: the relaxed structure is written, but fmax was not reached
#: errno values of OS errors that are failures at run time (exit status 1: the machine ran out of something);
#: any other OS error is about a path the user gave (exit status 2)
RUN_TIME_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.ENOMEM})
#: of those, the ones only a write raises: their message names the output folder being written
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})

# The running command (one per process, set by mlip.cli.main): its command line, recorded in the run
# locks of its output folders, and those locks, released when it ends.
_command_line = PROG
_run_locks = ExitStack()
_locked_folders: List[Path] = []


class CLIError(Exception):
    """Bad command-line input: reported as ``mlip: error: <message>``, exit status 2."""


def note(message: str) -> None:
    """Print a line for the user on stderr (notes, warnings), flushed at once."""
    print(message, file=sys.stderr, flush=True)


def _format_label(path: Path, format: Optional[str]) -> str:
    """``format cif, from --format``, ``format cif, guessed from the file`` or ``format unknown ...``."""
    if format:
        return f"format {format}, from --format"
    from ase.io.formats import filetype, ioformats

    try:
        guessed = filetype(str(path))
    except Exception:  # ASE cannot tell the format either
        guessed = None
    if guessed not in ioformats:  # filetype returns unknown extensions such as "txt" as they are
        return "format unknown; name it with --format"
    return f"format {guessed}, guessed from the file"


def _count_frames(path: Path, format: Optional[str]) -> Optional[int]:
    """Number of frames of a structure file, or None when it cannot be read through."""
    import ase.io

    try:
        return sum(1 for _ in ase.io.iread(str(path), index=":", format=format))
    except Exception:  # the file is unreadable: the caller reports the reader's own error
        return None


def refuse_existing(paths, overwrite: bool, instead: str) -> None:
    """CLIError naming the ``paths`` that already exist, unless ``overwrite`` (``instead``: what the
    user may do rather than overwrite, e.g. ``"choose another --prefix"``)."""
    existing = [str(p) for p in paths if Path(p).exists()]
    if existing and not overwrite:
        raise CLIError(f"{', '.join(existing)} exist(s); {instead} or pass --overwrite")


def start_command(argv: Sequence[str]) -> None:
    """Record the command line of the ``mlip`` command now starting (for its run locks)."""
    global _command_line
    _command_line = shlex.join([PROG, *map(str, argv)])


def command_line() -> str:
    """The command line of the running ``mlip`` command (what its run locks record)."""
    return _command_line


def end_command() -> None:
    """Release the run locks the command took (:func:`lock_output_folder`), however it ended."""
    _locked_folders.clear()
    _run_locks.close()


def lock_output_folder(path, *, sharding: Optional[Tuple[Optional[int], Optional[int]]] = None,
                       writer: bool = True, option: str = "--out-dir") -> Path:
    """Create output folder ``path`` and hold its run lock until the command ends (:mod:`mlip.run_lock`):
    a second run into the folder is refused at once, naming this one (CLIError; ``option`` is the
    argument that chose the folder). ``sharding``: (number of shards, shard index) of a sharded command
    as given (None each: from a Slurm array, torchrun or 1 shard), whose shards share the folder.
    ``writer``: False for a process that computes but does not write (an MPI rank > 0 of a GPAW
    calculation, a torchrun rank > 0 of a training), which takes no lock."""
    from mlip.run_lock import FolderInUseError, folder_lock

    if not writer:
        return Path(path)
    shard = None
    if sharding is not None:
        from mlip.workflows.sharding import shard_from_environment

        count, index = shard_from_environment(*sharding)
        shard = (index, count)
    try:
        folder = _run_locks.enter_context(folder_lock(path, shard=shard, command=_command_line, note=note))
    except FolderInUseError as err:
        sharded = shard is not None and shard[1] > 1
        raise CLIError(f"{err}; wait for it to end" + ("" if sharded else f" or choose another {option}")) \
            from None
    _locked_folders.append(folder)
    return folder


def os_error_message(err: OSError) -> Tuple[str, int]:
    """The one-line message and exit status of an OS error: ``PATH: STRERROR``; status 1 for the machine
    running out of something (:data:`RUN_TIME_ERRNOS`: disk full, quota, file size limit, I/O error),
    else 2 (a path the user gave: permission denied, read-only, a file where a folder should be)."""
    if err.errno is None or not err.strerror:  # raised with a message of its own
        msg = str(err) or type(err).__name__
        if err.filename and str(err.filename) not in msg:
            msg = f"{msg}: {err.filename}"
        return msg, 2
    msg = err.strerror
    if err.filename is not None:
        msg = f"{err.filename}: {msg}" + (f" -> {err.filename2}" if err.filename2 is not None else "")
    elif err.errno in _WRITE_ERRNOS and _locked_folders:  # a write with no file name: say where
        msg = f"{msg} (writing into {', '.join(map(str, _locked_folders))})"
    return msg, 1 if err.errno in RUN_TIME_ERRNOS else 2


def read_structure(path: str, index: int = -1, format: Optional[str] = None, majority_species: bool = False):
    """Read one frame of any ASE-readable file and check it can be evaluated.

    Errors name the file, the format (given or guessed) and what is wrong; an ``index`` outside the
    file is refused with the number of frames (ASE itself would stop with an empty StopIteration
    or, for negative indices, quietly return the first frame). A partially occupied site (a CIF's
    Cu 0.5 / Au 0.5, which ASE reads as Au) is refused, naming the site, unless ``majority_species``
    (``--majority-species``): then each such site gets its species of highest occupancy
    (:func:`mlip.data.occupancy.require_ordered`).
    """
    import ase.io
    from ase import Atoms

    from mlip.graph import validate_atoms

    p = Path(path)
    if not p.exists():
        raise CLIError(f"structure file {path!r} does not exist")
    if p.is_dir():
        raise CLIError(f"structure file {path!r} is a directory")
    if p.stat().st_size == 0:  # ASE would say "unknown format" when it guesses from the content
        raise CLIError(f"{path}: the file holds no structure (it is empty)")
    if format is not None:
        from ase.io.formats import ioformats

        if format not in ioformats:
            raise CLIError(f"--format {format!r} is not a format ASE knows (e.g. cif, extxyz, vasp, traj)")

    def out_of_range(n_frames: int) -> CLIError:
        if n_frames == 0:
            return CLIError(f"{path}: the file holds no structure")
        plural = "" if n_frames == 1 else "s"
        return CLIError(f"{path}: frame {index} requested but the file has {n_frames} frame{plural}")

    try:
        atoms = ase.io.read(str(p), index=index, format=format)
    except KeyError as err:
        # ASE raises KeyError for symbols that are not chemical elements (e.g. "Xx").
        where = f"structure file {path!r} ({_format_label(p, format)})"
        raise CLIError(f"cannot read {where}: unknown element or field {err}") from None
    except Exception as err:  # ASE raises many types for malformed files (AssertionError, ...)
        if isinstance(err, (IndexError, StopIteration)):
            n_frames = _count_frames(p, format)
            if n_frames is not None and not -n_frames <= index < n_frames:
                raise out_of_range(n_frames) from None
        msg = f"{type(err).__name__}: {err}" if str(err) else f"the reader failed with {type(err).__name__}"
        raise CLIError(f"cannot read structure file {path!r} ({_format_label(p, format)}): {msg}") from None
    if index < -1:  # ASE returns the first frame for a negative index beyond the file's start
        n_frames = _count_frames(p, format)
        if n_frames is not None and index < -n_frames:
            raise out_of_range(n_frames)
    if not isinstance(atoms, Atoms):
        raise CLIError(
            f"cannot read structure file {path!r}: expected one structure, got {type(atoms).__name__}"
        )
    atoms = _ordered(atoms, p, index, format, majority_species)
    try:
        validate_atoms(atoms)
    except ValueError as err:
        raise CLIError(f"invalid structure in {path!r}: {err}") from None
    return atoms


def _ordered(atoms, path: Path, index: int, format: Optional[str], majority_species: bool):
    """``atoms`` with one species per site (:func:`mlip.data.occupancy.require_ordered`); the refusal
    names a CIF's sites by their labels (read again, with the file's tags, only then)."""
    from mlip.data.occupancy import disordered_sites, require_ordered, site_labels

    if not disordered_sites(atoms):
        return atoms
    labels = site_labels(path, index, format)
    try:
        ordered = require_ordered(atoms, str(path), majority_species, labels=labels)
    except ValueError as err:
        raise CLIError(str(err)) from None
    sites = disordered_sites(atoms, labels)
    note(f"NOTE: --majority-species: {len(sites)} partially occupied site(s) given their majority species: "
         + "; ".join(f"{site.describe()} -> {ordered.symbols[site.atoms[0]]}" for site in sites))
    return ordered


def load_model(spec: str, device: str, dtype: str, compile: bool = False):
    """``--model`` through :func:`mlip.calculators.model_loading.resolve_calculator`, its notes on stderr
    (``compile``: ``--compile``, which a foreign calculator does not take). Returns (calculator, label)."""
    from mlip.calculators.model_loading import describe_model, potential_of, resolve_calculator

    options = {"compile": True} if compile else {}
    calc = resolve_calculator(spec, device=device, dtype=dtype, note=note, **options)
    label = describe_model(calc, spec)
    if compile and potential_of(calc) is None:
        note(f"NOTE: --compile applies to mlip models only; {label!r} runs as it is")
    return calc, label


def check_species(atoms, calc, path: str) -> None:
    """Reject elements the model does not cover before any work is done."""
    from mlip.graph import validate_atoms
    from mlip.calculators.model_loading import potential_of

    potential = potential_of(calc)
    if potential is None:
        return
    try:
        validate_atoms(atoms, allowed_numbers=potential.atomic_numbers.tolist())
    except ValueError as err:
        from mlip.pretrained import covering

        others = covering(atoms.get_chemical_symbols())
        hint = f"; shipped models that cover it: {', '.join(others)} (--model NAME)" if others else ""
        raise CLIError(f"{path}: {err}{hint}") from None


def calc_label(calc) -> str:
    """``MLIPCalculator, float64, cpu`` for mlip calculators, the class name for any other."""
    from mlip.calculators.model_loading import potential_of

    if potential_of(calc) is not None:
        dtype = str(calc.dtype).replace("torch.", "")
        return f"{type(calc).__name__}, {dtype}, {calc.device}"
    return type(calc).__name__
