"""Energy conservation in NVE molecular dynamics with the autograd forces."""

import numpy as np
import torch
from ase import units
from ase.build import bulk
from ase.md.velocitydistribution import Stationary, thermalize_momenta
from ase.md.verlet import VelocityVerlet

from conftest import build_potential, calc64


def test_nve_energy_conservation(arch):
    potential = build_potential(arch, species=["Cu"], cutoff=4.0)
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True) * (2, 2, 2)  # 32 atoms
    atoms.rattle(0.03, seed=0)
    # An untrained model's energy scale is arbitrary: rescale it so that the rattled crystal feels
    # forces of a realistic size (max 0.2 eV/Å for a 0.03 Å rattle), as a metal near equilibrium.
    atoms.calc = calc64(potential)
    with torch.no_grad():
        potential.scale.mul_(0.2 / np.abs(atoms.get_forces()).max())
    atoms.calc = calc64(potential)
    thermalize_momenta(atoms, temperature_K=300, rng=np.random.default_rng(0))
    Stationary(atoms)
    dyn = VelocityVerlet(atoms, timestep=1.0 * units.fs)
    energies, potential_energies = [], []

    def record():
        potential_energies.append(atoms.get_potential_energy())
        energies.append(potential_energies[-1] + atoms.get_kinetic_energy())

    dyn.attach(record, interval=10)
    dyn.run(1000)  # 1 ps
    energies = np.array(energies) / len(atoms)
    exchanged = (max(potential_energies) - min(potential_energies)) / len(atoms) * 1e3  # meV/atom
    times = np.arange(len(energies)) * 10e-3  # ps
    drift = np.polyfit(times, energies, 1)[0] * 1e3  # meV/atom/ps
    spread = (energies.max() - energies.min()) * 1e3
    temperature = atoms.get_temperature()
    print(f"NVE {arch}: drift {drift:+.2e} meV/atom/ps, max deviation {spread:.2e} meV/atom, "
          f"potential energy range {exchanged:.2f} meV/atom, T={temperature:.0f} K")
    # Velocity Verlet at 1 fs conserves a smooth potential's energy to O(dt²) fluctuations without
    # systematic drift; a non-conservative or discontinuous force field drifts by meV/atom/ps or more.
    assert np.isfinite(energies).all()
    # The test means something only if kinetic and potential energy really exchange.
    assert exchanged > 1.0, f"potential energy varies by only {exchanged:.3f} meV/atom"
    assert spread < 0.01 * exchanged
    assert abs(drift) < 0.05, f"energy drift {drift:.4f} meV/atom/ps"
    assert spread < 1.0, f"energy fluctuation {spread:.4f} meV/atom"
