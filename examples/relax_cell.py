"""Relax atoms *and* cell of a strained, rattled copper crystal (FIRE + FrechetCellFilter).

    python examples/relax_cell.py
    python examples/relax_cell.py --model ase.calculators.emt:EMT

This is the relaxation protocol of Matbench Discovery: FIRE, FrechetCellFilter, fmax 0.05 eV/Å,
at most 500 steps, in float64.
"""

import argparse

import numpy as np
from ase.build import bulk

from mlip.workflows import describe_model, is_untrained, relax, resolve_calculator

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--model", default="default", help="shipped name, checkpoint path or module:Class")
parser.add_argument("--fmax", type=float, default=0.05)
args = parser.parse_args()

calc = resolve_calculator(args.model, dtype="float64")  # float64 for geometry optimisation
print(f"model: {describe_model(calc, args.model)}"
      + (" -- UNTRAINED (random weights): the numbers below are not physical" if is_untrained(calc) else ""))

atoms = bulk("Cu", "fcc", a=3.61, cubic=True).repeat((2, 1, 1))  # 8 atoms
strain = np.array([[1.04, 0.02, 0.0], [0.0, 0.97, 0.0], [0.0, 0.0, 1.02]])  # stretched and sheared
atoms.set_cell(atoms.cell.array @ strain, scale_atoms=True)
atoms.rattle(stdev=0.05, seed=0)
atoms.calc = calc
e0 = atoms.get_potential_energy()
print(f"start: {len(atoms)} atoms, volume {atoms.get_volume():.3f} Å^3, energy {e0:.4f} eV, "
      f"cell lengths {atoms.cell.lengths().round(3).tolist()} Å, "
      f"angles {atoms.cell.angles().round(2).tolist()}°")

result = relax(atoms, calc, fmax=args.fmax, steps=500, cell_filter=True)
final = result.atoms
print(f"relax: {'converged' if result.converged else 'NOT converged'} in {result.n_steps} steps, "
      f"fmax {result.fmax_final:.4f} eV/Å")
print(f"end:   volume {final.get_volume():.3f} Å^3, energy {result.energy:.4f} eV "
      f"({result.energy - e0:+.4f} eV), cell lengths {final.cell.lengths().round(3).tolist()} Å, "
      f"angles {final.cell.angles().round(2).tolist()}°")
