"""``mlip data emt``: the EMT-labelled training set of the shipped models (:mod:`mlip.data.emt`)."""

from __future__ import annotations

import argparse
import time
from typing import Optional, Sequence

from mlip.cli.arguments import name_count
from mlip.data.emt import CATEGORIES, DEFAULT_COUNTS, SMALL_COUNTS, generate_emt_dataset


def build_parser(prog: str = "mlip data emt") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Generate an EMT-labelled training set (Al, Cu, Ag, Au, Ni, Pd, Pt) as extended XYZ.",
    )
    p.add_argument("output", help="extxyz file to write (e.g. emt.xyz)")
    p.add_argument("--seed", type=int, default=0, help="random seed (same seed → identical file; default 0)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("-n", "--n-structures", type=int, default=None,
                      help=f"total number of frames, spread like the defaults (default {sum(DEFAULT_COUNTS.values())})")
    size.add_argument("--small", action="store_true", help=f"tiny set for tests ({sum(SMALL_COUNTS.values())} frames)")
    size.add_argument("--count", type=name_count(CATEGORIES, "category"), action="append", metavar="CATEGORY=N",
                      help=f"frames of one category (repeatable; others get 0). Categories: {', '.join(CATEGORIES)}")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``mlip data emt OUTPUT [--seed S] [-n N | --small | --count CATEGORY=N ...]``."""
    from mlip.data.summary import format_summary, summarize

    args = build_parser().parse_args(argv)
    n = dict(args.count) if args.count else args.n_structures
    t0 = time.perf_counter()
    frames = generate_emt_dataset(n, seed=args.seed, out_path=args.output, progress=not args.no_progress,
                                  small=args.small)
    elapsed = time.perf_counter() - t0
    print(format_summary(summarize(frames)))
    print(f"wrote {len(frames)} frames to {args.output} in {elapsed:.1f} s")
    return 0
