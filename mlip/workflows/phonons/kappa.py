"""Lattice thermal conductivity κ with phono3py: the Matbench Discovery protocol ("phonondb-v1").

>>> from ase.build import bulk
>>> from mlip.workflows.phonons import KappaSettings, run_kappa
>>> result = run_kappa(bulk("Cu", "fcc", a=3.6, cubic=True), "ase.calculators.emt:EMT",
...                    KappaSettings(fc2_supercell=2, fc3_supercell=2, mesh=11), progress=False)
>>> result.status, round(float(result.kappa_average[0]), 1)  # W/(m·K) at 300 K
('ok', 12.6)

The workflow (:func:`run_kappa`), by default the κ protocol of Matbench Discovery:

1. symmetry-preserving relaxation: ``FixSymmetry`` (symprec 0.01) + ``FrechetCellFilter``
   without shear (strain mask [1, 1, 1, 0, 0, 0]) + FIRE, fmax 1e-4 eV/Å, ≤ 300 steps; the space
   group before and after (spglib, ``symprec`` 1e-5) is compared: a change marks the structure
   ``symmetry_broken`` and stops the workflow before the third-order force constants;
2. phono3py with the fc2 and fc3 supercells (taken from ``atoms.info["fc2_supercell"]`` /
   ``["fc3_supercell"]`` as in the PhononDB structures file of Matbench Discovery, else given,
   else chosen by :func:`suggest_supercell`), displacements of 0.03 Å, forces in float64 one
   displaced supercell at a time (resumable through ``out_dir``), less the forces on the undisplaced
   supercells (phonopy's ``--fz``: zero for an exactly invariant model, so the protocol's numbers
   stay; not zero for an approximately invariant one), symmetrised fc2 and fc3;
3. harmonic frequencies on the q-mesh (``atoms.info["q_point_mesh"]``, else 20³): imaginary modes
   stop the workflow *before* the (expensive) fc3 forces; the result says so;
4. conductivity at 300 K by the Wigner transport equation in the relaxation-time approximation
   (particle/populations + coherences terms, phono3py ``transport_type="SMM19"``), isotope
   scattering on, boundary mean free path 1e6 µm. ``method="rta"`` gives the plain Peierls–
   Boltzmann RTA, ``method="lbte"`` the direct solution of the linearised Boltzmann equation.

Supercells that are too small are refused before anything is computed (:func:`check_supercell`):

* narrower than ``MIN_WIDTH_CUTOFF_FACTOR`` (1) × the model's cutoff (mlip calculators expose
  it; others are not checked): an atom would interact with its own periodic image. This is half
  the harmonic phonons' rule (:mod:`mlip.workflows.phonons.harmonic`: 2 × the cutoff) on purpose: Matbench
  Discovery prescribes fc3 supercells of about 7 Å, which must pass with 6 Å models. Between 1 and
  2 cutoffs the force constants fold in periodic images of the displaced atom; that is what the
  protocol does, and κ hardly notices (docs/workflows.md, "Supercell sizes"). So there is no
  warning, which would fire on nearly every material of the benchmark;
* fc3 supercells narrower than ``MIN_WIDTH_NN_FACTOR`` (2.5) × the nearest-neighbour distance
  d_nn (widths of the Minkowski-reduced supercell, a property of the lattice, not of its basis):
  narrower ones give κ that is wrong, often by orders of magnitude (the evidence, supercell series
  of EMT Cu and Cu₃Au, is in docs/workflows.md, "Supercell sizes"). The 2.5 (rather than 2.0)
  leaves room for first coordination shells spread over up to 1.25 d_nn in less symmetric
  structures. fc2 supercells only need the cutoff rule.

Units: κ in W/(m·K), frequencies and linewidths in THz, heat capacities in eV/K, temperatures
in K, lengths in Å. κ tensors are 3×3; mode-resolved κ is in Voigt order (xx, yy, zz, yz, xz,
xy) as in phono3py.
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path
from typing import Callable, Optional, Tuple, Union

import numpy as np
from ase import Atoms

from mlip.workflows.phonons.force_constant_inputs import check_crystal, float64_calculator
from mlip.workflows.phonons.kappa_result import KappaResult, load_kappa
from mlip.calculators.model_loading import calculator_cutoff
from mlip.workflows.phonons.cache import NO_SHEAR_CELL_MASK, cached_relaxation, check_model_cache
from mlip.workflows.phonons.supercells import (
    check_supercell_width,
    cutoff_width,
    parse_supercell,
    reduced_widths,
    suggest_supercell,
)
from mlip.workflows.phonons.settings import KappaSettings, with_overrides

#: fc3 supercells must be at least this many nearest-neighbour distances wide (see module docs)
MIN_WIDTH_NN_FACTOR = 2.5

#: fc2 and fc3 supercells must be at least this many model cutoffs wide (see module docs; the
#: harmonic phonons of :mod:`mlip.workflows.phonons.harmonic` ask for 2)
MIN_WIDTH_CUTOFF_FACTOR = 1.0

#: acoustic frequencies at Γ down to −tolerance (THz) are numerical noise (Matbench Discovery's
#: ``check_imaginary_freqs``); every other frequency on the mesh must be ≥ 0
GAMMA_ACOUSTIC_TOLERANCE = 0.01


# ----------------------------------------------------------------------------------------- helpers
def voigt_to_tensor(voigt) -> np.ndarray:
    """[..., 6] Voigt (xx, yy, zz, yz, xz, xy) → [..., 3, 3] symmetric tensors."""
    v = np.asarray(voigt, dtype=float)
    if v.shape[-1] != 6:
        raise ValueError(f"a Voigt array needs 6 components in its last axis, got shape {v.shape}")
    t = np.empty(v.shape[:-1] + (3, 3))
    for (i, j), k in zip(((0, 0), (1, 1), (2, 2), (1, 2), (0, 2), (0, 1)), range(6)):
        t[..., i, j] = v[..., k]
        t[..., j, i] = v[..., k]
    return t


# ----------------------------------------------------------------------------------------- supercells
def nearest_neighbor_distance(atoms: Atoms) -> float:
    """The largest, over the atoms, of each atom's distance to its nearest neighbour (Å), periodic
    images included: every atom's nearest neighbour lies within this distance."""
    from ase.neighborlist import neighbor_list

    if len(atoms) == 0:
        raise ValueError("the structure has no atoms")
    atoms = atoms.copy()
    atoms.pbc = True
    radius = 1.5 * (abs(atoms.cell.volume) / len(atoms)) ** (1.0 / 3.0)
    for _ in range(8):
        i, d = neighbor_list("id", atoms, radius)
        nearest = np.full(len(atoms), np.inf)
        np.minimum.at(nearest, i, d)
        if np.all(np.isfinite(nearest)):
            return float(nearest.max())
        radius *= 2.0
    raise ValueError("could not find the nearest neighbours of every atom (isolated atoms?)")


def min_supercell_width(atoms: Atoms, order: int = 3, cutoff: Optional[float] = None) -> Tuple[float, str]:
    """The smallest acceptable width (Å) of an fc2 (``order=2``) or fc3 (``order=3``) supercell of
    ``atoms`` and the reason: the model's ``cutoff`` (both orders) and, for fc3,
    ``MIN_WIDTH_NN_FACTOR`` × the nearest-neighbour distance."""
    if order not in (2, 3):
        raise ValueError(f"order must be 2 (fc2) or 3 (fc3), got {order!r}")
    need, reason = 0.0, ""
    if order == 3:
        d_nn = nearest_neighbor_distance(atoms)
        need = MIN_WIDTH_NN_FACTOR * d_nn
        reason = (f"{MIN_WIDTH_NN_FACTOR:g} × the nearest-neighbour distance {d_nn:.3f} Å: narrower fc3 "
                  "supercells can give meaningless phonon linewidths (the 1-atom fcc cell × 2 gives "
                  "κ ≈ 1e9 W/(m·K) or worse)")
    if cutoff_width(cutoff, MIN_WIDTH_CUTOFF_FACTOR) > need:
        need = cutoff_width(cutoff, MIN_WIDTH_CUTOFF_FACTOR)
        reason = (f"the model's cutoff {cutoff:g} Å: in a narrower supercell an atom interacts with its "
                  "own periodic image")
    return need, reason


def check_supercell(atoms: Atoms, matrix, order: int = 3, cutoff: Optional[float] = None,
                    label: Optional[str] = None) -> np.ndarray:
    """Raise ValueError when the supercell ``matrix`` of ``atoms`` is too small (see
    :func:`min_supercell_width`); the message names a supercell to use instead (by
    :func:`suggest_supercell`). Returns the supercell's reduced widths [3] (Å)."""
    need, reason = min_supercell_width(atoms, order, cutoff)
    return check_supercell_width(atoms, matrix, need, reason, name=label or f"fc{order}_supercell",
                                 suggest=suggest_supercell, widths_of=reduced_widths)


# ----------------------------------------------------------------------------------------- workflow
def run_kappa(
    atoms: Atoms,
    calculator,
    settings: Optional[KappaSettings] = None,
    *,
    out_dir: Union[str, os.PathLike, None] = None,
    progress: bool = True,
    raise_errors: bool = False,
    log: Optional[Callable[[str], None]] = None,
    **overrides,
) -> KappaResult:
    """Lattice thermal conductivity of a crystal (Matbench Discovery's κ protocol by default).

    Args:
        atoms: a crystal periodic in all three directions (not modified); its masses are used.
            ``atoms.info`` keys ``fc2_supercell``, ``fc3_supercell`` and ``q_point_mesh`` (the
            PhononDB structures of Matbench Discovery carry them) supply defaults.
        calculator: anything :func:`mlip.workflows.resolve_calculator` accepts; mlip potentials
            are evaluated in float64.
        settings: supercells, q-mesh, displacement, temperatures, method, scattering, relaxation,
            ... (see :class:`~mlip.workflows.phonons.settings.KappaSettings`; default: the protocol's).
        out_dir: folder for ``kappa.json`` (:meth:`KappaResult.save`) and a resumable cache
            (``cache/``: the relaxed structure, ``cache/fc2`` and ``cache/fc3`` with the forces of
            each displaced supercell). A killed run resumes without recomputing finished forces;
            conductivity settings (mesh, temperatures, method, isotopes, boundary) may change
            between runs. A cache made by another model is refused.
        progress: progress bars for the relaxation and the force sets.
        raise_errors: re-raise exceptions of the relaxation, force and conductivity stages
            instead of returning a ``"failed"`` result.
        log: called with one line as each stage (relax, fc2, fc3, conductivity) starts, e.g.
            ``print`` for the logs of runs without progress bars.
        **overrides: settings by keyword, instead of or on top of ``settings``
            (``run_kappa(atoms, calc, fc3_supercell=2, method="rta")``).

    Returns:
        :class:`KappaResult` (also saved to ``out_dir`` when given).

    Raises:
        ValueError: invalid arguments, a non-periodic structure, a too-small supercell (the message
            names one to use instead), or an ``out_dir`` cache made by another model or for other
            structures.
        TypeError: ``settings`` of another class, or a keyword that is no setting.
        ImportError: phono3py is missing (``pip install 'mlip-torch[phonons]'``).
    """
    from mlip.calculators.model_loading import describe_model
    from mlip.workflows.phonons.phonopy_bridge import import_phono3py

    t_start = time.perf_counter()
    check_crystal(atoms, workflow="the thermal-conductivity workflow")
    s = with_overrides(KappaSettings, settings, overrides, "run_kappa")
    temps = list(s.temperatures)
    mesh_list = s.q_mesh(atoms.info)
    import_phono3py()
    calc = float64_calculator(calculator)
    cutoff = calculator_cutoff(calc)
    unit = atoms.copy()
    unit.calc = None
    unit.set_constraint()
    unit.info = {}
    fc2_matrix, fc3_matrix = _supercells(unit, atoms.info or {}, s.fc2_supercell, s.fc3_supercell, cutoff,
                                         s.check_supercells)
    record = {
        "fc2_supercell": fc2_matrix.tolist(),
        "fc3_supercell": fc3_matrix.tolist(),
        "mesh": mesh_list,
        "displacement_A": float(s.displacement),
        "temperatures_K": temps,
        "method": s.method,
        "isotopes": bool(s.isotopes),
        "boundary_mfp_um": None if s.boundary_mfp is None else float(s.boundary_mfp),
        "relax": bool(s.relax),
        "fmax_eV_per_A": float(s.fmax),
        "relax_steps": int(s.relax_steps),
        "symprec": float(s.symprec),
        "fix_symmetry_symprec": float(s.fix_symmetry_symprec),
        "cell_mask": list(NO_SHEAR_CELL_MASK),
        "stop_on_broken_symmetry": bool(s.stop_on_broken_symmetry),
        "check_supercells": bool(s.check_supercells),
        "gamma_acoustic_tolerance_THz": GAMMA_ACOUSTIC_TOLERANCE,
        "model_cutoff_A": cutoff,
        "subtract_residual_forces": bool(s.subtract_residual_forces),
    }
    model = describe_model(calc, calculator if isinstance(calculator, (str, os.PathLike)) else None)
    result = KappaResult(atoms=unit, model=model, settings=record, method=s.method, mesh=mesh_list,
                         temperatures=np.array(temps), fc2_supercell=fc2_matrix, fc3_supercell=fc3_matrix)

    cache = Path(out_dir) / "cache" if out_dir is not None else None
    if cache is not None:
        check_model_cache(cache, calc)

    stage = "relax"
    try:
        _run_stages(result, calc, cache, s, progress=progress, log=log or (lambda line: None))
    except Exception as err:  # recorded as a failed material; KeyboardInterrupt passes through
        stage = result.failed_stage or "relax"
        if raise_errors or _is_cache_error(err):
            raise
        result.failed = True
        result.failed_stage = stage
        result.error = f"{type(err).__name__}: {err}"
        result.kappa = result.kappa_particle = result.kappa_coherence = None
    else:
        result.failed_stage = None
    result.timings["total"] = time.perf_counter() - t_start
    if out_dir is not None:
        result.save(out_dir)
    return result


def _supercells(unit: Atoms, info: dict, fc2_supercell, fc3_supercell, cutoff: Optional[float],
                check_supercells: bool) -> Tuple[np.ndarray, np.ndarray]:
    """The fc2 and fc3 supercell matrices [3, 3]: given, else from ``info`` (the structure's
    ``atoms.info``), else for fc3 :func:`suggest_supercell` at the minimum width and for fc2 the fc3
    one; too small ones are refused (:func:`check_supercell`) when ``check_supercells``."""
    fc3_value = fc3_supercell if fc3_supercell is not None else info.get("fc3_supercell")
    fc2_value = fc2_supercell if fc2_supercell is not None else info.get("fc2_supercell")
    if fc3_value is None:
        fc3_matrix = suggest_supercell(unit, min_supercell_width(unit, 3, cutoff)[0])
    else:
        fc3_matrix = parse_supercell(fc3_value, "fc3_supercell")
    fc2_matrix = fc3_matrix.copy() if fc2_value is None else parse_supercell(fc2_value, "fc2_supercell")
    if check_supercells:
        check_supercell(unit, fc3_matrix, 3, cutoff)
        check_supercell(unit, fc2_matrix, 2, cutoff)
    return fc2_matrix, fc3_matrix


def _is_cache_error(err: Exception) -> bool:
    return isinstance(err, ValueError) and "use another output folder" in str(err)


def has_imaginary_modes(frequencies: np.ndarray, gamma_index: int = 0,
                        tolerance: float = GAMMA_ACOUSTIC_TOLERANCE) -> bool:
    """Matbench Discovery's test on frequencies [n_q, n_bands] (THz, bands ascending) of a mesh
    whose q-point ``gamma_index`` is Γ: an optical mode at Γ below 0, an acoustic mode at Γ below
    −``tolerance``, or any frequency elsewhere below 0. All-NaN counts as imaginary."""
    f = np.asarray(frequencies, dtype=float)
    if f.size == 0 or np.all(np.isnan(f)):
        return True
    gamma = f[gamma_index]
    others = np.delete(f, gamma_index, axis=0)
    return bool(np.any(gamma[3:] < 0) or np.any(gamma[:3] < -tolerance) or np.any(others < 0))


def _displaced(n: int) -> str:
    return f"{n} displaced supercell{'' if n == 1 else 's'}"


def _run_stages(result: KappaResult, calc, cache: Optional[Path], s: KappaSettings, *, progress: bool,
                log: Callable[[str], None]) -> None:
    """Relaxation, fc2, imaginary-mode check, fc3 and conductivity, filling ``result`` in place
    (``result.failed_stage`` tracks the stage in case of an exception)."""
    result.failed_stage = "relax"
    t0 = time.perf_counter()
    _relax_stage(result, calc, cache, s, progress=progress, log=log)
    result.timings["relax"] = time.perf_counter() - t0

    result.failed_stage = "fc2"
    ph3 = _phono3py(result, s.symprec, s.displacement)
    t0 = time.perf_counter()
    _fc2_stage(result, ph3, calc, cache, progress, log, s.subtract_residual_forces)
    result.timings["fc2"] = time.perf_counter() - t0
    if result.imaginary_modes or (result.symmetry_broken and s.stop_on_broken_symmetry):
        return

    result.failed_stage = "fc3"
    t0 = time.perf_counter()
    _fc3_stage(result, ph3, calc, cache, progress, log, s.subtract_residual_forces)
    result.timings["fc3"] = time.perf_counter() - t0

    result.failed_stage = "conductivity"
    log(f"stage conductivity: {result.method}, q-mesh {result.mesh}, "
        f"{', '.join(f'{t:g}' for t in result.temperatures)} K")
    t0 = time.perf_counter()
    ph3.init_phph_interaction()
    ph3.run_thermal_conductivity(
        is_LBTE=result.method == "lbte",
        temperatures=list(result.temperatures),
        is_isotope=bool(s.isotopes),
        boundary_mfp=s.boundary_mfp,
        transport_type="SMM19" if result.method == "wigner" else None,
    )
    _collect_conductivity(result, ph3.thermal_conductivity)
    result.timings["conductivity"] = time.perf_counter() - t0


def _relax_stage(result: KappaResult, calc, cache: Optional[Path], s: KappaSettings, *, progress: bool,
                 log: Callable[[str], None]) -> None:
    """Symmetry-preserving relaxation without shear (reused from ``cache`` when input and settings
    match), or without ``relax`` only the space group; no warnings: a changed space group is the
    result's status."""
    from mlip.workflows.relax import spacegroup

    if not s.relax:
        result.spacegroup_initial = result.spacegroup_final = spacegroup(result.atoms, s.symprec)
        return
    log(f"stage relax: symmetry-preserving relaxation, fmax {s.fmax:g} eV/Å, at most {s.relax_steps} steps")
    relaxation = cached_relaxation(result.atoms, calc, cache, fmax=s.fmax, steps=s.relax_steps,
                                   symprec=s.symprec, fix_symmetry_symprec=s.fix_symmetry_symprec,
                                   cell_mask=NO_SHEAR_CELL_MASK,
                                   key_extra={"cell_mask": list(NO_SHEAR_CELL_MASK)}, progress=progress)
    info = relaxation.info
    sg0, sg1 = info["spacegroup_initial"], info["spacegroup_final"]
    result.atoms = relaxation.atoms
    result.relaxation = {key: info[key] for key in ("converged", "n_steps", "energy_eV",
                                                    "fmax_final_eV_per_A")}
    result.spacegroup_initial, result.spacegroup_final = sg0, sg1
    result.symmetry_broken = sg0 is not None and sg1 is not None and sg0 != sg1


def _phono3py(result: KappaResult, symprec: float, displacement: float):
    """The Phono3py object of the (relaxed) unit cell with the fc2 and fc3 supercells, its
    displacements generated; records the primitive cell's size and the supercells' widths."""
    from phono3py import Phono3py

    from mlip.workflows.phonons.phonopy_bridge import to_phonopy_atoms

    with warnings.catch_warnings():
        # phonopy 4 notes that 'auto' picked a non-identity primitive matrix: we ask for it on purpose.
        warnings.filterwarnings("ignore", message="primitive_matrix defaulted to 'auto'")
        ph3 = Phono3py(to_phonopy_atoms(result.atoms), supercell_matrix=result.fc3_supercell,
                       phonon_supercell_matrix=result.fc2_supercell, primitive_matrix="auto",
                       symprec=symprec, log_level=0)
    result.phono3py = ph3
    result.n_atoms_primitive = len(ph3.primitive)
    result.fc2_widths = reduced_widths(ph3.phonon_supercell.cell)
    result.fc3_widths = reduced_widths(ph3.supercell.cell)
    ph3.mesh_numbers = result.mesh
    ph3.generate_displacements(distance=float(displacement))
    return ph3


def _fc2_stage(result: KappaResult, ph3, calc, cache: Optional[Path], progress: bool,
               log: Callable[[str], None], subtract_residual: bool) -> None:
    """fc2 from the forces of the displaced fc2 supercells (resumable through ``cache/fc2``; less
    those of the undisplaced one, ``cache/fc2-perfect``, when ``subtract_residual``), the harmonic
    frequencies on the q-mesh and the imaginary-mode check."""
    from mlip.workflows.phonons.displacement_forces import displacement_forces, subtract_residual_forces
    from mlip.workflows.phonons.phonopy_bridge import to_ase_atoms

    fc2_structures = [to_ase_atoms(s) for s in ph3.phonon_supercells_with_displacements]
    result.n_displacements_fc2 = len(fc2_structures)
    log(f"stage fc2: forces of {_displaced(len(fc2_structures))} ({len(ph3.phonon_supercell)} atoms each)")
    forces = displacement_forces(fc2_structures, calc, cache_dir=None if cache is None else cache / "fc2",
                                 label="fc2", progress=progress)
    if subtract_residual:
        forces, result.residual_force_max_fc2 = subtract_residual_forces(
            forces, to_ase_atoms(ph3.phonon_supercell), calc,
            None if cache is None else cache / "fc2-perfect")
    ph3.phonon_forces = np.array(forces, dtype=float)
    ph3.produce_fc2()
    ph3.symmetrize_fc2()
    ph3.init_phph_interaction()
    ph3.run_phonon_solver()
    frequencies, _, grid_address = ph3.get_phonon_data()
    frequencies = np.asarray(frequencies, dtype=float)
    gamma_index = int(np.flatnonzero(np.all(np.asarray(grid_address) == 0, axis=1))[0])
    result.lowest_frequency = float(np.nanmin(frequencies))
    result.imaginary_modes = has_imaginary_modes(frequencies, gamma_index)


def _fc3_stage(result: KappaResult, ph3, calc, cache: Optional[Path], progress: bool,
               log: Callable[[str], None], subtract_residual: bool) -> None:
    """fc3 from the forces of the displaced fc3 supercells (resumable through ``cache/fc3``; less
    those of the undisplaced one when ``subtract_residual``, kept in ``cache/fc3-perfect``, or read
    from ``cache/fc2-perfect`` when the two supercells are the same; pairs phono3py skips as too far
    apart carry zero forces)."""
    from mlip.workflows.phonons.displacement_forces import displacement_forces, subtract_residual_forces
    from mlip.workflows.phonons.phonopy_bridge import to_ase_atoms

    fc3_structures = [None if s is None else to_ase_atoms(s) for s in ph3.supercells_with_displacements]
    present = [k for k, s in enumerate(fc3_structures) if s is not None]
    result.n_displacements_fc3 = len(present)
    log(f"stage fc3: forces of {_displaced(len(present))} ({len(ph3.supercell)} atoms each)")
    computed = displacement_forces([fc3_structures[k] for k in present], calc,
                                   cache_dir=None if cache is None else cache / "fc3", label="fc3",
                                   progress=progress)
    if subtract_residual:
        same = np.array_equal(result.fc2_supercell, result.fc3_supercell)
        computed, result.residual_force_max_fc3 = subtract_residual_forces(
            computed, to_ase_atoms(ph3.supercell), calc,
            None if cache is None else cache / ("fc2-perfect" if same else "fc3-perfect"))
    n_super = len(ph3.supercell)
    fc3_forces = np.zeros((len(fc3_structures), n_super, 3))
    for k, f in zip(present, computed):
        fc3_forces[k] = f
    ph3.forces = fc3_forces
    ph3.produce_fc3()
    ph3.symmetrize_fc3()


def _collect_conductivity(result: KappaResult, tc) -> None:
    """Copy phono3py's conductivity (first smearing/tetrahedron setting) into ``result``."""
    from mlip.workflows.phonons.kappa_metrics import mode_kappa_total

    heat = np.asarray(tc.mode_heat_capacities, dtype=float)  # [T, q, band]
    result.qpoints = np.asarray(tc.qpoints, dtype=float)
    result.grid_weights = np.asarray(tc.grid_weights, dtype=np.int64)
    result.frequencies = np.asarray(tc.frequencies, dtype=float)  # at the irreducible q-points
    result.heat_capacities = heat
    result.gamma = np.asarray(tc.gamma, dtype=float)[0]
    if result.method == "wigner":
        matrix = np.asarray(tc.mode_kappa_matrix, dtype=float)[0]  # [T, q, band, band, 6]
        n_band = matrix.shape[2]
        diagonal = matrix[:, :, np.arange(n_band), np.arange(n_band), :]  # [T, q, band, 6]
        coherence = matrix.copy()
        coherence[:, :, np.arange(n_band), np.arange(n_band), :] = 0.0
        result.mode_kappa_particle = diagonal
        result.mode_kappa = mode_kappa_total(diagonal, coherence, heat)
        result.kappa = voigt_to_tensor(np.asarray(tc.kappa, dtype=float)[0])
        result.kappa_particle = voigt_to_tensor(np.asarray(tc.kappa_intra, dtype=float)[0])
        result.kappa_coherence = voigt_to_tensor(np.asarray(tc.kappa_inter, dtype=float)[0])
    else:
        result.mode_kappa = np.asarray(tc.mode_kappa, dtype=float)[0]
        result.kappa = voigt_to_tensor(np.asarray(tc.kappa, dtype=float)[0])
        result.mode_kappa_particle = None
        result.kappa_particle = result.kappa_coherence = None


__all__ = [
    "GAMMA_ACOUSTIC_TOLERANCE",
    "MIN_WIDTH_CUTOFF_FACTOR",
    "MIN_WIDTH_NN_FACTOR",
    "KappaResult",
    "calculator_cutoff",
    "check_supercell",
    "has_imaginary_modes",
    "load_kappa",
    "min_supercell_width",
    "nearest_neighbor_distance",
    "reduced_widths",
    "run_kappa",
    "suggest_supercell",
    "voigt_to_tensor",
]
