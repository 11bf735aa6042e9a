"""The outcome of the harmonic phonon workflow (:class:`PhononResult`), its JSON file and its plots.

:func:`mlip.workflows.phonons.harmonic.run_phonons` produces a :class:`PhononResult`;
:meth:`PhononResult.save` writes ``phonons.json`` (layout in :meth:`PhononResult.to_dict`) and the
band-structure, DOS and thermal-property figures (:func:`plot_band_structure`, :func:`plot_dos`,
:func:`plot_thermal_properties`). Units: frequencies in THz, energies in eV, temperatures in K.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
from ase import Atoms

from mlip.extras import require
from mlip.io import atoms_to_dict, jsonable, write_json

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
    """Outcome of :func:`~mlip.workflows.phonons.harmonic.run_phonons`.

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
    "EV_PER_THZ",
    "JSON_NAME",
    "KB_EV",
    "PLOT_NAMES",
    "PhononResult",
    "plot_band_structure",
    "plot_dos",
    "plot_thermal_properties",
]
