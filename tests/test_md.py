"""Energy conservation in NVE molecular dynamics with the autograd forces."""

import numpy as np
import torch
from ase import units
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.calculators.mixing import SumCalculator
from ase.md.velocitydistribution import Stationary, thermalize_momenta
from ase.md.verlet import VelocityVerlet

from conftest import build_potential, calc64


def test_nve_energy_conservation(arch):
    """Velocity Verlet conserves the energy of EMT copper plus the untrained model.

    An untrained model has no repulsive core and no reason to favour any lattice: on its own the
    crystal can collapse and heat to thousands of kelvin (the EquiformerV3 test models do), which
    tests the integrator's step size rather than the forces. EMT supplies a bounded, stable
    landscape; the model's forces are scaled to the same size as EMT's (max 0.2 eV/Å for a 0.03 Å
    rattle), so the model contributes a large part of the potential-energy exchange. A
    non-conservative or discontinuous model force shows up as drift of the total energy.
    """
    potential = build_potential(arch, species=["Cu"], cutoff=4.0)
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True) * (2, 2, 2)  # 32 atoms
    atoms.rattle(0.03, seed=0)
    model = calc64(potential)
    atoms.calc = model
    with torch.no_grad():
        potential.scale.mul_(0.2 / np.abs(atoms.get_forces()).max())
    model = calc64(potential)
    atoms.calc = SumCalculator([EMT(), model])
    thermalize_momenta(atoms, temperature_K=300, rng=np.random.default_rng(0))
    Stationary(atoms)
    dyn = VelocityVerlet(atoms, timestep=1.0 * units.fs)
    energies, potential_energies, model_energies = [], [], []

    def record():
        potential_energies.append(atoms.get_potential_energy())
        model_energies.append(model.results["energy"])
        energies.append(potential_energies[-1] + atoms.get_kinetic_energy())

    dyn.attach(record, interval=10)
    dyn.run(1000)  # 1 ps
    n = len(atoms)
    energies = np.array(energies) / n
    exchanged = (max(potential_energies) - min(potential_energies)) / n * 1e3  # meV/atom
    model_exchanged = (max(model_energies) - min(model_energies)) / n * 1e3
    times = np.arange(len(energies)) * 10e-3  # ps
    drift = np.polyfit(times, energies, 1)[0] * 1e3  # meV/atom/ps
    spread = (energies.max() - energies.min()) * 1e3
    temperature = atoms.get_temperature()
    print(f"NVE {arch}: drift {drift:+.2e} meV/atom/ps, max deviation {spread:.2e} meV/atom, "
          f"potential energy range {exchanged:.2f} meV/atom (model part {model_exchanged:.2f}), "
          f"T={temperature:.0f} K")
    # Velocity Verlet at 1 fs conserves a smooth potential's energy to O(dt²) fluctuations without
    # systematic drift; a non-conservative or discontinuous force field drifts by meV/atom/ps or more.
    assert np.isfinite(energies).all()
    # The test means something only if kinetic and potential energy really exchange, through the
    # model's energy as well as EMT's.
    assert exchanged > 1.0, f"potential energy varies by only {exchanged:.3f} meV/atom"
    assert model_exchanged > 1.0, f"the model's energy varies by only {model_exchanged:.3f} meV/atom"
    assert spread < 0.01 * exchanged
    assert abs(drift) < 0.05, f"energy drift {drift:.4f} meV/atom/ps"
    assert spread < 1.0, f"energy fluctuation {spread:.4f} meV/atom"


def test_a_single_atom_cell_runs_at_rest():
    """One atom in a periodic cell has no motion relative to its centre of mass: MD keeps it at rest
    (drawing velocities used to divide by zero degrees of freedom and stop at step 1 with NaN)."""
    from mlip.workflows.md import run_md

    atoms = bulk("Cu", "fcc", a=3.6)
    for ensemble in ("nve", "nvt"):
        result = run_md(atoms, EMT(), ensemble=ensemble, steps=5, temperature=300.0, seed=0, progress=False)
        assert np.allclose(result.atoms.positions, atoms.positions)
