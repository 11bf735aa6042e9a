"""Measure the MD-step speed of shipped model cards again and write it into the cards.

    OMP_NUM_THREADS=2 python benchmarks/card_speed.py equiformer_v3-sige platonic-sige --compile

For each NAME, ``models/pretrained/NAME.json`` gets a new ``speed`` entry and ``NAME.md`` a new
``## Speed`` section (:func:`mlip.workflows.model_card.make.remeasure_speed`): float32 energy + forces +
stress on the card's two cells, on this machine with the torch threads it gives (``--threads``); with
``--compile`` also through ``MLIPCalculator(compile=True)``. Everything else in the cards stays as it is.
Run it on an otherwise idle machine: the cards state absolute times.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from mlip.workflows.model_card.make import remeasure_speed

CARDS = Path(__file__).resolve().parents[1] / "models" / "pretrained"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="+", help="shipped card names (models/pretrained/NAME.json)")
    parser.add_argument("--compile", action="store_true", help="also time MLIPCalculator(compile=True)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--folder", type=Path, default=CARDS)
    args = parser.parse_args()
    missing = [n for n in args.names if not (args.folder / f"{n}.json").is_file()]
    if missing:
        parser.error(f"no card named {', '.join(missing)} in {args.folder}")
    if args.threads:
        torch.set_num_threads(args.threads)
    for name in args.names:
        speed = remeasure_speed(args.folder, name, compile=args.compile, repeats=args.repeats)
        for key in ("md_atom_steps_per_s", "compiled_md_atom_steps_per_s"):
            for label, rate in speed.get(key, {}).items():
                n = int(label.split(", ")[1].split()[0])
                arm = "compiled" if key.startswith("compiled") else "eager"
                print(f"{name:22s} {arm:8s} {label:34s} "
                      f"{1e3 * n / rate:8.1f} ms/step", flush=True)


if __name__ == "__main__":
    main()
