"""NVE then NVT (Langevin) molecular dynamics of an fcc copper supercell.

    python examples/md_nve_nvt_crystal.py                                  # shipped default model
    python examples/md_nve_nvt_crystal.py --model ase.calculators.emt:EMT  # reference EMT potential

The NVE run reports the energy drift (meV/atom/ps), the first thing to check before trusting a
potential for MD; the NVT run shows the Langevin thermostat holding the temperature.
"""

import argparse

from ase.build import bulk

from mlip.workflows import describe_model, is_untrained, resolve_calculator, run_md

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--model", default="default", help="shipped name, checkpoint path or module:Class")
parser.add_argument("--steps", type=int, default=200)
args = parser.parse_args()

calc = resolve_calculator(args.model, dtype="float32")  # float32 is the usual precision for MD
print(f"model: {describe_model(calc, args.model)}"
      + (" -- UNTRAINED (random weights): the numbers below are not physical" if is_untrained(calc) else ""))

atoms = bulk("Cu", "fcc", a=3.61, cubic=True).repeat((2, 2, 2))  # 32 atoms
print(f"Cu fcc supercell: {len(atoms)} atoms, cell {atoms.cell.lengths().round(2).tolist()} Å")

nve = run_md(atoms, calc, ensemble="nve", temperature=300, timestep=1.0, steps=args.steps, seed=0,
             log_interval=5)
# Starting from the perfect lattice, equipartition turns about half of the kinetic energy into
# potential energy: the temperature settles near 150 K while the total energy stays constant.
print(
    f"NVE  {args.steps} x 1 fs: T {nve.temperatures[0]:.0f} K -> {nve.temperatures[-1]:.0f} K, "
    f"energy drift {nve.drift_mev_per_atom_per_ps:+.4f} meV/atom/ps, "
    f"max deviation {nve.max_deviation_mev_per_atom:.4f} meV/atom"
)

# Continue from the end of the NVE run (its velocities are kept) under a Langevin thermostat.
# A 2 fs time step is fine for Cu under a thermostat; half the steps cover the same 0.2 ps.
nvt_steps = max(args.steps // 2, 1)
nvt = run_md(
    nve.atoms, calc, ensemble="nvt", temperature=300, timestep=2.0, steps=nvt_steps, friction=0.02, seed=1
)
half = len(nvt.temperatures) // 2
print(
    f"NVT  {nvt_steps} x 2 fs at 300 K (Langevin, friction 0.02/fs): mean T over the second half "
    f"{nvt.temperatures[half:].mean():.0f} K (a 32-atom cell fluctuates by about ±20%)"
)
