"""Energy conservation in NVE molecular dynamics with the autograd forces."""

import numpy as np
from ase import units
from ase.build import bulk
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution, Stationary
from ase.md.verlet import VelocityVerlet

from conftest import build_potential, calc64


def test_nve_energy_conservation(arch):
    potential = build_potential(arch, species=["Cu"], cutoff=4.0)
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True) * (2, 2, 2)  # 32 atoms
    atoms.rattle(0.02, seed=0)
    atoms.calc = calc64(potential)
    MaxwellBoltzmannDistribution(atoms, temperature_K=300, rng=np.random.default_rng(0))
    Stationary(atoms)
    dyn = VelocityVerlet(atoms, timestep=1.0 * units.fs)
    energies = []

    def record():
        energies.append(atoms.get_potential_energy() + atoms.get_kinetic_energy())

    dyn.attach(record, interval=10)
    dyn.run(1000)  # 1 ps
    energies = np.array(energies) / len(atoms)
    times = np.arange(len(energies)) * 10e-3  # ps
    drift = np.polyfit(times, energies, 1)[0] * 1e3  # meV/atom/ps
    spread = (energies.max() - energies.min()) * 1e3
    temperature = atoms.get_temperature()
    print(f"NVE {arch}: drift {drift:+.4f} meV/atom/ps, max deviation {spread:.4f} meV/atom, T={temperature:.0f} K")
    # Velocity Verlet at 1 fs conserves a smooth potential's energy to O(dt²) fluctuations without
    # systematic drift; a non-conservative or discontinuous force field drifts by meV/atom/ps or more.
    assert np.isfinite(energies).all()
    assert abs(drift) < 0.05, f"energy drift {drift:.4f} meV/atom/ps"
    assert spread < 1.0, f"energy fluctuation {spread:.4f} meV/atom"
