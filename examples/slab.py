"""Relax the top layers of an fcc(111) copper slab with the bottom layers held fixed.

    python examples/slab.py
    python examples/slab.py --model ase.calculators.emt:EMT

A slab is periodic in-plane only (pbc = [True, True, False]) with vacuum along z, so there is no
3D stress to relax: :func:`mlip.workflows.relax` optimises the atomic positions only, honouring
the ``FixAtoms`` constraint on the bottom two layers.
"""

import argparse

import numpy as np
from ase.build import fcc111
from ase.constraints import FixAtoms

from mlip.workflows import describe_model, is_untrained, relax, resolve_calculator

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--model", default="default", help="shipped name, checkpoint path or module:Class")
args = parser.parse_args()

calc = resolve_calculator(args.model, dtype="float64")
print(f"model: {describe_model(calc, args.model)}"
      + (" -- UNTRAINED (random weights): the numbers below are not physical" if is_untrained(calc) else ""))

slab = fcc111("Cu", size=(2, 2, 4), a=3.61, vacuum=8.0)  # 16 atoms, 4 layers, 8 Å vacuum each side
layer = slab.get_tags()  # fcc111 tags layers 1 (top) .. 4 (bottom)
slab.set_constraint(FixAtoms(mask=layer >= 3))  # hold the bottom two layers at bulk positions
print(f"Cu(111) slab: {len(slab)} atoms, {layer.max()} layers, pbc={slab.pbc.tolist()}, "
      f"{int((layer >= 3).sum())} atoms fixed")

z0 = slab.positions[:, 2].copy()
result = relax(slab, calc, fmax=0.05, steps=300)
dz = result.atoms.positions[:, 2] - z0
print(f"relax: {'converged' if result.converged else 'NOT converged'} in {result.n_steps} steps, "
      f"energy {result.energy:.4f} eV, fmax {result.fmax_final:.4f} eV/Å")
for tag in sorted(set(layer)):
    state = "fixed" if tag >= 3 else "free"
    print(f"  layer {tag} ({state}): mean z displacement {dz[layer == tag].mean():+.4f} Å")
assert np.allclose(dz[layer >= 3], 0.0), "fixed atoms moved"
