"""``mlip phonons``: harmonic phonons (phonopy): bands, DOS, thermal properties."""

from __future__ import annotations

from mlip.cli.arguments import (
    add_model_args,
    mesh_arg,
    nonneg_float,
    nonneg_int,
    positive_float,
    supercell_arg,
)
from mlip.cli.common import calc_label, check_species, load_model, lock_output_folder, read_structure


def add_parser(subparsers) -> None:
    """Add ``phonons`` to the ``mlip`` subparsers."""
    p = subparsers.add_parser("phonons", help="harmonic phonons (phonopy): bands, DOS, thermal properties")
    p.add_argument("structure", metavar="STRUCTURE", help="a crystal in any ASE-readable file")
    add_model_args(p, dtype="float64")
    p.add_argument("--supercell", type=int, nargs="+", metavar="N",
                   help="n, n1 n2 n3, or a 3×3 matrix "
                        "(default: every width >= --min-width and >= 2×cutoff)")
    p.add_argument("--min-width", type=positive_float, default=12.0,
                   help="smallest perpendicular width of the automatic supercell, Å (default: %(default)s)")
    p.add_argument("--imaginary-tol", type=nonneg_float, default=0.05,
                   help="frequencies below minus this (THz) count as imaginary (default: %(default)s)")
    p.add_argument("--displacement", type=positive_float, default=0.01, help="Å (default: %(default)s)")
    p.add_argument("--mesh", nargs="+", metavar="N", help="q-mesh: n, n1 n2 n3 or a length density in Å")
    p.add_argument("--no-relax", action="store_true", help="skip the symmetry-preserving relaxation")
    p.add_argument("--no-shear", action="store_true", help="relax the cell without shear")
    p.add_argument("--fmax", type=positive_float, default=1e-4,
                   help="relaxation threshold, eV/Å (default: %(default)s)")
    p.add_argument("--relax-steps", type=nonneg_int, default=300, help="default: %(default)s")
    p.add_argument("--keep-residual-forces", action="store_true",
                   help="keep the forces on the undisplaced supercell in the force constants (default: "
                        "subtract them, as phonopy's --fz; a change only for models not exactly invariant)")
    p.add_argument("--tmin", type=nonneg_float, default=0.0, help="K (default: %(default)s)")
    p.add_argument("--tmax", type=nonneg_float, default=1000.0, help="K (default: %(default)s)")
    p.add_argument("--tstep", type=positive_float, default=10.0, help="K (default: %(default)s)")
    p.add_argument("--out-dir", default="phonons",
                   help="results, plots and resumable cache (default: %(default)s)")
    p.set_defaults(func=run)


def run(args) -> int:
    """Run the phonon workflow (phonons.json and plots in --out-dir) and print its summary."""
    import numpy as np

    from mlip.workflows.phonons.harmonic import run_phonons

    atoms = read_structure(args.structure, args.index, args.format, args.majority_species)
    out_dir = lock_output_folder(args.out_dir)
    calc, label = load_model(args.model, args.device, "float64", args.compile)
    check_species(atoms, calc, args.structure)
    kwargs = dict(
        supercell=supercell_arg(args.supercell, "--supercell"),
        displacement=args.displacement,
        relax=not args.no_relax,
        fmax=args.fmax,
        relax_steps=args.relax_steps,
        no_shear=args.no_shear,
        temperatures=(args.tmin, args.tmax, args.tstep),
        min_width=args.min_width,
        imaginary_tol=args.imaginary_tol,
        subtract_residual_forces=not args.keep_residual_forces,
        out_dir=out_dir,
        progress=not args.no_progress,
    )
    mesh = mesh_arg(args.mesh)
    if mesh is not None:
        kwargs["mesh"] = mesh
    print(f"model:     {label} ({calc_label(calc)})")
    print(f"structure: {args.structure} ({len(atoms)} atoms, {atoms.get_chemical_formula()})", flush=True)
    result = run_phonons(atoms, calc, **kwargs)  # writes phonons.json and the plots to out_dir
    n = result.n_atoms
    print(f"space group {result.spacegroup}; supercell {result.supercell_matrix.tolist()} "
          f"({result.n_supercell_atoms} atoms, {result.n_displacements} displacements)")
    if result.relaxation is not None:
        r = result.relaxation
        print(f"relaxation: {'converged' if r['converged'] else 'NOT converged'} in {r['n_steps']} steps; "
              f"space group {r['spacegroup_initial']} -> {r['spacegroup_final']}"
              + (" (SYMMETRY BROKEN)" if r["symmetry_broken"] else ""))
    if result.residual_force_max is not None:
        print(f"forces on the undisplaced supercell: at most {result.residual_force_max:.2g} eV/Å "
              "(subtracted)")
    print(f"lowest frequency {result.lowest_frequency:.4f} THz"
          + ("  -> IMAGINARY MODES (dynamically unstable)" if result.has_imaginary_modes else ""))
    t = result.temperatures
    k300 = int(np.argmin(np.abs(t - 300.0))) if len(t) else None
    if k300 is not None:
        print(f"at {t[k300]:g} K: F = {result.free_energy[k300] / n * 1e3:.2f} meV/atom, "
              f"S = {result.entropy[k300] / n * 1e3:.4f} meV/K/atom, "
              f"C_V = {result.heat_capacity[k300] / n * 1e3:.4f} meV/K/atom")
    print(f"wrote:     {out_dir}/ phonons.json band_structure.png dos.png thermal_properties.png")
    return 0
