"""``mlip data card``: the data card of a labelled set (counts, label ranges, provenance, cost)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional, Sequence

from mlip.cli.common import CLIError, refuse_existing


def build_parser(prog: str = "mlip data card") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Read a labelled data set and print its card: frames, atoms and elements per "
        "config_type, the range of energies per atom, forces and stresses, the labelling calculator and "
        "settings and the labelling time recorded in each frame.")
    p.add_argument("path", help="labelled data set (extxyz, ASE db or MPtrj JSON)")
    p.add_argument("-o", "--json", default=None, help="also write the card as JSON to this file")
    p.add_argument("--markdown", default=None, help="also write the printed Markdown to this file")
    p.add_argument("--overwrite", action="store_true", help="replace existing output files")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``mlip data card FILE [-o card.json] [--markdown card.md]``."""
    from mlip.data.card import data_card, format_data_card
    from mlip.data.readers import read_dataset
    from mlip.io import write_json, write_text

    args = build_parser().parse_args(argv)
    if not Path(args.path).is_file():
        raise CLIError(f"data file {args.path!r} does not exist")
    refuse_existing([p for p in (args.json, args.markdown) if p], args.overwrite, "choose another name")
    try:
        card = data_card(read_dataset(args.path))
    except ValueError as err:
        raise CLIError(f"{args.path}: {err}") from None
    text = format_data_card(card)
    print(text)
    if args.json:
        write_json(args.json, card)
    if args.markdown:
        write_text(args.markdown, text + "\n")
    return 0
