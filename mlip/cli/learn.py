"""``mlip learn``: the active-learning loop (:mod:`mlip.workflows.active_learning`)."""

from __future__ import annotations

import argparse

from mlip.cli.arguments import nonneg_int, positive_float, positive_int
from mlip.cli.common import CLIError


def add_parser(subparsers) -> None:
    """Add ``learn`` to the ``mlip`` subparsers."""
    from mlip.cli.data_label import parse_setting
    from mlip.workflows.active_learning.settings import SELECTIONS, ExploreSettings, LearnSettings

    d, e = LearnSettings(), ExploreSettings()
    p = subparsers.add_parser(
        "learn", help="active learning: label only what a committee of models is unsure about",
        description="Train a committee on INITIAL, then repeat: explore from seed structures with it "
        "(MD over a temperature schedule, relaxations, strained and rattled seeds), select the most "
        "uncertain frames (kept apart from each other), label them with the oracle, retrain from the "
        "previous weights and evaluate on --heldout; until the label budget is spent or the exploration "
        "stays below --threshold. Every iteration keeps its frames, models and metrics in "
        "OUT_DIR/iter-NNN/; a killed run continues with --resume; one line per stage.")
    p.add_argument("initial",
                   help="labelled structures to train the first committee on (extxyz, ASE db, ...)")
    p.add_argument("--oracle", required=True,
                   help="emt, gpaw, chgnet or an ASE calculator class 'package.module:Class' (as for "
                        "'mlip data label')")
    p.add_argument("--setting", type=parse_setting, action="append", metavar="KEY=VALUE", default=[],
                   help="an oracle setting (repeatable), as for 'mlip data label'")
    p.add_argument("--oracle-launcher", default=None, metavar="COMMAND",
                   help="run the label stage as 'COMMAND -m mlip data label ...', e.g. \"mpiexec -n 2 gpaw "
                        "python\" for GPAW under MPI (exploration and training stay in this process)")
    p.add_argument("--out-dir", required=True,
                   help="folder of the run (iter-000/, iter-001/, ..., summary.json)")
    p.add_argument("--heldout", default=None, help="labelled structures every committee is evaluated on")
    p.add_argument("--seeds", default=None, help="structures to explore from (default: the initial ones)")
    p.add_argument("--pool", default=None,
                   help="a fixed file of candidates to select from in place of the exploration")
    p.add_argument("--committee", type=positive_int, default=None,
                   help=f"members, trained from seeds SEED, SEED+1, ... (default {d.committee}, or the "
                        "number of --start-from checkpoints)")
    p.add_argument("--start-from", nargs="+", default=None, metavar="CHECKPOINT",
                   help="members trained elsewhere to start from, one per member, in place of the first "
                        "training (each must be able to warm-start a member of --model)")
    p.add_argument("--finetune-from", default=None, metavar="CHECKPOINT",
                   help="a pre-trained model of --model's architecture from which the first committee is "
                        "fine-tuned on the initial data, each member from its own seed, instead of random "
                        "weights (excludes --start-from)")
    p.add_argument("--model", default=d.model,
                   help="a shipped model whose architecture and training settings the members take, or a "
                        "'mlip train' YAML config (default: %(default)s)")
    p.add_argument("--epochs", type=positive_int, default=d.epochs,
                   help="epochs of the first committee (default %(default)s)")
    p.add_argument("--finetune-epochs", type=positive_int, default=d.finetune_epochs,
                   help="epochs of each later iteration, from the previous weights (default %(default)s)")
    p.add_argument("--label-budget", type=nonneg_int, default=d.label_budget,
                   help="oracle calls in all (default %(default)s)")
    p.add_argument("--per-iteration", type=positive_int, default=d.per_iteration,
                   help="oracle calls per iteration at most (default %(default)s)")
    p.add_argument("--threshold", type=positive_float, default=None,
                   help="stop when an exploration's largest per-atom force uncertainty is below this (eV/Å)")
    p.add_argument("--max-iterations", type=nonneg_int, default=d.max_iterations,
                   help="iterations after the first training (default %(default)s)")
    p.add_argument("--selection", choices=SELECTIONS, default=d.selection,
                   help="most uncertain with diversity, or random (the baseline) (default %(default)s)")
    p.add_argument("--trust-lo", type=positive_float, default=None, metavar="EV_PER_A",
                   help="trust window, lower bound: frames whose largest per-atom force uncertainty is below "
                        "it are predicted well enough and not selected")
    p.add_argument("--trust-hi", type=positive_float, default=None, metavar="EV_PER_A",
                   help="trust window, upper bound: frames above it are failed explorations, counted and "
                        "recorded in metrics.json but never labelled (selection by uncertainty only)")
    p.add_argument("--seed", type=nonneg_int, default=d.seed, help="seed of everything random (default 0)")
    p.add_argument("--temperatures", type=positive_float, nargs="+", default=None, metavar="K",
                   help="the MD schedule: every iteration runs MD at each (default: "
                        + " ".join(f"{t:g}" for t in e.temperatures) + ")")
    p.add_argument("--explore", type=parse_setting, action="append", metavar="KEY=VALUE", default=[],
                   help="an exploration setting (repeatable): " + ", ".join(
                       f"{k}={v:g}" for k, v in vars(e).items() if k != "temperatures") + " (the defaults)")
    p.add_argument("--resume", action="store_true", help="continue the run in OUT_DIR (only --label-budget, "
                   "--max-iterations and --threshold may differ)")
    p.add_argument("--threads", type=positive_int, default=None, help="torch threads")
    p.add_argument("--no-progress", action="store_true", help="no progress bars (one line per stage remains)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run (or resume) the loop; one line per stage."""
    from mlip.cli.common import command_line
    from mlip.run_lock import FolderInUseError
    from mlip.workflows.active_learning import LearnSettings, learn

    explore = dict(args.explore)
    if args.temperatures is not None:
        explore["temperatures"] = list(args.temperatures)
    committee = args.committee or (len(args.start_from) if args.start_from else None)
    settings = dict(committee=committee or LearnSettings().committee, model=args.model, epochs=args.epochs,
                    finetune_epochs=args.finetune_epochs, label_budget=args.label_budget,
                    per_iteration=args.per_iteration, threshold=args.threshold,
                    max_iterations=args.max_iterations, selection=args.selection, seed=args.seed,
                    trust_lo=args.trust_lo, trust_hi=args.trust_hi,
                    explore=explore)
    launcher = None
    if args.oracle_launcher is not None:
        import shlex

        try:
            launcher = shlex.split(args.oracle_launcher)
        except ValueError as err:
            raise CLIError(f"--oracle-launcher {args.oracle_launcher!r}: {err}") from None
        if not launcher:
            raise CLIError("--oracle-launcher is empty: give a command such as \"mpiexec -n 2 gpaw python\"")
    try:
        result = learn(args.initial, args.oracle, args.out_dir, heldout=args.heldout, seeds=args.seeds,
                       pool=args.pool, oracle_settings=dict(args.setting), settings=settings,
                       resume=args.resume, progress=not args.no_progress,
                       log=lambda line: print(line, flush=True),
                       command=command_line(), committee=args.start_from,
                       oracle_launcher=launcher, finetune_from=args.finetune_from)
    except FolderInUseError as err:
        raise CLIError(f"{err}; wait for it to end or choose another --out-dir") from None
    print(f"committee: {' '.join(str(p) for p in result.committee)}")
    return 0
