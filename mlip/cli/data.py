"""``mlip data``: reference data (``emt OUT`` generates an EMT-labelled set, ``structures`` makes
unlabelled structures for any elements, ``chemistries`` over many chemistries, ``label`` labels them with
a reference calculator, ``summary FILE`` checks a set, ``card FILE`` describes a labelled one)."""

from __future__ import annotations

import argparse


DATA_COMMANDS = {"emt": "mlip.cli.data_emt", "summary": "mlip.data.summary",
                 "structures": "mlip.cli.data_structures", "label": "mlip.cli.data_label",
                 "split": "mlip.cli.data_split", "chemistries": "mlip.cli.data_chemistries",
                 "card": "mlip.cli.data_card"}


def add_parser(subparsers) -> None:
    """Add ``data`` to the ``mlip`` subparsers."""
    p = subparsers.add_parser(
        "data", help="reference data: 'emt OUT' generates an EMT-labelled set, 'structures' makes structures "
        "for any elements, 'chemistries' over many chemistries, 'label' labels them with a reference "
        "calculator, 'split' makes train/valid/test files, 'summary FILE' checks a set, 'card FILE' describes "
        "a labelled set",
        add_help=True,
    )
    p.add_argument("data_command", choices=sorted(DATA_COMMANDS),
                   help="emt, structures, chemistries, label, split, summary or card (each has its own --help)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="arguments of the data command")
    p.set_defaults(func=run)


def run(args) -> int:
    """Hand the remaining arguments to the data command's own main."""
    import importlib

    module = importlib.import_module(DATA_COMMANDS[args.data_command])
    return int(module.main(list(args.rest)) or 0)
