"""Reference data labelled with ASE's EMT: metals and alloys of Al, Cu, Ag, Au, Ni, Pd, Pt.

:func:`generate_emt_dataset` builds structures in seven categories (``info["config_type"]``):

* ``crystal``: one element on fcc/bcc/hcp (conventional or primitive cells, supercells), strained
  (isotropic ±4 %, plus anisotropic and shear components up to ±3 %) and rattled (σ 0.01–0.1 Å);
  every sixth (k = 0, 6, ...) is an *ideal* crystal (isotropic scaling only, no rattle: the forces
  vanish by symmetry).
* ``ordered_alloy``: prototypes L1₂ (A₃B), L1₀ (AB), B2 (AB), D0₃ (A₃B) and the ternary Heusler L2₁
  (A₂BC); strained, rattled, again with some ideal ones.
* ``random_alloy``: binary and ternary solid solutions on fcc/bcc/hcp, random compositions.
* ``vacancy``: 16–64 site supercells (element or solid solution) with 1–3 vacancies.
* ``surface``: slabs fcc(100)/(110)/(111), bcc(100)/(110), hcp(0001), 3–7 layers, 5–8 Å of vacuum on
  each side, ``pbc = [T, T, F]``, sometimes alloyed, sometimes with an adatom.
* ``md``: snapshots of short Langevin runs with EMT (2 fs steps; a snapshot after 10 steps, then every
  8; 5 per trajectory) at 300–1500 K of bulk cells and at 300–1000 K of slabs; one ``group`` per
  trajectory.
* ``cluster``: isolated atoms (one per element), dimers, random compact clusters (3–24 atoms) and
  magic clusters (icosahedra, cuboctahedra, octahedra, decahedra; 7–55 atoms), no cell,
  ``pbc = False`` and no stress label. In EMT an isolated atom lies 3–6 eV above its bulk energy: a
  model trained on bulk alone gets clusters and surfaces badly wrong.
* ``compressed``: pairs pushed closer than any other category allows, so a model learns the rising
  wall of the repulsion: dimers, trimers (one compressed pair and a third atom at a bonding distance)
  and fcc cells with one atom moved towards a neighbour, each compressed pair at a distance between
  0.45 × the sum of the pair's covalent radii (ASE's table) and the shortest distance of the other
  categories.

Periodic cells have 4–64 atoms; lattice constants start at EMT's own fcc equilibrium
(:data:`EMT_FCC_LATTICE`; bcc/hcp at the same volume per atom, ideal c/a; alloys by Vegard's law);
outside ``compressed`` no two atoms are closer than 1.8 Å.
Labels are EMT's energy (eV), forces (eV/Å) and, for cells with a
3-D cell (bulk and slabs: the virial over the whole cell, vacuum included), stress (eV/Å³, ASE sign).
Positions are rounded to the 8 decimals the extxyz file stores *before* labelling, so the file's labels
are exactly EMT's on the file's positions.

Range: ASE's EMT (``asap_cutoff=False``, the default) uses one cutoff for every structure, set by
the largest s₀ of its parameter table (Ag): a Fermi function centred at 5.38 Å that falls to 1e-4 at
5.76 Å, with neighbours listed to 5.88 Å. A model with a 5 Å cutoff cannot see the third fcc shell
of Al, Ag and Au (4.96–5.01 Å at equilibrium) nor its strained and rattled neighbours beyond 5 Å:
that part of EMT's energy a model must infer from the shells it does see. How large it is, and what
a 6 Å model did instead, is in docs/training-recipes.md ("The reach of EMT").

Every frame carries ``config_type``, ``group`` (its parent structure or MD trajectory, for grouped
splits), ``elements`` (e.g. ``"Au-Cu"``), ``prototype``, ``rattle`` (Gaussian σ, Å) and ``strain`` (largest
component of the anisotropic/shear strain; both 0 for ideal crystals, whose only deformation is an
isotropic scaling); MD frames (with their parent's rattle/strain) also ``temperature`` (K) and ``md_step``. Structure ``k`` of
a category depends only on (seed, category, k), so a smaller run is a prefix of a larger one, and the
same seed gives a byte-identical file.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

import numpy as np

__all__ = [
    "CATEGORIES",
    "DEFAULT_COUNTS",
    "ELEMENTS",
    "EMT_FCC_LATTICE",
    "SMALL_COUNTS",
    "generate_emt_dataset",
    "resolve_counts",
]

ELEMENTS = ("Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt")
#: EMT's equilibrium fcc lattice constants (Å), minimised with ASE 3.29's EMT (stress < 5e-5 eV/Å³).
EMT_FCC_LATTICE = {"Al": 3.9943, "Cu": 3.5898, "Ag": 4.0636, "Au": 4.0562, "Ni": 3.4871, "Pd": 3.8787,
                   "Pt": 3.9218}
#: a category added later goes at the end: structure k of a category depends on the category's index
CATEGORIES = ("crystal", "ordered_alloy", "random_alloy", "vacancy", "surface", "md", "cluster", "compressed")
DEFAULT_COUNTS = {"crystal": 350, "ordered_alloy": 350, "random_alloy": 550, "vacancy": 300, "surface": 550,
                  "md": 600, "cluster": 300, "compressed": 120}
SMALL_COUNTS = {"crystal": 4, "ordered_alloy": 5, "random_alloy": 3, "vacancy": 2, "surface": 3, "md": 4,
                "cluster": 4, "compressed": 3}
MIN_DISTANCE = 1.8
MIN_NN_FRACTION = 0.75  # of the pair's mean EMT nearest-neighbour distance (Au–Au ≥ 2.15 Å, Ni–Ni ≥ 1.85 Å)
#: the shortest compressed pair, as a fraction of the sum of the two covalent radii
COMPRESSED_FRACTION = 0.45
COMPRESSED_KINDS = ("dimer", "trimer", "fcc-pair")
MIN_ATOMS, MAX_ATOMS = 4, 64
MD_FRAMES_PER_TRAJECTORY = 5
IDEAL_EVERY = 6
MD_TIMESTEP_FS = 2.0
MD_EQUILIBRATION_STEPS = 10
MD_INTERVAL_STEPS = 8
_POSITION_DECIMALS = 8  # what ASE's extxyz writer stores (%16.8f)


# ------------------------------------------------------------------------------------------ helpers
def _rng(seed: int, category: str, k: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), CATEGORIES.index(category), int(k)])


def _vegard(symbols: Sequence[str]) -> float:
    """fcc lattice constant of a composition (Vegard's law on EMT's elemental lattice constants)."""
    return float(np.mean([EMT_FCC_LATTICE[s] for s in symbols]))


def _pick_elements(rng, n: int) -> List[str]:
    return [ELEMENTS[i] for i in rng.choice(len(ELEMENTS), size=n, replace=False)]


def _lattice_params(prototype: str, a_fcc: float):
    volume = a_fcc**3 / 4.0  # per atom, kept across structure types
    if prototype == "bcc":
        return (2.0 * volume) ** (1.0 / 3.0)
    if prototype == "hcp":
        a = a_fcc / math.sqrt(2.0)
        return a, a * math.sqrt(8.0 / 3.0)
    return a_fcc


def _lattice(prototype: str, a_fcc: float, rng, primitive: Optional[bool] = None):
    """One-species (Cu placeholder) fcc/bcc/hcp cell at the volume per atom of ``a_fcc``."""
    from ase.build import bulk

    if primitive is None:
        primitive = rng.random() < 0.3
    if prototype == "fcc":
        return bulk("Cu", "fcc", a=a_fcc, cubic=not primitive)
    if prototype == "bcc":
        return bulk("Cu", "bcc", a=_lattice_params("bcc", a_fcc), cubic=not primitive)
    a, c = _lattice_params("hcp", a_fcc)
    return bulk("Cu", "hcp", a=a, c=c, orthorhombic=not primitive)


def _supercell(atoms, rng, lo: int, hi: int):
    """Random diagonal repetition with lo ≤ n_atoms ≤ hi and cell lengths within a factor 2.5 of each other."""
    n0 = len(atoms)
    lengths = atoms.cell.lengths()
    options = []
    for reps in np.ndindex(4, 4, 4):
        r = np.array(reps) + 1
        n = n0 * int(np.prod(r))
        if lo <= n <= hi:
            lens = lengths * r
            if lens.max() / lens.min() <= 2.5:
                options.append(tuple(int(x) for x in r))
    if not options:
        raise RuntimeError(f"no supercell of a {n0}-atom cell with {lo}–{hi} atoms")
    # Uniform over the reachable atom counts first (else the many ways to make large cells dominate).
    sizes = sorted(set(n0 * int(np.prod(o)) for o in options))
    n = sizes[int(rng.integers(len(sizes)))]
    options = [o for o in options if n0 * int(np.prod(o)) == n]
    return atoms.repeat(options[int(rng.integers(len(options)))])


def _assign_random(atoms, rng, elements: Sequence[str]) -> None:
    """Random solid solution: every element at least once, composition from a flat Dirichlet."""
    n = len(atoms)
    k = len(elements)
    frac = rng.dirichlet(np.ones(k))
    counts = np.ones(k, dtype=int) + np.floor(frac * (n - k)).astype(int)
    counts[int(np.argmax(frac))] += n - counts.sum()
    symbols = np.repeat(np.array(elements), counts)
    atoms.set_chemical_symbols(list(symbols[rng.permutation(n)]))


def _strain(atoms, rng, iso: float, aniso: float, in_plane_only: bool = False) -> float:
    """Deform the cell (atoms follow) by F = s(I + ε).

    s ∈ [1 − iso, 1 + iso] is an isotropic scaling; ε is symmetric with components in ±aniso (shear
    included). With ``in_plane_only`` (slabs) only the in-plane block is deformed, keeping the surface
    normal and the vacuum. Returns the largest |component| of ε (the anisotropic/shear part).
    """
    s = 1.0 + rng.uniform(-iso, iso)
    eps = rng.uniform(-aniso, aniso, size=(3, 3))
    eps = 0.5 * (eps + eps.T)
    if in_plane_only:
        eps[2, :] = 0.0
        eps[:, 2] = 0.0
        F = np.eye(3) + eps
        F[:2, :2] *= s
    else:
        F = s * (np.eye(3) + eps)
    atoms.set_cell(atoms.cell.array @ F.T, scale_atoms=True)
    return float(np.abs(eps).max())


def _min_distance_ok(atoms, dmin: float = MIN_DISTANCE, fraction: float = MIN_NN_FRACTION) -> bool:
    """No pair closer than ``dmin`` nor than ``fraction`` × the pair's mean EMT nearest-neighbour distance."""
    from ase.data import chemical_symbols
    from ase.neighborlist import neighbor_list

    if len(atoms) < 2 and not atoms.pbc.any():
        return True
    nn = np.array([EMT_FCC_LATTICE[chemical_symbols[z]] / math.sqrt(2.0) for z in atoms.numbers])
    cutoff = max(dmin, fraction * float(nn.max()))
    probe = atoms
    if not atoms.pbc.any() and atoms.cell.rank < 3:  # neighbor_list wants a box for a free cluster
        probe = atoms.copy()
        probe.cell = np.ptp(atoms.positions, axis=0) + 2.0 * cutoff + 1.0
    i, j, d = neighbor_list("ijd", probe, cutoff)
    if len(d) == 0:
        return True
    limit = np.maximum(dmin, fraction * 0.5 * (nn[i] + nn[j]))
    return bool(np.all(d >= limit))


def _round_positions(atoms) -> None:
    """Round positions the way the extxyz file stores them, so labels match the file exactly."""
    flat = atoms.positions.ravel()
    text = " ".join(f"{v:.{_POSITION_DECIMALS}f}" for v in flat)
    atoms.positions = np.array(text.split(), dtype=np.float64).reshape(-1, 3)


def _elements_label(atoms) -> str:
    return "-".join(sorted(set(atoms.get_chemical_symbols())))


def _label(atoms, info: dict):
    """Round positions, evaluate EMT, attach a SinglePointCalculator; returns the labelled Atoms."""
    from ase.calculators.emt import EMT
    from ase.calculators.singlepoint import SinglePointCalculator

    atoms = atoms.copy()
    atoms.calc = None
    atoms.set_constraint()
    for key in list(atoms.arrays):  # only numbers and positions go to the file (no tags, momenta, ...)
        if key not in ("numbers", "positions"):
            del atoms.arrays[key]
    if atoms.pbc.any():
        atoms.wrap()
    _round_positions(atoms)
    atoms.info = dict(info)
    atoms.info.setdefault("elements", _elements_label(atoms))
    calc = EMT()
    atoms.calc = calc
    energy = atoms.get_potential_energy()
    forces = atoms.get_forces()
    results = {"energy": float(energy), "forces": np.array(forces)}
    if atoms.cell.rank == 3:
        results["stress"] = np.array(atoms.get_stress(voigt=True))
    atoms.calc = SinglePointCalculator(atoms, **results)
    if not np.isfinite(energy) or not np.all(np.isfinite(forces)):
        raise RuntimeError(f"EMT gave non-finite labels for {atoms.get_chemical_formula()}")
    return atoms


def _retry(build, rng, what: str, attempts: int = 100):
    for _ in range(attempts):
        atoms = build(rng)
        if atoms is not None and _min_distance_ok(atoms):
            return atoms
    raise RuntimeError(f"could not build a {what} with all distances ≥ {MIN_DISTANCE} Å in {attempts} attempts")


# ----------------------------------------------------------------------------------- bulk structures
def _ordered_alloy(prototype: str, elements: Sequence[str]):
    """Conventional cell of an ordered prototype; ``elements`` = (A, B[, C])."""
    from ase import Atoms

    A, B = elements[0], elements[1]
    if prototype == "L1_2":  # A3B, Cu3Au type
        symbols = [B, A, A, A]
        frac = [[0, 0, 0], [0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]]
        a = _vegard([A, A, A, B])
        return Atoms(symbols, scaled_positions=frac, cell=[a, a, a], pbc=True)
    if prototype == "L1_0":  # AB, CuAu type (alternating (001) layers)
        symbols = [A, A, B, B]
        frac = [[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]]
        a = _vegard([A, B])
        return Atoms(symbols, scaled_positions=frac, cell=[a, a, a], pbc=True)
    if prototype == "B2":  # AB, CsCl type
        a = _lattice_params("bcc", _vegard([A, B]))
        return Atoms([A, B], scaled_positions=[[0, 0, 0], [0.5, 0.5, 0.5]], cell=[a, a, a], pbc=True)
    if prototype in ("D0_3", "L2_1"):  # 16-atom cell: doubled bcc cube
        C = elements[2] if prototype == "L2_1" else B
        corner_even, corner_odd, centre = [], [], []
        for i, j, k in np.ndindex(2, 2, 2):
            (corner_even if (i + j + k) % 2 == 0 else corner_odd).append([i / 2, j / 2, k / 2])
            centre.append([i / 2 + 0.25, j / 2 + 0.25, k / 2 + 0.25])
        if prototype == "D0_3":  # A3B, Fe3Al type
            symbols = [B] * 4 + [A] * 4 + [A] * 8
            comp = [A, A, A, B]
        else:  # A2BC, Heusler Cu2MnAl type
            symbols = [B] * 4 + [C] * 4 + [A] * 8
            comp = [A, A, B, C]
        a = 2.0 * _lattice_params("bcc", _vegard(comp))
        return Atoms(symbols, scaled_positions=corner_even + corner_odd + centre, cell=[a, a, a], pbc=True)
    raise ValueError(f"unknown prototype {prototype!r}")


ORDERED_PROTOTYPES = ("L1_2", "L1_0", "B2", "D0_3", "L2_1")


def _is_ideal(k: Optional[int]) -> bool:
    """Every sixth crystal / ordered alloy (k = 0, 6, 12, ...) is ideal: isotropic scaling only, no rattle."""
    return k is not None and k % IDEAL_EVERY == 0


def _build_crystal(rng, k: Optional[int] = None):
    element = ELEMENTS[int(rng.integers(len(ELEMENTS)))]
    prototype = ("fcc", "bcc", "hcp")[int(rng.choice(3, p=[0.5, 0.25, 0.25]))]
    ideal = _is_ideal(k)

    def build(r):
        atoms = _supercell(_lattice(prototype, EMT_FCC_LATTICE[element], r), r, MIN_ATOMS, MAX_ATOMS)
        atoms.set_chemical_symbols([element] * len(atoms))
        return _perturb(atoms, r, ideal)

    atoms = _retry(build, rng, "crystal")
    return atoms, {"prototype": prototype}


def _perturb(atoms, rng, ideal: bool, rattle_range=(0.01, 0.1)):
    if ideal:  # isotropic scaling only: every atom keeps its site symmetry, forces vanish
        _strain(atoms, rng, iso=0.04, aniso=0.0)
        atoms.info["_rattle"], atoms.info["_strain"] = 0.0, 0.0
        return atoms
    strain = _strain(atoms, rng, iso=0.04, aniso=0.03)
    sigma = float(rng.uniform(*rattle_range))
    atoms.positions += rng.normal(0.0, sigma, size=atoms.positions.shape)
    atoms.info["_rattle"], atoms.info["_strain"] = sigma, strain
    return atoms


def _build_ordered(rng, k: Optional[int] = None):
    prototype = ORDERED_PROTOTYPES[int(rng.integers(len(ORDERED_PROTOTYPES)))]
    elements = _pick_elements(rng, 3 if prototype == "L2_1" else 2)
    ideal = _is_ideal(k)

    def build(r):
        atoms = _supercell(_ordered_alloy(prototype, elements), r, MIN_ATOMS, MAX_ATOMS)
        return _perturb(atoms, r, ideal)

    return _retry(build, rng, f"{prototype} alloy"), {"prototype": prototype}


def _build_random_alloy(rng, k: Optional[int] = None):
    prototype = ("fcc", "bcc", "hcp")[int(rng.choice(3, p=[0.5, 0.25, 0.25]))]
    elements = _pick_elements(rng, 2 if rng.random() < 0.6 else 3)

    def build(r):
        atoms = _supercell(_lattice(prototype, 3.6, r), r, 8, MAX_ATOMS)
        _assign_random(atoms, r, elements)
        a = _vegard(atoms.get_chemical_symbols())
        atoms.set_cell(atoms.cell.array * (a / 3.6), scale_atoms=True)
        return _perturb(atoms, r, ideal=False, rattle_range=(0.0, 0.1))

    return _retry(build, rng, "random alloy"), {"prototype": prototype}


def _build_vacancy(rng, k: Optional[int] = None):
    prototype = ("fcc", "bcc", "hcp")[int(rng.choice(3, p=[0.5, 0.25, 0.25]))]
    alloy = rng.random() < 0.5
    elements = _pick_elements(rng, int(rng.integers(2, 4)) if alloy else 1)
    n_vac = int(rng.integers(1, 4))

    def build(r):
        atoms = _supercell(_lattice(prototype, 3.6, r), r, 16, MAX_ATOMS)
        if alloy:
            _assign_random(atoms, r, elements)
        else:
            atoms.set_chemical_symbols(elements * len(atoms))
        a = _vegard(atoms.get_chemical_symbols())
        atoms.set_cell(atoms.cell.array * (a / 3.6), scale_atoms=True)
        del atoms[sorted(r.choice(len(atoms), size=n_vac, replace=False).tolist())]
        return _perturb(atoms, r, ideal=False, rattle_range=(0.0, 0.1))

    atoms = _retry(build, rng, "vacancy cell")
    return atoms, {"prototype": prototype}


# ------------------------------------------------------------------------------------------- slabs
SURFACES = ("fcc100", "fcc110", "fcc111", "bcc100", "bcc110", "hcp0001")


def _slab(surface: str, a_fcc: float, rng):
    from ase import build

    options = [(nx, ny, nz) for nx in (1, 2, 3) for ny in (1, 2, 3) for nz in range(3, 8)]
    per_cell = 2 if surface == "fcc110" else 1  # atoms per layer of a 1×1 cell
    options = [o for o in options if MIN_ATOMS <= o[0] * o[1] * o[2] * per_cell <= MAX_ATOMS and o[0] * o[1] >= 2]
    size = options[int(rng.integers(len(options)))]
    if surface.startswith("fcc"):
        return getattr(build, surface)("Cu", size=size, a=a_fcc, vacuum=5.0)
    if surface.startswith("bcc"):
        return getattr(build, surface)("Cu", size=size, a=_lattice_params("bcc", a_fcc), vacuum=5.0)
    a, c = _lattice_params("hcp", a_fcc)
    return build.hcp0001("Cu", size=size, a=a, c=c, vacuum=5.0)


def _build_surface(rng, k: Optional[int] = None, rattle_range=(0.01, 0.1)):
    surface = SURFACES[int(rng.integers(len(SURFACES)))]
    alloy = rng.random() < 0.4
    elements = _pick_elements(rng, int(rng.integers(2, 4)) if alloy else 1)
    adatom = rng.random() < 0.3
    vacuum = float(rng.uniform(5.0, 8.0))  # on each side

    def build(r):
        atoms = _slab(surface, 3.6, r)
        if adatom and len(atoms) < MAX_ATOMS:
            top = atoms.positions[:, 2].max()
            tops = np.where(atoms.positions[:, 2] > top - 0.1)[0]
            base = atoms.positions[int(tops[int(r.integers(len(tops)))])]
            offset = np.append(r.normal(0.0, 0.9, size=2), r.uniform(1.9, 2.4))
            atoms.append(atoms[0])
            atoms.positions[-1] = base + offset
        if alloy:
            _assign_random(atoms, r, elements)
        else:
            atoms.set_chemical_symbols(elements * len(atoms))
        # Scale the slab to the composition's lattice constant (built at a = 3.6 Å), then set the
        # surface-normal cell vector to the slab thickness plus the vacuum on both sides.
        scale = _vegard(atoms.get_chemical_symbols()) / 3.6
        cell = atoms.cell.array.copy()
        assert abs(cell[2, 0]) < 1e-12 and abs(cell[2, 1]) < 1e-12 and not np.any(cell[:2, 2])
        atoms.positions = atoms.positions * scale
        z = atoms.positions[:, 2]
        cell[:2] *= scale
        cell[2] = [0.0, 0.0, float(z.max() - z.min()) + 2.0 * vacuum]
        atoms.set_cell(cell, scale_atoms=False)
        atoms.center(axis=2)
        strain = _strain(atoms, r, iso=0.02, aniso=0.02, in_plane_only=True)
        sigma = float(r.uniform(*rattle_range))
        atoms.positions += r.normal(0.0, sigma, size=atoms.positions.shape)
        atoms.pbc = [True, True, False]
        atoms.info["_rattle"], atoms.info["_strain"] = sigma, strain
        return atoms

    atoms = _retry(build, rng, f"{surface} slab")
    return atoms, {"prototype": surface + ("+adatom" if adatom else "")}


# ---------------------------------------------------------------------------------------- clusters
MAGIC_CLUSTERS = (
    ("icosahedron13", "Icosahedron", dict(noshells=2)),
    ("icosahedron55", "Icosahedron", dict(noshells=3)),
    ("cuboctahedron13", "Octahedron", dict(length=3, cutoff=1)),
    ("octahedron19", "Octahedron", dict(length=3, cutoff=0)),
    ("truncated_octahedron38", "Octahedron", dict(length=4, cutoff=1)),
    ("decahedron7", "Decahedron", dict(p=2, q=1, r=0)),
    ("decahedron13", "Decahedron", dict(p=2, q=2, r=0)),
    ("decahedron23", "Decahedron", dict(p=3, q=1, r=0)),
)
CLUSTER_KINDS = ("atom", "dimer", "compact", "magic")


def _build_cluster(rng, k: int):
    from ase import Atoms

    kind = CLUSTER_KINDS[k % len(CLUSTER_KINDS)]
    if kind == "atom" and k // len(CLUSTER_KINDS) >= len(ELEMENTS):
        kind = "compact"  # one isolated atom per element is enough
    if kind == "atom":
        element = ELEMENTS[k // len(CLUSTER_KINDS)]
        return Atoms(element, positions=[[0.0, 0.0, 0.0]]), {"prototype": "atom", "_rattle": 0.0, "_strain": 0.0}
    alloy = rng.random() < 0.4
    elements = _pick_elements(rng, int(rng.integers(2, 4)) if alloy else 1)

    def finish(atoms, r, sigma):
        if alloy:
            _assign_random(atoms, r, elements[: min(len(elements), len(atoms))])
        else:
            atoms.set_chemical_symbols(elements * len(atoms))
        atoms.positions += r.normal(0.0, sigma, size=atoms.positions.shape)
        atoms.positions -= atoms.positions.mean(axis=0)
        atoms.set_cell(np.zeros((3, 3)))
        atoms.pbc = False
        atoms.info["_rattle"], atoms.info["_strain"] = sigma, 0.0
        return atoms

    if kind == "dimer":
        def build(r):
            d = float(r.uniform(1.9, 4.5))
            return finish(Atoms("Cu2", positions=[[0, 0, 0], [0, 0, d]]), r, 0.0)

        return _retry(build, rng, "dimer"), {"prototype": "dimer"}
    if kind == "compact":
        n = int(rng.integers(3, 25))

        def build(r):
            nn = _vegard(elements) / math.sqrt(2.0)
            pos = [np.zeros(3)]
            tries = 0
            while len(pos) < n and tries < 10_000:
                tries += 1
                v = r.normal(size=3)
                cand = pos[int(r.integers(len(pos)))] + v / np.linalg.norm(v) * nn * r.uniform(0.92, 1.12)
                if min(np.linalg.norm(cand - p) for p in pos) >= 0.85 * nn:
                    pos.append(cand)
            if len(pos) < n:
                return None
            return finish(Atoms("Cu" + str(n), positions=np.array(pos)), r, float(r.uniform(0.0, 0.06)))

        return _retry(build, rng, "compact cluster"), {"prototype": f"compact{n}"}
    name, ctor, kwargs = MAGIC_CLUSTERS[int(rng.integers(len(MAGIC_CLUSTERS)))]

    def build(r):
        from ase import cluster

        a = _vegard(elements) * float(r.uniform(0.96, 1.03))
        atoms = getattr(cluster, ctor)("Cu", latticeconstant=a, **kwargs)
        atoms = Atoms(atoms.numbers, positions=atoms.positions)
        return finish(atoms, r, float(r.uniform(0.0, 0.08)))

    return _retry(build, rng, name), {"prototype": name}


def _pair_limit(a: str, b: str) -> float:
    """The shortest distance :func:`_min_distance_ok` allows between elements a and b."""
    nn = 0.5 * (EMT_FCC_LATTICE[a] + EMT_FCC_LATTICE[b]) / math.sqrt(2.0)
    return max(MIN_DISTANCE, MIN_NN_FRACTION * nn)


def _compressed_distance(rng, a: str, b: str) -> float:
    """A distance between COMPRESSED_FRACTION × (R_a + R_b) and the shortest one other categories allow."""
    from ase.data import atomic_numbers, covalent_radii

    shortest = COMPRESSED_FRACTION * (covalent_radii[atomic_numbers[a]] + covalent_radii[atomic_numbers[b]])
    return float(rng.uniform(shortest, _pair_limit(a, b)))


def _random_direction(rng) -> np.ndarray:
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


def _build_compressed(rng, k: int):
    """One structure with a compressed pair (atoms 0 and 1): a dimer, a trimer or an fcc cell."""
    from ase import Atoms

    kind = COMPRESSED_KINDS[k % len(COMPRESSED_KINDS)]
    a, b = (_pick_elements(rng, 1) * 2) if rng.random() < 0.5 else _pick_elements(rng, 2)
    d = _compressed_distance(rng, a, b)
    if kind == "fcc-pair":
        lattice = _vegard([a, b]) * float(rng.uniform(0.98, 1.03))
        atoms = _lattice("fcc", lattice, rng, primitive=False)
        atoms = atoms.repeat((2, 1, 1) if rng.random() < 0.5 else (1, 1, 1))
        symbols = [a, b] + [a if rng.random() < 0.5 else b for _ in range(len(atoms) - 2)]
        atoms.set_chemical_symbols(symbols)
        # Move atom 0 along the bond to its nearest neighbour, atom 1 (at the cell's face centre).
        bond = atoms.get_distance(0, 1, mic=True, vector=True)
        atoms.positions[0] += bond * (1.0 - d / np.linalg.norm(bond))
        others = (np.arange(len(atoms)) >= 2)[:, None]  # the pair itself stays as placed
        atoms.positions += rng.normal(0.0, 0.02, size=atoms.positions.shape) * others
        return atoms, {"prototype": kind, "_rattle": 0.02, "_strain": 0.0}
    positions = [np.zeros(3), _random_direction(rng) * d]
    symbols = [a, b]
    if kind == "trimer":
        c = _pick_elements(rng, 1)[0]
        third = positions[int(rng.integers(2))] + _random_direction(rng) * _vegard([c]) / math.sqrt(2.0)
        if min(np.linalg.norm(third - p) for p in positions) < 0.8 * _pair_limit(a, c):
            third = positions[1] + (positions[1] - positions[0]) / d * _vegard([c]) / math.sqrt(2.0)
        positions.append(third)
        symbols.append(c)
    atoms = Atoms(symbols, positions=np.array(positions))
    atoms.positions -= atoms.positions.mean(axis=0)
    return atoms, {"prototype": kind, "_rattle": 0.0, "_strain": 0.0}


# -------------------------------------------------------------------------------------------- MD
def _md_trajectory(rng, n_frames: int, traj: int) -> List:
    """Labelled snapshots of one short Langevin run (EMT) of a bulk cell or slab."""
    from ase import units
    from ase.calculators.emt import EMT
    from ase.md.langevin import Langevin

    choice = rng.random()
    if choice < 0.25:
        atoms, meta = _build_surface(rng, rattle_range=(0.0, 0.05))
        temperature = float(rng.uniform(300.0, 1000.0))
    else:
        builder = _build_crystal if choice < 0.5 else (_build_random_alloy if choice < 0.8 else _build_ordered)
        atoms, meta = builder(rng)
        temperature = float(rng.uniform(300.0, 1500.0))
    start_rattle = round(float(atoms.info.pop("_rattle", 0.0)), 6)
    start_strain = round(float(atoms.info.pop("_strain", 0.0)), 6)
    atoms.calc = EMT()
    # Maxwell–Boltzmann momenta at the target temperature, zero total momentum.
    masses = atoms.get_masses()
    momenta = rng.standard_normal((len(atoms), 3)) * np.sqrt(masses * units.kB * temperature)[:, None]
    momenta -= masses[:, None] * (momenta.sum(axis=0) / masses.sum())
    atoms.set_momenta(momenta)
    dyn = Langevin(atoms, MD_TIMESTEP_FS * units.fs, temperature_K=temperature, friction=0.02 / units.fs,
                   fixcm=False, rng=rng)
    frames = []
    step = 0
    for f in range(n_frames):
        n_steps = MD_EQUILIBRATION_STEPS if f == 0 else MD_INTERVAL_STEPS
        dyn.run(n_steps)
        step += n_steps
        info = {
            "config_type": "md",
            "group": f"md-{traj:05d}",
            "prototype": meta["prototype"],
            "rattle": start_rattle,
            "strain": start_strain,
            "temperature": round(temperature, 3),
            "md_step": step,
        }
        snap = atoms.copy()
        snap.calc = None
        if _min_distance_ok(snap):
            frames.append(_label(snap, info))
        else:  # an unphysical MD collision: skip the snapshot, keep the trajectory going
            frames.append(None)
    return frames


# ----------------------------------------------------------------------------------------- driver
def resolve_counts(n_structures: Union[None, int, Dict[str, int]] = None, small: bool = False) -> Dict[str, int]:
    """Per-category frame counts: defaults, the small set, a total spread like the defaults, or a dict."""
    if isinstance(n_structures, dict):
        unknown = sorted(set(n_structures) - set(CATEGORIES))
        if unknown:
            raise ValueError(f"unknown categories {unknown}; choose from {list(CATEGORIES)}")
        counts = {c: int(n_structures.get(c, 0)) for c in CATEGORIES}
    elif n_structures is None:
        counts = dict(SMALL_COUNTS if small else DEFAULT_COUNTS)
    else:
        total = int(n_structures)
        if total < 0:
            raise ValueError("n_structures must be non-negative")
        base = SMALL_COUNTS if small else DEFAULT_COUNTS
        weights = np.array([base[c] for c in CATEGORIES], dtype=np.float64)
        raw = weights / weights.sum() * total
        counts_arr = np.floor(raw).astype(int)
        for i in np.argsort(-(raw - counts_arr), kind="stable")[: total - counts_arr.sum()]:
            counts_arr[i] += 1
        counts = {c: int(n) for c, n in zip(CATEGORIES, counts_arr)}
    if any(n < 0 for n in counts.values()):
        raise ValueError("counts must be non-negative")
    return counts


def generate_emt_dataset(
    n_structures: Union[None, int, Dict[str, int]] = None,
    seed: int = 0,
    out_path: Union[None, str, Path] = None,
    progress: bool = True,
    small: bool = False,
) -> List:
    """Generate EMT-labelled structures; optionally write them to ``out_path`` (extxyz, atomically).

    Args:
        n_structures: ``None`` for :data:`DEFAULT_COUNTS` (:data:`SMALL_COUNTS` with ``small=True``), a total
            spread over the categories in the same proportions, or a dict ``{category: count}`` (missing
            categories get 0).
        seed: non-negative integer; the same seed gives the same structures and a byte-identical file.
        out_path: extxyz file to write (through :func:`mlip.io.atomic_write`).
        progress: show a tqdm progress bar.
        small: the tiny set for tests (~25 frames, a few seconds).

    Returns:
        A list of ``ase.Atoms`` with the labels in a ``SinglePointCalculator`` (energy eV, forces eV/Å,
        stress eV/Å³ Voigt with ASE's sign for 3-D cells) and the metadata in ``info``.
    """
    from tqdm.auto import tqdm

    seed = int(seed)
    if seed < 0:
        raise ValueError("seed must be a non-negative integer")
    counts = resolve_counts(n_structures, small)
    builders = {
        "crystal": _build_crystal,
        "ordered_alloy": _build_ordered,
        "random_alloy": _build_random_alloy,
        "vacancy": _build_vacancy,
        "surface": _build_surface,
    }
    frames: List = []
    with tqdm(total=sum(counts.values()), desc="EMT data", unit="frame", disable=not progress,
              file=sys.stderr) as bar:
        for category in CATEGORIES:
            n = counts[category]
            if category == "md":
                n_traj = math.ceil(n / MD_FRAMES_PER_TRAJECTORY)
                for t in range(n_traj):
                    m = min(MD_FRAMES_PER_TRAJECTORY, n - t * MD_FRAMES_PER_TRAJECTORY)
                    snaps = _md_trajectory(_rng(seed, category, t), m, t)
                    frames.extend(s for s in snaps if s is not None)
                    bar.update(m)
                continue
            for k in range(n):
                rng = _rng(seed, category, k)
                if category == "cluster":
                    atoms, meta = _build_cluster(rng, k)
                elif category == "compressed":
                    atoms, meta = _build_compressed(rng, k)
                else:
                    atoms, meta = builders[category](rng, k)
                info = {
                    "config_type": category,
                    "group": f"{category}-{k:05d}",
                    "prototype": meta["prototype"],
                    "rattle": round(float(atoms.info.get("_rattle", meta.get("_rattle", 0.0))), 6),
                    "strain": round(float(atoms.info.get("_strain", meta.get("_strain", 0.0))), 6),
                }
                frames.append(_label(atoms, info))
                bar.update(1)
    if out_path is not None:
        from mlip.data.sample import write_extxyz

        write_extxyz(frames, out_path)
    return frames
