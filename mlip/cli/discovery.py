"""``mlip discovery``: the Matbench Discovery pipeline on the command line.

    mlip discovery emt-benchmark mini --seed 0 -n 300
    mlip discovery teacher-benchmark mini-chgnet --calculator chgnet --systems Mg-O Na-Cl Al-Ni -n 100
    mlip discovery relax mini/initial-structures.json.gz --model ase.calculators.emt:EMT --out-dir run
    mlip discovery relax mini/initial-structures.json.gz --model default --batch-size 32 --out-dir run
    mlip discovery join run --elemental-refs mini/elemental-references.json --out-dir submission
    mlip discovery metrics submission/<date>-discovery.csv.gz --reference mini/summary.csv.gz \\
        --geo-opt submission/<date>-geo-opt.jsonl.gz --reference-structures mini/relaxed-structures.json.gz

The steps are wired into :mod:`mlip.cli` by :func:`add_parser`, each with its ``run_<step>``
function; errors are reported by :func:`mlip.cli.main` (``mlip: error: ...``, exit status 2).
The pipeline itself is :mod:`mlip.workflows.discovery`.
"""

from __future__ import annotations

from pathlib import Path

from mlip.cli.arguments import add_compile_arg, nonneg_int, positive_float, positive_int
from mlip.cli.common import CLIError, calc_label, load_model, lock_output_folder


def run_relax(args) -> int:
    """Relax this shard's materials into the campaign folder and print the counts."""
    from mlip.graph import validate_atoms
    from mlip.workflows.discovery.inputs import read_structures
    from mlip.workflows.discovery.relax_campaign import run_discovery_relax
    from mlip.calculators.model_loading import potential_of

    if args.batch_size > 1:  # before the model is loaded: say at once what batching needs
        from mlip.integrations import require_torch_sim

        if args.fix_symmetry:
            raise CLIError("--fix-symmetry relaxes one material at a time: drop --batch-size")
        require_torch_sim(f"--batch-size {args.batch_size}")
    try:
        materials = read_structures(args.structures, key=args.structure_key)
    except ValueError as err:
        raise CLIError(str(err)) from None
    lock_output_folder(args.out_dir, sharding=(args.n_shards, args.shard_index))
    calc, label = load_model(args.model, args.device, args.dtype, args.compile)
    potential = potential_of(calc)
    n_entries = sum(m.entry is not None for m in materials)
    print(f"model:     {label} ({calc_label(calc)})")
    print(f"materials: {len(materials)} from {', '.join(map(str, args.structures))} -> {args.out_dir}/")
    if n_entries:
        print(f"NOTE: {n_entries} structures come from ComputedStructureEntries, i.e. the entries' (usually "
              f"relaxed) structures; the IS2RE task starts from the initial structures")
    if potential is not None:
        allowed = potential.atomic_numbers.tolist()
        lacking = []
        for m in materials:
            try:
                validate_atoms(m.atoms, allowed_numbers=allowed)
            except ValueError:
                lacking.append(m.material_id)
        if lacking:
            print(f"NOTE: {len(lacking)} materials contain elements the model lacks (e.g. {lacking[0]}); "
                  f"they are recorded as failed")
    print(f"protocol:  FIRE + FrechetCellFilter, fmax {args.fmax:g} eV/Å, at most {args.steps} steps"
          + (", space group kept (FixSymmetry)" if args.fix_symmetry else "")
          + (f", batches of up to {args.batch_size} (torch-sim)" if args.batch_size > 1 else ""), flush=True)
    counts = run_discovery_relax(materials, calc, args.out_dir, fmax=args.fmax, steps=args.steps,
                                 n_shards=args.n_shards, shard_index=args.shard_index,
                                 progress=not args.no_progress, dtype=args.dtype, device=args.device,
                                 fix_symmetry=args.fix_symmetry, batch_size=args.batch_size)
    print(f"shard {counts['shard'] + 1}/{counts['n_shards']}: {counts['assigned']} materials, "
          f"{counts['skipped']} already done, {counts['computed']} relaxed ({counts['failed']} failed)")
    print(f"campaign:  {counts['n_done']}/{counts['n_materials']} materials have a result in {args.out_dir}/")
    if counts["n_done"] == counts["n_materials"]:
        print(f"next:      mlip discovery join {args.out_dir} --elemental-refs <file> [--entries <file>]")
    return 0


def run_join(args) -> int:
    """Merge the shards into the submission files and print what was written."""
    from mlip.workflows.discovery.join import join_discovery

    lock_output_folder(args.out_dir or args.run_dirs[0])
    res = join_discovery(args.run_dirs, args.elemental_refs, out_dir=args.out_dir, entries=args.entries,
                         date=args.date, allow_missing=args.allow_missing)
    print(f"materials: {res['n_materials']} ({res['n_failed']} failed, {res['n_missing']} missing, "
          f"{res['n_not_converged']} not converged, {res['n_no_e_form']} without formation energy)")
    for key in ("discovery", "geo_opt", "model_yaml", "summary"):
        print(f"wrote:     {res[key]}")
    return 0


def run_metrics(args) -> int:
    """Score the predictions against the reference and print the summary."""
    from mlip.workflows.discovery.metrics import discovery_metrics, format_summary

    out_dir = args.out_dir or str(Path(args.predictions).parent)
    lock_output_folder(out_dir)
    result = discovery_metrics(args.predictions, args.reference, geo_opt=args.geo_opt,
                               reference_structures=args.reference_structures, kappa_srme=args.kappa_srme,
                               out_dir=out_dir, plot=not args.no_plot, progress=not args.no_progress,
                               pred_col=args.pred_col)
    print(format_summary(result))
    for path in result["files"].values():
        print(f"wrote:     {path}")
    return 0


def run_emt_benchmark(args) -> int:
    """Build the miniature EMT benchmark in OUT_DIR."""
    from mlip.workflows.discovery.emt_benchmark import generate_emt_benchmark

    lock_output_folder(args.out_dir, option="OUT_DIR")
    m = generate_emt_benchmark(args.out_dir, seed=args.seed, n_candidates=args.n, fmax=args.fmax,
                               steps=args.steps, progress=not args.no_progress)
    print(f"candidates: {m['n_candidates']} ({m['n_stable']} stable, prevalence {m['prevalence']:.3f}); "
          f"known hull: {m['n_hull_entries']} entries; {m['wall_time_s']:.1f} s")
    for name in m["files"].values():
        print(f"wrote:      {Path(args.out_dir) / name}")
    return 0


def run_teacher_benchmark(args) -> int:
    """Build the miniature benchmark in OUT_DIR with a calculator (the teacher) as the truth."""
    from mlip.workflows.discovery.teacher_benchmark import generate_teacher_benchmark

    lock_output_folder(args.out_dir, option="OUT_DIR")
    m = generate_teacher_benchmark(args.out_dir, calculator=args.calculator, systems=args.systems,
                                   seed=args.seed, n_candidates=args.n, fmax=args.fmax, steps=args.steps,
                                   calculator_settings=dict(args.setting), progress=not args.no_progress)
    print(f"candidates: {m['n_candidates']} ({m['n_stable']} stable, prevalence {m['prevalence']:.3f}) over "
          f"{len(m['systems'])} systems; known hull: {m['n_hull_entries']} entries; {m['wall_time_s']:.1f} s")
    if "warning" in m:
        print(f"WARNING:    {m['warning']}")
    for name in m["files"].values():
        print(f"wrote:      {Path(args.out_dir) / name}")
    return 0


def add_parser(subparsers) -> None:
    """Add ``discovery`` with its steps to the ``mlip`` subparsers."""
    p = subparsers.add_parser("discovery",
                              help="Matbench Discovery: relax, join, metrics, emt-benchmark, "
                                   "teacher-benchmark",
                              description="The Matbench Discovery (IS2RE-SR) pipeline with any model, and "
                                          "miniature offline versions in which EMT or any calculator (a "
                                          "teacher) plays DFT.")
    dsub = p.add_subparsers(dest="discovery_command", metavar="STEP")
    dsub.required = True
    _add_relax(dsub)
    _add_join(dsub)
    _add_metrics(dsub)
    _add_emt_benchmark(dsub)
    _add_teacher_benchmark(dsub)


def _add_relax(dsub) -> None:
    """``mlip discovery relax``."""
    r = dsub.add_parser("relax",
                        help="relax every material (FIRE + FrechetCellFilter), sharded and resumable")
    r.add_argument("structures", metavar="STRUCTURES", nargs="+",
                   help="initial structures: JSON(.gz/.bz2) of pymatgen structures or "
                        "ComputedStructureEntries keyed by material_id, JSON lines, or ASE-readable files "
                        "(extxyz with material_id in info)")
    r.add_argument("--model", default="default",
                   help="shipped model name, checkpoint path, or ASE calculator 'module:Class' "
                        "(e.g. ase.calculators.emt:EMT); default: %(default)s")
    r.add_argument("--device", default="auto",
                   help="auto (CUDA if available), cpu, cuda, ... (default: auto)")
    r.add_argument("--dtype", default="float64", choices=["float32", "float64"], help="default: %(default)s")
    add_compile_arg(r)
    r.add_argument("--out-dir", default="discovery", help="campaign folder (default: %(default)s)")
    r.add_argument("--fmax", type=positive_float, default=0.02,
                   help="force threshold, eV/Å (default: %(default)s)")
    r.add_argument("--fix-symmetry", action="store_true",
                   help="keep each structure's space group (ASE FixSymmetry; not the benchmark's protocol): "
                   "for "
                   "models that are not exactly rotation invariant, such as the Platonic Transformer")
    r.add_argument("--steps", type=positive_int, default=500,
                   help="maximum FIRE steps (default: %(default)s)")
    r.add_argument("--batch-size", type=positive_int, default=1, metavar="N",
                   help="relax N materials at a time in one batched evaluation with torch-sim (its FIRE, "
                        "the same protocol; an mlip model; pip install 'mlip-torch[torchsim]', "
                        "Python >= 3.12); N times the largest material's atoms per batch. "
                        "Default: 1, one at a time with ASE")
    r.add_argument("--n-shards", type=positive_int, default=None,
                   help="number of shards (default: Slurm array, torchrun WORLD_SIZE, or 1)")
    r.add_argument("--shard-index", type=nonneg_int, default=None, help="this shard (0-based)")
    r.add_argument("--structure-key", default=None,
                   help="column of structures in JSON tables (default: automatic)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.add_argument("--threads", type=positive_int, default=None, help="CPU threads for torch")
    r.set_defaults(func=run_relax)


def _add_join(dsub) -> None:
    """``mlip discovery join``."""
    j = dsub.add_parser("join", help="merge shards; formation energies; the submission files")
    j.add_argument("run_dirs", metavar="RUN_DIR", nargs="+",
                   help="campaign folder(s) of 'mlip discovery relax'")
    j.add_argument("--elemental-refs", required=True, metavar="FILE",
                   help="elemental reference energies: JSON {element: eV/atom} or MP elemental reference "
                        "entries")
    j.add_argument("--entries", metavar="FILE",
                   help="ComputedStructureEntries of the same materials: MaterialsProject2020Compatibility")
    j.add_argument("--out-dir", default=None, help="where to write (default: the first RUN_DIR)")
    j.add_argument("--date", default=None, help="YYYY-MM-DD prefix of the file names (default: today)")
    j.add_argument("--allow-missing", action="store_true",
                   help="write the files although materials have no result (they count as unstable)")
    j.set_defaults(func=run_join)


def _add_metrics(dsub) -> None:
    """``mlip discovery metrics``."""
    m = dsub.add_parser("metrics", help="F1, DAF, MAE, ... on hull distances; RMSD; CPS; summary and plot")
    m.add_argument("predictions", metavar="DISCOVERY_CSV",
                   help="<date>-discovery.csv.gz of 'mlip discovery join'")
    m.add_argument("--reference", required=True, metavar="FILE",
                   help="reference table with material_id, e_form_per_atom and e_above_hull "
                        "(or the WBM summary)")
    m.add_argument("--geo-opt", metavar="FILE",
                   help="<date>-geo-opt.jsonl.gz: RMSD against --reference-structures")
    m.add_argument("--reference-structures", metavar="FILE",
                   help="reference relaxed structures (any structures file)")
    m.add_argument("--kappa-srme", type=float, default=None, help="the model's κ_SRME: adds the CPS")
    m.add_argument("--pred-col", default="e_form_per_atom", help="prediction column (default: %(default)s)")
    m.add_argument("--out-dir", default=None,
                   help="metrics.json and the plot (default: beside DISCOVERY_CSV)")
    m.add_argument("--no-plot", action="store_true", help="no parity plot")
    m.add_argument("--no-progress", action="store_true", help="no progress bar")
    m.set_defaults(func=run_metrics)


def _add_emt_benchmark(dsub) -> None:
    """``mlip discovery emt-benchmark``."""
    e = dsub.add_parser("emt-benchmark", help="build the miniature benchmark in which EMT plays DFT")
    e.add_argument("out_dir", metavar="OUT_DIR")
    _add_benchmark_options(e, candidates=300)
    e.set_defaults(func=run_emt_benchmark)


def _add_benchmark_options(p, candidates: int) -> None:
    """The options both miniature benchmarks share: seed, number of candidates, relaxation settings."""
    p.add_argument("--seed", type=int, default=0, help="default: %(default)s")
    p.add_argument("-n", type=positive_int, default=candidates,
                   help="number of candidates (default: %(default)s)")
    p.add_argument("--fmax", type=positive_float, default=0.02, help="eV/Å (default: %(default)s)")
    p.add_argument("--steps", type=positive_int, default=500, help="default: %(default)s")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def _add_teacher_benchmark(dsub) -> None:
    """``mlip discovery teacher-benchmark``."""
    from mlip.cli.data_label import parse_setting
    from mlip.workflows.discovery.teacher_benchmark import DEFAULT_SYSTEMS

    t = dsub.add_parser("teacher-benchmark",
                        help="build the miniature benchmark in which a calculator (a teacher) plays DFT over "
                             "binary systems")
    t.add_argument("out_dir", metavar="OUT_DIR")
    t.add_argument("--calculator", required=True,
                   help="the truth: emt, chgnet (pip install 'mlip-torch[teacher]') or an ASE calculator "
                        "class 'package.module:Class'")
    t.add_argument("--setting", type=parse_setting, action="append", metavar="KEY=VALUE", default=[],
                   help="a calculator setting (repeatable), e.g. use_device=cpu for chgnet")
    t.add_argument("--systems", nargs="+", metavar="A-B", default=list(DEFAULT_SYSTEMS),
                   help="binary systems (default: %(default)s)")
    _add_benchmark_options(t, candidates=100)
    t.set_defaults(func=run_teacher_benchmark)
