"""The outcome of a κ calculation (:class:`KappaResult`) and its JSON form (``kappa.json``).

:func:`mlip.workflows.phonons.kappa.run_kappa` produces a :class:`KappaResult`; :meth:`KappaResult.save`
writes it, :func:`load_kappa` reads it back, and the κ metrics
(:mod:`mlip.workflows.phonons.kappa_metrics`) score it against a reference. The layout of the JSON file is
in :meth:`KappaResult.to_dict`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import numpy as np
from ase import Atoms

from mlip.io import atoms_from_dict, atoms_to_dict, jsonable, read_json, write_json

__all__ = ["FORMAT", "JSON_NAME", "VOIGT", "KappaResult", "load_kappa"]

#: Voigt order of phono3py's tensors and of the mode-resolved arrays
VOIGT = ("xx", "yy", "zz", "yz", "xz", "xy")

JSON_NAME = "kappa.json"
FORMAT = "mlip-kappa/1"


def _array(value, dtype=float) -> Optional[np.ndarray]:
    """JSON list → array (None stays None; null entries → NaN)."""
    if value is None:
        return None
    if dtype is float:
        return np.array(value, dtype=object).astype(float) if _has_none(value) else np.asarray(value, float)
    return np.asarray(value, dtype=dtype)


def _has_none(value) -> bool:
    if value is None:
        return True
    if isinstance(value, list):
        return any(_has_none(v) for v in value)
    return False


@dataclass
class KappaResult:
    """Outcome of :func:`mlip.workflows.phonons.kappa.run_kappa`.

    Cells: the *unit cell* ``atoms`` (the input, relaxed when ``relax`` is on); supercell matrices
    act on it (supercell = ``matrix @ atoms.cell``); phono3py's *primitive cell* defines the q-mesh
    and the ``n_bands = 3 × n_atoms_primitive`` phonon branches.

    Status: exactly one of ``"ok"``, ``"failed"`` (an exception; ``error`` holds its text and
    ``failed_stage`` where it happened), ``"imaginary_modes"`` (dynamically unstable on the q-mesh:
    no fc3, no κ) or ``"symmetry_broken"`` (the relaxation changed the space group: no fc3, no κ,
    unless ``stop_on_broken_symmetry=False``, which computes κ but keeps this status). κ is
    present for ``"ok"`` and, with ``stop_on_broken_symmetry=False``, ``"symmetry_broken"``.

    Attributes:
        atoms: the unit cell used (no calculator attached).
        model: a label of the calculator.
        settings: the arguments of the run (JSON-able).
        failed, error, failed_stage: see Status (stages: ``"relax"``, ``"fc2"``, ``"fc3"``,
            ``"conductivity"``).
        imaginary_modes: None when not reached (failed before), else whether the harmonic
            frequencies on the q-mesh had imaginary modes (Γ acoustic below
            −``GAMMA_ACOUSTIC_TOLERANCE`` THz, any other frequency below 0).
        symmetry_broken: the space group changed during relaxation.
        spacegroup_initial, spacegroup_final: e.g. ``"Fm-3m (225)"`` (spglib, ``symprec``).
        relaxation: None without relaxation, else ``converged``, ``n_steps``, ``energy_eV``,
            ``fmax_final_eV_per_A``.
        n_atoms_primitive: atoms in phono3py's primitive cell.
        fc2_supercell, fc3_supercell: [3, 3] integer matrices.
        fc2_widths, fc3_widths: perpendicular widths [3] of the (Minkowski-reduced) supercells (Å).
        n_displacements_fc2, n_displacements_fc3: displaced supercells (fc3: 0 when not reached).
        residual_force_max_fc2, residual_force_max_fc3: the largest force (eV/Å) on the undisplaced
            supercell, subtracted from the displaced ones' forces; None when not subtracted (or
            not reached).
        lowest_frequency: lowest harmonic frequency on the q-mesh (THz; negative: imaginary).
        method: ``"wigner"``, ``"rta"`` or ``"lbte"``.
        mesh: q-mesh [3].
        temperatures: [n_T] (K).
        kappa: total κ tensors [n_T, 3, 3] (W/(m·K)); None unless status ``"ok"``.
        kappa_particle, kappa_coherence: Wigner only: populations (band-diagonal, Peierls–Boltzmann
            RTA) and coherences (band-off-diagonal) parts [n_T, 3, 3]; ``kappa`` is their sum.
        qpoints: irreducible q-points [n_q, 3] (reduced coordinates of the primitive cell's
            reciprocal lattice).
        grid_weights: multiplicity of each irreducible q-point [n_q] (they sum to the mesh size).
        frequencies: [n_q, n_bands] (THz).
        mode_kappa: κ per irreducible q-point and band, Voigt [n_T, n_q, n_bands, 6] (W/(m·K)),
            multiplicity included, so that ``kappa = Σ_q,band mode_kappa / Σ grid_weights``.
            Wigner: populations (band-diagonal) term plus each mode's share of the coherence
            terms (see :func:`mlip.workflows.phonons.kappa_metrics.mode_kappa_total`) — the quantity
            κ_SRME compares.
        mode_kappa_particle: Wigner only: the populations term of ``mode_kappa``.
        heat_capacities: mode heat capacities [n_T, n_q, n_bands] (eV/K).
        gamma: phonon linewidths as phono3py's Γ (imaginary part of the self-energy, half the
            FWHM) [n_T, n_q, n_bands] (THz); lifetime τ = 1 / (4π Γ).
        timings: wall time of each stage (s).
        phono3py: the :class:`phono3py.Phono3py` object (not serialised; None when loaded).
    """

    atoms: Atoms
    model: str = ""
    settings: Dict[str, Any] = field(default_factory=dict)
    failed: bool = False
    error: Optional[str] = None
    failed_stage: Optional[str] = None
    imaginary_modes: Optional[bool] = None
    symmetry_broken: bool = False
    spacegroup_initial: Optional[str] = None
    spacegroup_final: Optional[str] = None
    relaxation: Optional[Dict[str, Any]] = None
    n_atoms_primitive: Optional[int] = None
    fc2_supercell: Optional[np.ndarray] = None
    fc3_supercell: Optional[np.ndarray] = None
    fc2_widths: Optional[np.ndarray] = None
    fc3_widths: Optional[np.ndarray] = None
    n_displacements_fc2: int = 0
    n_displacements_fc3: int = 0
    residual_force_max_fc2: Optional[float] = None
    residual_force_max_fc3: Optional[float] = None
    lowest_frequency: Optional[float] = None
    method: str = "wigner"
    mesh: Optional[List[int]] = None
    temperatures: Optional[np.ndarray] = None
    kappa: Optional[np.ndarray] = None
    kappa_particle: Optional[np.ndarray] = None
    kappa_coherence: Optional[np.ndarray] = None
    qpoints: Optional[np.ndarray] = None
    grid_weights: Optional[np.ndarray] = None
    frequencies: Optional[np.ndarray] = None
    mode_kappa: Optional[np.ndarray] = None
    mode_kappa_particle: Optional[np.ndarray] = None
    heat_capacities: Optional[np.ndarray] = None
    gamma: Optional[np.ndarray] = None
    timings: Dict[str, float] = field(default_factory=dict)
    phono3py: Any = field(default=None, repr=False, compare=False)

    # ---------------------------------------------------------------- derived numbers
    @property
    def status(self) -> str:
        """``"failed"``, ``"imaginary_modes"``, ``"symmetry_broken"`` or ``"ok"`` (in this order of
        precedence; ``"failed"`` also for a result without κ and without a flag)."""
        if self.failed:
            return "failed"
        if self.imaginary_modes:
            return "imaginary_modes"
        if self.symmetry_broken:
            return "symmetry_broken"
        return "ok" if self.kappa is not None else "failed"

    @property
    def ok(self) -> bool:
        """True when κ was computed for a stable structure that kept its space group."""
        return self.status == "ok"

    @property
    def n_atoms(self) -> int:
        """Atoms in the unit cell."""
        return len(self.atoms)

    @property
    def kappa_average(self) -> Optional[np.ndarray]:
        """Trace/3 of ``kappa`` [n_T] (W/(m·K)): the scalar κ of the benchmark."""
        return None if self.kappa is None else np.trace(self.kappa, axis1=-2, axis2=-1) / 3.0

    def kappa_at(self, temperature: float = 300.0) -> np.ndarray:
        """The κ tensor [3, 3] (W/(m·K)) at ``temperature`` (K); ValueError when not computed."""
        if self.kappa is None:
            raise ValueError(f"no κ in this result (status {self.status!r})")
        return self.kappa[_temperature_index(self.temperatures, temperature)]

    # ---------------------------------------------------------------- output
    def to_dict(self) -> dict:
        """JSON-serialisable result (everything but the phono3py object); keys carry units.

        Layout (see also the module docstring)::

            format, model, status, failed, error, failed_stage, imaginary_modes,
            symmetry_broken, spacegroup_initial, spacegroup_final, settings, structure
            {symbols, cell_A, positions_A, masses_amu}, n_atoms, n_atoms_primitive, relaxation,
            supercells {fc2, fc3: {matrix, n_atoms, widths_A, n_displacements}},
            lowest_frequency_THz, timings_s, versions,
            conductivity (null unless status "ok") {
                method, mesh, temperatures_K, tensor_layout "3x3",
                kappa_W_per_mK [n_T][3][3], kappa_average_W_per_mK [n_T],
                kappa_particle_W_per_mK, kappa_coherence_W_per_mK ([n_T][3][3] or null),
                modes {voigt_order, normalisation, qpoints [n_q][3], grid_weights [n_q],
                       frequencies_THz [n_q][n_bands],
                       mode_kappa_W_per_mK [n_T][n_q][n_bands][6],
                       mode_kappa_particle_W_per_mK (same or null),
                       heat_capacities_eV_per_K [n_T][n_q][n_bands], gamma_THz (same)}}
        """
        conductivity = None
        if self.kappa is not None:
            conductivity = {
                "method": self.method,
                "mesh": self.mesh,
                "temperatures_K": self.temperatures,
                "tensor_layout": "3x3",
                "kappa_W_per_mK": self.kappa,
                "kappa_average_W_per_mK": self.kappa_average,
                "kappa_particle_W_per_mK": self.kappa_particle,
                "kappa_coherence_W_per_mK": self.kappa_coherence,
                "modes": {
                    "voigt_order": list(VOIGT),
                    "normalisation": "kappa = sum over q-points and bands of mode_kappa / sum(grid_weights)",
                    "qpoints": self.qpoints,
                    "grid_weights": self.grid_weights,
                    "frequencies_THz": self.frequencies,
                    "mode_kappa_W_per_mK": self.mode_kappa,
                    "mode_kappa_particle_W_per_mK": self.mode_kappa_particle,
                    "heat_capacities_eV_per_K": self.heat_capacities,
                    "gamma_THz": self.gamma,
                },
            }

        def supercell(matrix, widths, n_disp, residual):
            if matrix is None:
                return None
            return {"matrix": matrix, "n_atoms": round(abs(np.linalg.det(matrix))) * len(self.atoms),
                    "widths_A": widths, "n_displacements": n_disp, "residual_force_max_eV_per_A": residual}

        return jsonable({
            "format": FORMAT,
            "model": self.model,
            "status": self.status,
            "failed": self.failed,
            "error": self.error,
            "failed_stage": self.failed_stage,
            "imaginary_modes": self.imaginary_modes,
            "symmetry_broken": self.symmetry_broken,
            "spacegroup_initial": self.spacegroup_initial,
            "spacegroup_final": self.spacegroup_final,
            "settings": self.settings,
            "structure": atoms_to_dict(self.atoms),
            "n_atoms": self.n_atoms,
            "n_atoms_primitive": self.n_atoms_primitive,
            "relaxation": self.relaxation,
            "supercells": {
                "fc2": supercell(self.fc2_supercell, self.fc2_widths, self.n_displacements_fc2,
                                 self.residual_force_max_fc2),
                "fc3": supercell(self.fc3_supercell, self.fc3_widths, self.n_displacements_fc3,
                                 self.residual_force_max_fc3),
            },
            "lowest_frequency_THz": self.lowest_frequency,
            "conductivity": conductivity,
            "timings_s": self.timings,
            "versions": _versions(),
        })

    @classmethod
    def from_dict(cls, data: dict) -> "KappaResult":
        """Rebuild a result from :meth:`to_dict` output (no phono3py object)."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not an mlip κ result (format {FORMAT!r} expected)")
        sc = data.get("supercells") or {}
        fc2, fc3 = sc.get("fc2") or {}, sc.get("fc3") or {}
        cond = data.get("conductivity") or {}
        modes = cond.get("modes") or {}
        temps = cond.get("temperatures_K", data.get("settings", {}).get("temperatures_K"))
        return cls(
            atoms=atoms_from_dict(data["structure"]),
            model=data.get("model", ""),
            settings=data.get("settings", {}),
            failed=bool(data.get("failed", False)),
            error=data.get("error"),
            failed_stage=data.get("failed_stage"),
            imaginary_modes=data.get("imaginary_modes"),
            symmetry_broken=bool(data.get("symmetry_broken", False)),
            spacegroup_initial=data.get("spacegroup_initial"),
            spacegroup_final=data.get("spacegroup_final"),
            relaxation=data.get("relaxation"),
            n_atoms_primitive=data.get("n_atoms_primitive"),
            fc2_supercell=_array(fc2.get("matrix"), int),
            fc3_supercell=_array(fc3.get("matrix"), int),
            fc2_widths=_array(fc2.get("widths_A")),
            fc3_widths=_array(fc3.get("widths_A")),
            n_displacements_fc2=int(fc2.get("n_displacements") or 0),
            n_displacements_fc3=int(fc3.get("n_displacements") or 0),
            residual_force_max_fc2=fc2.get("residual_force_max_eV_per_A"),
            residual_force_max_fc3=fc3.get("residual_force_max_eV_per_A"),
            lowest_frequency=data.get("lowest_frequency_THz"),
            method=cond.get("method", data.get("settings", {}).get("method", "wigner")),
            mesh=cond.get("mesh", data.get("settings", {}).get("mesh")),
            temperatures=_array(temps),
            kappa=_array(cond.get("kappa_W_per_mK")),
            kappa_particle=_array(cond.get("kappa_particle_W_per_mK")),
            kappa_coherence=_array(cond.get("kappa_coherence_W_per_mK")),
            qpoints=_array(modes.get("qpoints")),
            grid_weights=_array(modes.get("grid_weights"), np.int64),
            frequencies=_array(modes.get("frequencies_THz")),
            mode_kappa=_array(modes.get("mode_kappa_W_per_mK")),
            mode_kappa_particle=_array(modes.get("mode_kappa_particle_W_per_mK")),
            heat_capacities=_array(modes.get("heat_capacities_eV_per_K")),
            gamma=_array(modes.get("gamma_THz")),
            timings=dict(data.get("timings_s") or {}),
        )

    def save(self, out_dir: Union[str, os.PathLike], compress: bool = False) -> Path:
        """Write :meth:`to_dict` to ``out_dir/kappa.json`` (``kappa.json.gz``, gzip-compressed
        compact JSON, with ``compress=True``: the mode-resolved arrays of a large, low-symmetry
        cell on a 20³ mesh reach tens of MB), atomically. Returns the path.
        :func:`load_kappa` reads either."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        path = out / (JSON_NAME + (".gz" if compress else ""))
        write_json(path, self.to_dict(), compress=compress)
        return path


def load_kappa(path: Union[str, os.PathLike]) -> KappaResult:
    """Read a :class:`KappaResult` saved by :meth:`KappaResult.save` (``.json`` or ``.json.gz``;
    a folder is searched for ``kappa.json`` then ``kappa.json.gz``)."""
    path = Path(path)
    if path.is_dir():
        for name in (JSON_NAME, JSON_NAME + ".gz"):
            if (path / name).exists():
                path = path / name
                break
        else:
            raise FileNotFoundError(f"{path} holds neither {JSON_NAME} nor {JSON_NAME}.gz")
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    data = read_json(path)
    if data is None:
        raise ValueError(f"{path} is not a readable JSON object")
    return KappaResult.from_dict(data)


def _temperature_index(temperatures, temperature: float) -> int:
    temps = np.atleast_1d(np.asarray(temperatures if temperatures is not None else [], dtype=float))
    hits = np.flatnonzero(np.abs(temps - float(temperature)) < 1e-6)
    if hits.size == 0:
        raise ValueError(f"no result at {temperature:g} K (temperatures: {temps.tolist()} K)")
    return int(hits[0])


def _versions() -> dict:
    out = {}
    for name, module in (("mlip", "mlip"), ("phono3py", "phono3py"), ("phonopy", "phonopy")):
        try:
            out[name] = str(__import__(module).__version__)
        except Exception:  # pragma: no cover - version lookup must never fail a run
            out[name] = None
    return out
