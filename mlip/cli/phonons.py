"""``mlip phonons``: harmonic phonons (phonopy): bands, DOS, thermal properties."""

from __future__ import annotations

from mlip.cli.arguments import mesh_arg, nonneg_float, positive_float, supercell_arg
from mlip.cli.common import calc_label, check_species, load_model, lock_output_folder, read_structure
from mlip.cli.force_constants import add_force_constant_args, build_settings, setting_default


def add_parser(subparsers) -> None:
    """Add ``phonons`` to the ``mlip`` subparsers."""
    from mlip.workflows.phonons import PhononSettings

    p = subparsers.add_parser("phonons", help="harmonic phonons (phonopy): bands, DOS, thermal properties")
    add_force_constant_args(p, PhononSettings, structure_help="a crystal in any ASE-readable file")
    p.add_argument("--supercell", type=int, nargs="+", metavar="N",
                   help="n, n1 n2 n3, or a 3×3 matrix "
                        "(default: every width >= --min-width and >= 2×cutoff)")
    p.add_argument("--min-width", type=positive_float, default=setting_default(PhononSettings, "min_width"),
                   help="smallest perpendicular width of the automatic supercell, Å (default: %(default)s)")
    p.add_argument("--imaginary-tol", type=nonneg_float,
                   default=setting_default(PhononSettings, "imaginary_tol"),
                   help="frequencies below minus this (THz) count as imaginary (default: %(default)s)")
    p.add_argument("--mesh", nargs="+", metavar="N", help="q-mesh: n, n1 n2 n3 or a length density in Å")
    p.add_argument("--no-shear", action="store_true", help="relax the cell without shear")
    t_min, t_max, t_step = setting_default(PhononSettings, "temperatures")
    p.add_argument("--tmin", type=nonneg_float, default=t_min, help="K (default: %(default)s)")
    p.add_argument("--tmax", type=nonneg_float, default=t_max, help="K (default: %(default)s)")
    p.add_argument("--tstep", type=positive_float, default=t_step, help="K (default: %(default)s)")
    p.add_argument("--out-dir", default="phonons",
                   help="results, plots and resumable cache (default: %(default)s)")
    p.set_defaults(func=run)


def settings_from_args(args):
    """The :class:`~mlip.workflows.phonons.PhononSettings` of the command line (ValueError for a
    bad value, CLIError for a malformed ``--supercell`` or ``--mesh``)."""
    from mlip.workflows.phonons import PhononSettings

    own = dict(
        supercell=supercell_arg(args.supercell, "--supercell"),
        no_shear=args.no_shear,
        temperatures=(args.tmin, args.tmax, args.tstep),
        min_width=args.min_width,
        imaginary_tol=args.imaginary_tol,
    )
    mesh = mesh_arg(args.mesh)
    if mesh is not None:
        own["mesh"] = mesh
    return build_settings(PhononSettings, args, **own)


def run(args) -> int:
    """Run the phonon workflow (phonons.json and plots in --out-dir) and print its summary."""
    import numpy as np

    from mlip.workflows.phonons import run_phonons

    atoms = read_structure(args.structure, args.index, args.format, args.majority_species)
    out_dir = lock_output_folder(args.out_dir)
    calc, label = load_model(args.model, args.device, "float64", args.compile)
    check_species(atoms, calc, args.structure)
    settings = settings_from_args(args)
    print(f"model:     {label} ({calc_label(calc)})")
    print(f"structure: {args.structure} ({len(atoms)} atoms, {atoms.get_chemical_formula()})", flush=True)
    # writes phonons.json and the plots to out_dir
    result = run_phonons(atoms, calc, settings, out_dir=out_dir, progress=not args.no_progress)
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
