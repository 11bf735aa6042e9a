"""``mlip relax``: relax a structure (FIRE; + FrechetCellFilter for bulk) and write it."""

from __future__ import annotations

from pathlib import Path

from mlip.cli.arguments import add_model_args, nonneg_int, positive_float
from mlip.cli.common import (
    EXIT_NOT_CONVERGED,
    CLIError,
    calc_label,
    check_species,
    load_model,
    note,
    read_structure,
    refuse_existing,
)


def add_parser(subparsers) -> None:
    """Add ``relax`` to the ``mlip`` subparsers."""
    p = subparsers.add_parser("relax", help="relax a structure (FIRE; + FrechetCellFilter for bulk)",
                       epilog=f"Exit status: 0 converged, {EXIT_NOT_CONVERGED} not converged within --steps "
                              f"(the structure is still written), 2 bad input, 1 failure at run time.")
    p.add_argument("structure", metavar="STRUCTURE", help="any ASE-readable file")
    add_model_args(p, dtype="float64")
    p.add_argument(
        "--fmax", type=positive_float, default=0.05, help="force threshold in eV/Å (default: 0.05)"
    )
    p.add_argument("--steps", type=nonneg_int, default=500, help="maximum optimiser steps (default: 500)")
    p.add_argument(
        "--no-cell-filter",
        dest="cell_filter",
        action="store_false",
        help="keep the cell fixed (bulk structures)",
    )
    p.add_argument(
        "-o",
        "--output",
        help="relaxed structure file (default: <stem>_relaxed.extxyz in the current directory)",
    )
    p.add_argument(
        "--fix-symmetry",
        action="store_true",
        help="keep the structure's space group (ASE FixSymmetry; needs spglib): for models that are not "
        "exactly rotation invariant, such as the Platonic Transformer, whose small symmetry-breaking "
        "forces would otherwise carry a structure off a symmetric saddle point",
    )
    p.add_argument("--symprec", type=positive_float, default=0.01,
                   help="tolerance (Å) of the symmetry --fix-symmetry keeps (default: 0.01)")
    p.add_argument("--trajectory", help="optional ASE .traj file of the optimisation")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --output (and --trajectory) file (default: refuse to start)")
    p.set_defaults(func=run)


def run(args) -> int:
    """Relax, write the relaxed structure; exit status 3 when fmax was not reached."""
    import ase.io
    from ase.calculators.singlepoint import SinglePointCalculator

    from mlip.workflows.relax import relax

    atoms = read_structure(args.structure, args.index, args.format, args.majority_species)
    output = Path(args.output) if args.output else Path(f"{Path(args.structure).stem}_relaxed.extxyz")
    # An earlier result (of any model) is replaced only when asked to, before any work is done.
    refuse_existing([output] + ([args.trajectory] if args.trajectory else []), args.overwrite,
                    "choose another --output (-o)" + (" and --trajectory" if args.trajectory else ""))
    calc, label = load_model(args.model, args.device, args.dtype, args.compile)
    check_species(atoms, calc, args.structure)
    bulk = bool(atoms.pbc.all())
    mode = "positions + cell (FrechetCellFilter)" if bulk and args.cell_filter else "positions only"
    print(f"model:     {label} ({calc_label(calc)})")
    print(
        f"structure: {args.structure} ({len(atoms)} atoms, {atoms.get_chemical_formula()}, "
        f"pbc={atoms.pbc.tolist()})"
    )
    print(f"relaxing:  FIRE, {mode}, fmax {args.fmax:g} eV/Å, at most {args.steps} steps", flush=True)
    result = relax(
        atoms,
        calc,
        fmax=args.fmax,
        steps=args.steps,
        cell_filter=args.cell_filter,
        trajectory=args.trajectory,
        progress=not args.no_progress,
        fix_symmetry=args.fix_symmetry,
        symprec=args.symprec,
    )
    relaxed = result.atoms
    keep = ("energy", "free_energy", "forces", "stress")
    results = {k: v for k, v in relaxed.calc.results.items() if k in keep}
    out_atoms = relaxed.copy()
    out_atoms.calc = SinglePointCalculator(out_atoms, **results)
    out_atoms.info.update(
        {
            "model": label,
            "converged": result.converged,
            "n_steps": result.n_steps,
            "fmax_final": result.fmax_final,
        }
    )
    try:
        ase.io.write(str(output), out_atoms)
    except OSError as err:  # permission denied, disk full, ...: reported by mlip.cli.main, naming the file
        if err.errno is None:
            raise CLIError(f"cannot write {str(output)!r}: {err}") from None
        raise type(err)(err.errno, err.strerror, str(output)) from None
    except Exception as err:
        raise CLIError(f"cannot write {str(output)!r}: {err}") from None
    n = len(relaxed)
    print(f"energy:    {result.energy:.6f} eV ({result.energy / n:.6f} eV/atom)")
    print(
        f"converged: {'yes' if result.converged else 'NO'} (fmax {result.fmax_final:.4g} eV/Å, "
        f"threshold {args.fmax:g}) after {result.n_steps} steps"
    )
    if bulk and args.cell_filter:
        print(f"volume:    {atoms.get_volume():.4f} -> {relaxed.get_volume():.4f} Å^3")
    if args.fix_symmetry:
        print(f"symmetry:  {result.spacegroup_initial} -> {result.spacegroup_final}"
              + (" (SYMMETRY BROKEN)" if result.symmetry_broken else " (kept)"))
    print(f"wrote:     {output}")
    if not result.converged:
        note(f"NOTE: not converged within {args.steps} steps: exit status {EXIT_NOT_CONVERGED}")
        return EXIT_NOT_CONVERGED
    return 0
