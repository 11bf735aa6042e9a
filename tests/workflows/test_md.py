"""Energy conservation in NVE molecular dynamics with the autograd forces; implausible settings and runs
that explode."""

import re

import numpy as np
from ase.build import bulk
from ase.calculators.emt import EMT

from mlip.testing import build_potential, check_nve


def test_nve_energy_conservation(arch):
    """Velocity Verlet conserves the energy of EMT copper plus the untrained model (the NVE check of the
    shipped physics suite, mlip.testing.check_nve, whose docstring says why EMT is added)."""
    m = check_nve(build_potential(arch, species=["Cu"], cutoff=4.0))
    print(f"NVE {arch}: drift {m['drift']:+.2e} meV/atom/ps, max deviation {m['spread']:.2e} meV/atom, "
          f"potential energy range {m['exchanged']:.2f} meV/atom (model part {m['model_exchanged']:.2f}), "
          f"T={m['temperature']:.0f} K")


def test_a_single_atom_cell_runs_at_rest():
    """One atom in a periodic cell has no motion relative to its centre of mass: MD keeps it at rest
    (drawing velocities used to divide by zero degrees of freedom and stop at step 1 with NaN)."""
    from mlip.workflows.md import run_md

    atoms = bulk("Cu", "fcc", a=3.6)
    for ensemble in ("nve", "nvt"):
        result = run_md(atoms, EMT(), ensemble=ensemble, steps=5, temperature=300.0, seed=0, progress=False)
        assert np.allclose(result.atoms.positions, atoms.positions)


def test_settings_outside_the_plausible_ranges_need_allow_extreme(tmp_path):
    """1e9 K, a timestep in ps taken for fs, a pressure in Pa: refused before anything runs or is written,
    unless asked for; the pressure only where it is used (NPT)."""
    import pytest

    from mlip.workflows.md import PLAUSIBLE, run_md

    atoms = bulk("Cu", "fcc", a=3.61)
    traj = tmp_path / "md.traj"
    cases = ((dict(temperature=1e9), "temperature 1e+09 K"), (dict(timestep=1000.0), "timestep 1000 fs"),
             (dict(timestep=1e-4), "timestep 0.0001 fs"),
             (dict(ensemble="npt", pressure=101325.0), "pressure 101325 GPa"))
    for settings, name in cases:
        message = rf"^{re.escape(name)} is outside the plausible range of MD .* allow_extreme=True"
        with pytest.raises(ValueError, match=message):
            run_md(atoms, EMT(), steps=1, progress=False, trajectory=str(traj), **settings)
        assert not traj.exists()
    run_md(atoms, EMT(), steps=1, progress=False, pressure=101325.0)  # NVE: no pressure to check
    result = run_md(atoms, EMT(), steps=2, timestep=12.0, seed=0, progress=False, allow_extreme=True)
    assert result.steps == 2 and PLAUSIBLE["timestep"][1] < 12.0
    with pytest.raises(ValueError, match="pressure must be a finite number"):
        run_md(atoms, EMT(), ensemble="npt", steps=1, progress=False, pressure=float("nan"),
               allow_extreme=True)


def test_an_exploding_run_stops_and_keeps_its_files_readable(tmp_path):
    """A 60 fs timestep throws EMT copper apart within a few steps: the run stops at the step whose total
    energy jumped by more than 1 eV/atom, naming it, with the trajectory and log closed and holding the
    frames before it (the exploded step is not written)."""
    import pytest
    from ase.io import read

    from mlip.workflows.md import MDExplodedError, run_md

    atoms = bulk("Cu", "fcc", a=3.61, cubic=True).repeat(2)
    traj, log = tmp_path / "md.traj", tmp_path / "md.log"
    message = (r"the total energy changed by \+[\d.e+]+ eV/atom in one step, at MD step \d+ .*md.log hold "
               r"the run up to step 0$")
    with pytest.raises(MDExplodedError, match=message) as info:
        run_md(atoms, EMT(), timestep=60.0, steps=300, seed=0, log_interval=5, trajectory=str(traj),
               logfile=str(log), progress=False, allow_extreme=True)
    frames = read(str(traj), index=":")
    assert len(frames) == 1 and np.isfinite(frames[0].get_potential_energy())
    assert len(log.read_text().splitlines()) == 1 + 1
    assert "exploded" in str(info.value)
