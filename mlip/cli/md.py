"""``mlip md``: molecular dynamics (NVE, NVT Langevin, NPT MTK) with a trajectory, log, plot and summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List

from mlip.cli.arguments import (add_model_args, finite_float, nonneg_float, nonneg_int, positive_float,
                                positive_int)
from mlip.cli.common import (CLIError, calc_label, check_species, load_model, lock_output_folder, note,
                              read_structure)


MD_OUTPUTS = ("md.traj", "md.log", "energy.png", "md_summary.json")  # what run writes to --out-dir
#: the options one ensemble uses: name → (that ensemble, default)
ENSEMBLE_DEFAULTS = {"friction": ("nvt", 0.01), "pressure": ("npt", 0.0), "barostat": ("npt", "isotropic")}
SUMMARY = "md_summary.json"  # written last but the plot: a run without it did not finish


def add_parser(subparsers) -> None:
    """Add ``md`` to the ``mlip`` subparsers."""
    from mlip.workflows.md import PLAUSIBLE

    p = subparsers.add_parser("md", help="molecular dynamics (NVE, NVT Langevin, NPT MTK)")
    p.add_argument("structure", metavar="STRUCTURE", help="any ASE-readable file")
    add_model_args(p, dtype="float32")
    p.add_argument("--ensemble", choices=["nve", "nvt", "npt"], default="nve", help="default: nve")
    p.add_argument("--temperature", type=nonneg_float, default=300.0, help="K (default: 300)")
    p.add_argument("--timestep", type=positive_float, default=1.0, help="fs (default: 1)")
    p.add_argument("--steps", type=nonneg_int, default=1000, help="default: 1000")
    p.add_argument("--friction", type=positive_float, default=None,
                   help=f"Langevin friction, 1/fs, NVT only (default: {ENSEMBLE_DEFAULTS['friction'][1]})")
    p.add_argument("--pressure", type=finite_float, default=None,
                   help=f"pressure, GPa, NPT only (default: {ENSEMBLE_DEFAULTS['pressure'][1]})")
    p.add_argument("--barostat", choices=["isotropic", "anisotropic"], default=None,
                   help=f"NPT only (default: {ENSEMBLE_DEFAULTS['barostat'][1]})")
    ranges = ", ".join(f"{name} {lo:g} to {hi:g} {unit}" for name, (lo, hi, unit) in PLAUSIBLE.items())
    p.add_argument("--allow-extreme", action="store_true",
                   help=f"run settings outside the plausible ranges ({ranges}; the pressure for NPT), which "
                        "are refused by default as typos or other units")
    p.add_argument("--seed", type=int, default=None, help="velocity / thermostat random seed")
    p.add_argument("--supercell", type=int, nargs="+", metavar="N", help="repeat the cell, e.g. 3 3 3 (or 3)")
    p.add_argument(
        "--log-interval", type=positive_int, default=10, help="steps between logged frames (default: 10)"
    )
    p.add_argument("--out-dir", help="output directory (default: <stem>_md in the current directory)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the files of an earlier run in --out-dir (default: refuse to start)")
    p.set_defaults(func=run)


def run(args) -> int:
    """Run the dynamics and write md.traj, md.log, energy.png and md_summary.json to --out-dir."""
    from mlip.workflows.md import run_md, save_energy_plot

    _check_settings(args)
    atoms = read_structure(args.structure, args.index, args.format, args.majority_species)
    atoms = _repeated(atoms, args.supercell)
    out_dir = lock_output_folder(args.out_dir or f"{Path(args.structure).stem}_md")
    earlier = _earlier_run(out_dir, args.overwrite)
    calc, label = load_model(args.model, args.device, args.dtype, args.compile)
    check_species(atoms, calc, args.structure)
    for name in earlier:  # no file of the earlier run is left to be mistaken for this one's
        (out_dir / name).unlink()
    _print_settings(args, atoms, calc, label)
    result = run_md(
        atoms,
        calc,
        ensemble=args.ensemble,
        temperature=args.temperature,
        timestep=args.timestep,
        steps=args.steps,
        friction=args.friction,
        pressure=args.pressure,
        seed=args.seed,
        trajectory=str(out_dir / "md.traj"),
        logfile=str(out_dir / "md.log"),
        log_interval=args.log_interval,
        progress=not args.no_progress,
        barostat=args.barostat,
        allow_extreme=args.allow_extreme,
    )
    _write_summary(args, calc, label, result, out_dir / SUMMARY)
    plot_note = ""
    try:
        save_energy_plot(result, out_dir / "energy.png")
    except ImportError as err:
        plot_note = f" (energy.png skipped: {err})"
    _print_result(args, result)
    print(f"wrote:     {out_dir}/ md.traj md.log energy.png md_summary.json{plot_note}")
    return 0


def _earlier_run(out_dir: Path, overwrite: bool) -> List[str]:
    """The files of an earlier run in ``out_dir`` that this run replaces: all of them with ``overwrite``,
    else only an empty md.traj/md.log of a run stopped before its first step (with a note). Any other
    earlier file is refused (CLIError): appending would mix two runs in one trajectory, and MD does not
    resume. The message tells a finished run (it has md_summary.json) from one that did not finish."""
    earlier = [name for name in MD_OUTPUTS if (out_dir / name).exists()]
    if not earlier or overwrite:
        return earlier
    if SUMMARY in earlier:
        raise CLIError(f"{out_dir} already holds {', '.join(earlier)} from an earlier run: choose another "
                       f"--out-dir, or pass --overwrite to replace them")
    if all((out_dir / name).stat().st_size == 0 for name in earlier):
        note(f"NOTE: {out_dir}: replacing the empty {', '.join(earlier)} of an earlier run that was stopped "
             f"before its first step")
        return earlier
    raise CLIError(f"{out_dir} holds {', '.join(earlier)} of an earlier run that did not finish (no "
                   f"{SUMMARY}: it was stopped or failed) and MD does not resume: pass --overwrite to "
                   f"replace them, or choose another --out-dir")


def _check_settings(args) -> None:
    """Refuse an option the ensemble does not use (nothing given is dropped silently) and settings outside
    the plausible ranges (:func:`mlip.workflows.md.check_plausible`) unless --allow-extreme, before
    anything is read; then give the ensemble's options their defaults."""
    from mlip.workflows.md import check_plausible

    for name, (ensemble, default) in ENSEMBLE_DEFAULTS.items():
        value = getattr(args, name)
        if value is not None and args.ensemble != ensemble:
            raise CLIError(f"--{name} applies to --ensemble {ensemble} only (this run is {args.ensemble})")
        setattr(args, name, default if value is None else value)
    try:
        check_plausible(args.ensemble, args.temperature, args.timestep, args.pressure, args.allow_extreme,
                        how="--allow-extreme")
    except ValueError as err:
        raise CLIError(str(err)) from None


def _repeated(atoms, supercell):
    """``atoms`` repeated ``--supercell`` times (1 or 3 positive integers, periodic directions only)."""
    if not supercell:
        return atoms
    reps = list(supercell)
    if len(reps) == 1:
        reps = reps * 3
    if len(reps) != 3 or any(r < 1 for r in reps):
        raise CLIError(f"--supercell expects 1 or 3 positive integers, got {supercell}")
    bad = [ax for ax, r, periodic in zip("abc", reps, atoms.pbc) if r > 1 and not periodic]
    if bad:
        raise CLIError(f"--supercell repeats along non-periodic direction(s) {', '.join(bad)}")
    return atoms.repeat(reps)


def _print_settings(args, atoms, calc, label: str) -> None:
    extra = ""
    if args.ensemble == "nvt":
        extra = f", friction {args.friction:g} 1/fs"
    elif args.ensemble == "npt":
        extra = f", pressure {args.pressure:g} GPa, {args.barostat} barostat"
    print(f"model:     {label} ({calc_label(calc)})")
    print(f"structure: {args.structure} ({len(atoms)} atoms, {atoms.get_chemical_formula()})")
    print(
        f"md:        {args.ensemble.upper()}, T {args.temperature:g} K, dt {args.timestep:g} fs, "
        f"{args.steps} steps{extra}",
        flush=True,
    )


def _write_summary(args, calc, label: str, result, path: Path) -> None:
    """md_summary.json: the model, the structure, the settings and the :class:`MDResult`."""
    from mlip.calculators.model_loading import is_untrained

    summary = {
        "model": label,
        "untrained": is_untrained(calc),
        "structure": str(args.structure),
        "settings": {
            "ensemble": args.ensemble,
            "temperature_K": args.temperature,
            "timestep_fs": args.timestep,
            "steps": args.steps,
            "friction_per_fs": args.friction if args.ensemble == "nvt" else None,
            "pressure_GPa": args.pressure if args.ensemble == "npt" else None,
            "barostat": args.barostat if args.ensemble == "npt" else None,
            "seed": args.seed,
            "dtype": args.dtype,
            "log_interval": args.log_interval,
        },
        **result.to_dict(),
    }
    with open(path, "w") as fh:
        json.dump(summary, fh, indent=2)


def _print_result(args, result) -> None:
    temps = result.temperatures
    print(f"final T:   {temps[-1]:.1f} K (mean {temps.mean():.1f} K over {len(temps)} frames)")
    if args.ensemble == "nve":
        print(
            f"NVE energy drift: {result.drift_mev_per_atom_per_ps:+.4f} meV/atom/ps "
            f"(max deviation {result.max_deviation_mev_per_atom:.4f} meV/atom)"
        )
    elif args.ensemble == "npt":
        print(f"volume:    {result.volumes[0]:.3f} -> {result.volumes[-1]:.3f} Å^3")
        if result.drift_mev_per_atom_per_ps is not None:
            print(f"MTK conserved-energy drift: {result.drift_mev_per_atom_per_ps:+.4f} meV/atom/ps")
