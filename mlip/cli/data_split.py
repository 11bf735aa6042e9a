"""``mlip data split``: train/validation/test files of a labelled set, by kind and group."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Optional, Sequence

from mlip.cli.arguments import nonneg_float
from mlip.cli.common import CLIError, refuse_existing

PARTS = ("train", "valid", "test")


def build_parser(prog: str = "mlip data split") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Split an extxyz file into train, valid and test files: each config_type is "
        "split separately in the same proportions, and frames sharing a group (one MD trajectory) stay in "
        "one part. Seeded: the same file and seed give the same split.")
    p.add_argument("input", help="labelled extxyz file")
    p.add_argument("--fractions", type=nonneg_float, nargs=3, default=[0.8, 0.1, 0.1],
                   metavar=("TRAIN", "VALID", "TEST"),
                   help="fractions of the three parts (default 0.8 0.1 0.1)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--group-key", default="group", help="per-frame key of the group (default: group)")
    p.add_argument("--kind-key", default="config_type",
                   help="per-frame key split separately (default: config_type)")
    p.add_argument("--prefix", default=None,
                   help="output prefix: PREFIX-train.xyz, PREFIX-valid.xyz, PREFIX-test.xyz (default: the "
                        "input's name without extension)")
    p.add_argument("--overwrite", action="store_true", help="replace existing output files")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``mlip data split FILE [--fractions A B C] [--seed S] [--prefix P]``."""
    import ase.io

    from mlip.data.splits import split_dataset
    from mlip.io import atomic_write

    args = build_parser().parse_args(argv)
    source = Path(args.input)
    if not source.is_file():
        raise CLIError(f"data file {args.input!r} does not exist")
    prefix = args.prefix or str(source.with_suffix("")).removesuffix(".xyz")
    outputs = [Path(f"{prefix}-{part}.xyz") for part in PARTS]
    refuse_existing(outputs, args.overwrite, "choose another --prefix")
    try:
        frames = ase.io.read(source, ":")
    except Exception as err:  # ASE raises many kinds for a malformed file
        raise CLIError(f"cannot read {args.input!r}: {err}") from None
    parts = split_dataset(frames, args.fractions, seed=args.seed, group_by=args.group_key,
                          stratify_by=args.kind_key)
    for path, part, name in zip(outputs, parts, PARTS):
        atomic_write(path, lambda tmp, part=part: ase.io.write(tmp, part, format="extxyz"))
        kinds = Counter(str(f.info.get(args.kind_key, "(none)")) for f in part)
        listing = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
        print(f"{name}: {len(part)} frames -> {path} ({listing})")
    return 0
