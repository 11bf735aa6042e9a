"""``mlip create``: write a freshly initialised (untrained) checkpoint."""

from __future__ import annotations

from typing import Optional, Sequence

from mlip.cli.arguments import positive_float
from mlip.cli.common import PROG, CLIError


def _parse_set(items: Optional[Sequence[str]]) -> dict:
    import yaml

    out = {}
    for item in items or []:
        if "=" not in item:
            raise CLIError(f"--set expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        key = key.strip()
        if not key.isidentifier():
            raise CLIError(f"--set: invalid hyperparameter name {key!r}")
        try:
            out[key] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise CLIError(f"--set {key}: cannot parse value {value!r} ({err})") from None
    return out


def add_parser(subparsers) -> None:
    """Add ``create`` to the ``mlip`` subparsers."""
    p = subparsers.add_parser("create", help="write a freshly initialised (untrained) checkpoint")
    p.add_argument("architecture", metavar="ARCH", nargs="?",
                   help="platonic or equiformer_v3 (or from --config)")
    p.add_argument("--config", metavar="YAML",
                   help="model config file (create_model arguments, name included)")
    p.add_argument("--species", nargs="+", help="elements, e.g. Cu Au")
    p.add_argument("--cutoff", type=positive_float, help="neighbour cutoff (Å)")
    p.add_argument("--seed", type=int, default=None, help="weight initialisation seed")
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="hyperparameter (value parsed as YAML); repeatable",
    )
    p.add_argument("-o", "--output", required=True, help="output .safetensors path")
    p.set_defaults(func=run)


def run(args) -> int:
    """Create the model from ARCH/--config/--set and save it untrained."""
    from mlip.checkpoint import save_potential
    from mlip.models import create_model

    from mlip.models import load_model_config

    config = {}
    if args.config:
        try:
            config = load_model_config(args.config)
        except ValueError as err:
            raise CLIError(str(err)) from None
    architecture = args.architecture or config.pop("name", None)
    config.pop("name", None)
    species = args.species or config.pop("species", None)
    cutoff = args.cutoff or config.pop("cutoff", None)
    config.pop("species", None)
    config.pop("cutoff", None)
    for what, value in (("an architecture", architecture), ("--species", species), ("--cutoff", cutoff)):
        if value is None:
            raise CLIError(f"create needs {what} (on the command line or in --config)")
    args.architecture = architecture
    hyperparameters = {**config, **_parse_set(args.set)}
    try:
        potential = create_model(
            architecture, species=species, cutoff=cutoff, seed=args.seed, **hyperparameters
        )
    except TypeError as err:  # unknown hyperparameter names
        raise CLIError(str(err)) from None
    except ValueError as err:
        given = ", ".join(f"{k}={v!r}" for k, v in hyperparameters.items())
        raise CLIError(
            f"cannot create a {args.architecture!r} model"
            + (f" with {given}" if given else "")
            + f": {err}"
        ) from None
    potential.metadata = {
        "trained": False,
        "note": "freshly initialised (random weights); not physical until trained",
        "seed": args.seed,
        "command": " ".join([PROG] + list(args.argv)),
    }
    out = save_potential(potential, args.output)
    print(
        f"wrote {out}: {potential.architecture}, species {' '.join(potential.species)}, "
        f"cutoff {potential.cutoff:g} Å, {potential.num_parameters():,} parameters (untrained)"
    )
    return 0
