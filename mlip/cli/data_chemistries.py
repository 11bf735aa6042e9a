"""``mlip data chemistries``: unlabelled structures over many chemistries (:mod:`mlip.data.chemistries`),
the inputs of a teacher-labelled dataset."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Optional, Sequence

from mlip.cli.arguments import add_without_arg, kind_counts, name_count
from mlip.cli.common import CLIError
from mlip.data.chemistries import DEFAULT_COMPOSITIONS, DEFAULT_COUNTS, KINDS


def build_parser(prog: str = "mlip data chemistries") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Generate unlabelled structures over many chemistries: the unaries of every "
        "element and binaries and ternaries drawn the way the Materials Project is populated (oxides, "
        "halides, chalcogenides, nitrides, pnictides, hydrides, borides/carbides, intermetallics) on "
        "stoichiometric prototypes, each with strained, rattled, vacancy, surface, cluster, compressed-dimer "
        "and optional MD variants, as extended XYZ, to be labelled by 'mlip data label' (e.g. --calculator "
        "chgnet). Each frame's 'group' is its composition, so 'mlip data split' can hold out compositions.")
    p.add_argument("-o", "--output", required=True, help="extxyz file to write")
    p.add_argument("--elements", nargs="+", default=None, metavar="SYMBOL",
                   help="the elements to draw from (default: the 89 elements CHGNet knows)")
    p.add_argument("--compositions", type=int, default=DEFAULT_COMPOSITIONS,
                   help="binary and ternary compositions to draw; the unaries (4 per element) come on top "
                        f"(default {DEFAULT_COMPOSITIONS})")
    p.add_argument("--count", type=name_count(KINDS, "kind"), action="append", metavar="KIND=N",
                   help="frames of one kind per composition (repeatable; then the kinds not named get none; "
                        "md counts trajectories). Default: "
                        + ", ".join(f"{k}={n}" for k, n in DEFAULT_COUNTS.items()))
    add_without_arg(p, KINDS)
    p.add_argument("--no-unaries", action="store_true",
                   help="binaries and ternaries only (default: also the unaries of every element)")
    p.add_argument("--seed", type=int, default=0,
                   help="random seed (same seed → same structures; default 0)")
    p.add_argument("--md-calculator", default=None,
                   help="the calculator that runs the MD snapshots, named as in 'mlip data label "
                        "--calculator' (e.g. chgnet, emt or 'package.module:Class'); needed for --count md=N")
    p.add_argument("--summary", default=None, help="also write the composition statistics to this JSON file")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``mlip data chemistries -o OUT [--elements ...] [--compositions N] [--count KIND=N ...] [--seed S]
    [--md-calculator C]``."""
    from mlip.data.chemistries import CHGNET_ELEMENTS, generate_chemistries, summarize
    from mlip.data.sample import write_extxyz

    args = build_parser().parse_args(argv)
    if Path(args.output).exists() and not args.overwrite:
        raise CLIError(f"{args.output!r} exists; choose another --output or pass --overwrite to replace it")
    elements = list(CHGNET_ELEMENTS if args.elements is None else args.elements)
    calculator = None
    if args.md_calculator is not None:
        from mlip.workflows.labelling import labeller

        calculator = labeller(args.md_calculator).make(None)
    t0 = time.perf_counter()
    frames = generate_chemistries(elements, args.compositions, kind_counts(args, DEFAULT_COUNTS),
                                  seed=args.seed, md_calculator=calculator, unaries=not args.no_unaries,
                                  progress=not args.no_progress)
    minutes = (time.perf_counter() - t0) / 60
    write_extxyz(frames, args.output)
    stats = summarize(frames, elements)
    stats["minutes"] = round(minutes, 2)
    if args.summary:
        from mlip.io import write_json

        write_json(args.summary, stats)
    sizes = stats["atoms_per_frame"]
    print("families (compositions / frames): " + ", ".join(
        f"{k} {n}/{stats['frames_by_family'][k]}" for k, n in stats["compositions_by_family"].items()))
    print("kinds: " + ", ".join(f"{k} {n}" for k, n in stats["frames_by_kind"].items()))
    print("prototypes (crystal frames): " + json.dumps(stats["prototypes"])[1:-1].replace('"', ""))
    print(f"elements: {stats['elements']} of {len(elements)} in some frame, {stats['elements_in_compounds']} "
          "in a binary or ternary" + (f" (not: {' '.join(stats['elements_not_in_compounds'])})"
                                  if stats["elements_not_in_compounds"] else ""))
    print(f"charge-balanced ionic frames: {100 * stats['charge_balanced_share']:.0f} %; atoms per frame: "
          f"min {sizes['min']}, median {sizes['median']:g}, mean {sizes['mean']:g}, max {sizes['max']}")
    print(f"wrote {len(frames)} structures ({stats['atoms']} atoms, {stats['compositions']} compositions) to "
          f"{args.output} in {minutes:.1f} min")
    return 0
