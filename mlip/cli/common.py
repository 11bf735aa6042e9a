"""What every ``mlip`` subcommand shares: the error type, reading a structure, loading a model.

A :class:`CLIError` is bad command-line input; :func:`mlip.cli.main` reports it as
``mlip: error: <message>`` with exit status 2.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Optional

PROG = "mlip"
EXIT_NOT_CONVERGED = 3  # mlip relax: the relaxed structure is written, but fmax was not reached


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
    from mlip.data.occupancy import disordered_sites, require_ordered

    if not disordered_sites(atoms):
        return atoms
    labels = None
    try:
        import ase.io

        tagged = ase.io.read(str(path), index=index, format=format, store_tags=True)
        labels = tagged.info.get("_atom_site_label")
    except Exception:  # not a CIF (no tags to keep), or no labels: sites are named by their row
        pass
    try:
        ordered = require_ordered(atoms, str(path), majority_species, labels=labels)
    except ValueError as err:
        raise CLIError(str(err)) from None
    sites = disordered_sites(atoms, labels)
    note(f"NOTE: --majority-species: {len(sites)} partially occupied site(s) given their majority species: "
         + "; ".join(f"{site.describe()} -> {ordered.symbols[site.atoms[0]]}" for site in sites))
    return ordered


def load_model(spec: str, device: str, dtype: str, compile: bool = False):
    """Resolve ``--model`` (``compile``: ``--compile``); print a prominent note for untrained models.
    Returns (calculator, label)."""
    from mlip.pretrained import UntrainedModelWarning
    from mlip.workflows.model_loading import describe_model, is_untrained, potential_of, resolve_calculator

    with warnings.catch_warnings():
        # Replaced by the NOTE line below, which says the same thing more visibly.
        warnings.simplefilter("ignore", UntrainedModelWarning)
        calc = resolve_calculator(spec, device=device, dtype=dtype, **({"compile": True} if compile else {}))
    label = describe_model(calc, spec)
    if compile and potential_of(calc) is None:
        note(f"NOTE: --compile applies to mlip models only; {label!r} runs as it is")
    if is_untrained(calc):
        note(f"NOTE: model {label!r} is UNTRAINED (random weights): results are not physical")
    return calc, label


def check_species(atoms, calc, path: str) -> None:
    """Reject elements the model does not cover before any work is done."""
    from mlip.graph import validate_atoms
    from mlip.workflows.model_loading import potential_of

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
    from mlip.workflows.model_loading import potential_of

    if potential_of(calc) is not None:
        dtype = str(calc.dtype).replace("torch.", "")
        return f"{type(calc).__name__}, {dtype}, {calc.device}"
    return type(calc).__name__
