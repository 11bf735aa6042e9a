"""Phonon band structure, density of states and thermal properties of fcc copper (phonopy).

    python examples/phonon_bands.py                       # EMT, plots in phonon-bands-out/
    python examples/phonon_bands.py my-output-folder --model default

The crystal is relaxed first (FIRE + FrechetCellFilter, keeping the space group, fmax 1e-4 eV/Å),
then phonopy displaces one atom of the supercell by 0.01 Å, the forces give the force constants,
and from them the bands along Γ-X-W-K-Γ-L-U-W-L-K|U-X, the DOS and the harmonic free energy,
entropy and heat capacity follow. Needs phonopy and matplotlib (pip install 'mlip-torch[phonons,plot]').
"""

import argparse
from pathlib import Path

from ase.build import bulk

from mlip.workflows import describe_model, is_untrained, resolve_calculator
from mlip.workflows.phonons import PhononSettings, run_phonons
from mlip.workflows.phonons.phonon_result import KB_EV

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("out_dir", nargs="?", default="phonon-bands-out", help="folder for the plots and JSON")
parser.add_argument("--model", default="ase.calculators.emt:EMT",
                    help="shipped name, checkpoint path or module:Class (default: ASE's EMT)")
parser.add_argument("--supercell", type=int, default=None,
                    help="n for an n×n×n supercell of the primitive cell (default: the smallest one at least "
                         "12 Å and twice the model's cutoff wide)")
args = parser.parse_args()

calc = resolve_calculator(args.model, dtype="float64")  # phonons need float64
print(f"model: {describe_model(calc, args.model)}"
      + (" -- UNTRAINED (random weights): the numbers below are not physical" if is_untrained(calc) else ""))

atoms = bulk("Cu", "fcc", a=3.61)  # 1-atom primitive cell
result = run_phonons(atoms, calc, PhononSettings(supercell=args.supercell, mesh=24), out_dir=args.out_dir)

relaxation = result.relaxation
print(f"relaxation: {'converged' if relaxation['converged'] else 'NOT converged'} in "
      f"{relaxation['n_steps']} steps, space group {relaxation['spacegroup_initial']} -> "
      f"{relaxation['spacegroup_final']}, a = {result.atoms.cell.lengths()[0] * 2**0.5:.4f} Å")
print(f"supercell: {result.n_supercell_atoms} atoms, {result.n_displacements} displacement(s); "
      f"{result.n_bands} branches; q-mesh {'x'.join(map(str, result.mesh))}")
for (start, end), f in zip(result.band_segments, result.band_frequencies, strict=True):
    if (start, end) == ("Γ", "X"):
        print(f"frequencies at X: {', '.join(f'{x:.3f}' for x in sorted(f[-1]))} THz")
print(f"lowest frequency {result.lowest_frequency:.2e} THz: "
      + ("IMAGINARY MODES (dynamically unstable)" if result.has_imaginary_modes else "no imaginary modes"))
k300 = int(abs(result.temperatures - 300.0).argmin())
print(f"at {result.temperatures[k300]:.0f} K: F = {1000 * result.free_energy_per_atom[k300]:.2f} meV/atom, "
      f"S = {result.entropy_per_atom[k300] / KB_EV:.3f} k_B/atom, "
      f"C_V = {result.heat_capacity_per_atom[k300] / KB_EV:.3f} k_B/atom (Dulong-Petit: 3); "
      f"zero-point energy {1000 * result.zero_point_energy_per_atom:.2f} meV/atom")
out = Path(args.out_dir).resolve()
print(f"wrote {out / 'phonons.json'}, {out / 'band_structure.png'}, {out / 'dos.png'}, "
      f"{out / 'thermal_properties.png'}")
