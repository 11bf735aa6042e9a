"""``mlip kappa``: lattice thermal conductivity (phono3py) of one crystal or, with ``--batch``, of many."""

from __future__ import annotations

from pathlib import Path

from mlip.cli.arguments import mesh_arg, nonneg_float, nonneg_int, positive_int, supercell_arg
from mlip.cli.common import (CLIError, calc_label, check_species, load_model, lock_output_folder,
                              read_structure)
from mlip.cli.force_constants import (add_force_constant_args, build_settings, force_constant_settings,
                                      setting_default)


def _conductivity_settings(args) -> dict:
    """The conductivity settings of the command line (a single structure and ``--batch`` alike)."""
    return dict(temperatures=args.temperatures, method=args.method, isotopes=not args.no_isotopes)


def _print_scores(scores: dict, temperature: float) -> None:
    print(f"\nκ_SRME against the reference at {temperature:g} K:")
    print(f"  {'material':<24} {'κ_pred':>9} {'κ_ref':>9} {'SRME':>6} {'SRE':>6}  status")
    for mid, sc in scores["per_material"].items():
        pred = "-" if sc["kappa_pred"] is None else f"{sc['kappa_pred']:.3f}"
        print(f"  {str(mid):<24} {pred:>9} {sc['kappa_ref']:>9.3f} {sc['srme']:>6.3f} {sc['sre']:>6.3f}  "
              f"{sc['status']}")
    print(f"  mean over {scores['n_materials']} materials: κ_SRME {scores['srme']:.4f}, "
          f"κ_SRE {scores['sre']:.4f}, "
          f"κ_SRD {scores['srd']:+.4f} ({scores['n_failed']} failed/unstable/missing)")


def add_parser(subparsers) -> None:
    """Add ``kappa`` to the ``mlip`` subparsers."""
    from mlip.workflows.phonons import KappaSettings
    from mlip.workflows.phonons.settings import METHODS

    p = subparsers.add_parser("kappa", help="lattice thermal conductivity (phono3py; Wigner RTA by default)")
    add_force_constant_args(
        p, KappaSettings,
        structure_help="a crystal (ASE-readable), or with --batch a multi-frame file whose frames carry "
                       "fc2_supercell, fc3_supercell, q_point_mesh and material_id in atoms.info")
    p.add_argument("--fc2-supercell", type=int, nargs="+", metavar="N", help="n, n1 n2 n3 or a 3×3 matrix")
    p.add_argument("--fc3-supercell", type=int, nargs="+", metavar="N",
                   help="n, n1 n2 n3 or a 3×3 matrix (default: the smallest large enough; fc2 the same)")
    p.add_argument("--mesh", nargs="+", metavar="N", help="q-mesh n or n1 n2 n3 (default: 20 20 20)")
    p.add_argument("--temperatures", type=nonneg_float, nargs="+",
                   default=list(setting_default(KappaSettings, "temperatures")),
                   help="K (default: 300); κ_SRME uses the first")
    p.add_argument("--method", choices=list(METHODS), default=setting_default(KappaSettings, "method"),
                   help="Wigner transport (RTA, particle + coherence; the Matbench Discovery protocol), "
                        "plain RTA or LBTE (default: %(default)s)")
    p.add_argument("--no-isotopes", action="store_true", help="no isotope scattering")
    p.add_argument("--out-dir", default="kappa", help="results and resumable caches (default: %(default)s)")
    p.add_argument("--batch", action="store_true",
                   help="STRUCTURE is a file of many crystals (sharded, resumable)")
    p.add_argument("--n-shards", type=positive_int, default=None,
                   help="with --batch: number of shards (default: Slurm array, torchrun, or 1)")
    p.add_argument("--shard-index", type=nonneg_int, default=None, help="with --batch: this shard (0-based)")
    p.add_argument("--reference", metavar="FILE",
                   help="κ_SRME against reference results: a merged results file or batch folder (with "
                        "--batch), or a kappa.json (single structure)")
    p.set_defaults(func=run)


def settings_from_args(args):
    """The :class:`~mlip.workflows.phonons.KappaSettings` of the command line for one structure
    (ValueError for a bad value, CLIError for a malformed supercell or ``--mesh``)."""
    from mlip.workflows.phonons import KappaSettings

    own = dict(_conductivity_settings(args),
               fc2_supercell=supercell_arg(args.fc2_supercell, "--fc2-supercell"),
               fc3_supercell=supercell_arg(args.fc3_supercell, "--fc3-supercell"))
    if args.mesh is not None:
        own["mesh"] = mesh_arg(args.mesh)
    return build_settings(KappaSettings, args, **own)


def run(args) -> int:
    """κ of one structure (exit status 1 when it failed) or, with --batch, of this shard's share."""
    return _run_batch(args) if args.batch else _run_one(args)


def _run_batch(args) -> int:
    """--batch: this shard's materials, the merged results once every shard is done, κ_SRME."""
    from mlip.workflows.phonons.kappa_batch import read_kappa_structures, run_kappa_batch, score_kappa_batch

    out_dir = Path(args.out_dir)
    temperature = args.temperatures[0]
    try:
        items = read_kappa_structures(args.structure, format=args.format)
    except ValueError as err:
        raise CLIError(str(err)) from None
    for flag in ("fc2_supercell", "fc3_supercell", "mesh"):
        if getattr(args, flag) is not None:
            raise CLIError(f"--{flag.replace('_', '-')} is not used with --batch: each structure carries "
                           f"its own in atoms.info")
    lock_output_folder(out_dir, sharding=(args.n_shards, args.shard_index))
    calc, label = load_model(args.model, args.device, "float64", args.compile)
    for mid, atoms in items:
        check_species(atoms, calc, f"{args.structure} ({mid})")
    print(f"model:     {label} ({calc_label(calc)})")
    print(f"batch:     {args.structure} ({len(items)} materials) -> {out_dir}/", flush=True)
    counts = run_kappa_batch(items, calc, out_dir, n_shards=args.n_shards, shard_index=args.shard_index,
                             progress=not args.no_progress,
                             # the keys a batch has always recorded in campaign.json: an earlier one resumes
                             **force_constant_settings(args), **_conductivity_settings(args))
    print(f"shard {counts['shard'] + 1}/{counts['n_shards']}: {counts['assigned']} materials, "
          f"{counts['skipped']} already done, {counts['computed']} computed ({counts['failed']} crashed)")
    if counts["merged"] is None:
        print("other shards still running: rerun any shard (or the whole file) to merge when they finish")
        return 0
    print(f"wrote:     {counts['merged']}")
    if args.reference:
        scores = score_kappa_batch(counts["merged"], args.reference, temperature)
        _print_scores(scores, temperature)
        from mlip.io import write_json

        path = out_dir / "kappa_srme.json"
        write_json(path, scores)
        print(f"wrote:     {path}")
    return 0


def _run_one(args) -> int:
    """One structure: κ at each temperature, kappa.json, κ_SRME against a reference kappa.json."""
    import numpy as np

    from mlip.workflows.phonons import run_kappa

    out_dir = Path(args.out_dir)
    temperature = args.temperatures[0]
    atoms = read_structure(args.structure, args.index, args.format, args.majority_species)
    lock_output_folder(out_dir)
    calc, label = load_model(args.model, args.device, "float64", args.compile)
    check_species(atoms, calc, args.structure)
    settings = settings_from_args(args)
    print(f"model:     {label} ({calc_label(calc)})")
    print(f"structure: {args.structure} ({len(atoms)} atoms, {atoms.get_chemical_formula()})", flush=True)
    # Without progress bars, one line per stage shows how far a run got (batch-job logs).
    log = (lambda line: print(line, flush=True)) if args.no_progress else None
    result = run_kappa(atoms, calc, settings, out_dir=out_dir, progress=not args.no_progress, log=log)
    print(f"supercells: fc2 {np.asarray(result.fc2_supercell).tolist()}, "
          f"fc3 {np.asarray(result.fc3_supercell).tolist()}; "
          f"q-mesh {result.mesh}; method {result.method}")
    if result.status != "ok":
        detail = f": {result.error}" if result.error else ""
        print(f"status:    {result.status.upper()}{detail} (no κ; scores κ_SRME = 2)")
    else:
        for k, t in enumerate(result.temperatures):
            kap = np.asarray(result.kappa[k])
            line = (f"κ({t:g} K) = {np.trace(kap) / 3:.4f} W/(m·K) "
                    f"(xx {kap[0, 0]:.4f}, yy {kap[1, 1]:.4f}, zz {kap[2, 2]:.4f})")
            if result.kappa_particle is not None and result.kappa_coherence is not None:
                line += (f"; particle {np.trace(result.kappa_particle[k]) / 3:.4f}, "
                         f"coherence {np.trace(result.kappa_coherence[k]) / 3:.4f}")
            print(line)
    print(f"wrote:     {out_dir}/kappa.json")
    if args.reference:
        from mlip.workflows.phonons.kappa import load_kappa
        from mlip.workflows.phonons.kappa_metrics import mean_kappa_scores

        reference = {"structure": load_kappa(args.reference)}
        scores = mean_kappa_scores({"structure": result}, reference, temperature)
        _print_scores(scores, temperature)
    return 0 if result.status == "ok" else 1
