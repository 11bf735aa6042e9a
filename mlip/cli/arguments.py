"""Argument types and options shared by the ``mlip`` subcommands.

The types (:data:`positive_int`, :data:`positive_float`, ...) reject non-finite and out-of-range
values with argparse's usage error; :func:`supercell_arg` and :func:`mesh_arg` turn the lists of
``--supercell`` / ``--mesh`` into what the phonon workflows take.
"""

from __future__ import annotations

import argparse
import math
from typing import Dict, Optional, Sequence

from mlip.cli.common import CLIError


def _number(kind: type, minimum: float, strict: bool, bound: str):
    """argparse type: a finite ``kind`` (int or float) > minimum (strict) or >= minimum."""
    noun = "an integer" if kind is int else "a number"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {noun}: {text!r}") from None
        if not math.isfinite(value) or value < minimum or (strict and value == minimum):
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text!r}")
        return value

    return parse


finite_float = _number(float, -math.inf, False, "a finite number")
positive_float = _number(float, 0, True, "a positive number")
nonneg_float = _number(float, 0, False, "a non-negative number")
nonneg_int = _number(int, 0, False, ">= 0")
positive_int = _number(int, 1, False, ">= 1")


def name_count(names: Sequence[str], what: str):
    """argparse type of ``NAME=N`` (``--count crystal=50``): NAME one of ``names`` (a ``what``, e.g.
    "category"), N a non-negative integer; returns (NAME, N)."""

    def parse(text: str):
        if "=" not in text:
            raise argparse.ArgumentTypeError(f"expected {what.upper()}=N, got {text!r}")
        name, n = text.split("=", 1)
        if name not in names:
            raise argparse.ArgumentTypeError(f"unknown {what} {name!r}; choose from {', '.join(names)}")
        try:
            value = int(n)
        except ValueError:
            raise argparse.ArgumentTypeError(f"count must be an integer, got {n!r}") from None
        if value < 0:
            raise argparse.ArgumentTypeError("count must be non-negative")
        return name, value

    return parse


def add_without_arg(p: argparse.ArgumentParser, kinds: Sequence[str]) -> None:
    """``--without KIND`` (repeatable): a kind of structure left out of the default counts (or of
    ``--count``); read back with :func:`kind_counts`."""
    p.add_argument("--without", action="append", choices=list(kinds), metavar="KIND", default=[],
                   help="leave this kind out (repeatable), e.g. --without compressed for a teacher with no "
                        "repulsive wall, such as CHGNet")


def kind_counts(args: argparse.Namespace, defaults: Dict[str, int]) -> Optional[Dict[str, int]]:
    """The counts per kind of ``--count`` (or ``defaults`` when none is given) with the kinds of
    ``--without`` at zero; None (the generator's defaults) when neither option is given."""
    if not args.without:
        return dict(args.count) if args.count else None
    counts = dict(args.count) if args.count else dict(defaults)
    for kind in args.without:
        counts[kind] = 0
    return counts


def add_model_args(p: argparse.ArgumentParser, dtype: str) -> None:
    """--model, --device, --dtype (default ``dtype``), --compile, --index, --format, --majority-species,
    --no-progress, --threads."""
    p.add_argument(
        "--model",
        default="default",
        help="shipped model name, checkpoint path, or ASE calculator 'module:Class' "
        "(e.g. ase.calculators.emt:EMT); default: %(default)s",
    )
    p.add_argument(
        "--device", default="auto", help="auto (CUDA if available), cpu, cuda, cuda:1, ... (default: auto)"
    )
    p.add_argument("--dtype", default=dtype, choices=["float32", "float64"], help="default: %(default)s")
    add_compile_arg(p)
    p.add_argument("--index", type=int, default=-1, help="frame of the structure file to use (default: last)")
    p.add_argument("--format", default=None,
                   help="ASE format of the structure file, e.g. cif, extxyz, vasp (default: from the name)")
    p.add_argument("--majority-species", action="store_true",
                   help="put on each partially occupied site of the structure (a CIF's Cu 0.5 / Au 0.5) its "
                        "species of highest occupancy (default: refuse such a structure)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="CPU threads for torch (default: the cores this process may use, less those other processes "
        "keep busy, at least 1; OMP_NUM_THREADS, when set, wins)",
    )


def add_compile_arg(p: argparse.ArgumentParser) -> None:
    """--compile: torch.compile the evaluation of an mlip model (MLIPCalculator's ``compile``)."""
    p.add_argument(
        "--compile",
        action="store_true",
        help="evaluate an mlip model through torch.compile (energy, forces and stress in one graph): "
        "the first evaluation compiles (minutes on a CPU), later ones are faster (long MD, small "
        "cells most); a failed compilation warns and runs eagerly; ignored for ASE calculators",
    )


def supercell_arg(values: Optional[Sequence[int]], what: str):
    """1, 3 or 9 integers from the command line → n, (n1, n2, n3) or a 3×3 matrix (None stays None)."""
    if values is None:
        return None
    if len(values) == 1:
        return int(values[0])
    if len(values) == 3:
        return [int(v) for v in values]
    if len(values) == 9:
        return [[int(v) for v in values[3 * k : 3 * k + 3]] for k in range(3)]
    raise CLIError(f"{what} takes 1, 3 or 9 integers (n, n1 n2 n3, or a 3×3 matrix row by row), "
                   f"got {len(values)}")


def mesh_arg(values: Optional[Sequence[str]]):
    """``--mesh 20 20 20``, ``--mesh 19`` or a length density ``--mesh 40.0``."""
    if values is None:
        return None
    try:
        if len(values) == 1:
            return float(values[0]) if "." in values[0] else int(values[0])
        if len(values) == 3:
            return [int(v) for v in values]
    except ValueError:
        pass
    raise CLIError(f"--mesh takes n, n1 n2 n3 or a length density in Å such as 40.0, got {' '.join(values)}")
