"""``mlip info``: describe a checkpoint or shipped model (header, hyperparameters, metadata)."""

from __future__ import annotations

import json
import os
import warnings

from mlip.cli.common import CLIError, note


def _fmt_value(value) -> str:
    """A header value as one line: strings as they are, everything else as JSON if it can be."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)


def add_parser(subparsers) -> None:
    """Add ``info`` to the ``mlip`` subparsers."""
    p = subparsers.add_parser("info", help="describe a checkpoint or shipped model")
    p.add_argument("model", metavar="CHECKPOINT_OR_NAME")
    p.add_argument("--json", action="store_true", help="print the full header as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    """Print the checkpoint's header once it is known to describe a model this package can build (the
    architecture registered, the hyperparameters its own, the stored tensors of the shapes they give:
    :func:`mlip.checkpoint.check_header`); exit status 0."""
    from mlip import pretrained
    from mlip.checkpoint import check_header, checkpoint_header, read_header

    spec = args.model
    if os.path.exists(spec):
        header = read_header(spec)  # a directory: "a directory, not a checkpoint"
        check_header(spec, header)  # nothing is printed of a header that does not describe its weights
        source = f"checkpoint {spec}"
    elif pretrained.is_known(spec):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pretrained.UntrainedModelWarning)
            potential = pretrained.load(spec)
        header = checkpoint_header(potential)
        name = pretrained.DEFAULT_MODEL if spec == "default" else spec
        source = f"shipped model {name}"
    else:
        raise CLIError(
            f"{spec!r} is neither a checkpoint file nor a shipped model "
            f"(shipped models: {', '.join(['default'] + pretrained.available())})"
        )
    if args.json:
        print(json.dumps(header, indent=2, sort_keys=True))
        return 0
    metadata = header.get("metadata") or {}
    trained = metadata.get("trained")
    trained_text = {True: "yes", False: "NO (random weights: results are not physical)"}
    trained_text = trained_text.get(trained, "unknown")
    n_params = header.get("num_parameters")
    rows = [
        ("model", source),
        ("architecture", header["architecture"]),
        ("species", " ".join(header["species"])),
        ("cutoff", f"{header['cutoff']:g} Å"),
        ("parameters", f"{n_params:,}" if isinstance(n_params, int) else "unknown"),
        ("package version", header.get("package_version", "unknown")),
        ("trained", trained_text),
    ]
    width = max(len(k) for k, _ in rows) + 1
    for key, value in rows:
        print(f"{key + ':':<{width}} {value}")
    print("hyperparameters:")
    for key, value in sorted(header["hyperparameters"].items()):
        print(f"  {key}: {_fmt_value(value)}")
    print("metadata:")
    if not metadata:
        print("  (none)")
    for key, value in sorted(metadata.items()):
        print(f"  {key}: {_fmt_value(value)}")
    if trained is False:
        note(f"NOTE: {source} is UNTRAINED (random weights): results are not physical")
    return 0
