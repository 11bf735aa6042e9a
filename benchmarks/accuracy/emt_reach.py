"""How far ASE's EMT reaches: what a model with a given cutoff cannot see directly.

ASE's EMT (default parameters) weights every pair by a Fermi function that is 1/2 at
rc = 5.38 Å and 1e-4 at 5.76 Å, whatever elements are present, and lists neighbours to 5.88 Å.
This script labels EMT structures twice: with ASE's EMT as is, and with EMT whose pair weight is
multiplied by a steep step that removes every pair beyond R (1/2 at R - 0.1 Å, 3e-3 at R; the
fcc reference sums are left alone). The differences are the part of the labels that comes from pairs
beyond R: a model with cutoff R sees those pairs only through messages passed along shorter edges.

It prints, per R, the MAE of the force and stress differences and the energy differences per atom
(their mean, and the MAE about the mean, which a per-structure constant cannot absorb).

It also prints EMT's dimer binding energy (per atom, relative to the two isolated atoms) at the far end
of the generator's dimer range (1.9–4.5 Å) and beyond, over all 28 element pairs. A model with cutoff R
and exact isolated-atom energies must give zero binding from R on, so a dimer still bound there is
out of its reach.

    python benchmarks/accuracy/emt_reach.py [DATA.xyz] [-n 300] [--radii 5.0 5.5 6.0]
"""

from __future__ import annotations

import argparse

import numpy as np
from ase.calculators.emt import EMT


class TruncatedEMT(EMT):
    """EMT with every pair beyond ``radius`` switched off by a steep logistic step (its derivative included)."""

    def __init__(self, radius: float, steepness: float = 60.0, **kwargs):
        super().__init__(**kwargs)
        self.radius = radius
        self.steepness = steepness

    def _calc_theta(self, r):
        w, dw_dr_over_w = super()._calc_theta(r)
        step = 1.0 / (1.0 + np.exp(self.steepness * (r - (self.radius - 0.1))))
        return w * step, dw_dr_over_w - self.steepness * (1.0 - step)


def labels(atoms, calc):
    atoms = atoms.copy()
    atoms.calc = calc
    energy = atoms.get_potential_energy() / len(atoms)
    forces = atoms.get_forces()
    stress = atoms.get_stress() if atoms.pbc.all() else None
    return energy, forces, stress


def dimer_binding(distances, elements=("Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt")):
    """{(A, B): [binding per atom (eV) at each distance]}: E(AB at d)/2 − (E(A) + E(B))/2 with ASE's EMT
    (negative: bound)."""
    from ase import Atoms

    def energy(symbols, positions):
        atoms = Atoms(symbols, positions=positions)
        atoms.calc = EMT()
        return atoms.get_potential_energy()

    isolated = {el: energy([el], [[0.0, 0.0, 0.0]]) for el in elements}
    out = {}
    for i, a in enumerate(elements):
        for b in elements[i:]:
            out[a, b] = [(energy([a, b], [[0.0, 0.0, 0.0], [0.0, 0.0, d]]) - isolated[a] - isolated[b]) / 2
                         for d in distances]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", default=None,
                        help="extxyz structures (default: 300 new ones from `mlip data emt`'s generator, seed 1)")
    parser.add_argument("-n", type=int, default=300, help="structures to use")
    parser.add_argument("--radii", type=float, nargs="+", default=[5.0, 5.5, 6.0])
    args = parser.parse_args()

    if args.data is None:
        from mlip.data.emt import generate_emt_dataset

        frames = generate_emt_dataset(n_structures=args.n, seed=1, progress=False)
    else:
        import ase.io

        frames = ase.io.read(args.data, f":{args.n}")

    full = EMT()
    rc, rc_list, acut = full._calc_cutoff(frames[0])
    print(f"ASE EMT: pair weight 1/2 at {rc:.3f} Å, 1e-4 at {rc + np.log(1e4 - 1) / acut:.3f} Å, "
          f"neighbour list to {rc_list:.3f} Å; {len(frames)} structures")
    reference = [labels(atoms, full) for atoms in frames]
    print(f"{'R (Å)':>6} {'energy mean':>12} {'energy MAE about mean':>22} {'forces MAE':>11} {'stress MAE':>11}")
    print(f"{'':>6} {'(meV/atom)':>12} {'(meV/atom)':>22} {'(meV/Å)':>11} {'(meV/Å³)':>11}")
    for radius in args.radii:
        truncated = TruncatedEMT(radius)
        de, df, ds = [], [], []
        for atoms, (e_ref, f_ref, s_ref) in zip(frames, reference):
            e, f, s = labels(atoms, truncated)
            de.append(e_ref - e)
            df.append(np.abs(f_ref - f).ravel())
            if s_ref is not None:
                ds.append(np.abs(s_ref - s))
        de = 1e3 * np.array(de)
        df = 1e3 * np.concatenate(df)
        stress = f"{1e3 * np.concatenate(ds).mean():>11.2f}" if ds else f"{'-':>11}"
        print(f"{radius:>6.2f} {de.mean():>12.1f} {np.abs(de - de.mean()).mean():>22.1f} {df.mean():>11.1f} {stress}")

    distances = (4.0, 4.5, 5.0, 5.5)
    binding = dimer_binding(distances)
    values = 1e3 * np.array(list(binding.values()))  # [pairs, distances] meV/atom
    print(f"\nEMT dimer binding per atom over the {len(binding)} element pairs (meV/atom; negative = bound)")
    print(f"{'d (Å)':>6} {'median':>8} {'strongest':>10} {'pair':>6}")
    pairs = list(binding)
    for k, d in enumerate(distances):
        j = int(np.argmin(values[:, k]))
        print(f"{d:>6.2f} {np.median(values[:, k]):>8.1f} {values[j, k]:>10.1f} {''.join(pairs[j]):>6}")


if __name__ == "__main__":
    main()
