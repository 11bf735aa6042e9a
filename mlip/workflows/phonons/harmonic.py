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

Units: frequencies in THz (1 THz = 4.1357 meV = 33.356 cm⁻¹), energies in eV, temperatures in K.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
from ase import Atoms

from mlip.extras import require
from mlip.workflows.phonons.force_constant_inputs import check_crystal, float64_calculator
from mlip.io import atoms_to_dict, jsonable, write_json
from mlip.calculators.model_loading import calculator_cutoff
from mlip.workflows.phonons.cache import NO_SHEAR_CELL_MASK, cached_relaxation, check_model_cache
from mlip.workflows.phonons.supercells import (
    check_supercell_width,
    cutoff_width,
    diagonal_supercell,
)
from mlip.workflows.phonons.settings import DEFAULT_MIN_WIDTH, PhononSettings, with_overrides

#: supercells must be at least this many model cutoffs wide, so that no atom sees two periodic
#: images of a displaced atom (the force constants would fold them together); the κ workflow
#: (:mod:`mlip.workflows.phonons.kappa`) asks for 1 on purpose
MIN_WIDTH_CUTOFF_FACTOR = 2.0

#: Boltzmann constant (eV/K), CODATA 2018 (phonopy's own constants are older CODATA values that
#: differ by ~1e-7 relative)
KB_EV = 8.617333262e-5

#: eV per THz (Planck constant h in eV·s times 10¹², CODATA 2018)
EV_PER_THZ = 4.135667696e-3

JSON_NAME = "phonons.json"
PLOT_NAMES = ("band_structure.png", "dos.png", "thermal_properties.png")


# ----------------------------------------------------------------------------------------- result
@dataclass
class PhononResult:
    """Outcome of :func:`run_phonons`.

    Cells: the *unit cell* is the structure the phonons were computed for (the input, relaxed when
    ``relax`` is on; ``n_atoms`` atoms); phonopy finds its *primitive cell* (``n_atoms_primitive``
    atoms), whose ``3 · n_atoms_primitive`` branches the band structure and DOS show.

    Attributes:
        atoms: the unit cell (a copy, relaxed when ``relax`` was on; no calculator attached).
        primitive: phonopy's primitive cell as ASE Atoms.
        spacegroup: space group of ``atoms`` found by phonopy with ``symprec``, e.g. ``"Fm-3m (225)"``.
        supercell_matrix: [3, 3] integer matrix: supercell = ``supercell_matrix @ atoms.cell``.
        supercell_widths: perpendicular widths of the supercell [3] (Å).
        n_supercell_atoms: atoms in the supercell.
        n_displacements: displaced supercells whose forces were evaluated.
        residual_force_max: the largest force (eV/Å) on the undisplaced supercell, subtracted from
            the displaced ones' forces; None when ``subtract_residual_forces`` was off.
        band_path: the path in ASE notation (``"GXWKGLUWLK,UX"``; a comma is a jump).
        band_segments: one ``(start, end)`` label pair per straight segment (``"Γ"`` for G).
        band_qpoints: per segment, q-points [n_k, 3] in reduced coordinates of the primitive
            cell's reciprocal lattice.
        band_distances: per segment, distance along the path [n_k] (Å⁻¹, without 2π), continuing
            across segments.
        band_frequencies: per segment, frequencies [n_k, n_bands] (THz; imaginary as negative).
        mesh: the q-mesh numbers [3] used for the DOS, thermal properties and the imaginary check.
        dos_frequencies: frequency points of the DOS [n] (THz).
        dos: total phonon DOS [n] (states/THz per primitive cell; integrates to ``n_bands``).
        temperatures: [n_T] (K).
        free_energy: Helmholtz vibrational free energy (zero-point energy included) [n_T]
            (eV per unit cell).
        entropy: vibrational entropy [n_T] (eV/K per unit cell).
        heat_capacity: heat capacity at constant volume [n_T] (eV/K per unit cell).
        zero_point_energy: Σ hν/2 over the mesh (eV per unit cell); equals ``free_energy`` at 0 K.
        lowest_frequency_mesh, lowest_frequency_path: lowest frequency (THz) on the q-mesh and
            along the band path (negative: imaginary).
        lowest_frequency_qpoint: where the overall lowest frequency is (reduced coordinates).
        imaginary_tol: frequencies below ``-imaginary_tol`` (THz) count as imaginary.
        relaxation: ``None`` without relaxation, else a dict with ``converged``, ``n_steps``,
            ``energy`` (eV), ``fmax_final`` (eV/Å), ``spacegroup_initial``, ``spacegroup_final``,
            ``symmetry_broken``.
        settings: the arguments of the run (JSON-able).
        model: a label of the calculator (shipped name, checkpoint path or calculator class).
        phonopy: the :class:`phonopy.Phonopy` object with the force constants (not serialised).
    """

    atoms: Atoms
    primitive: Atoms
    spacegroup: str
    supercell_matrix: np.ndarray
    supercell_widths: np.ndarray
    n_supercell_atoms: int
    n_displacements: int
    band_path: str
    band_segments: List[Tuple[str, str]]
    band_qpoints: List[np.ndarray]
    band_distances: List[np.ndarray]
    band_frequencies: List[np.ndarray]
    mesh: List[int]
    dos_frequencies: np.ndarray
    dos: np.ndarray
    temperatures: np.ndarray
    free_energy: np.ndarray
    entropy: np.ndarray
    heat_capacity: np.ndarray
    zero_point_energy: float
    lowest_frequency_mesh: float
    lowest_frequency_path: float
    lowest_frequency_qpoint: List[float]
    imaginary_tol: float
    relaxation: Optional[Dict[str, Any]] = None
    residual_force_max: Optional[float] = None
    settings: Dict[str, Any] = field(default_factory=dict)
    model: str = ""
    phonopy: Any = field(default=None, repr=False, compare=False)

    # ---------------------------------------------------------------- derived numbers
    @property
    def n_atoms(self) -> int:
        """Atoms in the unit cell."""
        return len(self.atoms)

    @property
    def n_atoms_primitive(self) -> int:
        """Atoms in the primitive cell."""
        return len(self.primitive)

    @property
    def n_bands(self) -> int:
        """Phonon branches: 3 × atoms in the primitive cell."""
        return 3 * self.n_atoms_primitive

    @property
    def lowest_frequency(self) -> float:
        """Lowest frequency on the mesh and the path (THz; negative: imaginary)."""
        return float(min(self.lowest_frequency_mesh, self.lowest_frequency_path))

    @property
    def has_imaginary_modes(self) -> bool:
        """True when a frequency on the mesh or the path lies below ``-imaginary_tol``."""
        return bool(self.lowest_frequency < -self.imaginary_tol)

    @property
    def free_energy_per_atom(self) -> np.ndarray:
        """Helmholtz free energy (eV/atom)."""
        return self.free_energy / self.n_atoms

    @property
    def entropy_per_atom(self) -> np.ndarray:
        """Entropy (eV/K/atom)."""
        return self.entropy / self.n_atoms

    @property
    def heat_capacity_per_atom(self) -> np.ndarray:
        """Heat capacity at constant volume (eV/K/atom); → 3 k_B at high temperature."""
        return self.heat_capacity / self.n_atoms

    @property
    def zero_point_energy_per_atom(self) -> float:
        """Zero-point energy (eV/atom)."""
        return self.zero_point_energy / self.n_atoms

    def frequencies_at(self, qpoint: Sequence[float]) -> np.ndarray:
        """Frequencies [n_bands] (THz) at ``qpoint`` (reduced coordinates of the primitive
        reciprocal lattice), from the force constants (needs the phonopy object)."""
        if self.phonopy is None:
            raise ValueError("this result has no phonopy object (it was loaded from JSON)")
        q = np.asarray(qpoint, dtype=float).reshape(1, 3)
        return np.asarray(self.phonopy.run_qpoints(q).frequencies[0], dtype=float)

    # ---------------------------------------------------------------- output
    def to_dict(self) -> dict:
        """JSON-serialisable summary (everything but the phonopy object); keys carry units."""
        n, n_prim = self.n_atoms, self.n_atoms_primitive
        return jsonable({
            "model": self.model,
            "settings": self.settings,
            "structure": atoms_to_dict(self.atoms),
            "spacegroup": self.spacegroup,
            "primitive": atoms_to_dict(self.primitive),
            "n_atoms": n,
            "n_atoms_primitive": n_prim,
            "n_bands": self.n_bands,
            "relaxation": self.relaxation,
            "supercell": {
                "matrix": self.supercell_matrix,
                "n_atoms": self.n_supercell_atoms,
                "perpendicular_widths_A": self.supercell_widths,
                "n_displacements": self.n_displacements,
                "residual_force_max_eV_per_A": self.residual_force_max,
            },
            "band_structure": {
                "path": self.band_path,
                "qpoints_basis": "reduced coordinates of the primitive cell's reciprocal lattice",
                "segments": [
                    {
                        "labels": list(labels),
                        "qpoints": q,
                        "distances_inv_A": d,
                        "frequencies_THz": f,
                    }
                    for labels, q, d, f in zip(
                        self.band_segments, self.band_qpoints, self.band_distances, self.band_frequencies,
                        strict=True,
                    )
                ],
            },
            "dos": {
                "mesh": self.mesh,
                "frequencies_THz": self.dos_frequencies,
                "dos_states_per_THz_per_primitive_cell": self.dos,
            },
            "thermal_properties": {
                "temperatures_K": self.temperatures,
                "free_energy_eV_per_cell": self.free_energy,
                "entropy_eV_per_K_per_cell": self.entropy,
                "heat_capacity_eV_per_K_per_cell": self.heat_capacity,
                "free_energy_eV_per_atom": self.free_energy_per_atom,
                "entropy_eV_per_K_per_atom": self.entropy_per_atom,
                "heat_capacity_eV_per_K_per_atom": self.heat_capacity_per_atom,
                "zero_point_energy_eV_per_cell": self.zero_point_energy,
                "zero_point_energy_eV_per_atom": self.zero_point_energy_per_atom,
            },
            "imaginary_modes": {
                "has_imaginary_modes": self.has_imaginary_modes,
                "lowest_frequency_THz": self.lowest_frequency,
                "lowest_frequency_mesh_THz": self.lowest_frequency_mesh,
                "lowest_frequency_path_THz": self.lowest_frequency_path,
                "lowest_frequency_qpoint": self.lowest_frequency_qpoint,
                "tolerance_THz": self.imaginary_tol,
            },
        })

    def save(self, out_dir: Union[str, os.PathLike]) -> Dict[str, Path]:
        """Write ``phonons.json`` and the plots ``band_structure.png`` (with the DOS alongside),
        ``dos.png`` and ``thermal_properties.png`` into ``out_dir``, each atomically.

        Returns the paths by name (``"json"``, ``"band_structure"``, ``"dos"``,
        ``"thermal_properties"``). The plots need matplotlib (``pip install mlip-torch[plot]``).
        """
        from mlip.io import atomic_write

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"json": out / JSON_NAME}
        write_json(paths["json"], self.to_dict())
        plots = (plot_band_structure, plot_dos, plot_thermal_properties)
        for name, plot in zip(PLOT_NAMES, plots, strict=True):
            key = name[: -len(".png")]
            paths[key] = out / name
            fig = plot(self)
            atomic_write(paths[key], lambda tmp, fig=fig: fig.savefig(tmp, format="png", dpi=130))
        return paths


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


# ----------------------------------------------------------------------------------------- plots
def _figure(figsize):
    require("matplotlib", "plot", "phonon plots")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=figsize, constrained_layout=True)
    FigureCanvasAgg(fig)
    return fig


def _title(result: PhononResult) -> str:
    title = f"{result.atoms.get_chemical_formula(mode='reduce')}  {result.spacegroup}"
    if result.model:
        title += f"  —  {result.model}"
    return title


def _shade_imaginary(ax, result: PhononResult, axis: str = "y") -> None:
    """Shade the negative-frequency region (imaginary modes, plotted as negative numbers)."""
    if result.lowest_frequency >= 0:
        return
    span = ax.axhspan if axis == "y" else ax.axvspan
    lo = min(result.lowest_frequency * 1.1, -0.05)
    span(lo, 0.0, color="tab:red", alpha=0.08, lw=0, label="imaginary (shown as negative)")


def _add_mev_axis(ax, axis: str = "y") -> None:
    """Secondary axis in meV (1 THz = 4.1357 meV)."""
    f = 1000.0 * EV_PER_THZ
    if axis == "y":
        sec = ax.secondary_yaxis("right", functions=(lambda x: x * f, lambda x: x / f))
        sec.set_ylabel("energy (meV)")
    else:
        sec = ax.secondary_xaxis("top", functions=(lambda x: x * f, lambda x: x / f))
        sec.set_xlabel("energy (meV)")


def plot_band_structure(result: PhononResult):
    """Band structure (frequency in THz vs path; imaginary modes negative) with the DOS alongside.

    Returns a matplotlib ``Figure`` (Agg canvas, no pyplot)."""
    fig = _figure((9.0, 5.0))
    ax, ax_dos = fig.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": [4, 1]})
    imaginary = result.has_imaginary_modes
    ticks: List[float] = []
    tick_labels: List[str] = []
    previous_end: Optional[str] = None
    segments = zip(result.band_segments, result.band_distances, result.band_frequencies, strict=True)
    for (start, end), d, f in segments:
        ax.plot(d, f, color="tab:blue", lw=1.2)
        if imaginary:
            neg = np.where(f < -result.imaginary_tol, f, np.nan)
            ax.plot(d, neg, color="tab:red", lw=1.6)
        if previous_end is None or not ticks or abs(ticks[-1] - d[0]) > 1e-9:
            ticks.append(float(d[0]))
            tick_labels.append(start)
        elif previous_end != start:  # a jump in the path: "K|U"
            tick_labels[-1] = f"{previous_end}|{start}"
        ticks.append(float(d[-1]))
        tick_labels.append(end)
        previous_end = end
    for x in ticks:
        ax.axvline(x, color="0.6", lw=0.6)
    ax.axhline(0.0, color="black", lw=0.6)
    _shade_imaginary(ax, result)
    ax.set_xticks(ticks)
    ax.set_xticklabels(tick_labels)
    ax.set_xlim(ticks[0], ticks[-1])
    ax.set_xlabel("wave vector")
    ax.set_ylabel("frequency (THz)")
    title = _title(result)
    if imaginary:
        title += f"\nimaginary modes: lowest {result.lowest_frequency:.3g} THz"
    ax.set_title(title, fontsize=10)
    ax_dos.plot(result.dos, result.dos_frequencies, color="black", lw=1.0)
    ax_dos.fill_betweenx(result.dos_frequencies, 0.0, result.dos, color="0.85")
    ax_dos.axhline(0.0, color="black", lw=0.6)
    ax_dos.set_xlim(left=0.0)
    ax_dos.set_xlabel("DOS (1/THz)")
    _add_mev_axis(ax_dos)
    lo, hi = _frequency_range(result)
    ax.set_ylim(lo, hi)
    return fig


def _frequency_range(result: PhononResult) -> Tuple[float, float]:
    """Plot range of frequencies: from 0 (or below the lowest imaginary mode) to above the highest."""
    lo = min(0.0, result.lowest_frequency)
    hi = max(float(max(f.max() for f in result.band_frequencies)), 1e-3)
    pad = 0.04 * (hi - lo)
    return (lo - pad if lo < -result.imaginary_tol else 0.0), hi + pad


def plot_dos(result: PhononResult):
    """Total phonon DOS (states/THz per primitive cell) vs frequency (THz). Returns a Figure."""
    fig = _figure((7.0, 4.2))
    ax = fig.subplots()
    ax.plot(result.dos_frequencies, result.dos, color="black", lw=1.0)
    ax.fill_between(result.dos_frequencies, 0.0, result.dos, color="tab:blue", alpha=0.25)
    ax.axvline(0.0, color="black", lw=0.6)
    _shade_imaginary(ax, result, axis="x")
    ax.set_xlim(*_frequency_range(result))
    ax.set_xlabel("frequency (THz)")
    ax.set_ylabel("DOS (states/THz per primitive cell)")
    ax.set_ylim(bottom=0.0)
    _add_mev_axis(ax, axis="x")
    ax.set_title(f"{_title(result)}\nq-mesh {'×'.join(str(n) for n in result.mesh)}", fontsize=10)
    return fig


def plot_thermal_properties(result: PhononResult):
    """Free energy (meV/atom), entropy and heat capacity (k_B/atom) vs temperature. Returns a Figure."""
    fig = _figure((7.0, 7.5))
    ax_f, ax_s, ax_c = fig.subplots(3, 1, sharex=True)
    t = result.temperatures
    ax_f.plot(t, 1000.0 * result.free_energy_per_atom, color="tab:blue")
    ax_f.set_ylabel("free energy F (meV/atom)")
    ax_f.axhline(0.0, color="0.6", lw=0.6)
    ax_s.plot(t, result.entropy_per_atom / KB_EV, color="tab:green")
    ax_s.set_ylabel("entropy S (k$_B$/atom)")
    ax_c.plot(t, result.heat_capacity_per_atom / KB_EV, color="tab:red", label="C$_V$")
    ax_c.axhline(3.0, color="0.5", lw=0.8, ls="--", label="Dulong–Petit, 3 k$_B$")
    ax_c.set_ylabel("heat capacity C$_V$ (k$_B$/atom)")
    ax_c.set_xlabel("temperature (K)")
    ax_c.set_ylim(bottom=0.0)
    ax_c.legend(loc="lower right")
    title = f"{_title(result)}\nharmonic, per atom"
    if result.has_imaginary_modes:
        title += " (imaginary modes left out)"
    ax_f.set_title(title, fontsize=10)
    for ax in (ax_f, ax_s, ax_c):
        if len(t) > 1:
            ax.set_xlim(t[0], t[-1])
        ax.grid(alpha=0.3)
    return fig


__all__ = [
    "MIN_WIDTH_CUTOFF_FACTOR",
    "PhononResult",
    "calculator_cutoff",
    "default_supercell",
    "plot_band_structure",
    "plot_dos",
    "plot_thermal_properties",
    "run_phonons",
]
