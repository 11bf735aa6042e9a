"""The ``mlip`` command line: inspect and create checkpoints, relax structures, run MD.

    mlip info default
    mlip create platonic --species Cu Au --cutoff 4.5 --seed 0 -o cuau.safetensors
    mlip create --config models/configs/equiformer_v3_mp.yaml -o eqv3-mp.safetensors
    mlip relax structure.cif --model default --fmax 0.05
    mlip md structure.cif --model default --ensemble nve --temperature 300 --steps 1000 --supercell 3 3 3
    mlip discovery relax initial-structures.json.gz --model default --out-dir run   (see mlip.workflows.discovery)

``--model`` accepts a shipped model's name, a checkpoint path or the import path of an ASE
calculator class (``ase.calculators.emt:EMT``). Bad input (unreadable file, unknown element, NaN
coordinates, unknown model, ...) and a missing optional extra print ``mlip: error: <message>`` and exit
with status 2; a simulation that fails at run time exits with status 1; ``mlip relax`` exits with status 3
(``EXIT_NOT_CONVERGED``) when the relaxation did not converge, after writing its result. Set
``MLIP_DEBUG=1`` for tracebacks.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings
from pathlib import Path
from typing import List, Optional, Sequence

PROG = "mlip"
EXIT_NOT_CONVERGED = 3  # mlip relax: the relaxed structure is written, but fmax was not reached


class CLIError(Exception):
    """Bad command-line input: reported as ``mlip: error: <message>``, exit status 2."""


# ---------------------------------------------------------------------------------------- helpers
def _note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _fmt_value(value) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)


def _format_label(path: Path, format: Optional[str]) -> str:
    """``format cif, from --format``, ``format cif, guessed from the file`` or ``format unknown ...``."""
    if format:
        return f"format {format}, from --format"
    from ase.io.formats import filetype, ioformats

    try:
        guessed = filetype(str(path))
    except Exception:  # ASE cannot tell the format either
        guessed = None
    if guessed not in ioformats:  # filetype returns unknown extensions such as "txt" as they are
        return "format unknown; name it with --format"
    return f"format {guessed}, guessed from the file"


def _count_frames(path: Path, format: Optional[str]) -> Optional[int]:
    """Number of frames of a structure file, or None when it cannot be read through."""
    import ase.io

    try:
        return sum(1 for _ in ase.io.iread(str(path), index=":", format=format))
    except Exception:  # the file is unreadable: the caller reports the reader's own error
        return None


def _read_structure(path: str, index: int = -1, format: Optional[str] = None):
    """Read one frame of any ASE-readable file and check it can be evaluated.

    Errors name the file, the format (given or guessed) and what is wrong; an ``index`` outside the
    file is refused with the number of frames (ASE itself would stop with an empty StopIteration
    or, for negative indices, quietly return the first frame).
    """
    import ase.io
    from ase import Atoms

    from mlip.graph import validate_atoms

    p = Path(path)
    if not p.exists():
        raise CLIError(f"structure file {path!r} does not exist")
    if p.is_dir():
        raise CLIError(f"structure file {path!r} is a directory")
    if format is not None:
        from ase.io.formats import ioformats

        if format not in ioformats:
            raise CLIError(f"--format {format!r} is not a format ASE knows (e.g. cif, extxyz, vasp, traj)")

    def out_of_range(n_frames: int) -> CLIError:
        if n_frames == 0:
            return CLIError(f"{path}: the file holds no structure")
        plural = "" if n_frames == 1 else "s"
        return CLIError(f"{path}: frame {index} requested but the file has {n_frames} frame{plural}")

    try:
        atoms = ase.io.read(str(p), index=index, format=format)
    except KeyError as err:
        # ASE raises KeyError for symbols that are not chemical elements (e.g. "Xx").
        where = f"structure file {path!r} ({_format_label(p, format)})"
        raise CLIError(f"cannot read {where}: unknown element or field {err}") from None
    except Exception as err:  # ASE raises many types for malformed files (AssertionError, ...)
        if isinstance(err, (IndexError, StopIteration)):
            n_frames = _count_frames(p, format)
            if n_frames is not None and not -n_frames <= index < n_frames:
                raise out_of_range(n_frames) from None
        msg = f"{type(err).__name__}: {err}" if str(err) else f"the reader failed with {type(err).__name__}"
        raise CLIError(f"cannot read structure file {path!r} ({_format_label(p, format)}): {msg}") from None
    if index < -1:  # ASE returns the first frame for a negative index beyond the file's start
        n_frames = _count_frames(p, format)
        if n_frames is not None and index < -n_frames:
            raise out_of_range(n_frames)
    if not isinstance(atoms, Atoms):
        raise CLIError(
            f"cannot read structure file {path!r}: expected one structure, got {type(atoms).__name__}"
        )
    try:
        validate_atoms(atoms)
    except ValueError as err:
        raise CLIError(f"invalid structure in {path!r}: {err}") from None
    return atoms


def _load_model(spec: str, device: str, dtype: str):
    """Resolve ``--model``; print a prominent note for untrained models. Returns (calculator, label)."""
    from mlip.pretrained import UntrainedModelWarning
    from mlip.workflows.model_loading import describe_model, is_untrained, resolve_calculator

    with warnings.catch_warnings():
        # Replaced by the NOTE line below, which says the same thing more visibly.
        warnings.simplefilter("ignore", UntrainedModelWarning)
        calc = resolve_calculator(spec, device=device, dtype=dtype)
    label = describe_model(calc, spec)
    if is_untrained(calc):
        _note(f"NOTE: model {label!r} is UNTRAINED (random weights): results are not physical")
    return calc, label


def _check_species(atoms, calc, path: str) -> None:
    """Reject elements the model does not cover before any work is done."""
    from mlip.graph import validate_atoms
    from mlip.workflows.model_loading import potential_of

    potential = potential_of(calc)
    if potential is None:
        return
    try:
        validate_atoms(atoms, allowed_numbers=potential.atomic_numbers.tolist())
    except ValueError as err:
        raise CLIError(f"{path}: {err}") from None


def _calc_label(calc) -> str:
    from mlip.workflows.model_loading import potential_of

    if potential_of(calc) is not None:
        dtype = str(calc.dtype).replace("torch.", "")
        return f"{type(calc).__name__}, {dtype}, {calc.device}"
    return type(calc).__name__


# ---------------------------------------------------------------------------------------- info
def cmd_info(args) -> int:
    from mlip import pretrained
    from mlip.checkpoint import checkpoint_header, read_header

    spec = args.model
    if os.path.exists(spec):
        header = read_header(spec)
        source = f"checkpoint {spec}"
    elif pretrained.is_known(spec):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pretrained.UntrainedModelWarning)
            potential = pretrained.load(spec)
        header = checkpoint_header(potential)
        name = pretrained.DEFAULT_MODEL if spec == "default" else spec
        source = f"shipped model {name}"
    else:
        raise CLIError(
            f"{spec!r} is neither a checkpoint file nor a shipped model "
            f"(shipped models: {', '.join(['default'] + pretrained.available())})"
        )
    if args.json:
        print(json.dumps(header, indent=2, sort_keys=True))
        return 0
    metadata = header.get("metadata") or {}
    trained = metadata.get("trained")
    trained_text = {True: "yes", False: "NO (random weights: results are not physical)"}
    trained_text = trained_text.get(trained, "unknown")
    n_params = header.get("num_parameters")
    rows = [
        ("model", source),
        ("architecture", header["architecture"]),
        ("species", " ".join(header["species"])),
        ("cutoff", f"{header['cutoff']:g} Å"),
        ("parameters", f"{n_params:,}" if isinstance(n_params, int) else "unknown"),
        ("package version", header.get("package_version", "unknown")),
        ("trained", trained_text),
    ]
    width = max(len(k) for k, _ in rows) + 1
    for key, value in rows:
        print(f"{key + ':':<{width}} {value}")
    print("hyperparameters:")
    for key, value in sorted(header["hyperparameters"].items()):
        print(f"  {key}: {_fmt_value(value)}")
    print("metadata:")
    if not metadata:
        print("  (none)")
    for key, value in sorted(metadata.items()):
        print(f"  {key}: {_fmt_value(value)}")
    if trained is False:
        _note(f"NOTE: {source} is UNTRAINED (random weights): results are not physical")
    return 0


# ---------------------------------------------------------------------------------------- create
def _parse_set(items: Optional[Sequence[str]]) -> dict:
    import yaml

    out = {}
    for item in items or []:
        if "=" not in item:
            raise CLIError(f"--set expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        key = key.strip()
        if not key.isidentifier():
            raise CLIError(f"--set: invalid hyperparameter name {key!r}")
        try:
            out[key] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise CLIError(f"--set {key}: cannot parse value {value!r} ({err})") from None
    return out


def cmd_create(args) -> int:
    from mlip.checkpoint import save_potential
    from mlip.models import create_model

    from mlip.models import load_model_config

    config = {}
    if args.config:
        try:
            config = load_model_config(args.config)
        except ValueError as err:
            raise CLIError(str(err)) from None
    architecture = args.architecture or config.pop("name", None)
    config.pop("name", None)
    species = args.species or config.pop("species", None)
    cutoff = args.cutoff or config.pop("cutoff", None)
    config.pop("species", None)
    config.pop("cutoff", None)
    for what, value in (("an architecture", architecture), ("--species", species), ("--cutoff", cutoff)):
        if value is None:
            raise CLIError(f"create needs {what} (on the command line or in --config)")
    args.architecture = architecture
    hyperparameters = {**config, **_parse_set(args.set)}
    try:
        potential = create_model(
            architecture, species=species, cutoff=cutoff, seed=args.seed, **hyperparameters
        )
    except TypeError as err:  # unknown hyperparameter names
        raise CLIError(str(err)) from None
    except ValueError as err:
        given = ", ".join(f"{k}={v!r}" for k, v in hyperparameters.items())
        raise CLIError(
            f"cannot create a {args.architecture!r} model"
            + (f" with {given}" if given else "")
            + f": {err}"
        ) from None
    potential.metadata = {
        "trained": False,
        "note": "freshly initialised (random weights); not physical until trained",
        "seed": args.seed,
        "command": " ".join([PROG] + list(args.argv)),
    }
    out = save_potential(potential, args.output)
    print(
        f"wrote {out}: {potential.architecture}, species {' '.join(potential.species)}, "
        f"cutoff {potential.cutoff:g} Å, {potential.num_parameters():,} parameters (untrained)"
    )
    return 0


# ---------------------------------------------------------------------------------------- relax
def cmd_relax(args) -> int:
    import ase.io
    from ase.calculators.singlepoint import SinglePointCalculator

    from mlip.workflows.relax import relax

    atoms = _read_structure(args.structure, args.index, args.format)
    calc, label = _load_model(args.model, args.device, args.dtype)
    _check_species(atoms, calc, args.structure)
    output = Path(args.output) if args.output else Path(f"{Path(args.structure).stem}_relaxed.extxyz")
    bulk = bool(atoms.pbc.all())
    mode = "positions + cell (FrechetCellFilter)" if bulk and args.cell_filter else "positions only"
    print(f"model:     {label} ({_calc_label(calc)})")
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
        _note(f"NOTE: not converged within {args.steps} steps: exit status {EXIT_NOT_CONVERGED}")
        return EXIT_NOT_CONVERGED
    return 0


# ---------------------------------------------------------------------------------------- md
MD_OUTPUTS = ("md.traj", "md.log", "energy.png", "md_summary.json")  # what cmd_md writes to --out-dir


def cmd_md(args) -> int:
    from mlip.workflows.md import run_md, save_energy_plot

    atoms = _read_structure(args.structure, args.index, args.format)
    if args.supercell:
        reps = list(args.supercell)
        if len(reps) == 1:
            reps = reps * 3
        if len(reps) != 3 or any(r < 1 for r in reps):
            raise CLIError(f"--supercell expects 1 or 3 positive integers, got {args.supercell}")
        bad = [ax for ax, r, periodic in zip("abc", reps, atoms.pbc) if r > 1 and not periodic]
        if bad:
            raise CLIError(f"--supercell repeats along non-periodic direction(s) {', '.join(bad)}")
        atoms = atoms.repeat(reps)
    out_dir = Path(args.out_dir) if args.out_dir else Path(f"{Path(args.structure).stem}_md")
    earlier = [name for name in MD_OUTPUTS if (out_dir / name).exists()]
    if earlier and not args.overwrite:
        # Appending would mix two runs in one trajectory; replacing them needs an explicit choice.
        raise CLIError(f"{out_dir} already holds {', '.join(earlier)} from an earlier run: choose another "
                       f"--out-dir, or pass --overwrite to replace them")
    calc, label = _load_model(args.model, args.device, args.dtype)
    _check_species(atoms, calc, args.structure)
    for name in earlier:  # --overwrite: no file of the earlier run is left to be mistaken for this one's
        (out_dir / name).unlink()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CLIError(f"cannot create output directory {str(out_dir)!r}: {err}") from None
    extra = ""
    if args.ensemble == "nvt":
        extra = f", friction {args.friction:g} 1/fs"
    elif args.ensemble == "npt":
        extra = f", pressure {args.pressure:g} GPa, {args.barostat} barostat"
    print(f"model:     {label} ({_calc_label(calc)})")
    print(f"structure: {args.structure} ({len(atoms)} atoms, {atoms.get_chemical_formula()})")
    print(
        f"md:        {args.ensemble.upper()}, T {args.temperature:g} K, dt {args.timestep:g} fs, "
        f"{args.steps} steps{extra}",
        flush=True,
    )
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
    )
    from mlip.workflows.model_loading import is_untrained

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
    with open(out_dir / "md_summary.json", "w") as fh:
        json.dump(summary, fh, indent=2)
    plot_note = ""
    try:
        save_energy_plot(result, out_dir / "energy.png")
    except ImportError as err:
        plot_note = f" (energy.png skipped: {err})"
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
    print(f"wrote:     {out_dir}/ md.traj md.log energy.png md_summary.json{plot_note}")
    return 0


# ---------------------------------------------------------------------------------------- phonons
def _supercell_arg(values: Optional[Sequence[int]], what: str):
    """1, 3 or 9 integers from the command line → n, (n1, n2, n3) or a 3×3 matrix (None stays None)."""
    if values is None:
        return None
    if len(values) == 1:
        return int(values[0])
    if len(values) == 3:
        return [int(v) for v in values]
    if len(values) == 9:
        return [[int(v) for v in values[3 * k : 3 * k + 3]] for k in range(3)]
    raise CLIError(f"{what} takes 1, 3 or 9 integers (n, n1 n2 n3, or a 3×3 matrix row by row), got {len(values)}")


def _mesh_arg(values: Optional[Sequence[str]]):
    """``--mesh 20 20 20``, ``--mesh 19`` or a length density ``--mesh 40.0``."""
    if values is None:
        return None
    try:
        if len(values) == 1:
            return float(values[0]) if "." in values[0] else int(values[0])
        if len(values) == 3:
            return [int(v) for v in values]
    except ValueError:
        pass
    raise CLIError(f"--mesh takes n, n1 n2 n3 or a length density in Å such as 40.0, got {' '.join(values)}")


def cmd_phonons(args) -> int:
    import numpy as np

    from mlip.workflows.phonons import run_phonons

    atoms = _read_structure(args.structure, args.index, args.format)
    calc, label = _load_model(args.model, args.device, "float64")
    _check_species(atoms, calc, args.structure)
    out_dir = Path(args.out_dir)
    kwargs = dict(
        supercell=_supercell_arg(args.supercell, "--supercell"),
        displacement=args.displacement,
        relax=not args.no_relax,
        fmax=args.fmax,
        relax_steps=args.relax_steps,
        no_shear=args.no_shear,
        temperatures=(args.tmin, args.tmax, args.tstep),
        min_width=args.min_width,
        imaginary_tol=args.imaginary_tol,
        out_dir=out_dir,
        progress=not args.no_progress,
    )
    mesh = _mesh_arg(args.mesh)
    if mesh is not None:
        kwargs["mesh"] = mesh
    print(f"model:     {label} ({_calc_label(calc)})")
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


# ---------------------------------------------------------------------------------------- kappa
def _kappa_kwargs(args) -> dict:
    return dict(
        displacement=args.displacement,
        temperatures=args.temperatures,
        method=args.method,
        isotopes=not args.no_isotopes,
        relax=not args.no_relax,
        fmax=args.fmax,
        relax_steps=args.relax_steps,
    )


def _print_scores(scores: dict, temperature: float) -> None:
    print(f"\nκ_SRME against the reference at {temperature:g} K:")
    print(f"  {'material':<24} {'κ_pred':>9} {'κ_ref':>9} {'SRME':>6} {'SRE':>6}  status")
    for mid, sc in scores["per_material"].items():
        pred = "-" if sc["kappa_pred"] is None else f"{sc['kappa_pred']:.3f}"
        print(f"  {str(mid):<24} {pred:>9} {sc['kappa_ref']:>9.3f} {sc['srme']:>6.3f} {sc['sre']:>6.3f}  {sc['status']}")
    print(f"  mean over {scores['n_materials']} materials: κ_SRME {scores['srme']:.4f}, κ_SRE {scores['sre']:.4f}, "
          f"κ_SRD {scores['srd']:+.4f} ({scores['n_failed']} failed/unstable/missing)")


def cmd_kappa(args) -> int:
    import numpy as np

    out_dir = Path(args.out_dir)
    temperature = args.temperatures[0]
    if args.batch:
        from mlip.workflows.kappa_batch import read_kappa_structures, run_kappa_batch, score_kappa_batch

        try:
            items = read_kappa_structures(args.structure, format=args.format)
        except ValueError as err:
            raise CLIError(str(err)) from None
        for flag in ("fc2_supercell", "fc3_supercell", "mesh"):
            if getattr(args, flag) is not None:
                raise CLIError(f"--{flag.replace('_', '-')} is not used with --batch: each structure carries "
                               f"its own in atoms.info")
        calc, label = _load_model(args.model, args.device, "float64")
        for mid, atoms in items:
            _check_species(atoms, calc, f"{args.structure} ({mid})")
        print(f"model:     {label} ({_calc_label(calc)})")
        print(f"batch:     {args.structure} ({len(items)} materials) -> {out_dir}/", flush=True)
        counts = run_kappa_batch(items, calc, out_dir, n_shards=args.n_shards, shard_index=args.shard_index,
                                 progress=not args.no_progress, **_kappa_kwargs(args))
        print(f"shard {counts['shard'] + 1}/{counts['n_shards']}: {counts['assigned']} materials, "
              f"{counts['skipped']} already done, {counts['computed']} computed ({counts['failed']} crashed)")
        if counts["merged"] is None:
            print("other shards still running: rerun any shard (or the whole file) to merge when they finish")
            return 0
        print(f"wrote:     {counts['merged']}")
        if args.reference:
            scores = score_kappa_batch(counts["merged"], args.reference, temperature)
            _print_scores(scores, temperature)
            path = out_dir / "kappa_srme.json"
            from mlip.io import write_json

            write_json(path, scores)
            print(f"wrote:     {path}")
        return 0

    from mlip.workflows.kappa import run_kappa

    atoms = _read_structure(args.structure, args.index, args.format)
    calc, label = _load_model(args.model, args.device, "float64")
    _check_species(atoms, calc, args.structure)
    print(f"model:     {label} ({_calc_label(calc)})")
    print(f"structure: {args.structure} ({len(atoms)} atoms, {atoms.get_chemical_formula()})", flush=True)
    kwargs = _kappa_kwargs(args)
    kwargs.update(fc2_supercell=_supercell_arg(args.fc2_supercell, "--fc2-supercell"),
                  fc3_supercell=_supercell_arg(args.fc3_supercell, "--fc3-supercell"))
    if args.mesh is not None:
        kwargs["mesh"] = _mesh_arg(args.mesh)
    # Without progress bars, one line per stage shows how far a run got (batch-job logs).
    log = (lambda line: print(line, flush=True)) if args.no_progress else None
    result = run_kappa(atoms, calc, out_dir=out_dir, progress=not args.no_progress, log=log, **kwargs)
    print(f"supercells: fc2 {np.asarray(result.fc2_supercell).tolist()}, fc3 {np.asarray(result.fc3_supercell).tolist()}; "
          f"q-mesh {result.mesh}; method {result.method}")
    if result.status != "ok":
        detail = f": {result.error}" if result.error else ""
        print(f"status:    {result.status.upper()}{detail} (no κ; scores κ_SRME = 2)")
    else:
        for k, t in enumerate(result.temperatures):
            kap = np.asarray(result.kappa[k])
            line = f"κ({t:g} K) = {np.trace(kap) / 3:.4f} W/(m·K) (xx {kap[0, 0]:.4f}, yy {kap[1, 1]:.4f}, zz {kap[2, 2]:.4f})"
            if result.kappa_particle is not None and result.kappa_coherence is not None:
                line += (f"; particle {np.trace(result.kappa_particle[k]) / 3:.4f}, "
                         f"coherence {np.trace(result.kappa_coherence[k]) / 3:.4f}")
            print(line)
    print(f"wrote:     {out_dir}/kappa.json")
    if args.reference:
        from mlip.workflows.kappa import load_kappa
        from mlip.workflows.kappa_metrics import mean_kappa_scores

        scores = mean_kappa_scores({"structure": result}, {"structure": load_kappa(args.reference)}, temperature)
        _print_scores(scores, temperature)
    return 0 if result.status == "ok" else 1


# ---------------------------------------------------------------------------------------- train
def cmd_train(args) -> int:
    from mlip.training import TrainConfig, train

    config = TrainConfig.from_yaml(args.config)
    if args.out_dir:
        config.out_dir = args.out_dir
    print(f"training {config.model['name']} on {config.data.train} -> {config.out_dir}/"
          + (" (resuming)" if args.resume else ""), flush=True)
    result = train(config, resume=args.resume, progress=not args.no_progress, overwrite=args.overwrite)
    last = result.history[-1] if result.history else {}
    print(f"done: {result.epochs_run} epochs; best: {result.best}; last: {result.last}")
    for key in ("valid_energy_mae_meV_per_atom", "valid_forces_mae_meV_per_A", "valid_stress_mae_meV_per_A3"):
        if key in last:
            print(f"  {key[6:]}: {last[key]:.3f}")
    return 0


# ---------------------------------------------------------------------------------------- eval
def cmd_eval(args) -> int:
    from mlip.data import read_dataset
    from mlip.data.readers import FORMATS, detect_format
    from mlip.training.evaluation import error_metrics, parity_plot, predictions
    from mlip.io import write_json
    from mlip.workflows.model_loading import potential_of

    calc, label = _load_model(args.model, args.device, args.dtype)
    if not Path(args.data).is_file():
        raise CLIError(f"data file {args.data!r} does not exist")
    fmt = args.format
    if fmt is None:
        try:
            fmt = detect_format(args.data)
        except ValueError:
            raise CLIError(
                f"{args.data}: cannot tell the format of labelled data from the file name; eval reads extxyz "
                f"(.xyz, .extxyz), ASE databases (.db) and MPtrj JSON (.json), each optionally .gz: "
                f"name one with --format {{{','.join(FORMATS)}}}"
            ) from None
    potential = potential_of(calc)
    # Frames with elements the model lacks are refused while reading, with the file, frame and symbol.
    species = potential.species if potential is not None else None
    samples = read_dataset(args.data, fmt, energy_key=args.energy_key, forces_key=args.forces_key,
                           stress_key=args.stress_key, species=species)
    if not samples:
        raise CLIError(f"{args.data}: no structures")
    model = potential if potential is not None else calc
    print(f"model: {label}; data: {args.data} ({len(samples)} structures)", flush=True)
    preds = predictions(model, samples, batch_size=args.batch_size, dtype=args.dtype,
                        device=getattr(calc, "device", "cpu"))
    metrics = error_metrics(preds)
    for key, value in metrics.items():
        print(f"  {key}: {value:.4g}")
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "metrics.json", {"model": label, "data": str(args.data), "n_structures": len(samples), **metrics})
    try:
        parity_plot(preds, out_dir / "parity.png", title=f"{label} on {Path(args.data).name}")
        plot = " parity.png"
    except ImportError:
        plot = " (no parity plot: matplotlib is not installed)"
    print(f"wrote: {out_dir}/ metrics.json{plot}")
    return 0


# ---------------------------------------------------------------------------------------- data
DATA_COMMANDS = {"emt": "mlip.data.emt", "summary": "mlip.data.summary"}


def cmd_data(args) -> int:
    import importlib

    module = importlib.import_module(DATA_COMMANDS[args.data_command])
    return int(module.main(list(args.rest)) or 0)


# ---------------------------------------------------------------------------------------- parser
def _number(kind: type, minimum: float, strict: bool, bound: str):
    """argparse type: a finite ``kind`` (int or float) > minimum (strict) or >= minimum."""
    noun = "an integer" if kind is int else "a number"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {noun}: {text!r}") from None
        if not math.isfinite(value) or value < minimum or (strict and value == minimum):
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text!r}")
        return value

    return parse


_positive_float = _number(float, 0, True, "a positive number")
_nonneg_float = _number(float, 0, False, "a non-negative number")
_nonneg_int = _number(int, 0, False, ">= 0")
_positive_int = _number(int, 1, False, ">= 1")


def _add_model_args(p: argparse.ArgumentParser, dtype: str) -> None:
    p.add_argument(
        "--model",
        default="default",
        help="shipped model name, checkpoint path, or ASE calculator 'module:Class' "
        "(e.g. ase.calculators.emt:EMT); default: %(default)s",
    )
    p.add_argument(
        "--device", default="auto", help="auto (CUDA if available), cpu, cuda, cuda:1, ... (default: auto)"
    )
    p.add_argument("--dtype", default=dtype, choices=["float32", "float64"], help="default: %(default)s")
    p.add_argument("--index", type=int, default=-1, help="frame of the structure file to use (default: last)")
    p.add_argument("--format", default=None,
                   help="ASE format of the structure file, e.g. cif, extxyz, vasp (default: from the name)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--threads",
        type=_positive_int,
        default=None,
        help="CPU threads for torch (default: torch's choice); 1 is often fastest for small "
        "structures and on a busy machine",
    )


class _Parser(argparse.ArgumentParser):
    """Usage errors read ``mlip: error: ...`` for every subcommand, like all other input errors."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(2, f"{PROG}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from mlip.data.readers import FORMATS
    from mlip.version import __version__

    parser = _Parser(
        prog=PROG,
        description="Machine-learning interatomic potentials: inspect/create checkpoints, relax, run MD.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("info", help="describe a checkpoint or shipped model")
    p.add_argument("model", metavar="CHECKPOINT_OR_NAME")
    p.add_argument("--json", action="store_true", help="print the full header as JSON")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("create", help="write a freshly initialised (untrained) checkpoint")
    p.add_argument("architecture", metavar="ARCH", nargs="?", help="platonic or equiformer_v3 (or from --config)")
    p.add_argument("--config", metavar="YAML", help="model config file (create_model arguments, name included)")
    p.add_argument("--species", nargs="+", help="elements, e.g. Cu Au")
    p.add_argument("--cutoff", type=_positive_float, help="neighbour cutoff (Å)")
    p.add_argument("--seed", type=int, default=None, help="weight initialisation seed")
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="hyperparameter (value parsed as YAML); repeatable",
    )
    p.add_argument("-o", "--output", required=True, help="output .safetensors path")
    p.set_defaults(func=cmd_create)

    p = sub.add_parser("phonons", help="harmonic phonons (phonopy): bands, DOS, thermal properties")
    p.add_argument("structure", metavar="STRUCTURE", help="a crystal in any ASE-readable file")
    _add_model_args(p, dtype="float64")
    p.add_argument("--supercell", type=int, nargs="+", metavar="N",
                   help="n, n1 n2 n3, or a 3×3 matrix (default: every width >= --min-width and >= 2×cutoff)")
    p.add_argument("--min-width", type=_positive_float, default=12.0,
                   help="smallest perpendicular width of the automatic supercell, Å (default: %(default)s)")
    p.add_argument("--imaginary-tol", type=_nonneg_float, default=0.05,
                   help="frequencies below minus this (THz) count as imaginary (default: %(default)s)")
    p.add_argument("--displacement", type=_positive_float, default=0.01, help="Å (default: %(default)s)")
    p.add_argument("--mesh", nargs="+", metavar="N", help="q-mesh: n, n1 n2 n3 or a length density in Å")
    p.add_argument("--no-relax", action="store_true", help="skip the symmetry-preserving relaxation")
    p.add_argument("--no-shear", action="store_true", help="relax the cell without shear")
    p.add_argument("--fmax", type=_positive_float, default=1e-4, help="relaxation threshold, eV/Å (default: %(default)s)")
    p.add_argument("--relax-steps", type=_nonneg_int, default=300, help="default: %(default)s")
    p.add_argument("--tmin", type=_nonneg_float, default=0.0, help="K (default: %(default)s)")
    p.add_argument("--tmax", type=_nonneg_float, default=1000.0, help="K (default: %(default)s)")
    p.add_argument("--tstep", type=_positive_float, default=10.0, help="K (default: %(default)s)")
    p.add_argument("--out-dir", default="phonons", help="results, plots and resumable cache (default: %(default)s)")
    p.set_defaults(func=cmd_phonons)

    p = sub.add_parser("kappa", help="lattice thermal conductivity (phono3py; Wigner RTA by default)")
    p.add_argument("structure", metavar="STRUCTURE",
                   help="a crystal (ASE-readable), or with --batch a multi-frame file whose frames carry "
                        "fc2_supercell, fc3_supercell, q_point_mesh and material_id in atoms.info")
    _add_model_args(p, dtype="float64")
    p.add_argument("--fc2-supercell", type=int, nargs="+", metavar="N", help="n, n1 n2 n3 or a 3×3 matrix")
    p.add_argument("--fc3-supercell", type=int, nargs="+", metavar="N",
                   help="n, n1 n2 n3 or a 3×3 matrix (default: the smallest large enough; fc2 the same)")
    p.add_argument("--mesh", nargs="+", metavar="N", help="q-mesh n or n1 n2 n3 (default: 20 20 20)")
    p.add_argument("--displacement", type=_positive_float, default=0.03, help="Å (default: %(default)s)")
    p.add_argument("--temperatures", type=_nonneg_float, nargs="+", default=[300.0],
                   help="K (default: 300); κ_SRME uses the first")
    p.add_argument("--method", choices=["wigner", "rta", "lbte"], default="wigner",
                   help="Wigner transport (RTA, particle + coherence; the Matbench Discovery protocol), "
                        "plain RTA or LBTE (default: %(default)s)")
    p.add_argument("--no-isotopes", action="store_true", help="no isotope scattering")
    p.add_argument("--no-relax", action="store_true", help="skip the symmetry-preserving relaxation")
    p.add_argument("--fmax", type=_positive_float, default=1e-4, help="relaxation threshold, eV/Å (default: %(default)s)")
    p.add_argument("--relax-steps", type=_nonneg_int, default=300, help="default: %(default)s")
    p.add_argument("--out-dir", default="kappa", help="results and resumable caches (default: %(default)s)")
    p.add_argument("--batch", action="store_true", help="STRUCTURE is a file of many crystals (sharded, resumable)")
    p.add_argument("--n-shards", type=_positive_int, default=None,
                   help="with --batch: number of shards (default: Slurm array, torchrun, or 1)")
    p.add_argument("--shard-index", type=_nonneg_int, default=None, help="with --batch: this shard (0-based)")
    p.add_argument("--reference", metavar="FILE",
                   help="κ_SRME against reference results: a merged results file or batch folder (with "
                        "--batch), or a kappa.json (single structure)")
    p.set_defaults(func=cmd_kappa)

    p = sub.add_parser("data", help="reference data: 'emt OUT' generates an EMT-labelled set, 'summary FILE' checks one",
                       add_help=True)
    p.add_argument("data_command", choices=sorted(DATA_COMMANDS), help="emt or summary (each has its own --help)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="arguments of the data command")
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("train", help="train a model on energies, forces and stresses (YAML config)")
    p.add_argument("config", metavar="CONFIG.yaml", help="model, data, loss, optimizer, epochs, ... (see mlip.training)")
    p.add_argument("--resume", action="store_true", help="continue from OUT_DIR/train_state.safetensors "
                   "(only epochs, max_minutes, out_dir and device may differ from the run's config)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an earlier run in OUT_DIR (its checkpoints, metrics and state are deleted)")
    p.add_argument("--out-dir", default=None, help="override the config's out_dir")
    p.add_argument("--no-progress", action="store_true", help="no progress bars (the line per epoch remains)")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("eval", help="errors of a model on labelled data (MAE/RMSE, per element, parity plot)")
    p.add_argument("model", metavar="MODEL", help="shipped name, checkpoint or module:Class")
    p.add_argument("data", metavar="DATA", help="labelled structures (extxyz, ASE db, MPtrj JSON)")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="format of DATA (default: from the extension .xyz/.extxyz, .db or .json, maybe .gz)")
    p.add_argument("--dtype", default="float64", choices=["float32", "float64"], help="default: %(default)s")
    p.add_argument("--device", default="auto")
    p.add_argument("--batch-size", type=_positive_int, default=16)
    p.add_argument("--energy-key", default=None)
    p.add_argument("--forces-key", default=None)
    p.add_argument("--stress-key", default=None)
    p.add_argument("--out-dir", default="eval", help="metrics.json and parity.png (default: %(default)s)")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("relax", help="relax a structure (FIRE; + FrechetCellFilter for bulk)",
                       epilog=f"Exit status: 0 converged, {EXIT_NOT_CONVERGED} not converged within --steps "
                              f"(the structure is still written), 2 bad input, 1 failure at run time.")
    p.add_argument("structure", metavar="STRUCTURE", help="any ASE-readable file")
    _add_model_args(p, dtype="float64")
    p.add_argument(
        "--fmax", type=_positive_float, default=0.05, help="force threshold in eV/Å (default: 0.05)"
    )
    p.add_argument("--steps", type=_nonneg_int, default=500, help="maximum optimiser steps (default: 500)")
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
    p.add_argument("--symprec", type=_positive_float, default=0.01,
                   help="tolerance (Å) of the symmetry --fix-symmetry keeps (default: 0.01)")
    p.add_argument("--trajectory", help="optional ASE .traj file of the optimisation")
    p.set_defaults(func=cmd_relax)

    p = sub.add_parser("md", help="molecular dynamics (NVE, NVT Langevin, NPT MTK)")
    p.add_argument("structure", metavar="STRUCTURE", help="any ASE-readable file")
    _add_model_args(p, dtype="float32")
    p.add_argument("--ensemble", choices=["nve", "nvt", "npt"], default="nve", help="default: nve")
    p.add_argument("--temperature", type=_nonneg_float, default=300.0, help="K (default: 300)")
    p.add_argument("--timestep", type=_positive_float, default=1.0, help="fs (default: 1)")
    p.add_argument("--steps", type=_nonneg_int, default=1000, help="default: 1000")
    p.add_argument(
        "--friction", type=_positive_float, default=0.01, help="Langevin friction, 1/fs (default: 0.01)"
    )
    p.add_argument("--pressure", type=float, default=0.0, help="NPT pressure, GPa (default: 0)")
    p.add_argument("--barostat", choices=["isotropic", "anisotropic"], default="isotropic", help="NPT only")
    p.add_argument("--seed", type=int, default=None, help="velocity / thermostat random seed")
    p.add_argument("--supercell", type=int, nargs="+", metavar="N", help="repeat the cell, e.g. 3 3 3 (or 3)")
    p.add_argument(
        "--log-interval", type=_positive_int, default=10, help="steps between logged frames (default: 10)"
    )
    p.add_argument("--out-dir", help="output directory (default: <stem>_md in the current directory)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the files of an earlier run in --out-dir (default: refuse to start)")
    p.set_defaults(func=cmd_md)

    from mlip.workflows.discovery.cli import add_parser as add_discovery_parser

    add_discovery_parser(sub)  # mlip discovery {relax, join, metrics, emt-benchmark}
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the ``mlip`` command; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse: --help/--version (0) or a usage error (2, already printed)
        return int(exit_.code or 0)
    args.argv = argv

    from ase.calculators.calculator import PropertyNotImplementedError

    from mlip.extras import MissingExtraError

    threads = getattr(args, "threads", None)
    debug = os.environ.get("MLIP_DEBUG", "") not in ("", "0")
    previous_threads = None
    try:
        if threads is not None:
            import torch

            previous_threads = torch.get_num_threads()
            torch.set_num_threads(threads)
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except (CLIError, ValueError, FileNotFoundError, PropertyNotImplementedError, OSError,
            MissingExtraError) as err:
        if debug:
            raise
        msg = str(err) or type(err).__name__
        if isinstance(err, FileNotFoundError) and err.filename and str(err.filename) not in msg:
            msg = f"{msg}: {err.filename}"
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return 2
    except RuntimeError as err:
        if debug:
            raise
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 1
    finally:
        if previous_threads is not None:  # main() may run inside a larger program (tests)
            import torch

            torch.set_num_threads(previous_threads)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
