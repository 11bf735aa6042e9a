"""``mlip distill``: a fast student model trained on a teacher calculator's labels
(:mod:`mlip.workflows.distill`)."""

from __future__ import annotations

from mlip.cli.arguments import (add_without_arg, kind_counts, name_count, nonneg_float, positive_float,
                                positive_int)
from mlip.data.structures import DEFAULT_COUNTS, KINDS


def add_parser(subparsers) -> None:
    """Add ``distill`` to the ``mlip`` subparsers."""
    from mlip.cli.data_label import parse_setting
    from mlip.workflows.distill import DEFAULT_STUDENT

    p = subparsers.add_parser(
        "distill", help="distil a teacher calculator into a fast student model for your elements",
        description="Structures for the elements, the teacher's labels, a train/valid/test split by "
        "config_type, the student's training and its errors against the teacher on the test part, all in "
        "OUT_DIR; a rerun resumes every stage, and a changed setting is refused. The student, "
        "OUT_DIR/student.safetensors, is what 'mlip md --model' takes.")
    p.add_argument("elements", nargs="+", help="chemical symbols, e.g. Cu Ag Au")
    p.add_argument("--teacher", required=True,
                   help="emt, gpaw, chgnet or an ASE calculator class 'package.module:Class'")
    p.add_argument("--setting", type=parse_setting, action="append", metavar="KEY=VALUE", default=[],
                   help="a teacher setting (repeatable), as for 'mlip data label'")
    p.add_argument("--out-dir", required=True, help="folder of every stage (a rerun resumes it)")
    p.add_argument("--count", type=name_count(KINDS, "kind"), action="append", metavar="KIND=N",
                   help="structures of one kind (repeatable; then the kinds not named get none; md=N "
                        "trajectories run with the teacher). Default: "
                        + ", ".join(f"{k}={n}" for k, n in DEFAULT_COUNTS.items()))
    add_without_arg(p, KINDS)
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the structures, split and training (default 0)")
    p.add_argument("--student", default=DEFAULT_STUDENT,
                   help="a shipped model whose architecture the student takes, or a 'mlip train' YAML config "
                        "(default: %(default)s)")
    p.add_argument("--fractions", type=nonneg_float, nargs=3, default=[0.8, 0.1, 0.1],
                   metavar=("TRAIN", "VALID", "TEST"), help="split of each config_type (default 0.8 0.1 0.1)")
    p.add_argument("--epochs", type=positive_int, default=None, help="training epochs")
    p.add_argument("--minutes", type=positive_float, default=None,
                   help="training time budget; without --epochs, the epochs that fit in it (one is timed)")
    p.add_argument("--shards", type=int, default=None, help="label in this many shards (default: from the "
                   "environment); the run stops after labelling until every shard is done")
    p.add_argument("--shard-index", type=int, default=None, help="this process's shard")
    p.add_argument("--threads", type=positive_int, default=None, help="torch threads")
    p.add_argument("--no-progress", action="store_true", help="no progress bars (one line per stage remains)")
    p.set_defaults(func=run)


def run(args) -> int:
    """Run (or resume) the distillation; one line per stage."""
    from mlip.cli.common import lock_output_folder
    from mlip.workflows.distill import distill
    from mlip.workflows.labelling import labeller

    # Shards share the folder; of the MPI ranks of one GPAW teacher only the writing one locks it.
    lock_output_folder(args.out_dir, sharding=(args.shards, args.shard_index),
                       writer=labeller(args.teacher, dict(args.setting)).is_writer)
    result = distill(args.elements, args.teacher, args.out_dir, settings=dict(args.setting),
                     counts=kind_counts(args, DEFAULT_COUNTS), seed=args.seed, student=args.student,
                     fractions=args.fractions, epochs=args.epochs, minutes=args.minutes, n_shards=args.shards,
                     shard_index=args.shard_index, progress=not args.no_progress,
                     log=lambda line: print(line, flush=True))
    if result is not None:
        print(f"student: {result.student} (mlip md STRUCTURE --model {result.student})")
    return 0
