"""Unlabelled structures over many chemistries: the inputs of a teacher-labelled dataset for the whole
periodic table.

:func:`generate_chemistries` draws *compositions* the way the Materials Project is populated, then
makes *variants* of each. The compositions are

* the unaries of every element (:data:`UNARY_PROTOTYPES`: fcc, bcc, hcp, diamond), and
* binaries and ternaries of the element families of :data:`FAMILY_WEIGHTS` (oxides, chalcogenides,
  halides, nitrides, pnictides, hydrides, borides/carbides/silicides, intermetallics) decorated on
  stoichiometric prototypes (:data:`PROTOTYPES`: rocksalt, zincblende, wurtzite, CsCl, fluorite,
  rutile, ReO3, corundum and their anti-structures; L1_0, L1_2; perovskite ABX3, layered-rocksalt and
  ordered-zincblende ABX2, spinel AB2X4, K2NiF4 A2BX4; full and half Heusler). Ionic compositions are
  charge-balanced from a common oxidation state (:data:`OXIDATION_STATES`) with probability
  :data:`CHARGE_BALANCED_SHARE`, else any prototype of the right arity.

The lattice of a prototype is set by a contact rule (:func:`bond_length`, :func:`scale_to_contact`):
the cell is the smallest at which every bonding pair (cation–anion in a compound with an anion; every
pair in an intermetallic or unary) is at least its bond length apart and every other pair at least
:data:`NONBONDING_FRACTION` of its bond length. Bond lengths are sums of ASE's covalent radii for any
pair with a non-metal (hydrogen bonded to a metal: :data:`HYDRIDE_RADIUS`), and the mean of the two
elements' nearest-neighbour distances in ASE's reference crystals
(:func:`mlip.data.structures.nearest_neighbor_distance`) for two metals, because covalent radii make
metallic bonds too short (most for the alkali and alkaline-earth metals). Hydrides take metal cations
only.

Each composition then gives frames of the kinds of :data:`KINDS` (``crystal`` at ±8 % volume,
``strained``, ``rattled``, ``vacancy``, ``surface`` slabs, small ``cluster`` cut from the crystal,
``compressed`` dimers down to 0.6 × the covalent sum, and ``md`` snapshots at 300–2000 K with a given
calculator, the teacher), :data:`DEFAULT_COUNTS` of each. Every frame carries ``config_type`` (its
kind), a unique ``id``, ``group`` (the reduced composition, e.g. ``Al2O3``, or ``Cu1`` for a
unary: ``mlip data split`` holds out whole compositions), ``family``, ``prototype`` and
``charge_balanced``. Frames have at most :data:`MAX_ATOMS` atoms, and no two atoms closer than
:data:`MIN_CONTACT_FRACTION` of the sum of their covalent radii except in ``compressed`` frames.

Frame j of kind K of composition c depends only on (seed, c, K, j) and the element set: more
compositions or more frames per kind extend a set without changing the frames already made.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from mlip.data.structures import (checked_counts, md_snapshots, min_distance, nearest_neighbor_distance,
                                  prototype_cell, repeat_to, strain)

#: the 89 elements of CHGNet's training set (MPtrj: H–Bi and Ac–Pu). chgnet itself exposes no such list
#: (its per-element tables have 94 rows), so it is stated here.
CHGNET_ELEMENTS = tuple(
    "H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As Se Br Kr "
    "Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm Eu Gd Tb Dy Ho Er Tm Yb "
    "Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Ac Th Pa U Np Pu".split())

#: the kinds of frame made of each composition, in generation order
KINDS = ("crystal", "strained", "rattled", "vacancy", "surface", "cluster", "compressed", "md")
#: frames (``md``: trajectories of :data:`mlip.data.structures.MD_SNAPSHOTS` frames) per composition
DEFAULT_COUNTS = {"crystal": 2, "strained": 2, "rattled": 2, "vacancy": 1, "surface": 1, "cluster": 1,
                  "compressed": 1, "md": 0}
#: binary and ternary compositions drawn by default (the unaries come on top: 4 per element)
DEFAULT_COMPOSITIONS = 1200

#: anions of each ionic family with their charge
FAMILY_ANIONS: Dict[str, Dict[str, int]] = {
    "oxide": {"O": -2},
    "chalcogenide": {"S": -2, "Se": -2, "Te": -2},
    "halide": {"F": -1, "Cl": -1, "Br": -1, "I": -1},
    "nitride": {"N": -3},
    "pnictide": {"P": -3, "As": -3, "Sb": -3},
    "hydride": {"H": -1},
    "boride_carbide": {"B": -3, "C": -4, "Si": -4},
}
#: the share of each family among the drawn compositions: roughly the Materials Project's, where
#: oxides dominate (the weights are renormalised over the families the element set allows)
FAMILY_WEIGHTS = {"oxide": 0.34, "intermetallic": 0.18, "chalcogenide": 0.12, "halide": 0.12,
                  "pnictide": 0.08, "nitride": 0.06, "boride_carbide": 0.05, "hydride": 0.05}
#: the share of ternaries among a family's compositions (the rest are binaries)
TERNARY_SHARE = {"intermetallic": 0.4}
DEFAULT_TERNARY_SHARE = 0.55
#: ionic compositions charge-balanced from :data:`OXIDATION_STATES` (borides/carbides never are)
CHARGE_BALANCED_SHARE = 0.8

#: common positive oxidation states: the cations of the ionic families (an element not listed is
#: never a cation)
OXIDATION_STATES: Dict[str, Tuple[int, ...]] = {
    "Li": (1,), "Na": (1,), "K": (1,), "Rb": (1,), "Cs": (1,), "Fr": (1,),
    "Be": (2,), "Mg": (2,), "Ca": (2,), "Sr": (2,), "Ba": (2,), "Ra": (2,),
    "Sc": (3,), "Y": (3,), "La": (3,), "Ce": (3, 4), "Pr": (3,), "Nd": (3,), "Pm": (3,), "Sm": (3, 2),
    "Eu": (2, 3), "Gd": (3,), "Tb": (3, 4), "Dy": (3,), "Ho": (3,), "Er": (3,), "Tm": (3,), "Yb": (3, 2),
    "Lu": (3,), "Ac": (3,), "Th": (4,), "Pa": (5, 4), "U": (4, 6, 3), "Np": (4, 5, 3), "Pu": (4, 3),
    "Ti": (4, 3, 2), "Zr": (4,), "Hf": (4,), "V": (5, 3, 4, 2), "Nb": (5, 3), "Ta": (5,), "Cr": (3, 2, 6),
    "Mo": (6, 4), "W": (6, 4), "Mn": (2, 3, 4), "Tc": (4, 7), "Re": (4, 7, 6), "Fe": (2, 3), "Ru": (3, 4),
    "Os": (4,), "Co": (2, 3), "Rh": (3,), "Ir": (3, 4), "Ni": (2,), "Pd": (2,), "Pt": (2, 4),
    "Cu": (2, 1), "Ag": (1,), "Au": (1, 3), "Zn": (2,), "Cd": (2,), "Hg": (2, 1),
    "B": (3,), "Al": (3,), "Ga": (3,), "In": (3,), "Tl": (1, 3), "Si": (4,), "Ge": (4, 2), "Sn": (4, 2),
    "Pb": (2, 4), "P": (5, 3), "As": (3, 5), "Sb": (3, 5), "Bi": (3,), "Se": (4,), "Te": (4,), "Po": (4, 2),
}
#: elements that are not metals: never in an intermetallic, and bonded by covalent radii
NON_METALS = frozenset("H He B C N O F Ne Si P S Cl Ar As Se Br Kr Te I Xe At Rn".split())

#: elements whose solids are molecular (or atomic): their unaries are scaled by :func:`bond_length`'s rule
#: for them, not to the bond of the molecule
MOLECULAR = frozenset("H He N O F Cl Br I".split())

#: the radius (Å) of hydrogen bonded to a metal, between its covalent (0.31) and ionic (about 1.4) radii:
#: with ASE's covalent radius of the metal it gives LiH, NaH and KH their bond lengths within 3 %, where
#: the covalent radius makes them 20 % short (and metal hydride cells far too dense)
HYDRIDE_RADIUS = 0.75

UNARY_PROTOTYPES = ("fcc", "bcc", "hcp", "diamond")
#: frames have at most this many atoms; most crystals have at most SMALL_ATOMS
MAX_ATOMS = 64
SMALL_ATOMS = 32
#: in a compound with an anion, non-bonding pairs (cation–cation, anion–anion) are kept at least this
#: fraction of their covalent sum apart by the contact rule
NONBONDING_FRACTION = 0.85
#: frames of every kind but ``compressed`` keep each pair of atoms at least this fraction of the sum of
#: their covalent radii apart (:func:`contact_ratio`); a draw that does not is drawn again
MIN_CONTACT_FRACTION = 0.65
#: vacuum (Å) on each side of slabs, clusters and dimers
VACUUM = 6.0
SURFACES = ((1, 0, 0), (1, 1, 0), (1, 1, 1))


# ----------------------------------------------------------------------------------------- prototypes
def _cubic(symbols: Sequence[str], fractional: Sequence[Tuple[float, float, float]], a: float = 4.0):
    from ase import Atoms

    return Atoms(list(symbols), scaled_positions=fractional, cell=[a, a, a], pbc=True)


_FCC = [(0, 0, 0), (0.5, 0.5, 0), (0.5, 0, 0.5), (0, 0.5, 0.5)]


def _fluorite(a: str, x: str):
    from ase.build import bulk

    atoms = bulk("Ca" + "F2", "fluorite", a=5.5)
    atoms.set_chemical_symbols([a if s == "Ca" else x for s in atoms.get_chemical_symbols()])
    return atoms


def _crystal(symbols, basis, spacegroup: int, cellpar, setting: int = 1):
    from ase.spacegroup import crystal

    return crystal(list(symbols), basis, spacegroup=spacegroup, cellpar=cellpar, setting=setting,
                   primitive_cell=True)


def _rutile(a, x):
    return _crystal([a, x], [(0, 0, 0), (0.305, 0.305, 0)], 136, [4.6, 4.6, 2.96, 90, 90, 90])


def _rhenium_trioxide(a, x):
    return _cubic([a, x, x, x], [(0, 0, 0), (0.5, 0, 0), (0, 0.5, 0), (0, 0, 0.5)])


def _corundum(a, x):
    return _crystal([a, x], [(0, 0, 0.352), (0.306, 0, 0.25)], 167, [4.76, 4.76, 12.99, 90, 90, 120])


def _perovskite(a, b, x):
    return _cubic([a, b, x, x, x], [(0, 0, 0), (0.5, 0.5, 0.5), (0.5, 0.5, 0), (0.5, 0, 0.5), (0, 0.5, 0.5)])


def _layered_rocksalt(a, b, x):
    """Rocksalt with the cation planes normal to c alternating A and B (the CuAu ordering)."""
    return _cubic([a, a, b, b] + [x] * 4, _FCC + [(0.5, 0, 0), (0, 0.5, 0), (0, 0, 0.5), (0.5, 0.5, 0.5)])


def _ordered_zincblende(a, b, x):
    """Zincblende with the cation planes normal to c alternating A and B (a chalcopyrite stand-in)."""
    anions = [(p[0] + 0.25, p[1] + 0.25, p[2] + 0.25) for p in _FCC]
    return _cubic([a, a, b, b] + [x] * 4, _FCC + anions, a=5.4)


def _spinel(a, b, x):
    return _crystal([a, b, x], [(0, 0, 0), (0.625, 0.625, 0.625), (0.387, 0.387, 0.387)], 227,
                    [8.08] * 3 + [90] * 3)


def _k2nif4(a, b, x):
    return _crystal([a, b, x, x], [(0, 0, 0.355), (0, 0, 0), (0, 0.5, 0), (0, 0, 0.15)], 139,
                    [3.8, 3.8, 13.1, 90, 90, 90])


def _heusler(a, b, c):
    return _crystal([a, b, c], [(0.25, 0.25, 0.25), (0, 0, 0), (0.5, 0.5, 0.5)], 225, [5.8] * 3 + [90] * 3)


def _half_heusler(a, b, c):
    return _crystal([a, b, c], [(0, 0, 0), (0.25, 0.25, 0.25), (0.5, 0.5, 0.5)], 216, [5.8] * 3 + [90] * 3)


@dataclass(frozen=True)
class Prototype:
    """A stoichiometric prototype: ``counts`` atoms of each role (reduced) in ``build(*symbols)``, one
    symbol per role, at an arbitrary scale; ``kind`` says which compositions it hosts (``ionic``:
    cations then one anion; ``intermetallic``)."""

    name: str
    counts: Tuple[int, ...]
    kind: str
    build: Callable = None


def _pair(name):
    return lambda a, b: prototype_cell(name, [a, b])


PROTOTYPES: Dict[str, Prototype] = {p.name: p for p in [
    Prototype("rocksalt", (1, 1), "ionic", _pair("rocksalt")),
    Prototype("zincblende", (1, 1), "ionic", _pair("zincblende")),
    Prototype("wurtzite", (1, 1), "ionic", _pair("wurtzite")),
    Prototype("cesium_chloride", (1, 1), "ionic", _pair("cesium_chloride")),
    Prototype("fluorite", (1, 2), "ionic", _fluorite),
    Prototype("antifluorite", (2, 1), "ionic", lambda a, x: _fluorite(x, a)),
    Prototype("rutile", (1, 2), "ionic", _rutile),
    Prototype("ReO3", (1, 3), "ionic", _rhenium_trioxide),
    Prototype("anti_ReO3", (3, 1), "ionic", lambda a, x: _rhenium_trioxide(x, a)),
    Prototype("corundum", (2, 3), "ionic", _corundum),
    Prototype("anti_corundum", (3, 2), "ionic", lambda a, x: _corundum(x, a)),
    Prototype("perovskite", (1, 1, 3), "ionic", _perovskite),
    Prototype("layered_rocksalt", (1, 1, 2), "ionic", _layered_rocksalt),
    Prototype("ordered_zincblende", (1, 1, 2), "ionic", _ordered_zincblende),
    Prototype("spinel", (1, 2, 4), "ionic", _spinel),
    Prototype("K2NiF4", (2, 1, 4), "ionic", _k2nif4),
    Prototype("B2", (1, 1), "intermetallic", _pair("cesium_chloride")),
    Prototype("L1_0", (1, 1), "intermetallic", lambda a, b: _cubic([a, a, b, b], _FCC)),
    Prototype("L1_2", (3, 1), "intermetallic", lambda a, b: _cubic([b, a, a, a], _FCC)),
    Prototype("heusler", (2, 1, 1), "intermetallic", _heusler),
    Prototype("half_heusler", (1, 1, 1), "intermetallic", _half_heusler),
]}


# ----------------------------------------------------------------------------------------- lengths
def covalent_sum(a: str, b: str) -> float:
    """The sum of the two elements' covalent radii (ASE's table), Å."""
    from ase.data import atomic_numbers, covalent_radii

    return float(covalent_radii[atomic_numbers[a]] + covalent_radii[atomic_numbers[b]])


def bond_length(a: str, b: str) -> float:
    """The bond length (Å) of a pair: for one element its nearest-neighbour distance in ASE's reference
    crystal (:func:`mlip.data.structures.nearest_neighbor_distance`) or, for the elements of
    :data:`MOLECULAR` (whose solids are molecular), its covalent plus its van der Waals radius (between
    the bond and the contact of two molecules); for two metals the mean of their nearest-neighbour
    distances; for a metal and hydrogen the metal's covalent radius plus :data:`HYDRIDE_RADIUS`; else the
    sum of the covalent radii."""
    if a == b and a in MOLECULAR:
        from ase.data import atomic_numbers, covalent_radii, vdw_radii

        z = atomic_numbers[a]
        return float(covalent_radii[z] + vdw_radii[z])
    if a == b:
        return nearest_neighbor_distance(a)
    if a not in NON_METALS and b not in NON_METALS:
        return 0.5 * (nearest_neighbor_distance(a) + nearest_neighbor_distance(b))
    if "H" in (a, b) and (a not in NON_METALS or b not in NON_METALS):  # a metal hydride
        from ase.data import atomic_numbers, covalent_radii

        return float(covalent_radii[atomic_numbers[b if a == "H" else a]] + HYDRIDE_RADIUS)
    return covalent_sum(a, b)


class BondLengths:
    """:func:`bond_length` and :func:`covalent_sum` of the pairs of an element set, as (n_Z, n_Z)
    tables indexed by atomic number."""

    def __init__(self, elements: Sequence[str]):
        from ase.data import atomic_numbers

        z = {s: atomic_numbers[s] for s in elements}
        size = max(z.values()) + 1
        self.bond = np.zeros((size, size))
        self.covalent = np.zeros((size, size))
        for a in elements:
            for b in elements:
                self.bond[z[a], z[b]] = bond_length(a, b)
                self.covalent[z[a], z[b]] = covalent_sum(a, b)

    def pairs(self, atoms, cutoff: float):
        """(i, j, d) of the pairs of ``atoms`` closer than ``cutoff`` (periodic images included)."""
        from ase.neighborlist import neighbor_list

        return neighbor_list("ijd", atoms, cutoff)


def scale_to_contact(atoms, lengths: BondLengths, anions: Sequence[str] = ()) -> None:
    """Scale the cell of ``atoms`` (atoms follow) to the smallest at which every bonding pair is at least
    its :func:`bond_length` apart and every other pair at least :data:`NONBONDING_FRACTION` of its
    :func:`covalent_sum`. With ``anions``, the bonding pairs are those of a cation and an anion;
    without, every pair."""
    atoms.set_cell(atoms.cell * (2.0 / min_distance(atoms)), scale_atoms=True)  # a known scale
    i, j, d = lengths.pairs(atoms, 2.0 * 3.0)
    zi, zj = atoms.numbers[i], atoms.numbers[j]
    need = lengths.bond[zi, zj]
    if len(anions):
        is_anion = np.isin(np.array(atoms.get_chemical_symbols()), list(anions))
        need = np.where(is_anion[i] != is_anion[j], need, NONBONDING_FRACTION * lengths.covalent[zi, zj])
    atoms.set_cell(atoms.cell * float(np.max(need / d)), scale_atoms=True)


def contact_ratio(atoms, lengths: BondLengths) -> float:
    """The smallest distance / :func:`covalent_sum` over the pairs of ``atoms`` (inf for fewer than
    two atoms or no pair within reach)."""
    if len(atoms) < 2:
        return math.inf
    z = np.unique(atoms.numbers)
    i, j, d = lengths.pairs(atoms, float(lengths.covalent[np.ix_(z, z)].max()))
    return float(np.min(d / lengths.covalent[atoms.numbers[i], atoms.numbers[j]])) if len(d) else math.inf


# ----------------------------------------------------------------------------------------- compositions
@dataclass(frozen=True)
class Composition:
    """A composition on a prototype: ``symbols`` (one per role of ``prototype``), its ``family``,
    whether it is charge-balanced, and its reduced formula (the frames' ``group``)."""

    family: str
    prototype: str
    symbols: Tuple[str, ...]
    charge_balanced: bool
    anions: Tuple[str, ...] = ()

    @property
    def formula(self) -> str:
        """The reduced formula in ASE's ``metal`` order (``Al2O3``); a unary's carries its count
        (``Cu1``, ``F1``), since extended XYZ reads a bare ``F`` as false."""
        from ase.formula import Formula

        if self.prototype in UNARY_PROTOTYPES:
            return self.symbols[0] + "1"
        counts: Dict[str, int] = Counter()
        for s, n in zip(self.symbols, PROTOTYPES[self.prototype].counts):
            counts[s] += n
        return Formula.from_dict(counts).reduce()[0].format("metal")

    def cell(self, lengths: BondLengths):
        """The prototype's cell with this composition, scaled by :func:`scale_to_contact`."""
        if self.prototype in UNARY_PROTOTYPES:
            atoms = prototype_cell(self.prototype, self.symbols)
        else:
            atoms = PROTOTYPES[self.prototype].build(*self.symbols)
        scale_to_contact(atoms, lengths, self.anions)
        atoms.info["prototype"] = self.prototype
        return atoms


class ElementSet:
    """The elements to draw from, sorted into the pools of each family."""

    def __init__(self, elements: Sequence[str]):
        from ase.data import atomic_numbers

        elements = list(elements)
        if not elements:
            raise ValueError("give at least one element")
        unknown = [str(s) for s in elements if s not in atomic_numbers or s == "X"]
        if unknown:
            raise ValueError(f"unknown element(s) {', '.join(unknown)}")
        repeated = sorted(s for s, n in Counter(elements).items() if n > 1)
        if repeated:
            raise ValueError(f"elements repeat: {', '.join(repeated)}")
        self.elements = elements
        self.metals = [s for s in elements if s not in NON_METALS]
        self.cations = [s for s in elements if s in OXIDATION_STATES]
        self.families: Dict[str, float] = {}
        for family, weight in FAMILY_WEIGHTS.items():
            if family == "intermetallic":
                if len(self.metals) >= 2:
                    self.families[family] = weight
            elif any(x in elements and [c for c in (self.metals if family == "hydride" else self.cations)
                                        if c != x and c in OXIDATION_STATES] for x in FAMILY_ANIONS[family]):
                self.families[family] = weight

    def draw(self, rng) -> Composition:
        """A random binary or ternary composition on a prototype (see the module docstring)."""
        names = sorted(self.families)
        weights = np.array([self.families[n] for n in names])
        family = names[int(rng.choice(len(names), p=weights / weights.sum()))]
        ternary = rng.random() < TERNARY_SHARE.get(family, DEFAULT_TERNARY_SHARE)
        if family == "intermetallic":
            n = 3 if ternary and len(self.metals) >= 3 else 2
            metals = [self.metals[i] for i in rng.choice(len(self.metals), size=n, replace=False)]
            options = [p for p in PROTOTYPES.values() if p.kind == "intermetallic" and len(p.counts) == n]
            proto = options[int(rng.integers(len(options)))]
            return Composition(family, proto.name, tuple(metals), False)
        anions = [x for x in FAMILY_ANIONS[family] if x in self.elements]
        anion = anions[int(rng.integers(len(anions)))]
        cations = [c for c in self.cations if c != anion and (family != "hydride" or c in self.metals)]
        n = 2 if ternary and len(cations) >= 2 else 1
        chosen = [cations[i] for i in rng.choice(len(cations), size=n, replace=False)]
        options = [p for p in PROTOTYPES.values() if p.kind == "ionic" and len(p.counts) == n + 1]
        if family != "boride_carbide" and rng.random() < CHARGE_BALANCED_SHARE:
            balanced = _balanced(chosen, FAMILY_ANIONS[family][anion], options)
            if balanced:
                proto, order = balanced[int(rng.integers(len(balanced)))]
                return Composition(family, proto.name, tuple(order) + (anion,), True, (anion,))
        proto = options[int(rng.integers(len(options)))]
        order = [chosen[i] for i in rng.permutation(n)]
        return Composition(family, proto.name, tuple(order) + (anion,), False, (anion,))


def _balanced(cations: Sequence[str], charge: int, options: Sequence[Prototype]) -> List:
    """[(prototype, cations in role order)] whose counts balance some oxidation states of the cations
    against anions of ``charge``."""
    import itertools

    found = []
    for proto in options:
        for order in itertools.permutations(cations):
            for states in itertools.product(*(OXIDATION_STATES[c] for c in order)):
                if sum(q * n for q, n in zip(states, proto.counts)) == -charge * proto.counts[-1]:
                    found.append((proto, list(order)))
                    break
    return found


# ----------------------------------------------------------------------------------------- variants
def _rng(seed: int, stream: int, index: int, kind: Optional[str] = None, j: int = 0):
    tail = [] if kind is None else [1 + KINDS.index(kind), int(j)]
    return np.random.default_rng([int(seed), stream, int(index)] + tail)


def _bond_scale(atoms, lengths: BondLengths) -> float:
    z = np.unique(atoms.numbers)
    return float(lengths.covalent[np.ix_(z, z)].min())


def _rattle(atoms, rng, lo: float, hi: float, lengths: BondLengths) -> None:
    """Gaussian displacements of lo–hi (drawn) times the shortest bond length of the frame's elements."""
    atoms.rattle(rng.uniform(lo, hi) * _bond_scale(atoms, lengths), seed=int(rng.integers(2**31)))


def _sized(base, rng, lo: int = 1, hi: Optional[int] = None):
    hi = hi or (SMALL_ATOMS if rng.random() < 0.8 else MAX_ATOMS)
    return repeat_to(base, rng, max(1, min(lo, hi)), hi)


def _cluster_from(base, rng, n: int):
    """The n atoms nearest a random site of the crystal, in vacuum."""
    from ase import Atoms

    big = base.repeat((3, 3, 3))
    centre = len(base) * 13 + int(rng.integers(len(base)))  # a site of the middle cell
    d = np.linalg.norm(big.positions - big.positions[centre], axis=1)
    keep = np.argsort(d, kind="stable")[:n]
    atoms = Atoms(big.symbols[keep], positions=big.positions[keep], pbc=False)
    atoms.center(vacuum=VACUUM)
    return atoms


def _variant(kind: str, comp: Composition, base, rng, lengths: BondLengths, calculator) -> List:
    """The frame(s) of one variant of ``kind`` of the composition's crystal ``base``."""
    from ase import Atoms

    name = comp.prototype
    if kind == "crystal":
        atoms = _sized(base, rng)
        atoms.set_cell(atoms.cell * (1 + rng.uniform(-0.08, 0.08)) ** (1 / 3), scale_atoms=True)
        _rattle(atoms, rng, 0.0, 0.02, lengths)
    elif kind == "strained":
        atoms = _sized(base, rng)
        strain(atoms, rng)
        _rattle(atoms, rng, 0.0, 0.03, lengths)
    elif kind == "rattled":
        atoms = _sized(base, rng, lo=8)
        _rattle(atoms, rng, 0.03, 0.1, lengths)
    elif kind == "vacancy":
        atoms = _sized(base, rng, lo=8, hi=(SMALL_ATOMS if rng.random() < 0.8 else MAX_ATOMS) + 1)
        del atoms[int(rng.integers(len(atoms)))]
        _rattle(atoms, rng, 0.0, 0.03, lengths)
    elif kind == "surface":
        from ase.build import surface

        miller = SURFACES[int(rng.integers(len(SURFACES)))]
        layers = int(rng.integers(1, 4))
        atoms = surface(base, miller, layers, vacuum=VACUUM, periodic=False)
        while len(atoms) > MAX_ATOMS // 2 and layers > 1:
            layers -= 1
            atoms = surface(base, miller, layers, vacuum=VACUUM, periodic=False)
        if len(atoms) < 4:
            atoms = atoms.repeat((2, 2, 1))
        atoms.pbc = [True, True, False]
        name = f"{name}({''.join(map(str, miller))})"
        _rattle(atoms, rng, 0.0, 0.03, lengths)
    elif kind == "cluster":
        atoms = _cluster_from(base, rng, int(rng.integers(2, 21)))
        _rattle(atoms, rng, 0.0, 0.05, lengths)
        name = "cluster"
    elif kind == "compressed":
        symbols = sorted(set(comp.symbols))
        a, b = (symbols[int(i)] for i in rng.integers(len(symbols), size=2))
        r = covalent_sum(a, b) * rng.uniform(0.6, 1.0)
        atoms = Atoms([a, b], positions=[[0, 0, 0], [r, 0, 0]], pbc=False)
        atoms.center(vacuum=VACUUM)
        name = "dimer"
    elif kind == "md":
        start = _sized(base, rng, lo=8, hi=SMALL_ATOMS)
        start.info["prototype"] = name
        return md_snapshots(start, rng, calculator)
    else:
        raise ValueError(f"unknown kind {kind!r}")
    atoms.info["prototype"] = name
    return [atoms]


def _variant_checked(kind, comp, base, rng, lengths, calculator, attempts: int = 50) -> List:
    """:func:`_variant`, drawn again (from the same generator) until every pair of atoms is at least
    :data:`MIN_CONTACT_FRACTION` of its bond length apart (``compressed`` is exempt)."""
    for _ in range(attempts):
        frames = _variant(kind, comp, base, rng, lengths, calculator)
        if kind == "compressed" or all(contact_ratio(f, lengths) >= MIN_CONTACT_FRACTION for f in frames):
            return frames
    raise RuntimeError(f"no {kind} frame of {comp.formula} ({comp.prototype}) without overlapping atoms "
                       f"in {attempts} draws")


def compositions(elements: Sequence[str] = CHGNET_ELEMENTS, n_compositions: int = DEFAULT_COMPOSITIONS,
                 seed: int = 0, unaries: bool = True) -> List[Composition]:
    """The unaries of ``elements`` (:data:`UNARY_PROTOTYPES` each; none when ``unaries`` is false)
    followed by ``n_compositions`` drawn binaries and ternaries; the c-th drawn one depends only on
    (seed, c, elements)."""
    pools = ElementSet(elements)
    if int(n_compositions) < 0 or int(seed) < 0:
        raise ValueError("the number of compositions and the seed must be non-negative")
    if n_compositions and not pools.families:
        raise ValueError(f"no binary or ternary family can be made of {', '.join(pools.elements)} "
                         "(an intermetallic needs two metals, an ionic family an anion and a cation); "
                         "ask for 0 compositions to make unaries only")
    ones = [Composition("unary", p, (s,), False) for s in pools.elements for p in UNARY_PROTOTYPES]
    drawn = [pools.draw(_rng(seed, 1, c)) for c in range(int(n_compositions))]
    return (ones if unaries else []) + drawn


def generate_chemistries(elements: Sequence[str] = CHGNET_ELEMENTS,
                         n_compositions: int = DEFAULT_COMPOSITIONS,
                         counts: Optional[Dict[str, int]] = None, seed: int = 0, md_calculator=None,
                         unaries: bool = True, progress: bool = True) -> List:
    """Unlabelled frames over many chemistries (see the module docstring).

    Args:
        elements: chemical symbols (default: :data:`CHGNET_ELEMENTS`).
        n_compositions: binaries and ternaries to draw (the unaries come on top).
        counts: frames per composition of each kind (None: :data:`DEFAULT_COUNTS`; kinds left out
            get none; ``md`` counts trajectories and needs ``md_calculator``).
        seed: the same seed (and elements) gives the same frames.
        md_calculator: the ASE calculator (the teacher) that runs the MD snapshots.
        unaries: include the unaries (a unary's frames do not depend on this switch).
        progress: show a progress bar.
    Returns:
        ASE Atoms with ``info`` holding config_type, id, group, family, prototype, charge_balanced.
    """
    from tqdm.auto import tqdm

    counts = checked_counts(counts, DEFAULT_COUNTS, KINDS, md_calculator)
    comps = compositions(elements, n_compositions, seed, unaries)
    lengths = BondLengths(sorted(set(elements)))
    n_unary = len(comps) - int(n_compositions)
    frames = []
    for c, comp in enumerate(tqdm(comps, desc="compositions", unit="composition", disable=not progress)):
        stream, index = (0, c) if c < n_unary else (1, c - n_unary)
        tag = f"u{index:05d}-{comp.symbols[0]}" if stream == 0 else f"c{index:05d}-{comp.formula}"
        base = comp.cell(lengths)
        for kind in KINDS:
            for j in range(int(counts.get(kind, 0))):
                built = _variant_checked(kind, comp, base, _rng(seed, stream, index, kind, j), lengths,
                                         md_calculator)
                for s, atoms in enumerate(built):
                    if atoms.pbc.all():
                        atoms.wrap()
                    frame_id = f"{tag}-{kind}-{j}" + (f"-{s}" if len(built) > 1 else "")
                    extra = {k: v for k, v in atoms.info.items() if k != "prototype"}
                    atoms.info = {"config_type": kind, "id": frame_id, "group": comp.formula,
                                  "family": comp.family, "prototype": atoms.info.get("prototype", kind),
                                  "charge_balanced": comp.charge_balanced, **extra}
                    frames.append(atoms)
    return frames


def summarize(frames: Sequence, elements: Optional[Sequence[str]] = None) -> Dict:
    """Composition statistics of generated frames: counts by family, kind and prototype, the
    compositions (groups) per family, the elements covered (in any frame, and in a binary or ternary)
    and atoms per frame."""
    sizes = np.array([len(f) for f in frames]) if len(frames) else np.zeros(1, dtype=int)
    by_family: Dict[str, set] = {}
    in_any, in_compounds = set(), set()
    for f in frames:
        by_family.setdefault(f.info["family"], set()).add(f.info["group"])
        symbols = set(f.get_chemical_symbols())
        in_any |= symbols
        if f.info["family"] != "unary":
            in_compounds |= symbols
    out = {
        "frames": len(frames),
        "atoms": int(sizes.sum()) if len(frames) else 0,
        "compositions": len({f.info["group"] for f in frames}),
        "frames_by_family": dict(Counter(f.info["family"] for f in frames).most_common()),
        "compositions_by_family": {k: len(v) for k, v in
                                   sorted(by_family.items(), key=lambda kv: -len(kv[1]))},
        "frames_by_kind": dict(Counter(f.info["config_type"] for f in frames)),
        "prototypes": dict(Counter(f.info["prototype"] for f in frames
                                   if f.info["config_type"] == "crystal").most_common()),
        "charge_balanced_share": float(np.mean([bool(f.info["charge_balanced"]) for f in frames if
                                                f.info["family"] not in ("unary", "intermetallic")] or [0])),
        "elements": len(in_any),
        "elements_in_compounds": len(in_compounds),
        "atoms_per_frame": {"min": int(sizes.min()), "median": float(np.median(sizes)),
                            "mean": round(float(sizes.mean()), 2), "max": int(sizes.max())},
    }
    if elements is not None:
        out["elements_missing"] = sorted(set(elements) - in_any)
        out["elements_not_in_compounds"] = sorted(set(elements) - in_compounds)
    return out


__all__ = ["BondLengths", "CHARGE_BALANCED_SHARE", "CHGNET_ELEMENTS", "Composition", "DEFAULT_COMPOSITIONS",
           "DEFAULT_COUNTS", "ElementSet", "FAMILY_ANIONS", "FAMILY_WEIGHTS", "HYDRIDE_RADIUS", "KINDS",
           "MAX_ATOMS", "MIN_CONTACT_FRACTION", "MOLECULAR", "NONBONDING_FRACTION", "NON_METALS",
           "OXIDATION_STATES", "PROTOTYPES", "Prototype", "UNARY_PROTOTYPES", "bond_length", "compositions",
           "contact_ratio", "covalent_sum", "generate_chemistries", "scale_to_contact", "summarize"]
