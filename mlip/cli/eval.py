"""``mlip eval``: errors of a model on labelled data (MAE/RMSE, per element, parity plot)."""

from __future__ import annotations

from pathlib import Path
from typing import List

from mlip.cli.arguments import positive_int
from mlip.cli.common import CLIError, load_model, lock_output_folder

EVAL_OUTPUTS = ("metrics.json", "parity.png")  # what run writes to --out-dir


def add_parser(subparsers) -> None:
    """Add ``eval`` to the ``mlip`` subparsers."""
    from mlip.data.readers import FORMATS

    p = subparsers.add_parser("eval",
                              help="errors of a model on labelled data (MAE/RMSE, per element, parity plot)")
    p.add_argument("model", metavar="MODEL", help="shipped name, checkpoint or module:Class")
    p.add_argument("data", metavar="DATA", help="labelled structures (extxyz, ASE db, MPtrj JSON)")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="format of DATA (default: from the extension .xyz/.extxyz, .db or .json, maybe .gz)")
    p.add_argument("--dtype", default="float64", choices=["float32", "float64"], help="default: %(default)s")
    p.add_argument("--device", default="auto")
    p.add_argument("--batch-size", type=positive_int, default=16)
    p.add_argument("--energy-key", default=None)
    p.add_argument("--forces-key", default=None)
    p.add_argument("--stress-key", default=None)
    p.add_argument("--out-dir", default="eval", help="metrics.json and parity.png (default: %(default)s)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an earlier evaluation's results in --out-dir (default: refuse to start)")
    p.set_defaults(func=run)


def run(args) -> int:
    """Evaluate, print the metrics, write metrics.json and parity.png to --out-dir."""
    from mlip.data import read_dataset
    from mlip.data.readers import FORMATS, detect_format
    from mlip.training.evaluation import error_metrics, parity_plot, predictions
    from mlip.io import write_json
    from mlip.calculators.model_loading import potential_of

    out_dir = lock_output_folder(args.out_dir)
    earlier = _earlier_results(out_dir, args.overwrite)
    calc, label = load_model(args.model, args.device, args.dtype)
    if not Path(args.data).is_file():
        raise CLIError(f"data file {args.data!r} does not exist")
    fmt = args.format
    if fmt is None:
        try:
            fmt = detect_format(args.data)
        except ValueError:
            raise CLIError(
                f"{args.data}: cannot tell the format of labelled data from the file name; eval reads extxyz "
                f"(.xyz, .extxyz), ASE databases (.db) and MPtrj JSON (.json), each optionally .gz: "
                f"name one with --format {{{','.join(FORMATS)}}}"
            ) from None
    potential = potential_of(calc)
    # Frames with elements the model lacks are refused while reading, with the file, frame and symbol.
    species = potential.species if potential is not None else None
    samples = read_dataset(args.data, fmt, energy_key=args.energy_key, forces_key=args.forces_key,
                           stress_key=args.stress_key, species=species)
    if not samples:
        raise CLIError(f"{args.data}: no structures")
    model = potential if potential is not None else calc
    print(f"model: {label}; data: {args.data} ({len(samples)} structures)", flush=True)
    preds = predictions(model, samples, batch_size=args.batch_size, dtype=args.dtype,
                        device=getattr(calc, "device", "cpu"))
    metrics = error_metrics(preds)
    for key, value in metrics.items():
        print(f"  {key}: {value:.4g}")
    for name in earlier:  # no file of the earlier evaluation is left to be mistaken for this one's
        (out_dir / name).unlink()
    write_json(out_dir / "metrics.json",
               {"model": label, "data": str(args.data), "n_structures": len(samples), **metrics})
    try:
        parity_plot(preds, out_dir / "parity.png", title=f"{label} on {Path(args.data).name}")
        plot = " parity.png"
    except ImportError:
        plot = " (no parity plot: matplotlib is not installed)"
    print(f"wrote: {out_dir}/ metrics.json{plot}")
    return 0


def _earlier_results(out_dir: Path, overwrite: bool) -> List[str]:
    """The files of an earlier evaluation in ``out_dir``, which ``overwrite`` replaces; without it a
    CLIError naming them and the model and data they are of."""
    from mlip.io import read_json

    earlier = [name for name in EVAL_OUTPUTS if (out_dir / name).exists()]
    if earlier and not overwrite:
        record = read_json(out_dir / "metrics.json")
        of = (f" (model {record.get('model')!r} on {record.get('data')!r})"
              if isinstance(record, dict) and "model" in record else "")
        raise CLIError(f"{out_dir} already holds {', '.join(earlier)} of an earlier evaluation{of}: choose "
                       f"another --out-dir, or pass --overwrite to replace them")
    return earlier
