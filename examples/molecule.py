"""Relax a small copper cluster far from the origin, then run a short NVE trajectory.

    python examples/molecule.py
    python examples/molecule.py --model ase.calculators.emt:EMT

Molecules and clusters have no periodicity (pbc = False, no cell): relaxation moves the atoms
only, and MD removes both centre-of-mass translation and rotation from the initial velocities.
Placing the cluster thousands of Å from the origin changes nothing: energies are
translation invariant and the calculator re-centres the structure before evaluating it.
"""

import argparse

from ase.cluster import Icosahedron

from mlip.workflows import describe_model, is_untrained, relax, resolve_calculator, run_md

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--model", default="default", help="shipped name, checkpoint path or module:Class")
parser.add_argument("--steps", type=int, default=100)
args = parser.parse_args()

calc = resolve_calculator(args.model, dtype="float64")
print(f"model: {describe_model(calc, args.model)}"
      + (" -- UNTRAINED (random weights): the numbers below are not physical" if is_untrained(calc) else ""))

cluster = Icosahedron("Cu", noshells=2)  # 13 atoms
cluster.pbc = False
cluster.set_cell([0, 0, 0])
cluster.rattle(stdev=0.05, seed=0)
far = cluster.copy()
far.translate([1000.0, -2000.0, 1500.0])

cluster.calc = calc
e_origin = cluster.get_potential_energy()
far.calc = calc
e_far = far.get_potential_energy()
print(f"Cu13 cluster: energy at the origin {e_origin:.6f} eV, 2700 Å away {e_far:.6f} eV "
      f"(difference {abs(e_far - e_origin):.1e} eV)")

result = relax(far, calc, fmax=0.05, steps=300)
print(f"relax: {'converged' if result.converged else 'NOT converged'} in {result.n_steps} steps, "
      f"energy {result.energy:.4f} eV ({result.energy - e_far:+.4f} eV)")

md = run_md(result.atoms, calc, ensemble="nve", temperature=300, timestep=1.0, steps=args.steps, seed=0,
            log_interval=5)
print(f"NVE  {args.steps} x 1 fs: T {md.temperatures[0]:.0f} K -> {md.temperatures[-1]:.0f} K, "
      f"energy drift {md.drift_mev_per_atom_per_ps:+.4f} meV/atom/ps")
