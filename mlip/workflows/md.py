"""Molecular dynamics in the NVE, NVT (Langevin) and NPT (MTK) ensembles, with energy bookkeeping.

Settings outside the plausible ranges of MD of condensed matter (:data:`PLAUSIBLE`: temperature 0–10,000 K,
time step 0.01–10 fs, NPT pressure −100 to 1,000 GPa) are refused unless asked for (``allow_extreme``,
``mlip md --allow-extreme``): beyond them a number is far more likely a typo or another unit (1e9 K, a
time step in ps or s, a pressure in Pa or bar) than a plan, and no interatomic potential trained on
solids and liquids has seen such states. Above 10,000 K every element is a gas of atoms or a plasma; a
time step of 10 fs samples the slowest lattice vibrations (periods of 100–300 fs for heavy metals) with
a few tens of steps per period and hydrogen's (about 10 fs) not at all; 1,000 GPa is beyond the centre
of the Earth (360 GPa) and the highest static pressures reached, and a solid breaks apart well before
−100 GPa.

A run that explodes stops with :class:`MDExplodedError` (a RuntimeError) naming the step and what
happened: a non-finite energy or position, the total energy changing by more than
:data:`MAX_ENERGY_JUMP` eV/atom in one step, or (NVE, NPT) the conserved energy drifting that far from
its start. The trajectory and the log are closed and hold the run up to the last logged step before.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Optional, Union

import numpy as np
from ase import Atoms, units

from mlip.extras import require

ENSEMBLES = ("nve", "nvt", "npt")
BAROSTATS = ("isotropic", "anisotropic")
#: setting → (lowest, highest, unit): the plausible ranges (see the module notes)
PLAUSIBLE = {"temperature": (0.0, 10_000.0, "K"), "timestep": (0.01, 10.0, "fs"),
             "pressure": (-100.0, 1_000.0, "GPa")}
#: eV/atom: the most the total energy may change in one step (any ensemble), and the conserved
#: energy drift from the start (NVE, NPT), before a run counts as exploded; kT at 10,000 K is 0.86 eV
MAX_ENERGY_JUMP = 1.0


class MDExplodedError(RuntimeError):
    """The dynamics left the physical: a non-finite energy or position, or an energy jump (module notes)."""


def check_plausible(ensemble: str, temperature: float, timestep: float, pressure: float,
                    allow_extreme: bool = False, how: str = "allow_extreme=True") -> None:
    """ValueError naming the first setting outside :data:`PLAUSIBLE` (the pressure only for NPT, which
    uses it), unless ``allow_extreme``; ``how`` is the caller's way to allow it (named in the message).
    Non-finite values and what :func:`run_md` cannot run at all are refused by it regardless."""
    if allow_extreme:
        return
    values = {"temperature": temperature, "timestep": timestep}
    if str(ensemble).lower() == "npt":
        values["pressure"] = pressure
    for name, value in values.items():
        lo, hi, unit = PLAUSIBLE[name]
        if math.isfinite(value) and not lo <= value <= hi:
            raise ValueError(f"{name} {value:g} {unit} is outside the plausible range of MD ({lo:g} to "
                             f"{hi:g} {unit}; another unit or a typo?); pass {how} to run it anyway")


@dataclass
class MDResult:
    """Outcome of :func:`run_md`: one entry per logged frame (every ``log_interval`` steps, plus
    the first and the last step).

    Attributes:
        ensemble: ``"nve"``, ``"nvt"`` or ``"npt"``.
        n_atoms: number of atoms.
        timestep_fs: integration time step (fs).
        steps: MD steps run.
        times: simulation time of each frame (ps).
        total_energies, potential_energies, kinetic_energies: energies of each frame (eV).
        temperatures: instantaneous kinetic temperature of each frame (K).
        volumes: cell volume of each frame (Å³; NaN without a 3D cell).
        conserved_energies: the integrator's conserved quantity (eV): the total energy in NVE,
            the MTK extended energy in NPT; empty for Langevin NVT, which conserves nothing.
        drift_mev_per_atom_per_ps: least-squares slope of the conserved quantity vs time
            (meV/atom/ps); None for NVT.
        max_deviation_mev_per_atom: largest |E(t) − E(0)| of the conserved quantity (meV/atom);
            None for NVT.
        atoms: the final structure (a copy of the input, calculator attached, momenta set).
    """

    ensemble: str
    n_atoms: int
    timestep_fs: float
    steps: int
    times: np.ndarray
    total_energies: np.ndarray
    potential_energies: np.ndarray
    kinetic_energies: np.ndarray
    temperatures: np.ndarray
    volumes: np.ndarray
    conserved_energies: np.ndarray = field(default_factory=lambda: np.zeros(0))
    drift_mev_per_atom_per_ps: Optional[float] = None
    max_deviation_mev_per_atom: Optional[float] = None
    atoms: Optional[Atoms] = field(default=None, repr=False)

    def to_dict(self) -> dict:
        """JSON-serialisable summary (the final structure is left out)."""
        out = {}
        for key, value in asdict(self).items():
            if key == "atoms":
                continue
            if isinstance(value, np.ndarray):
                value = [None if not math.isfinite(x) else float(x) for x in value.tolist()]
            out[key] = value
        if self.temperatures.size:
            out["mean_temperature"] = float(np.mean(self.temperatures))
        return out


def energy_drift(times_ps, energies_ev, n_atoms: int):
    """(slope in meV/atom/ps from a least-squares line, max |E − E₀| in meV/atom)."""
    t = np.asarray(times_ps, dtype=float)
    e = np.asarray(energies_ev, dtype=float)
    if len(e) == 0:
        return None, None
    deviation = float(np.max(np.abs(e - e[0]))) * 1000.0 / n_atoms
    if len(t) < 2 or np.ptp(t) == 0:
        return 0.0, deviation
    slope = float(np.polyfit(t, e, 1)[0])
    return slope * 1000.0 / n_atoms, deviation


def _initialise_velocities(atoms: Atoms, temperature: float, rng: np.random.Generator) -> None:
    from ase.md import velocitydistribution as vd

    if len(atoms) == 1:  # no motion relative to the centre of mass: at rest (thermalizing would divide by 0)
        atoms.set_momenta(np.zeros((1, 3)))
        return
    thermalize = getattr(vd, "thermalize_momenta", None)  # ASE >= 3.29; older: MaxwellBoltzmannDistribution
    if thermalize is not None:
        thermalize(atoms, temperature, rng=rng)
    else:  # pragma: no cover - ASE < 3.29
        vd.MaxwellBoltzmannDistribution(atoms, temperature_K=temperature, rng=rng)
    vd.Stationary(atoms)
    if not atoms.pbc.any():
        vd.ZeroRotation(atoms)


def run_md(
    atoms: Atoms,
    calculator,
    ensemble: str = "nve",
    temperature: float = 300.0,
    timestep: float = 1.0,
    steps: int = 1000,
    friction: float = 0.01,
    pressure: float = 0.0,
    seed: Optional[int] = None,
    trajectory: Optional[str] = None,
    logfile: Union[str, IO, None] = None,
    log_interval: int = 10,
    progress: bool = True,
    initialize_velocities: Optional[bool] = None,
    barostat: str = "isotropic",
    tdamp: Optional[float] = None,
    pdamp: Optional[float] = None,
    allow_extreme: bool = False,
) -> MDResult:
    """Run molecular dynamics on a copy of ``atoms``.

    Integrators (all from ASE):

    * ``"nve"``: :class:`ase.md.verlet.VelocityVerlet`.
    * ``"nvt"``: :class:`ase.md.langevin.Langevin` at ``temperature`` with ``friction``.
    * ``"npt"``: the Martyna–Tobias–Klein barostat with Nosé–Hoover chains,
      :class:`ase.md.nose_hoover_chain.IsotropicMTKNPT` (``barostat="isotropic"``, the cell shape
      is kept) or :class:`ase.md.nose_hoover_chain.MTKNPT` (``barostat="anisotropic"``, full cell
      fluctuations). Only for cells periodic in all three directions, without constraints.

    Initial velocities are drawn from a Maxwell–Boltzmann distribution at ``temperature`` with
    ``numpy.random.default_rng(seed)``, then the centre-of-mass motion is removed (and the
    rotation, for non-periodic structures). Starting from a relaxed structure, equipartition
    brings the temperature down to about ``temperature / 2`` in NVE.

    Args:
        atoms: the structure (not modified).
        calculator: an ASE calculator, or anything :func:`mlip.workflows.resolve_calculator`
            accepts. MD in float32 is the usual choice for mlip potentials.
        ensemble: ``"nve"``, ``"nvt"`` or ``"npt"``.
        temperature: initial (NVE) or target (NVT/NPT) temperature (K).
        timestep: time step (fs).
        steps: number of MD steps.
        friction: Langevin friction (1/fs), NVT only.
        pressure: external pressure (GPa), NPT only.
        seed: seed of the velocity (and Langevin noise) random generator.
        trajectory: optional ASE ``.traj`` path, written every ``log_interval`` steps.
        logfile: optional path/file for :class:`ase.md.MDLogger` (every ``log_interval`` steps).
        log_interval: steps between logged frames.
        progress: show a tqdm progress bar.
        initialize_velocities: True: always draw new velocities; False: keep the momenta of
            ``atoms``; None (default): draw them unless ``atoms`` already carries non-zero momenta.
        barostat: ``"isotropic"`` or ``"anisotropic"`` (NPT only).
        tdamp: thermostat time constant (fs), NPT only; default 100 time steps.
        pdamp: barostat time constant (fs), NPT only; default 1000 time steps.
        allow_extreme: run a temperature, time step or pressure outside :data:`PLAUSIBLE` (refused
            with a ValueError otherwise).

    The structure is evaluated once before the trajectory and the log are opened, so one the
    calculator refuses (an element it lacks, too large for the memory) leaves no file behind.
    Exceptions raised by the calculator propagate at once: the integrator never continues after a
    failed force call. A run that explodes raises :class:`MDExplodedError` (module notes).
    """
    from mlip.calculators.model_loading import resolve_calculator

    ensemble = _check_md_arguments(atoms, ensemble, temperature, timestep, steps, log_interval, friction,
                                   barostat, pressure)
    check_plausible(ensemble, temperature, timestep, pressure, allow_extreme)
    calc = resolve_calculator(calculator, dtype="float32")
    atoms = atoms.copy()
    atoms.calc = calc
    atoms.get_forces()  # before any file is opened (see the docstring); cached for the first step
    rng = np.random.default_rng(seed)
    if initialize_velocities or (initialize_velocities is None and not np.any(atoms.get_momenta())):
        _initialise_velocities(atoms, temperature, rng)
    dyn, added_fixcom = _make_integrator(atoms, ensemble, temperature, timestep, friction, pressure, barostat,
                                         tdamp, pdamp, rng)
    frames = _Frames(atoms, dyn, ensemble, timestep)
    _run_loop(atoms, dyn, frames, ensemble, steps, log_interval, trajectory, logfile, progress, added_fixcom)
    return frames.result(steps)


def _check_md_arguments(atoms: Atoms, ensemble: str, temperature: float, timestep: float, steps: int,
                        log_interval: int, friction: float, barostat: str, pressure: float) -> str:
    """Refuse settings :func:`run_md` cannot run (ValueError naming the setting); returns the
    ensemble in lower case."""
    ensemble = str(ensemble).lower()
    if ensemble not in ENSEMBLES:
        raise ValueError(f"ensemble must be one of {', '.join(ENSEMBLES)}, got {ensemble!r}")
    if not (timestep > 0 and math.isfinite(timestep)):
        raise ValueError(f"timestep must be a positive number of fs, got {timestep}")
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    if temperature < 0 or not math.isfinite(temperature):
        raise ValueError(f"temperature must be >= 0 K, got {temperature}")
    if not math.isfinite(pressure):
        raise ValueError(f"pressure must be a finite number of GPa, got {pressure}")
    if log_interval < 1:
        raise ValueError(f"log_interval must be >= 1, got {log_interval}")
    if ensemble == "nvt" and not friction > 0:
        raise ValueError(f"Langevin friction must be positive (1/fs), got {friction}")
    if ensemble == "npt":
        if not np.all(atoms.pbc) or atoms.cell.rank < 3:
            raise ValueError(
                f"NPT needs a cell periodic in all three directions (pbc={atoms.pbc.tolist()}, "
                f"cell rank {atoms.cell.rank}); use NVT for slabs, wires and molecules"
            )
        if atoms.constraints:
            raise ValueError("the MTK NPT integrator does not support constraints; remove them or use NVT")
        if barostat not in BAROSTATS:
            raise ValueError(f"barostat must be one of {', '.join(BAROSTATS)}, got {barostat!r}")
    return ensemble


def _make_integrator(atoms: Atoms, ensemble: str, temperature: float, timestep: float, friction: float,
                     pressure: float, barostat: str, tdamp: Optional[float], pdamp: Optional[float],
                     rng: np.random.Generator):
    """The ASE integrator of ``ensemble`` on ``atoms``; returns (dynamics, whether a FixCom
    constraint was added to ``atoms``, to be removed after the run)."""
    dt = timestep * units.fs
    added_fixcom = False
    if ensemble == "nve":
        from ase.md.verlet import VelocityVerlet

        dyn = VelocityVerlet(atoms, timestep=dt)
    elif ensemble == "nvt":
        from ase.md.langevin import Langevin

        # ASE >= 3.28 deprecates Langevin(fixcm=True), which biases the sampled distribution; the
        # recommended replacement is fixcm=False plus a FixCom constraint (removed again at the
        # end). Structures that already carry constraints (e.g. a slab's fixed bottom layers) are
        # anchored by them and get no FixCom.
        if not atoms.constraints:
            from ase.constraints import FixCom

            atoms.set_constraint(FixCom())
            added_fixcom = True
        dyn = Langevin(
            atoms, timestep=dt, temperature_K=temperature, friction=friction / units.fs, fixcm=False, rng=rng
        )
    else:
        from ase.md.nose_hoover_chain import IsotropicMTKNPT, MTKNPT

        cls = IsotropicMTKNPT if barostat == "isotropic" else MTKNPT
        dyn = cls(
            atoms,
            timestep=dt,
            temperature_K=temperature,
            pressure_au=pressure * units.GPa,
            tdamp=(tdamp if tdamp is not None else 100 * timestep) * units.fs,
            pdamp=(pdamp if pdamp is not None else 1000 * timestep) * units.fs,
        )
    return dyn, added_fixcom


class _Frames:
    """The logged frames of a run: time (ps), potential and kinetic energy (eV), temperature (K),
    volume (Å³) and the integrator's conserved energy (eV), one entry per :meth:`record`."""

    def __init__(self, atoms: Atoms, dyn, ensemble: str, timestep: float):
        self.atoms, self.dyn, self.ensemble, self.timestep = atoms, dyn, ensemble, timestep
        self.data: dict = {k: [] for k in ("t", "epot", "ekin", "temp", "vol", "cons")}
        self.conserved = getattr(dyn, "get_conserved_energy", None) if ensemble == "npt" else None

    def record(self) -> None:
        atoms, dyn, frames = self.atoms, self.dyn, self.data
        epot = float(atoms.get_potential_energy())  # finite: _Watch checked this step first
        ekin = float(atoms.get_kinetic_energy())
        frames["t"].append(dyn.nsteps * self.timestep / 1000.0)
        frames["epot"].append(epot)
        frames["ekin"].append(ekin)
        frames["temp"].append(float(atoms.get_temperature()))
        frames["vol"].append(float(atoms.get_volume()) if atoms.cell.rank == 3 else float("nan"))
        if self.ensemble == "nve":
            frames["cons"].append(epot + ekin)
        elif self.conserved is not None:
            frames["cons"].append(float(self.conserved()))

    def last_step(self) -> Optional[int]:
        """The step of the last recorded frame (None before the first)."""
        return round(self.data["t"][-1] * 1000.0 / self.timestep) if self.data["t"] else None

    def result(self, steps: int) -> MDResult:
        """The :class:`MDResult` of the recorded frames (the drift from the conserved energy)."""
        n = len(self.atoms)
        arr = {k: np.asarray(v, dtype=float) for k, v in self.data.items()}
        drift = deviation = None
        if arr["cons"].size:
            drift, deviation = energy_drift(arr["t"], arr["cons"], n)
        return MDResult(
            ensemble=self.ensemble,
            n_atoms=n,
            timestep_fs=float(self.timestep),
            steps=int(steps),
            times=arr["t"],
            total_energies=arr["epot"] + arr["ekin"],
            potential_energies=arr["epot"],
            kinetic_energies=arr["ekin"],
            temperatures=arr["temp"],
            volumes=arr["vol"],
            conserved_energies=arr["cons"],
            drift_mev_per_atom_per_ps=drift,
            max_deviation_mev_per_atom=deviation,
            atoms=self.atoms,
        )


class _Watch:
    """Called after every step, before the step is recorded: raises :class:`MDExplodedError` for
    non-finite positions or energy, a total energy that changed by more than :data:`MAX_ENERGY_JUMP`
    eV/atom since the step before, or (NVE, NPT) a conserved energy that drifted that far from the
    first step's."""

    def __init__(self, atoms: Atoms, dyn, frames: _Frames):
        self.atoms, self.dyn, self.frames = atoms, dyn, frames
        self.previous: Optional[float] = None  # total energy (eV) at the step before
        self.start: Optional[float] = None  # conserved energy (eV) at the first step

    def __call__(self) -> None:
        atoms, step, n = self.atoms, self.dyn.nsteps, len(self.atoms)
        if not np.all(np.isfinite(atoms.positions)):
            raise MDExplodedError(f"non-finite positions at MD step {step} (the simulation exploded)")
        epot = float(atoms.get_potential_energy())
        if not math.isfinite(epot):
            raise MDExplodedError(f"non-finite potential energy at MD step {step} (the simulation exploded)")
        total = epot + float(atoms.get_kinetic_energy())
        if self.previous is not None and abs(total - self.previous) > MAX_ENERGY_JUMP * n:
            raise MDExplodedError(
                f"the total energy changed by {(total - self.previous) / n:+.3g} eV/atom in one step, at MD "
                f"step {step} (more than {MAX_ENERGY_JUMP:g} eV/atom: the simulation exploded; a smaller "
                f"timestep, or a model that covers these configurations)")
        self.previous = total
        ensemble = self.frames.ensemble
        if ensemble == "nvt" or (ensemble == "npt" and self.frames.conserved is None):
            return
        conserved = total if ensemble == "nve" else float(self.frames.conserved())
        if self.start is None:
            self.start = conserved
        elif abs(conserved - self.start) > MAX_ENERGY_JUMP * n:
            raise MDExplodedError(
                f"the conserved energy drifted by {(conserved - self.start) / n:+.3g} eV/atom from the "
                f"start, at MD step {step} (more than {MAX_ENERGY_JUMP:g} eV/atom: the simulation exploded; "
                f"a smaller timestep, or a model that covers these configurations)")


def _run_loop(atoms: Atoms, dyn, frames: _Frames, ensemble: str, steps: int, log_interval: int,
              trajectory: Optional[str], logfile: Union[str, IO, None], progress: bool,
              added_fixcom: bool) -> None:
    """Run ``steps`` steps, recording a frame (and writing the trajectory and log) every
    ``log_interval`` steps and at the last step; a step that explodes (:class:`_Watch`) is neither
    recorded nor written, and the error says up to which step the files hold the run. The progress
    bar, trajectory, log and integrator are closed and an added FixCom removed, whatever happens."""
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, desc=f"md {ensemble}", unit="step", leave=False, dynamic_ncols=True)

    def progress_bar():
        if bar is not None:
            bar.update(dyn.nsteps - bar.n)
            if frames.data["temp"] and dyn.nsteps % log_interval == 0:
                etot = frames.data["epot"][-1] + frames.data["ekin"][-1]
                bar.set_postfix(T=f"{frames.data['temp'][-1]:.0f}K", Etot=f"{etot:.4f}", refresh=False)

    traj = None
    logger = None
    try:
        dyn.attach(_Watch(atoms, dyn, frames), interval=1)  # observers run in this order
        dyn.attach(frames.record, interval=log_interval)
        dyn.attach(progress_bar, interval=1)
        if trajectory is not None:
            from ase.io import Trajectory

            traj = Trajectory(trajectory, "w", atoms)
            dyn.attach(traj.write, interval=log_interval)
        if logfile is not None:
            from ase.md import MDLogger

            logger = MDLogger(dyn, atoms, logfile, header=True, stress=(ensemble == "npt"), mode="w")
            dyn.attach(logger, interval=log_interval)
        dyn.run(steps)
        if steps % log_interval:
            frames.record()  # always end on the last step
            if traj is not None:
                traj.write()
            if logger is not None:
                logger()
    except MDExplodedError as err:
        last = frames.last_step()
        files = [str(f) for f in (trajectory, logfile) if isinstance(f, (str, Path))]
        held = f"; {' and '.join(files)} hold the run up to step {last}" if files and last is not None else ""
        raise MDExplodedError(f"{err}; stopping{held}") from None
    finally:
        if bar is not None:
            bar.close()
        if traj is not None:
            traj.close()
        if logger is not None:
            logger.close()
        dyn.close()
        if added_fixcom:
            atoms.set_constraint()


def save_energy_plot(result: MDResult, path) -> None:
    """Save a PNG of total, potential and kinetic energy (eV/atom) vs time (ps).

    Uses matplotlib's Agg canvas directly (no pyplot, no global backend change); matplotlib is
    imported only here (``pip install mlip-torch[plot]``).
    """
    require("matplotlib", "plot", "the energy plot")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    n = max(result.n_atoms, 1)
    fig = Figure(figsize=(7, 7.5), constrained_layout=True)
    FigureCanvasAgg(fig)
    ax_tot, ax_pot, ax_kin = fig.subplots(3, 1, sharex=True)
    # Separate panels: kinetic and potential energy differ by orders of magnitude in eV/atom.
    ax_tot.plot(result.times, result.total_energies / n, label="total", color="black")
    if result.conserved_energies.size and result.ensemble == "npt":
        ax_tot.plot(
            result.times, result.conserved_energies / n, label="conserved (MTK)", color="tab:green", ls="--"
        )
    ax_tot.legend(loc="best")
    ax_tot.set_ylabel("total (eV/atom)")
    title = f"{result.ensemble.upper()} MD, {result.n_atoms} atoms, dt = {result.timestep_fs:g} fs"
    if result.drift_mev_per_atom_per_ps is not None:
        title += f", drift {result.drift_mev_per_atom_per_ps:+.3g} meV/atom/ps"
    ax_tot.set_title(title)
    ax_pot.plot(result.times, result.potential_energies / n, color="tab:blue")
    ax_pot.set_ylabel("potential (eV/atom)")
    ax_kin.plot(result.times, result.kinetic_energies / n, color="tab:red")
    ax_kin.set_ylabel("kinetic (eV/atom)")
    ax_kin.set_xlabel("time (ps)")
    for ax in (ax_tot, ax_pot, ax_kin):
        ax.ticklabel_format(axis="y", useOffset=False)
    fig.savefig(str(path), dpi=120)


__all__ = ["ENSEMBLES", "MAX_ENERGY_JUMP", "MDExplodedError", "MDResult", "PLAUSIBLE", "check_plausible",
           "energy_drift", "run_md", "save_energy_plot"]
