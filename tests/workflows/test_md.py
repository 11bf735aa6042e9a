"""Energy conservation in NVE molecular dynamics with the autograd forces."""

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
