"""``mlip train``: train a model from a YAML config (see :mod:`mlip.training`)."""

from __future__ import annotations


def add_parser(subparsers) -> None:
    """Add ``train`` to the ``mlip`` subparsers."""
    p = subparsers.add_parser("train", help="train a model on energies, forces and stresses (YAML config)")
    p.add_argument("config", metavar="CONFIG.yaml",
                   help="model, data, loss, optimizer, epochs, ... (see mlip.training)")
    p.add_argument("--resume", action="store_true", help="continue from OUT_DIR/train_state.safetensors "
                   "(only epochs, max_minutes, out_dir and device may differ from the run's config)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an earlier run in OUT_DIR (its checkpoints, metrics and state are deleted)")
    p.add_argument("--out-dir", default=None, help="override the config's out_dir")
    p.add_argument("--session-minutes", type=float, default=None, metavar="M",
                   help="advance the run by one session: stop before an epoch that would end after M "
                   "minutes, with the state saved; a run already in OUT_DIR is continued (as --resume), so the same "
                   "command continues it next time, on this machine or on a clone of the folder")
    p.add_argument("--no-progress", action="store_true", help="no progress bars (the line per epoch remains)")
    p.set_defaults(func=run)


def run(args) -> int:
    """Train from the YAML config and print the last validation errors."""
    import os

    from mlip.cli.common import lock_output_folder
    from mlip.training import TrainConfig, train

    from pathlib import Path

    from mlip.training.run_dir import STATE_NAME

    config = TrainConfig.from_yaml(args.config)
    if args.out_dir:
        config.out_dir = args.out_dir
    if args.session_minutes is not None:
        if args.session_minutes <= 0:
            raise ValueError(f"--session-minutes must be positive, got {args.session_minutes:g}")
        if args.overwrite:
            raise ValueError("--session-minutes continues the run in OUT_DIR; it excludes --overwrite")
        args.resume = args.resume or (Path(config.out_dir) / STATE_NAME).is_file()
    # Under torchrun (WORLD_SIZE > 1, as mlip.training reads it) every rank runs this and rank 0 alone
    # writes the run's files: it alone takes the lock.
    writer = int(os.environ.get("WORLD_SIZE", "1")) <= 1 or int(os.environ.get("RANK", "0")) == 0
    lock_output_folder(config.out_dir, writer=writer, option="--out-dir (or out_dir in the config)")
    print(f"training {config.model['name']} on {config.data.train} -> {config.out_dir}/"
          + (" (resuming)" if args.resume else ""), flush=True)
    result = train(config, resume=args.resume, progress=not args.no_progress, overwrite=args.overwrite,
                   session_minutes=args.session_minutes)
    last = result.history[-1] if result.history else {}
    ended = f" (ended: {result.finished})" if result.finished else ""
    print(f"done: {result.epochs_run} epochs{ended}; best: {result.best}; last: {result.last}")
    for key in ("valid_energy_mae_meV_per_atom", "valid_forces_mae_meV_per_A", "valid_stress_mae_meV_per_A3"):
        if key in last:
            print(f"  {key[6:]}: {last[key]:.3f}")
    return 0
