"""Unlabelled structures for any list of elements: the inputs of a reference dataset.

:func:`generate_structures` makes, for the given elements and their pairs, the kinds of structure a
model must see to generalise (:data:`KINDS`): known prototypes (diamond, β-Sn, simple hexagonal, bc8,
sc, fcc, hcp, bcc; zincblende, wurtzite, rocksalt and CsCl orderings of pairs), ordered and random
alloys in supercells of several sizes, strained and rattled cells, vacancies and interstitials,
(100)/(110)/(111) slabs, clusters of 2–20 atoms, dimers and trimers compressed down to 0.6 × the
covalent bond length, dense random packings standing for liquid and amorphous snapshots, each
isolated atom in a 12 Å box, and (given a calculator) Langevin MD snapshots. Every frame carries its
``config_type``, a unique ``id``, its ``group`` (frames of one MD trajectory share it) and the
prototype it came from. The k-th frame of a kind depends only on the seed, the kind and k, so
counts can grow without changing the frames already made. Label them with
:func:`mlip.workflows.labelling.label_structures`.

Lengths are set from each element's nearest-neighbour distance (:func:`nearest_neighbor_distance`):
ASE's reference crystal where it has one, else twice the covalent radius; a pair uses the mean.
"""

from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

#: the kinds of structure, in generation order
KINDS = ("isolated_atom", "prototype", "ordered_alloy", "random_alloy", "strained", "rattled", "vacancy",
         "interstitial", "surface", "cluster", "compressed", "liquid", "amorphous", "md")
#: per-kind counts of a dataset of about a thousand structures (isolated atoms: one per element)
DEFAULT_COUNTS = {"prototype": 150, "ordered_alloy": 80, "random_alloy": 100, "strained": 120, "rattled": 120,
                  "vacancy": 60, "interstitial": 50, "surface": 80, "cluster": 80, "compressed": 60,
                  "liquid": 50, "amorphous": 50, "md": 0}
ELEMENT_PROTOTYPES = ("diamond", "beta_tin", "simple_hexagonal", "bc8", "sc", "fcc", "hcp", "bcc")
PAIR_PROTOTYPES = ("zincblende", "wurtzite", "rocksalt", "cesium_chloride")
SURFACES = ((1, 0, 0), (1, 1, 0), (1, 1, 1))
#: vacuum (Å) on each side of slabs and clusters, and the edge of an isolated atom's box
VACUUM = 6.0
ISOLATED_BOX = 12.0
#: the most atoms in a frame; most frames have at most SMALL_SIZE
MAX_SIZE = 32
SMALL_SIZE = 16
#: frames of every kind but ``compressed`` keep their atoms at least this fraction of the shortest
#: nearest-neighbour distance of their elements apart (a random draw that does not is drawn again)
MIN_DISTANCE_FRACTION = 0.7


def nearest_neighbor_distance(symbol: str) -> float:
    """The element's nearest-neighbour distance (Å) in ASE's reference crystal (fcc, bcc, hcp, diamond,
    sc), or twice its covalent radius where ASE has none of these."""
    from ase.data import atomic_numbers, covalent_radii, reference_states

    z = atomic_numbers[symbol]
    state = reference_states[z] or {}
    a = state.get("a")
    factor = {"fcc": math.sqrt(0.5), "bcc": math.sqrt(0.75), "diamond": math.sqrt(3) / 4, "sc": 1.0}
    if a and state.get("symmetry") in factor:
        return float(a * factor[state["symmetry"]])
    if a and state.get("symmetry") == "hcp":
        return float(a)
    return float(2 * covalent_radii[z])


def _rng(seed: int, kind: str, k: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), KINDS.index(kind), int(k)])


def min_distance(atoms) -> float:
    """Shortest interatomic distance, periodic images included (inf for one atom alone)."""
    from ase.neighborlist import neighbor_list

    if len(atoms) < 2 and not atoms.pbc.any():
        return math.inf
    d = neighbor_list("d", atoms, 6.0)
    return float(d.min()) if len(d) else math.inf


def _scale_to(atoms, distance: float) -> None:
    """Scale the cell (atoms follow) so that the shortest distance becomes ``distance``."""
    atoms.set_cell(atoms.cell * (distance / min_distance(atoms)), scale_atoms=True)


def prototype_cell(name: str, symbols: Sequence[str]):
    """The conventional (or primitive, for the one-atom lattices) cell of prototype ``name`` with the
    elements ``symbols`` (one, or two for the pair orderings), at an arbitrary scale."""
    from ase import Atoms
    from ase.build import bulk
    from ase.spacegroup import crystal

    a, b = symbols[0], symbols[-1]
    if name in ("diamond", "fcc", "bcc", "sc"):
        return bulk(a, name, a=4.0, cubic=name != "sc")
    if name == "hcp":
        return bulk(a, "hcp", a=3.0, c=3.0 * math.sqrt(8 / 3))
    if name == "beta_tin":
        return crystal([a], [(0, 0, 0)], spacegroup=141, cellpar=[5.83, 5.83, 3.18, 90, 90, 90])
    if name == "simple_hexagonal":
        return Atoms(a, cell=[[2.6, 0, 0], [-1.3, 1.3 * math.sqrt(3), 0], [0, 0, 2.45]], pbc=True)
    if name == "bc8":
        return crystal([a], [(0.1003, 0.1003, 0.1003)], spacegroup=206,
                       cellpar=[6.64, 6.64, 6.64, 90, 90, 90], primitive_cell=True)
    if name in ("zincblende", "rocksalt"):
        return bulk(a + b, name, a=5.0, cubic=True)
    if name == "wurtzite":
        return bulk(a + b, "wurtzite", a=3.8, c=3.8 * math.sqrt(8 / 3), u=0.375)
    if name == "cesium_chloride":
        return bulk(a + b, "cesiumchloride", a=3.0)
    raise ValueError(f"unknown prototype {name!r}")


def repeat_to(atoms, rng, lo: int, hi: int):
    """A diagonal repetition with lo ≤ atoms ≤ hi (atom counts drawn uniformly among those reachable)
    whose cell lengths stay within a factor 2.5 of each other; the cell itself when none fits."""
    lengths = atoms.cell.lengths()
    options: Dict[int, List[Tuple[int, int, int]]] = {}
    for reps in np.ndindex(4, 4, 4):
        r = tuple(int(x) + 1 for x in reps)
        n = len(atoms) * int(np.prod(r))
        if lo <= n <= hi and (lengths * r).max() / (lengths * r).min() <= 2.5:
            options.setdefault(n, []).append(r)
    if not options:
        return atoms.copy()
    sizes = sorted(options)
    choices = options[sizes[int(rng.integers(len(sizes)))]]
    return atoms.repeat(choices[int(rng.integers(len(choices)))])


class _Chemistry:
    """The elements of a dataset and the lengths that go with them."""

    def __init__(self, elements: Sequence[str]):
        from ase.data import atomic_numbers

        unknown = [s for s in elements if s not in atomic_numbers]
        if unknown or not elements:
            raise ValueError(f"unknown element(s) {', '.join(map(str, unknown))}" if unknown
                             else "give at least one element")
        if len(set(elements)) != len(elements):
            raise ValueError(f"elements repeat: {', '.join(elements)}")
        self.elements = list(elements)
        self.distance = {s: nearest_neighbor_distance(s) for s in elements}

    def pick(self, rng, n: int) -> List[str]:
        """n distinct elements (as many as there are, when fewer), in random order."""
        n = min(n, len(self.elements))
        return [self.elements[i] for i in rng.choice(len(self.elements), size=n, replace=False)]

    def mean_distance(self, symbols: Sequence[str]) -> float:
        return float(np.mean([self.distance[s] for s in symbols]))

    def covalent_sum(self, a: str, b: str) -> float:
        from ase.data import atomic_numbers, covalent_radii

        return float(covalent_radii[atomic_numbers[a]] + covalent_radii[atomic_numbers[b]])

    def crystal(self, rng, hi: int = SMALL_SIZE, lo: int = 1, pair: Optional[bool] = None):
        """A prototype crystal of one element or (when there are two or more) a pair, at its
        nearest-neighbour distance times a random factor for ±8 % volume, repeated to lo–hi atoms."""
        if pair is None:
            pair = len(self.elements) > 1 and rng.random() < 0.4
        symbols = self.pick(rng, 2 if pair else 1)
        names = PAIR_PROTOTYPES if len(symbols) == 2 else ELEMENT_PROTOTYPES
        name = names[int(rng.integers(len(names)))]
        atoms = prototype_cell(name, symbols)
        _scale_to(atoms, self.mean_distance(symbols) * (1 + rng.uniform(-0.08, 0.08)) ** (1 / 3))
        atoms = repeat_to(atoms, rng, lo, hi)
        atoms.info["prototype"] = name
        return atoms

    def decorate(self, atoms, rng) -> None:
        """A random composition (every element at least once where the cell is large enough) on the
        sites of ``atoms``, lengths rescaled to the composition's mean distance. With three or more
        elements the number of elements is drawn from 2 to all, so every binary subsystem is sampled
        beside the full mixture."""
        n, k = len(atoms), min(len(self.elements), len(atoms))
        if k > 2:
            k = int(rng.integers(2, k + 1))
        symbols = self.pick(rng, k)
        fractions = rng.dirichlet(np.ones(k))
        counts = np.ones(k, dtype=int) + np.floor(fractions * (n - k)).astype(int)
        counts[int(np.argmax(fractions))] += n - counts.sum()
        atoms.set_chemical_symbols(list(np.repeat(symbols, counts)[rng.permutation(n)]))
        _scale_to(atoms, self.mean_distance(atoms.get_chemical_symbols()) * rng.uniform(0.97, 1.03))

    def packing(self, rng, n: int, density_factor: float, closest: float):
        """n atoms placed at random in a cube at ``density_factor`` times the density of diamond-like
        packing of their mean distance, no two closer than ``closest`` × that distance."""
        from ase import Atoms

        symbols = [self.elements[int(i)] for i in rng.integers(len(self.elements), size=n)]
        d = self.mean_distance(symbols)
        volume = n * (8 * (4 * d / math.sqrt(3)) ** 3 / 64) / density_factor  # diamond: a³/8 per atom
        edge = volume ** (1 / 3)
        atoms = Atoms(symbols, cell=[edge] * 3, pbc=True)
        positions = []
        for _ in range(n):
            for _attempt in range(2000):
                trial = rng.random(3) * edge
                if all(_periodic_distance(trial, p, edge) >= closest * d for p in positions):
                    break
            positions.append(trial)
        atoms.positions = np.array(positions)
        return atoms


def _periodic_distance(a: np.ndarray, b: np.ndarray, edge: float) -> float:
    delta = a - b
    delta -= edge * np.round(delta / edge)
    return float(np.linalg.norm(delta))


def strain(atoms, rng, volume: float = 0.08, shear: float = 0.06) -> None:
    """Deform the cell by F = s(I + ε): s³ within ±``volume`` of 1, ε symmetric and traceless-ish
    with off-diagonal and deviatoric components within ±``shear``."""
    eps = rng.uniform(-shear, shear, size=(3, 3))
    eps = 0.5 * (eps + eps.T)
    eps -= np.eye(3) * np.trace(eps) / 3
    s = (1 + rng.uniform(-volume, volume)) ** (1 / 3)
    atoms.set_cell(atoms.cell.array @ (s * (np.eye(3) + eps)).T, scale_atoms=True)


def _cluster(chem: _Chemistry, rng, n: int):
    """n atoms grown one by one next to a random member, no two closer than 0.8 × their distance."""
    from ase import Atoms

    symbols = [chem.elements[int(i)] for i in rng.integers(len(chem.elements), size=n)]
    positions = [np.zeros(3)]
    for s in symbols[1:]:
        for _attempt in range(2000):
            anchor = positions[int(rng.integers(len(positions)))]
            direction = rng.normal(size=3)
            trial = anchor + direction / np.linalg.norm(direction) * chem.distance[s] * rng.uniform(0.95, 1.2)
            if all(np.linalg.norm(trial - p) >= 0.8 * chem.mean_distance([s, t])
                   for p, t in zip(positions, symbols)):
                break
        positions.append(trial)
    atoms = Atoms(symbols, positions=positions, pbc=False)
    atoms.center(vacuum=VACUUM)
    return atoms


def _build(kind: str, chem: _Chemistry, rng, k: int, md_calculator) -> List:
    """The frame(s) of the k-th structure of ``kind`` (a list: one frame, or an MD trajectory's)."""
    from ase import Atoms

    if kind == "isolated_atom":
        atoms = Atoms(chem.elements[k], positions=[[ISOLATED_BOX / 2] * 3], cell=[ISOLATED_BOX] * 3,
                      pbc=False)
        atoms.info["prototype"] = "atom"
        return [atoms]
    if kind == "prototype":
        atoms = chem.crystal(rng, hi=SMALL_SIZE if rng.random() < 0.8 else MAX_SIZE // 2)
        atoms.rattle(rng.uniform(0.0, 0.03), seed=int(rng.integers(2**31)))
        return [atoms]
    if kind == "ordered_alloy":
        atoms = chem.crystal(rng, hi=8, lo=2, pair=False)
        chem.decorate(atoms, rng)
        return [atoms]
    if kind == "random_alloy":
        atoms = chem.crystal(rng, lo=8, hi=SMALL_SIZE if rng.random() < 0.7 else MAX_SIZE, pair=False)
        chem.decorate(atoms, rng)
        atoms.rattle(rng.uniform(0.01, 0.08), seed=int(rng.integers(2**31)))
        return [atoms]
    if kind == "strained":
        atoms = chem.crystal(rng)
        strain(atoms, rng)
        atoms.rattle(rng.uniform(0.0, 0.05), seed=int(rng.integers(2**31)))
        return [atoms]
    if kind == "rattled":
        atoms = chem.crystal(rng, lo=2)
        atoms.rattle(rng.uniform(0.05, 0.25), seed=int(rng.integers(2**31)))
        return [atoms]
    if kind in ("vacancy", "interstitial"):
        atoms = chem.crystal(rng, lo=8, hi=SMALL_SIZE if rng.random() < 0.7 else MAX_SIZE - 1)
        if kind == "vacancy":
            del atoms[int(rng.integers(len(atoms)))]
        else:
            from ase.geometry import get_distances

            trials = rng.random((200, 3)) @ atoms.cell.array  # the emptiest of 200 random points
            gaps = get_distances(trials, atoms.positions, cell=atoms.cell, pbc=True)[1].min(axis=1)
            atoms += Atoms(chem.pick(rng, 1), positions=[trials[int(np.argmax(gaps))]])
        atoms.rattle(rng.uniform(0.0, 0.05), seed=int(rng.integers(2**31)))
        return [atoms]
    if kind == "surface":
        from ase.build import surface

        unit = chem.crystal(rng, hi=4, lo=1)
        name = unit.info["prototype"]
        miller = SURFACES[int(rng.integers(len(SURFACES)))]
        atoms = surface(unit, miller, int(rng.integers(2, 5)), vacuum=VACUUM, periodic=False)
        if len(atoms) > MAX_SIZE:
            atoms = surface(unit, miller, 1, vacuum=VACUUM, periodic=False)
        atoms.pbc = [True, True, False]
        atoms.info["prototype"] = f"{name}({''.join(map(str, miller))})"
        atoms.rattle(rng.uniform(0.0, 0.05), seed=int(rng.integers(2**31)))
        return [atoms]
    if kind == "cluster":
        atoms = _cluster(chem, rng, int(rng.integers(2, 21)))
        atoms.info["prototype"] = "cluster"
        return [atoms]
    if kind == "compressed":
        a, b = (chem.elements[int(i)] for i in rng.integers(len(chem.elements), size=2))
        r = chem.covalent_sum(a, b) * rng.uniform(0.6, 1.0)
        if rng.random() < 0.5:
            atoms = Atoms([a, b], positions=[[0, 0, 0], [r, 0, 0]], pbc=False)
            atoms.info["prototype"] = "dimer"
        else:
            c = chem.elements[int(rng.integers(len(chem.elements)))]
            angle = rng.uniform(math.radians(50), math.pi)
            r2 = chem.covalent_sum(a, c) * rng.uniform(0.6, 1.1)
            third = [r2 * math.cos(angle), r2 * math.sin(angle), 0]
            atoms = Atoms([a, b, c], positions=[[0, 0, 0], [r, 0, 0], third], pbc=False)
            atoms.info["prototype"] = "trimer"
        atoms.center(vacuum=VACUUM)
        return [atoms]
    if kind in ("liquid", "amorphous"):
        small = rng.random() < 0.7
        n = int(rng.integers(8, SMALL_SIZE + 1) if small else rng.integers(SMALL_SIZE + 1, MAX_SIZE + 1))
        density, closest = ((1.1, 0.8) if kind == "liquid" else (1.0, 0.9))
        atoms = chem.packing(rng, n, density * rng.uniform(0.95, 1.05), closest)
        atoms.info["prototype"] = "random-packing"
        return [atoms]
    if kind == "md":
        return _md_snapshots(chem, rng, md_calculator)
    raise ValueError(f"unknown kind {kind!r}")


def _build_checked(kind: str, chem: _Chemistry, rng, k: int, md_calculator, attempts: int = 100) -> List:
    """:func:`_build`, drawn again (from the same generator) until no two atoms are closer than
    :data:`MIN_DISTANCE_FRACTION` of their elements' shortest distance (``compressed`` is exempt)."""
    for _ in range(attempts):
        frames = _build(kind, chem, rng, k, md_calculator)
        if kind == "compressed" or all(
                min_distance(f) >= MIN_DISTANCE_FRACTION * min(chem.distance[s] for s in set(f.symbols))
                for f in frames):
            return frames
    raise RuntimeError(f"no {kind} structure without overlapping atoms in {attempts} draws")


#: snapshots per MD trajectory, steps before the first and between snapshots, time step (fs)
MD_SNAPSHOTS, MD_EQUILIBRATION, MD_INTERVAL, MD_TIMESTEP_FS = 4, 40, 20, 1.0


def _md_snapshots(chem: _Chemistry, rng, calculator) -> List:
    """Snapshots of a Langevin run (300–2000 K) of a crystal with ``calculator``."""
    return md_snapshots(chem.crystal(rng, lo=4), rng, calculator)


def md_snapshots(atoms, rng, calculator) -> List:
    """:data:`MD_SNAPSHOTS` snapshots of a Langevin run of a copy of ``atoms`` with ``calculator`` at a
    temperature drawn from 300–2000 K (``rng``: a numpy Generator); each snapshot keeps the
    ``prototype`` of ``atoms.info`` and records ``temperature_K``."""
    from ase import units
    from ase.constraints import FixCom
    from ase.md import velocitydistribution
    from ase.md.langevin import Langevin

    name = atoms.info.get("prototype", "md")
    atoms = atoms.copy()
    atoms.calc = calculator
    temperature = float(rng.uniform(300, 2000))
    thermalize = getattr(velocitydistribution, "thermalize_momenta", None)  # ASE >= 3.29
    if thermalize is not None:
        thermalize(atoms, temperature, rng=rng)
    else:  # pragma: no cover - older ASE
        velocitydistribution.MaxwellBoltzmannDistribution(atoms, temperature_K=temperature, rng=rng)
    atoms.set_constraint(FixCom())  # what ASE recommends in place of Langevin's biased fixcm=True
    dyn = Langevin(atoms, MD_TIMESTEP_FS * units.fs, temperature_K=temperature, friction=0.02, fixcm=False,
                   rng=np.random.default_rng(int(rng.integers(2**31))))
    frames = []
    dyn.run(MD_EQUILIBRATION)
    for _ in range(MD_SNAPSHOTS):
        dyn.run(MD_INTERVAL)
        snap = atoms.copy()
        snap.calc = None
        snap.set_constraint()
        snap.info = {"prototype": name, "temperature_K": round(temperature, 1)}
        frames.append(snap)
    return frames


def checked_counts(counts: Optional[Dict[str, int]], defaults: Dict[str, int], kinds: Sequence[str],
                   md_calculator) -> Dict[str, int]:
    """A copy of ``counts`` (``defaults`` when None) after checking it: every kind one of ``kinds``, no
    negative count, and a calculator given when MD snapshots are asked for. ValueError naming the problem."""
    counts = dict(defaults if counts is None else counts)
    unknown = sorted(set(counts) - set(kinds))
    if unknown:
        raise ValueError(f"unknown kind(s) {', '.join(unknown)}; choose from {', '.join(kinds)}")
    if any(int(n) < 0 for n in counts.values()):
        raise ValueError("counts must be non-negative")
    if counts.get("md", 0) and md_calculator is None:
        raise ValueError("md snapshots need a calculator to run the MD (or give md=0)")
    return counts


def generate_structures(elements: Sequence[str], counts: Optional[Dict[str, int]] = None, seed: int = 0,
                        md_calculator=None, progress: bool = True,
                        on_frame: Optional[Callable[[int], None]] = None) -> List:
    """Unlabelled structures of ``elements`` (see the module docstring).

    Args:
        elements: chemical symbols.
        counts: frames per kind (None: :data:`DEFAULT_COUNTS`; kinds left out get none; ``md`` counts
            trajectories of :data:`MD_SNAPSHOTS` frames and needs ``md_calculator``); isolated atoms
            are always one per element.
        seed: the same seed gives the same structures.
        md_calculator: the ASE calculator that runs the MD snapshots.
        progress: show a progress bar.
    """
    from tqdm.auto import tqdm

    chem = _Chemistry(list(elements))
    counts = checked_counts(counts, DEFAULT_COUNTS, KINDS, md_calculator)
    counts["isolated_atom"] = len(chem.elements)
    if int(seed) < 0:
        raise ValueError("seed must be a non-negative integer")
    frames = []
    with tqdm(total=sum(counts.values()), desc="structures", unit="structure", disable=not progress) as bar:
        for kind in KINDS:
            for k in range(int(counts.get(kind, 0))):
                group = f"{kind}-{k:05d}"
                built = _build_checked(kind, chem, _rng(seed, kind, k), k, md_calculator)
                for j, atoms in enumerate(built):
                    if atoms.pbc.all():
                        atoms.wrap()
                    atoms.info = {"config_type": kind, "id": group if len(built) == 1 else f"{group}-{j}",
                                  "group": group, "prototype": atoms.info.get("prototype", kind),
                                  **{k_: v for k_, v in atoms.info.items() if k_ != "prototype"}}
                    frames.append(atoms)
                bar.update(1)
    return frames


__all__ = ["DEFAULT_COUNTS", "ELEMENT_PROTOTYPES", "KINDS", "PAIR_PROTOTYPES", "generate_structures",
           "md_snapshots", "min_distance", "nearest_neighbor_distance", "prototype_cell", "repeat_to", "strain"]
