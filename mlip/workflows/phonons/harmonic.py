"""Harmonic phonons with phonopy: band structure, density of states and thermal properties.

>>> from ase.build import bulk
>>> from mlip.workflows.phonons import PhononSettings, run_phonons
>>> result = run_phonons(bulk("Cu", "fcc", a=3.6), "ase.calculators.emt:EMT",
...                      PhononSettings(supercell=4, mesh=12), progress=False)
>>> result.has_imaginary_modes
False

The workflow (:func:`run_phonons`):

1. optional symmetry-preserving relaxation: FIRE + ``FrechetCellFilter`` with ``FixSymmetry``
   (optionally without shear), fmax 1e-4 eV/Å, ≤ 300 steps (the phonondb/Matbench Discovery
   protocol); the space group before and after is recorded;
2. finite displacements in a supercell (phonopy, default 0.01 Å), forces evaluated one supercell
   at a time in float64 by :func:`mlip.workflows.phonons.displacement_forces.displacement_forces`
   (resumable through ``out_dir``), minus the forces on the undisplaced supercell (phonopy's
   ``--fz``, :func:`~mlip.workflows.phonons.displacement_forces.subtract_residual_forces`), symmetrised
   force constants;
3. band structure along the standard Setyawan–Curtarolo path of the primitive cell (ASE's
   ``Cell.bandpath``, dependency-free), DOS on a q-mesh (tetrahedron method), thermal properties
   (Helmholtz free energy, entropy, heat capacity at constant volume), and a check for imaginary
   modes (reported, as is the convention, as negative frequencies).

The outcome, its JSON file and its plots are :class:`~mlip.workflows.phonons.phonon_result.PhononResult`.

Units: frequencies in THz (1 THz = 4.1357 meV = 33.356 cm⁻¹), energies in eV, temperatures in K.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Optional, Tuple, Union

import numpy as np
from ase import Atoms

from mlip.workflows.phonons.force_constant_inputs import check_crystal, float64_calculator
from mlip.calculators.model_loading import calculator_cutoff
from mlip.workflows.phonons.cache import NO_SHEAR_CELL_MASK, cached_relaxation, check_model_cache
from mlip.workflows.phonons.supercells import (
    check_supercell_width,
    cutoff_width,
    diagonal_supercell,
)
from mlip.workflows.phonons.phonon_result import PhononResult
from mlip.workflows.phonons.settings import DEFAULT_MIN_WIDTH, PhononSettings, with_overrides

#: supercells must be at least this many model cutoffs wide, so that no atom sees two periodic
#: images of a displaced atom (the force constants would fold them together); the κ workflow
#: (:mod:`mlip.workflows.phonons.kappa`) asks for 1 on purpose
MIN_WIDTH_CUTOFF_FACTOR = 2.0

# ----------------------------------------------------------------------------------------- helpers
def default_supercell(atoms: Atoms, min_width: float = DEFAULT_MIN_WIDTH) -> Tuple[int, int, int]:
    """The smallest diagonal supercell ``(n1, n2, n3)`` of ``atoms.cell`` whose perpendicular
    widths (distances between opposite faces) are all ≥ ``min_width`` (Å)."""
    return diagonal_supercell(atoms, min_width)


def _check_supercell_for_cutoff(atoms: Atoms, matrix: np.ndarray, cutoff: Optional[float]) -> None:
    """Refuse a supercell narrower than ``MIN_WIDTH_CUTOFF_FACTOR`` (2) × the model's cutoff (Å);
    the message names the :func:`default_supercell` that is wide enough. Widths are measured in the
    basis of ``atoms.cell``, as :func:`default_supercell` sizes its supercells."""
    from mlip.workflows.phonons.phonopy_bridge import perpendicular_widths

    if cutoff is None:
        return
    check_supercell_width(
        atoms, matrix, cutoff_width(cutoff, MIN_WIDTH_CUTOFF_FACTOR),
        f"{MIN_WIDTH_CUTOFF_FACTOR:g} × the model's cutoff of {cutoff:g} Å: in a narrower supercell a "
        "displaced atom interacts with its own periodic images and the force constants are wrong",
        name="supercell", suggest=default_supercell, widths_of=perpendicular_widths,
    )


def _label(name: str) -> str:
    return "Γ" if name in ("G", "Gamma", "GAMMA") else name


# ----------------------------------------------------------------------------------------- workflow
def run_phonons(
    atoms: Atoms,
    calculator,
    settings: Optional[PhononSettings] = None,
    *,
    out_dir: Union[str, os.PathLike, None] = None,
    progress: bool = True,
    **overrides,
) -> PhononResult:
    """Harmonic phonons of a crystal: band structure, DOS, thermal properties, imaginary modes.

    Args:
        atoms: a crystal, periodic in all three directions (not modified). Its masses are used.
        calculator: anything :func:`mlip.workflows.resolve_calculator` accepts (shipped model
            name, checkpoint path, :class:`mlip.Potential`, ASE calculator, ``"module:Class"``);
            mlip potentials are evaluated in float64.
        settings: the supercell, displacement, relaxation, q-mesh, temperatures, ... (see
            :class:`~mlip.workflows.phonons.settings.PhononSettings`; default: its defaults).
        out_dir: folder for the results (``phonons.json`` and the plots, see
            :meth:`PhononResult.save`) and for a resumable cache (``cache/``: the relaxed
            structure and the forces of each displaced supercell). A rerun with the same input
            and settings recomputes nothing; a cache made with another model or for other
            supercells is refused (use another folder, or delete ``cache/``).
        progress: progress bars for the relaxation and the displaced-supercell forces.
        **overrides: settings by keyword, instead of or on top of ``settings``
            (``run_phonons(atoms, calc, supercell=4, mesh=12)``).

    Raises:
        ValueError: non-periodic or empty structure, bad supercell (malformed, singular,
            left-handed, too small for the model's cutoff), non-positive displacement, bad mesh,
            temperatures or tolerances, elements unknown to the model (from the calculator), or a
            cache in ``out_dir`` made for other structures or another model.
        TypeError: ``settings`` of another class, or a keyword that is no setting.
        ImportError: phonopy or spglib is missing (``pip install 'mlip-torch[phonons]'``).

    A relaxation that does not converge, or that changes the space group, emits a
    ``RuntimeWarning`` and the phonons are computed anyway (see ``result.relaxation``).
    """
    from mlip.calculators.model_loading import describe_model
    from mlip.workflows.phonons.phonopy_bridge import import_phonopy, to_ase_atoms

    check_crystal(atoms, workflow="the phonon workflow")
    s = with_overrides(PhononSettings, settings, overrides, "run_phonons")
    mesh_arg = list(s.mesh) if isinstance(s.mesh, tuple) else s.mesh
    t_min, t_max, t_step = s.temperatures
    matrix = s.supercell_matrix()
    phonopy_module = import_phonopy()
    calc = float64_calculator(calculator)
    cutoff = calculator_cutoff(calc)
    if matrix is not None:
        _check_supercell_for_cutoff(atoms, matrix, cutoff)
    record = {
        "supercell": None if s.supercell is None else np.asarray(s.supercell).tolist(),
        "min_width_A": float(s.min_width),
        "displacement_A": float(s.displacement),
        "relax": bool(s.relax),
        "fmax_eV_per_A": float(s.fmax),
        "relax_steps": int(s.relax_steps),
        "symprec": float(s.symprec),
        "fix_symmetry_symprec": float(s.fix_symmetry_symprec),
        "no_shear": bool(s.no_shear),
        "mesh": mesh_arg,
        "temperatures_K": [t_min, t_max, t_step],
        "band_npoints": s.band_npoints,
        "imaginary_tol_THz": float(s.imaginary_tol),
        "model_cutoff_A": cutoff,
        "subtract_residual_forces": bool(s.subtract_residual_forces),
    }
    cache = Path(out_dir) / "cache" if out_dir is not None else None
    if cache is not None:
        check_model_cache(cache, calc)

    unit = atoms.copy()
    unit.calc = None
    unit.set_constraint()
    relaxation = None
    if s.relax:
        relaxed = cached_relaxation(
            unit, calc, cache, fmax=s.fmax, steps=s.relax_steps, symprec=s.symprec,
            fix_symmetry_symprec=s.fix_symmetry_symprec, cell_mask=NO_SHEAR_CELL_MASK if s.no_shear else None,
            key_extra={"no_shear": bool(s.no_shear)}, progress=progress,
        )
        unit, relaxation = relaxed.atoms, relaxed.info
        if not relaxed.reused:
            _warn_if_unsound(relaxation, s.fmax, s.relax_steps)

    matrix = _supercell_matrix(unit, matrix, cutoff, s.min_width)
    ph, n_displacements, residual = _force_constants(phonopy_module, unit, matrix, s.displacement, s.symprec,
                                                     calc, cache, progress, s.subtract_residual_forces)
    primitive = to_ase_atoms(ph.primitive)
    band = _band_structure(ph, primitive, s.band_npoints)
    thermal = _mesh_and_thermal_properties(ph, mesh_arg, t_min, t_max, t_step, len(unit) / len(primitive))
    low_mesh, low_path, low_q = _lowest_frequencies(thermal["mesh_frequencies"], thermal["mesh_qpoints"],
                                                    band)

    result = PhononResult(
        atoms=unit,
        primitive=primitive,
        spacegroup=str(ph.symmetry.get_international_table()),
        supercell_matrix=np.asarray(matrix, dtype=int),
        supercell_widths=_widths(matrix, unit),
        n_supercell_atoms=len(ph.supercell),
        n_displacements=n_displacements,
        band_path=band["path"],
        band_segments=band["segments"],
        band_qpoints=band["qpoints"],
        band_distances=band["distances"],
        band_frequencies=band["frequencies"],
        mesh=[int(x) for x in ph.mesh.mesh_numbers],
        dos_frequencies=thermal["dos_frequencies"],
        dos=thermal["dos"],
        temperatures=thermal["temperatures"],
        free_energy=thermal["free_energy"],
        entropy=thermal["entropy"],
        heat_capacity=thermal["heat_capacity"],
        zero_point_energy=thermal["zero_point_energy"],
        lowest_frequency_mesh=low_mesh,
        lowest_frequency_path=low_path,
        lowest_frequency_qpoint=[float(x) for x in low_q],
        imaginary_tol=float(s.imaginary_tol),
        relaxation=relaxation,
        residual_force_max=residual,
        settings=record,
        model=describe_model(calc, calculator if isinstance(calculator, (str, os.PathLike)) else None),
        phonopy=ph,
    )
    if out_dir is not None:
        result.save(out_dir)
    return result


def _warn_if_unsound(relaxation: dict, fmax: float, steps: int) -> None:
    """RuntimeWarnings (pointing at the caller of :func:`run_phonons`) for a fresh relaxation that
    did not converge or changed the space group; the phonons are computed anyway."""
    if not relaxation["converged"]:
        warnings.warn(
            f"relaxation did not reach fmax={fmax} eV/Å in {steps} steps "
            f"(fmax {relaxation['fmax_final_eV_per_A']:.2g}); "
            "phonons of a structure off its minimum can show spurious imaginary modes",
            RuntimeWarning, stacklevel=3,
        )
    if relaxation["symmetry_broken"]:
        warnings.warn(
            f"the space group changed during relaxation: {relaxation['spacegroup_initial']} → "
            f"{relaxation['spacegroup_final']}", RuntimeWarning, stacklevel=3,
        )


def _supercell_matrix(unit: Atoms, matrix: Optional[np.ndarray], cutoff: Optional[float],
                      min_width: float) -> np.ndarray:
    """The given supercell [3, 3], checked again against the cutoff (the relaxed cell may have
    shrunk), or the default one: every width ≥ ``min_width`` and ≥ 2 × cutoff."""
    if matrix is None:
        target = max(float(min_width), cutoff_width(cutoff, MIN_WIDTH_CUTOFF_FACTOR))
        return np.diag(default_supercell(unit, target)).astype(int)
    _check_supercell_for_cutoff(unit, matrix, cutoff)
    return matrix


def _widths(matrix: np.ndarray, unit: Atoms) -> np.ndarray:
    """Perpendicular widths [3] (Å) of the supercell ``matrix @ unit.cell``."""
    from mlip.workflows.phonons.phonopy_bridge import perpendicular_widths

    return perpendicular_widths(matrix @ unit.cell.array)


def _force_constants(phonopy_module, unit: Atoms, matrix: np.ndarray, displacement: float, symprec: float,
                     calc, cache: Optional[Path], progress: bool, subtract_residual: bool):
    """Symmetrised force constants from the forces of the displaced supercells (resumable through
    ``cache/fc2``), less those of the undisplaced one (``cache/fc2-perfect``) when
    ``subtract_residual``; returns (the Phonopy object, number of displaced supercells, the largest
    residual force or None)."""
    from mlip.workflows.phonons.displacement_forces import displacement_forces, subtract_residual_forces
    from mlip.workflows.phonons.phonopy_bridge import to_ase_atoms, to_phonopy_atoms

    with warnings.catch_warnings():
        # phonopy 4 notes that 'auto' picked a non-identity primitive matrix: we ask for it on purpose.
        warnings.filterwarnings("ignore", message="primitive_matrix defaulted to 'auto'")
        ph = phonopy_module.Phonopy(to_phonopy_atoms(unit), supercell_matrix=matrix,
                                    primitive_matrix="auto", symprec=symprec)
    ph.generate_displacements(distance=float(displacement))
    displaced = [to_ase_atoms(s) for s in ph.supercells_with_displacements]
    forces = displacement_forces(displaced, calc, cache_dir=None if cache is None else cache / "fc2",
                                 label="fc2", progress=progress)
    residual = None
    if subtract_residual:
        forces, residual = subtract_residual_forces(forces, to_ase_atoms(ph.supercell), calc,
                                                    None if cache is None else cache / "fc2-perfect")
    ph.forces = np.array(forces, dtype=float)
    ph.produce_force_constants()
    ph.symmetrize_force_constants()
    return ph, len(displaced), residual


def _mesh_and_thermal_properties(ph, mesh_arg, t_min: float, t_max: float, t_step: float,
                                 per_cell: float) -> dict:
    """Frequencies and q-points on the Γ-centred mesh, the total DOS and the thermal properties,
    converted from phonopy's kJ/mol per primitive cell to eV per unit cell (``per_cell``: unit-cell
    atoms per primitive-cell atom)."""
    from phonopy.physical_units import get_physical_units

    ph.run_mesh(mesh_arg, is_gamma_center=True)
    out = {
        "mesh_frequencies": np.asarray(ph.mesh.frequencies, dtype=float),
        "mesh_qpoints": np.asarray(ph.mesh.qpoints, dtype=float),
    }
    ph.run_total_dos()
    out["dos_frequencies"] = np.array(ph.total_dos.frequency_points, dtype=float)
    out["dos"] = np.array(ph.total_dos.dos, dtype=float)
    ph.run_thermal_properties(t_min=t_min, t_max=t_max, t_step=t_step, exclude_gamma_acoustic=True)
    tp = ph.thermal_properties
    ev_to_kjmol = get_physical_units().EvTokJmol
    out["temperatures"] = np.asarray(tp.temperatures, dtype=float)
    out["free_energy"] = np.asarray(tp.free_energy, dtype=float) / ev_to_kjmol * per_cell
    out["entropy"] = np.asarray(tp.entropy, dtype=float) / (1000.0 * ev_to_kjmol) * per_cell
    out["heat_capacity"] = np.asarray(tp.heat_capacity, dtype=float) / (1000.0 * ev_to_kjmol) * per_cell
    out["zero_point_energy"] = float(tp.zero_point_energy) / ev_to_kjmol * per_cell
    return out


def _lowest_frequencies(mesh_freqs: np.ndarray, mesh_q: np.ndarray, band: dict):
    """(lowest frequency on the mesh, lowest along the band path, the q-point of the lower of the two)."""
    k_mesh = np.unravel_index(int(np.argmin(mesh_freqs)), mesh_freqs.shape)[0]
    low_mesh = float(mesh_freqs.min())
    path_all = np.concatenate(band["frequencies"])
    q_all = np.concatenate(band["qpoints"])
    k_path = np.unravel_index(int(np.argmin(path_all)), path_all.shape)[0]
    low_path = float(path_all.min())
    low_q = mesh_q[k_mesh] if low_mesh <= low_path else q_all[k_path]
    return low_mesh, low_path, low_q


def _band_structure(ph, primitive: Atoms, npoints: int) -> dict:
    """Frequencies along the standard path of the primitive cell (ASE's Setyawan–Curtarolo path)."""
    from ase.dft.kpoints import parse_path_string
    from phonopy.phonon.band_structure import get_band_qpoints_and_path_connections

    bandpath = None
    last_err: Optional[Exception] = None
    for eps in (2e-4, 1e-3, 1e-2):
        try:
            bandpath = primitive.cell.bandpath(npoints=0, eps=eps)
            break
        except Exception as err:  # noqa: BLE001 - ASE raises several kinds for odd cells
            last_err = err
    if bandpath is None:
        raise ValueError(f"could not determine a band path for the primitive cell: {last_err}")
    special = bandpath.special_points
    branches = parse_path_string(bandpath.path)
    coords = [[np.asarray(special[name], dtype=float) for name in branch] for branch in branches]
    qpoints, connections = get_band_qpoints_and_path_connections(coords, npoints=npoints)
    labels = [_label(name) for branch in branches for name in branch]
    ph.run_band_structure(qpoints, path_connections=connections, labels=labels)
    bs = ph.band_structure
    segments = [(_label(b[i]), _label(b[i + 1])) for b in branches for i in range(len(b) - 1)]
    return {
        "path": bandpath.path,
        "segments": segments,
        "qpoints": [np.asarray(q, dtype=float) for q in bs.qpoints],
        "distances": [np.asarray(d, dtype=float) for d in bs.distances],
        "frequencies": [np.asarray(f, dtype=float) for f in bs.frequencies],
    }


__all__ = [
    "MIN_WIDTH_CUTOFF_FACTOR",
    "calculator_cutoff",
    "default_supercell",
    "run_phonons",
]
