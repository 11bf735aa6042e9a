"""``mlip card``: measure a trained model and write its model card (:mod:`mlip.workflows.model_card`).

    mlip card RUN_DIR --name platonic-emt --test emt-test.xyz \
        --train-command "mlip train benchmarks/configs/platonic_emt_stage1.yaml" --out models/pretrained
"""

from __future__ import annotations

import json
from pathlib import Path

from mlip.cli.arguments import positive_int
from mlip.cli.common import CLIError, refuse_existing


def _target(text: str):
    """A test MAE target: a number, or ``-`` for none."""
    if text == "-":
        return None
    try:
        return float(text)
    except ValueError:
        raise CLIError(f"--targets: {text!r} is neither a number nor '-'") from None


def add_parser(subparsers) -> None:
    """Add ``card`` to the ``mlip`` subparsers."""
    from mlip.workflows.model_card.make import SHIPPED_AS, TEST_COMMAND
    from mlip.workflows.model_card.markdown import EMT_TEST
    from mlip.workflows.model_card.measure import MD_CELLS

    p = subparsers.add_parser(
        "card", help="measure a trained model and write its model card (NAME.json, NAME.md)",
        description="Ship the best weights of a training run as OUT/NAME.safetensors, measure them (test "
        "errors, card sample, rotations, MD-step speed, training) and write the card: OUT/NAME.json, "
        "OUT/NAME.md and the learning curve's plot OUT/NAME-learning-curve.png. A model trained in stages "
        "names the earlier stages' run folders and one --train-command per stage.")
    p.add_argument("run_dir", metavar="RUN_DIR",
                   help="the out_dir of mlip train (best.safetensors, metrics.json)")
    p.add_argument("--name", required=True, help="the model's name (the card's files are named after it)")
    p.add_argument("--summary", default="", help="the card's first paragraph")
    p.add_argument("--test", required=True, help="labelled test file (extxyz, ASE db, MPtrj JSON)")
    p.add_argument("--test-command", default=TEST_COMMAND, help="the command that made --test")
    p.add_argument("--train-data-command", default="mlip data emt emt-train.xyz --seed 0")
    p.add_argument("--train-command", required=True, action="append",
                   help="the training command (once per stage, in order)")
    p.add_argument("--earlier-stages", nargs="*", default=[],
                   help="run directories of the stages before RUN_DIR (init_from chain), in order")
    p.add_argument("--train-threads", default="1 thread of a 2-core machine")
    p.add_argument("--reference", default="EMT",
                   help="what the model imitates (the tests compare an EMT model with ASE's EMT)")
    p.add_argument("--domain", default=None, help="the domain-of-validity paragraph (default: EMT's)")
    p.add_argument("--targets", nargs=3, default=None, metavar=("E", "F", "S"),
                   help="test MAE targets in meV/atom, meV/Å, meV/Å³ ('-' for none; default 3 20 3)")
    p.add_argument("--targets-file", default=None, metavar="FILE",
                   help="the model's targets as JSON (test errors, near-equilibrium forces, crystal "
                        "properties, phonons, κ; mlip.workflows.model_card.targets): the card opens with "
                        "each met or missed")
    p.add_argument("--test-description", default=EMT_TEST, help="how the test set was drawn")
    p.add_argument("--card-sample", default=None,
                   help="a labelled file in the repository (path relative to it) as the card sample, "
                        "instead of the EMT generator's")
    p.add_argument("--student-vs-teacher", default=None,
                   help="OUT/student_vs_teacher.json of benchmarks/accuracy/student_vs_teacher.py for this "
                        "model")
    p.add_argument("--student-vs-teacher-command", default=None, help="the command that produced it")
    p.add_argument("--dft-validation", default=None,
                   help="dft_validation.json of benchmarks/accuracy/dft_validation.py, this model a method")
    p.add_argument("--dft-validation-method", default=None, help="this model's method name in it")
    p.add_argument("--dft-validation-beside", nargs="+", default=[], metavar="METHOD",
                   help="other methods of --dft-validation (foundation models) shown beside this model")
    p.add_argument("--dft-validation-command", default="benchmarks/accuracy/dft_validation.py",
                   help="the command that produced it")
    p.add_argument("--mace-baseline", default=None,
                   help="mace_baseline.json of benchmarks/accuracy/mace_baseline.py, this model one --ours")
    p.add_argument("--mace-row", default=None, help="this model's row (its --ours; default --name)")
    p.add_argument("--mace-baseline-command", default="benchmarks/accuracy/mace_baseline.py",
                   help="the command that produced it")
    p.add_argument("--speed-cells", choices=sorted(MD_CELLS), default="cu-au",
                   help="the cells of the MD-step speed (default cu-au, the EMT cards')")
    p.add_argument("--sample-n", type=positive_int, default=40)
    p.add_argument("--sample-seed", type=int, default=1)
    p.add_argument("--out", default="models/pretrained",
                   help="folder of the card's files (default: %(default)s)")
    p.add_argument("--discovery", default=None,
                   help="metrics.json of the miniature Matbench Discovery run of this model "
                        "(examples/discovery_emt.py)")
    p.add_argument("--discovery-command", default=None, help="the command that produced --discovery")
    p.add_argument("--label-noise", default=None, metavar="FILE",
                   help="error budget: the label noise of the data's first version against its second, the "
                        "JSON of examples/datasets/sige-pbe/v2/noise.py --json")
    p.add_argument("--label-noise-command", default=None, metavar="CMD",
                   help="the command that wrote --label-noise (default: the one it names)")
    p.add_argument("--label-floor", default=None, metavar="FILE",
                   help="error budget: the residual of the labels' k-point rule, the k-point study's JSON "
                        "(benchmarks/data/kpoint_convergence.py report)")
    p.add_argument("--label-floor-command", default=None, metavar="CMD",
                   help="the command that wrote --label-floor (needed unless the file names one)")
    p.add_argument("--orientation", default=None,
                   help="Platonic only: ship the weights with this group orientation (e.g. generic)")
    p.add_argument("--average-over", default=None, choices=SHIPPED_AS["average_over"],
                   help="Platonic only: ship the weights with this coset average (see docs/models.md)")
    p.add_argument("--weights", choices=("best", "last"), default="best",
                   help="the weights to ship: the best epoch by validation loss (best.safetensors) or the "
                        "run's last, decayed ones (last.safetensors)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the card's files in --out (default: refuse to start)")
    p.set_defaults(func=run)


def run(args) -> int:
    """Measure, write the card's files, print the name, parameter count and test errors."""
    from mlip.workflows.model_card import CardSettings, make_model_card

    if not Path(args.run_dir).is_dir():
        raise CLIError(f"run folder {args.run_dir!r} does not exist")
    out = Path(args.out)
    suffixes = (".safetensors", ".json", ".md", "-learning-curve.png")
    refuse_existing([out / f"{args.name}{suffix}" for suffix in suffixes],
                    args.overwrite,
                    "choose another --out or --name")
    if args.targets is not None and args.targets_file:
        raise CLIError("--targets and --targets-file: give the test targets in one place (the file's 'test')")
    settings = CardSettings(
        name=args.name, test=args.test, train_commands=args.train_command, earlier_stages=args.earlier_stages,
        summary=args.summary, test_command=args.test_command, train_data_command=args.train_data_command,
        train_threads=args.train_threads, reference=args.reference, domain=args.domain,
        targets=dict(zip(("energy", "forces", "stress"), map(_target, args.targets or ["3", "20", "3"]))),
        targets_file=args.targets_file, dft_validation_beside=args.dft_validation_beside,
        test_description=args.test_description, card_sample=args.card_sample, sample_n=args.sample_n,
        sample_seed=args.sample_seed, speed_cells=args.speed_cells, orientation=args.orientation,
        average_over=args.average_over, student_vs_teacher=args.student_vs_teacher,
        student_vs_teacher_command=args.student_vs_teacher_command, dft_validation=args.dft_validation,
        dft_validation_method=args.dft_validation_method, dft_validation_command=args.dft_validation_command,
        mace_baseline=args.mace_baseline, mace_row=args.mace_row,
        mace_baseline_command=args.mace_baseline_command,
        discovery=args.discovery, discovery_command=args.discovery_command, label_noise=args.label_noise,
        label_noise_command=args.label_noise_command, label_floor=args.label_floor,
        label_floor_command=args.label_floor_command, weights=args.weights)
    data = make_model_card(args.run_dir, out, settings)
    summary = {k: data[k] for k in ("name", "n_parameters")} | {"test": data["test"]["metrics"]}
    print(json.dumps(summary, indent=1, default=str))
    return 0
