"""``mlip data structures``: unlabelled structures for a list of elements (:mod:`mlip.data.structures`)."""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path
from typing import Optional, Sequence

from mlip.cli.arguments import add_without_arg, kind_counts, name_count
from mlip.cli.common import CLIError
from mlip.data.structures import DEFAULT_COUNTS, KINDS


def build_parser(prog: str = "mlip data structures") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Generate unlabelled structures of the given elements and their pairs "
        "(prototypes, alloys, strain, rattles, defects, surfaces, clusters, compressed pairs, random "
        "packings, isolated atoms, MD snapshots) as extended XYZ, to be labelled by 'mlip data label'.")
    p.add_argument("elements", nargs="+", help="chemical symbols, e.g. Si Ge")
    p.add_argument("-o", "--output", required=True, help="extxyz file to write")
    p.add_argument("--seed", type=int, default=0, help="random seed (same seed → same structures; default 0)")
    p.add_argument("--count", type=name_count(KINDS, "kind"), action="append", metavar="KIND=N",
                   help="structures of one kind (repeatable; then the kinds not named get none). Default: "
                   + ", ".join(f"{k}={n}" for k, n in DEFAULT_COUNTS.items()))
    add_without_arg(p, KINDS)
    p.add_argument("--md-model", default=None,
                   help="the model that runs the MD snapshots (a shipped name, checkpoint or "
                        "'package.module:Class'); needed for --count md=N")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``mlip data structures ELEMENTS... -o OUT [--seed S] [--count KIND=N ...] [--md-model M]``."""
    from mlip.data.sample import write_extxyz
    from mlip.data.structures import generate_structures

    args = build_parser().parse_args(argv)
    if Path(args.output).exists() and not args.overwrite:
        raise CLIError(f"{args.output!r} exists; choose another --output or pass --overwrite to replace it")
    calculator = None
    if args.md_model is not None:
        from mlip.calculators.model_loading import resolve_calculator

        calculator = resolve_calculator(args.md_model, dtype="float64")
    t0 = time.perf_counter()
    frames = generate_structures(args.elements, kind_counts(args, DEFAULT_COUNTS), seed=args.seed,
                                 md_calculator=calculator, progress=not args.no_progress)
    write_extxyz(frames, args.output)
    kinds = Counter(f.info["config_type"] for f in frames)
    print("structures: " + ", ".join(f"{k} {n}" for k, n in kinds.items()))
    print(f"wrote {len(frames)} structures ({sum(len(f) for f in frames)} atoms) to {args.output} "
          f"in {time.perf_counter() - t0:.1f} s")
    return 0
