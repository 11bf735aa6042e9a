"""Lattice thermal conductivity κ(300 K) of fcc copper with phono3py (Wigner transport, RTA).

    python examples/kappa_crystal.py                 # writes kappa-out/kappa.json
    python examples/kappa_crystal.py my-folder --model ase.calculators.emt:EMT

The protocol of Matbench Discovery's κ task: symmetry-preserving relaxation (fmax 1e-4 eV/Å),
0.03 Å displacements, symmetrised fc2/fc3, an imaginary-mode check before the third-order force
constants, then the Wigner transport equation (particle + coherence terms) with isotope
scattering. Here with the 4-atom conventional cell × 2 (32-atom supercells) and an 11³ q-mesh so
that it runs in seconds; EMT gives ≈ 12.6 W/(m·K) (copper's lattice part is ~ 10-20 W/(m·K); the
measured total, ~400 W/(m·K), is electronic). Rerunning into the same folder reuses the forces.
"""

import argparse
from pathlib import Path

import numpy as np
from ase.build import bulk

from mlip.workflows import describe_model, is_untrained, resolve_calculator
from mlip.workflows.phonons import KappaSettings, run_kappa

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("out_dir", nargs="?", default="kappa-out", help="output folder (default: kappa-out)")
parser.add_argument("--model", default="ase.calculators.emt:EMT",
                    help="shipped name, checkpoint path or module:Class (default: EMT)")
parser.add_argument("--mesh", type=int, default=11, help="q-mesh n×n×n (the benchmark uses 19-20)")
args = parser.parse_args()

calc = resolve_calculator(args.model, dtype="float64")  # float64: finite-displacement force constants
print(f"model: {describe_model(calc, args.model)}"
      + (" -- UNTRAINED (random weights): the numbers below are not physical" if is_untrained(calc) else ""))

atoms = bulk("Cu", "fcc", a=3.61, cubic=True)  # conventional cell, 4 atoms
settings = KappaSettings(fc2_supercell=2, fc3_supercell=2, mesh=args.mesh, temperatures=[300])
result = run_kappa(atoms, calc, settings, out_dir=args.out_dir)

relax = result.relaxation or {}
print(f"relaxed: a = {result.atoms.cell.lengths()[0]:.4f} Å in {relax.get('n_steps')} steps, space group "
      f"{result.spacegroup_initial} -> {result.spacegroup_final}")
n_super = round(abs(np.linalg.det(result.fc3_supercell))) * len(result.atoms)
print(f"supercells: fc2 {result.n_displacements_fc2} + fc3 {result.n_displacements_fc3} displaced "
      f"({n_super} atoms each); lowest frequency on the mesh {result.lowest_frequency:.3f} THz")
if result.ok:
    k = result.kappa_at(300)
    particle, coherence = result.kappa_particle[0].trace() / 3, result.kappa_coherence[0].trace() / 3
    print(f"kappa(300 K) = {result.kappa_average[0]:.3f} W/(m K) (trace/3): particle {particle:.3f} "
          f"+ coherence {coherence:.3f}")
    off_diagonal = np.abs(k - np.diag(k.diagonal())).max()
    print(f"kappa tensor (W/(m K)): diagonal {k.diagonal().round(3).tolist()}, largest off-diagonal "
          f"{off_diagonal:.1e} (cubic: isotropic)")
else:
    print(f"no kappa: status {result.status}" + (f" ({result.error})" if result.error else ""))
print(f"results: {(Path(args.out_dir) / 'kappa.json').resolve()}")
