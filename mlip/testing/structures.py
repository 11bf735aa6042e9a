"""The structures of the physics suite (:mod:`mlip.testing.physics`), each a function returning a fresh
``ase.Atoms``.

Together they cover what a neighbour list and an energy model can get wrong: a skewed triclinic cell,
cells smaller than the cutoff (every periodic image matters), a slab (mixed periodicity), an isolated
molecule far from the origin, bonds along the coordinate axes, a neighbour crossing the cutoff and a
dimer pushed together. They use the elements Cu and Au, and H, C and O (the molecule): a potential put
through the suite must be built for them (:data:`mlip.testing.SPECIES`). Distances suit a cutoff of
about 4 Å (:data:`mlip.testing.CUTOFF`).
"""

from __future__ import annotations

from typing import Callable, Dict

import numpy as np
from ase import Atoms
from ase.build import bulk, fcc111, molecule
from ase.data import atomic_numbers, covalent_radii


def triclinic_crystal(seed=0) -> Atoms:
    """Rattled two-species crystal in a skewed triclinic cell (8 atoms)."""
    rng = np.random.default_rng(seed)
    cell = np.array([[3.9, 0.0, 0.0], [1.3, 3.6, 0.0], [-0.9, 0.8, 4.1]])
    frac = rng.random((8, 3))
    atoms = Atoms("Cu5Au3", scaled_positions=frac, cell=cell, pbc=True)
    # Spread atoms out a little: keep the minimum distance reasonable.
    atoms.set_scaled_positions((np.indices((2, 2, 2)).reshape(3, -1).T + 0.25 * frac) / 2.0)
    atoms.rattle(0.08, seed=seed)
    return atoms


def small_fcc_cell() -> Atoms:
    """One-atom fcc primitive cell, much smaller than the cutoff (every image matters)."""
    atoms = bulk("Cu", "fcc", a=3.61)
    atoms.cell[2] += [0.05, -0.03, 0.02]  # break symmetry so forces/stress are not zero by symmetry
    return atoms


def small_pair_cell() -> Atoms:
    """Two-atom CsCl-type CuAu cell (2.95 Å edge, skewed), smaller than the cutoff, rattled."""
    atoms = Atoms("CuAu", scaled_positions=[[0, 0, 0], [0.5, 0.5, 0.5]],
                  cell=[[2.95, 0.0, 0.0], [0.1, 2.95, 0.0], [0.05, -0.08, 2.95]], pbc=True)
    atoms.rattle(0.05, seed=2)
    return atoms


def slab() -> Atoms:
    """fcc(111) slab, pbc = [T, T, F], vacuum above and below."""
    atoms = fcc111("Cu", size=(2, 2, 3), vacuum=5.0, a=3.61)
    atoms.numbers[[1, 6]] = 79
    atoms.pbc = [True, True, False]
    atoms.rattle(0.05, seed=3)
    return atoms


def far_molecule() -> Atoms:
    """Isolated molecule (no cell) far from the origin."""
    atoms = molecule("CH3CH2OH")
    atoms.rattle(0.05, seed=4)
    atoms.positions += np.array([1.0e3, -2.5e3, 7.0e2])
    atoms.cell = np.zeros((3, 3))
    atoms.pbc = False
    return atoms


#: name → function building the structure: the suite's default structures
STRUCTURES: Dict[str, Callable[[], Atoms]] = {
    "triclinic": triclinic_crystal,
    "small_fcc": small_fcc_cell,
    "small_pair": small_pair_cell,
    "slab": slab,
    "molecule": far_molecule,
}


def axis_aligned_cubic_cell(a: float = 2.5) -> Atoms:
    """Simple-cubic CuAu lattice of 8 atoms (edge ``2a``), every nearest-neighbour bond along ±x, ±y or ±z
    (the poles of Euler angles); the species are mixed so that transverse terms do not all cancel."""
    grid = np.indices((2, 2, 2)).reshape(3, -1).T
    return Atoms("CuAuCuCuAuAuCuAu", positions=grid * a, cell=np.eye(3) * 2 * a, pbc=True)


def cluster_with_probe(distance: float, cutoff: float) -> Atoms:
    """A rattled 4-atom cluster in a periodic box (so stress exists) and a probe atom (index 4) whose
    distance to atom 0 is ``distance``; all other probe distances stay outside the cutoff."""
    base = Atoms(
        "CuAuCuCu",
        positions=[[0.0, 0.0, 0.0], [-2.3, 0.4, 0.3], [-1.1, 2.1, -0.4], [-1.0, -1.2, 1.9]],
    )
    probe = Atoms("Au", positions=[[distance, 0.0, 0.0]])
    atoms = base + probe
    atoms.positions += 10.0
    atoms.cell = np.eye(3) * 30.0  # much larger than 2 r_c: no periodic interactions
    atoms.pbc = True
    assert np.linalg.norm(atoms.positions[1:4] - atoms.positions[4], axis=1).min() > cutoff
    return atoms


def dimer(a: str, b: str, distance: float) -> Atoms:
    """The a–b dimer along z, ``distance`` Å apart (no cell)."""
    return Atoms([a, b], positions=[[0, 0, 0], [0, 0, distance]])


def dimer_distances(a: str, b: str, start_fraction=0.6, stop=0.1, n=120) -> np.ndarray:
    """[n] distances from ``start_fraction`` × (R_a + R_b) (covalent radii) down to ``stop`` Å."""
    bond = covalent_radii[atomic_numbers[a]] + covalent_radii[atomic_numbers[b]]
    return np.linspace(start_fraction * bond, stop, n)


def cubic_cif(rows: str, a: float = 3.8) -> str:
    """The text of a CIF of a cubic P1 cell (edge ``a`` Å) with the atom-site ``rows`` (one a line:
    label, symbol, fractional x y z, occupancy)."""
    head = [f"_cell_length_{axis} {a}" for axis in "abc"] + [f"_cell_angle_{angle} 90"
                                                                 for angle in ("alpha", "beta", "gamma")]
    loop = ["loop_"] + [f"_atom_site_{key}" for key in ("label", "type_symbol", "fract_x", "fract_y",
                                                           "fract_z", "occupancy")]
    return "\n".join(["data_x", *head, "_symmetry_space_group_name_H-M 'P 1'", *loop, rows.strip(), ""])


def disordered_cuau_cif(cu: float = 0.5, au: float = 0.5) -> str:
    """An fcc CuAu3-like CIF whose site Cu1 at the origin holds Cu and Au with occupancies ``cu`` and
    ``au`` (a partially occupied site: ASE reads it as one atom of the species it finds dominant)."""
    return cubic_cif(f"Cu1 Cu 0 0 0 {cu}\nAu1 Au 0 0 0 {au}\nCu2 Cu 0.5 0.5 0 1.0\nCu3 Cu 0.5 0 0.5 1.0\n"
                     "Cu4 Cu 0 0.5 0.5 1.0")
