"""A miniature Matbench Discovery in which ASE's EMT plays the role of DFT.

Same protocol as the real benchmark, over Al, Cu, Ag, Au, Ni, Pd and Pt, built from a seed in a
few minutes on two cores:

* elemental references: fcc, bcc and hcp of each element relaxed with EMT (FIRE +
  FrechetCellFilter, the relaxation protocol of :mod:`.relax_campaign`); μ_el = the lowest energy
  per atom (eV/atom);
* the "known" hull (the role of the Materials Project): the elements and, for each of the 21
  pairs, the L1₂ compounds A₃B and AB₃, relaxed; the hull is pymatgen's ``PhaseDiagram`` of them;
* candidates (the role of WBM): ordered prototypes that are not on the known hull (L1₀ and B2 AB,
  D0₂₂ A₃B, B1 AB), random substitutions on fcc supercells of 8 or 16 atoms with two or three
  elements, and rattled (0.05 Å) and strained (±3 %) copies of some of them, each given unrelaxed;
  their reference relaxed structure, energy, formation energy and hull distance come from the
  same EMT relaxation. Most are unstable; those below the known hull are the "discoveries".
  Candidates whose reference relaxation did not converge, or whose hull distance lies within
  ``margin`` (1 meV/atom) of zero, are replaced by new ones, so that the stability labels do not
  hinge on the 4-decimal rounding of the submission file.

Files written to ``out_dir`` (the benchmark's formats):

* ``initial-structures.json.gz``: pandas "columns" JSON, ``material_id`` and ``initial_structure``
  (pymatgen dicts), and the same structures as ``initial-atoms.extxyz`` (``material_id`` in info);
* ``relaxed-structures.json.gz``: ``material_id`` and ``structure``, the reference relaxed ones;
* ``summary.csv.gz``: ``material_id``, ``formula``, ``n_sites``, ``prototype``, ``energy`` (eV),
  ``e_form_per_atom`` and ``e_above_hull`` (eV/atom);
* ``elemental-references.json``: ``{element: eV/atom}``;
* ``hull-entries.json.gz``: the known hull's entries (``material_id``, ``formula``, ``prototype``,
  ``energy``, ``e_form_per_atom``, ``structure``);
* ``benchmark.json``: seed, settings, counts and timings.

Every reference relaxation is cached in ``out_dir/work/`` as it finishes, so an interrupted
generation resumes where it stopped (the folder is tied to its seed and settings).
"""

from __future__ import annotations

import itertools
import math
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple, Union

import numpy as np
from ase import Atoms
from ase.build import bulk

from mlip.extras import require

ELEMENTS = ("Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt")
#: hull distances closer to zero than this (eV/atom) are not used for candidates
MARGIN = 1e-3


def _fcc_conventional(species: List[str], a: float) -> Atoms:
    """The 4-atom cubic fcc cell with ``species`` at (0,0,0), (0,½,½), (½,0,½), (½,½,0)."""
    frac = np.array([[0, 0, 0], [0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]])
    return Atoms(species, scaled_positions=frac, cell=np.eye(3) * a, pbc=True)


def prototype(name: str, a_el: str, b_el: str, a: float) -> Atoms:
    """An ordered binary prototype with fcc-like lattice constant ``a`` (Å) as a starting guess:
    ``L12`` (A₃B), ``L10`` (AB), ``B2`` (AB), ``D022`` (A₃B), ``B1`` (AB)."""
    if name == "L12":
        return _fcc_conventional([b_el, a_el, a_el, a_el], a)
    if name == "L10":
        atoms = _fcc_conventional([a_el, a_el, b_el, b_el], a)
        return atoms
    if name == "B2":
        ab = a / 2 ** (1 / 3)  # same volume per atom as fcc
        return Atoms([a_el, b_el], scaled_positions=[[0, 0, 0], [0.5, 0.5, 0.5]], cell=np.eye(3) * ab, pbc=True)
    if name == "D022":
        cell = np.diag([a, a, 2 * a])
        frac = np.array([[0, 0, 0], [0, 0.5, 0.25], [0.5, 0, 0.25], [0.5, 0.5, 0],
                         [0, 0, 0.5], [0, 0.5, 0.75], [0.5, 0, 0.75], [0.5, 0.5, 0.5]])
        species = [b_el, a_el, a_el, a_el, a_el, a_el, a_el, b_el]
        return Atoms(species, scaled_positions=frac, cell=cell, pbc=True)
    if name == "B1":
        ar = a * 2 ** (1 / 3)  # rock salt: 8 atoms per cube; same volume per atom as fcc
        frac = np.array([[0, 0, 0], [0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0],
                         [0.5, 0.5, 0.5], [0.5, 0, 0], [0, 0.5, 0], [0, 0, 0.5]])
        return Atoms([a_el] * 4 + [b_el] * 4, scaled_positions=frac, cell=np.eye(3) * ar, pbc=True)
    raise ValueError(f"unknown prototype {name!r}")


def _element_phases(el: str, a_fcc: float) -> Dict[str, Atoms]:
    return {
        "fcc": bulk(el, "fcc", a=a_fcc),
        "bcc": bulk(el, "bcc", a=a_fcc / 2 ** (1 / 3)),
        "hcp": bulk(el, "hcp", a=a_fcc / math.sqrt(2), c=a_fcc / math.sqrt(2) * math.sqrt(8 / 3)),
    }


class _Cache:
    """Reference relaxations stored as they finish in ``work/`` (resumable generation)."""

    def __init__(self, folder: Path, calc, fmax: float, steps: int):
        self.folder, self.calc, self.fmax, self.steps = folder, calc, fmax, steps
        self.n_computed = 0

    def relax(self, key: str, atoms: Atoms) -> Dict[str, Any]:
        from mlip.workflows.discovery.relax_campaign import relax_material
        from mlip.workflows.displacement_forces import structures_fingerprint
        from mlip.workflows.sharding import read_result, write_result

        fingerprint = structures_fingerprint([atoms])
        old = read_result(self.folder, key)
        if old is not None and old.get("fingerprint") == fingerprint:
            return old
        record = relax_material(atoms, self.calc, fmax=self.fmax, steps=self.steps)
        record["fingerprint"] = fingerprint
        write_result(self.folder, key, record)
        self.n_computed += 1
        return {"id": key, **record}


def _atoms(record: dict) -> Atoms:
    from mlip.workflows.discovery.formation import relaxed_atoms

    return relaxed_atoms(record)


def _random_candidate(rng: np.random.Generator, a_fcc: Dict[str, float]) -> Tuple[str, Atoms]:
    n_el = 2 if rng.random() < 0.7 else 3
    elements = list(rng.choice(ELEMENTS, size=n_el, replace=False))
    reps = [(2, 1, 1), (2, 2, 1)][int(rng.random() < 0.4)]
    n = 4 * int(np.prod(reps))
    species = list(elements) + list(rng.choice(elements, size=n - n_el))
    rng.shuffle(species)
    a = float(np.mean([a_fcc[el] for el in species]))  # Vegard's law as the starting guess
    atoms = _fcc_conventional(["X"] * 4, a).repeat(reps)
    atoms.set_chemical_symbols(species)
    return f"random-{n}", atoms


def _perturb(rng: np.random.Generator, atoms: Atoms) -> Atoms:
    """Rattled by 0.05 Å (normal) and strained by up to ±3 % (symmetric strain)."""
    atoms = atoms.copy()
    eps = rng.uniform(-0.03, 0.03, size=(3, 3))
    eps = 0.5 * (eps + eps.T)
    atoms.set_cell(atoms.cell.array @ (np.eye(3) + eps), scale_atoms=True)
    atoms.positions += rng.normal(0, 0.05, size=atoms.positions.shape)
    return atoms


def generate_emt_benchmark(
    out_dir: Union[str, Path],
    seed: int = 0,
    n_candidates: int = 300,
    fmax: float = 0.02,
    steps: int = 500,
    margin: float = MARGIN,
    progress: bool = True,
) -> Dict[str, Any]:
    """Build the miniature benchmark in ``out_dir`` (see the module docstring) and return the
    contents of ``benchmark.json``.

    Args:
        out_dir: output folder.
        seed: the random seed (same seed, same benchmark).
        n_candidates: number of candidate materials (>= 4).
        fmax, steps: reference relaxation protocol (eV/Å, FIRE steps): the defaults of
            ``mlip discovery relax``.
        margin: minimum |hull distance| of a candidate (eV/atom).
        progress: progress bars.
    """
    require("pymatgen", "discovery", "the EMT benchmark's convex hull")
    from pymatgen.analysis.phase_diagram import PDEntry, PhaseDiagram
    from pymatgen.core import Composition
    from ase.calculators.emt import EMT
    from tqdm.auto import tqdm

    from mlip.workflows.discovery.formation import plain_formation_energy
    from mlip.workflows.discovery.inputs import structure_dict
    from mlip.io import read_json, write_json

    if int(n_candidates) < 4:
        raise ValueError(f"n_candidates must be >= 4 (stable and unstable materials are needed), got {n_candidates}")
    if not margin >= 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    out_dir = Path(out_dir)
    settings = {"seed": int(seed), "fmax": float(fmax), "steps": int(steps), "margin": float(margin),
                "elements": list(ELEMENTS), "version": 1}
    work = out_dir / "work"
    old = read_json(work / "settings.json")
    if old is not None and old != settings:
        raise ValueError(f"{out_dir} holds an EMT benchmark built with other settings ({old}); "
                         f"use another folder (or delete it)")
    write_json(work / "settings.json", settings)
    t_start = time.perf_counter()
    cache = _Cache(work, EMT(), fmax, steps)
    rng = np.random.default_rng(seed)

    # --- elemental references
    a_guess = {el: bulk(el, "fcc").cell.cellpar()[0] * math.sqrt(2) for el in ELEMENTS}  # conventional a
    refs: Dict[str, float] = {}
    a_fcc: Dict[str, float] = {}
    hull_rows: List[dict] = []
    bar = tqdm(total=len(ELEMENTS) * 3 + 42, desc="known hull", unit="structure", disable=not progress,
               dynamic_ncols=True)
    for el in ELEMENTS:
        best = None
        for phase, atoms in _element_phases(el, a_guess[el]).items():
            rec = cache.relax(f"ref-{el}-{phase}", atoms)
            bar.update(1)
            if not rec["converged"]:
                continue
            e = rec["energy"] / rec["n_atoms"]
            if best is None or e < best[0]:
                best = (e, phase, rec)
        if best is None:
            raise RuntimeError(f"no converged EMT relaxation of elemental {el}")
        refs[el] = best[0]
        relaxed = _atoms(best[2])
        a_fcc[el] = (4 * relaxed.get_volume() / len(relaxed)) ** (1 / 3)
        hull_rows.append({"material_id": f"emt-ref-{el}", "formula": el, "prototype": best[1],
                          "energy": best[2]["energy"], "e_form_per_atom": 0.0,
                          "structure": structure_dict(relaxed)})
    pd_entries = [PDEntry(Composition(el), refs[el]) for el in ELEMENTS]
    for a_el, b_el in itertools.combinations(ELEMENTS, 2):
        for maj, mino in ((a_el, b_el), (b_el, a_el)):
            a0 = 0.75 * a_fcc[maj] + 0.25 * a_fcc[mino]
            rec = cache.relax(f"ref-L12-{maj}3{mino}", prototype("L12", maj, mino, a0))
            bar.update(1)
            if not rec["converged"]:
                continue
            relaxed = _atoms(rec)
            e_form = plain_formation_energy(relaxed.get_chemical_symbols(), rec["energy"], refs)
            pd_entries.append(PDEntry(Composition(relaxed.get_chemical_formula()), rec["energy"]))
            hull_rows.append({"material_id": f"emt-ref-L12-{maj}3{mino}", "formula": relaxed.get_chemical_formula(),
                              "prototype": "L12", "energy": rec["energy"], "e_form_per_atom": e_form,
                              "structure": structure_dict(relaxed)})
    bar.close()
    phase_diagram = PhaseDiagram(pd_entries)

    # --- candidate pool: prototypes first (shuffled), then random substitutions
    protos = [(name, x, y) for x, y in itertools.permutations(ELEMENTS, 2) for name in ("L10", "B2", "D022", "B1")
              if name == "D022" or x < y]
    order = rng.permutation(len(protos))
    n_protos = min(len(protos), int(n_candidates) // 3)
    pool_protos = [protos[k] for k in order[:n_protos]]

    def next_spec(k: int) -> Tuple[str, Atoms]:
        if k < len(pool_protos):
            name, x, y = pool_protos[k]
            frac_x = 0.75 if name == "D022" else 0.5
            return name, prototype(name, x, y, frac_x * a_fcc[x] + (1 - frac_x) * a_fcc[y])
        kind, atoms = _random_candidate(rng, a_fcc)
        if rng.random() < 0.25:
            return kind + "-perturbed", _perturb(rng, atoms)
        return kind, atoms

    candidates: List[dict] = []
    n_rejected = {"not_converged": 0, "near_hull": 0}
    max_attempts = 6 * int(n_candidates) + 50
    bar = tqdm(total=int(n_candidates), desc="candidates", unit="material", disable=not progress, dynamic_ncols=True)
    k = 0
    while len(candidates) < int(n_candidates):
        if k >= max_attempts:
            raise RuntimeError(f"only {len(candidates)} usable candidates after {k} attempts")
        kind, atoms = next_spec(k)
        k += 1
        rec = cache.relax(f"cand-{k:05d}", atoms)
        if not rec["converged"]:
            n_rejected["not_converged"] += 1
            continue
        relaxed = _atoms(rec)
        comp = Composition(relaxed.get_chemical_formula())
        e_hull = float(phase_diagram.get_decomp_and_e_above_hull(PDEntry(comp, rec["energy"]),
                                                                  allow_negative=True)[1])
        if abs(e_hull) < margin:
            n_rejected["near_hull"] += 1
            continue
        e_form = plain_formation_energy(relaxed.get_chemical_symbols(), rec["energy"], refs)
        candidates.append({"material_id": f"emt-{len(candidates) + 1:04d}", "formula": atoms.get_chemical_formula(),
                           "n_sites": len(atoms), "prototype": kind, "energy": rec["energy"],
                           "e_form_per_atom": e_form, "e_above_hull": e_hull, "initial": atoms, "relaxed": relaxed})
        bar.update(1)
    bar.close()
    n_stable = sum(c["e_above_hull"] <= 0 for c in candidates)
    if n_stable == 0:
        raise RuntimeError(f"no stable candidate among {len(candidates)} (seed {seed}): use more candidates")
    if n_stable == len(candidates):
        raise RuntimeError(f"no unstable candidate among {len(candidates)} (seed {seed}): use more candidates")

    # --- files
    _write_outputs(out_dir, candidates, hull_rows, refs)
    manifest = {
        "description": "miniature Matbench Discovery: ASE EMT plays DFT (mlip discovery emt-benchmark)",
        **settings,
        "protocol": {"optimizer": "FIRE", "cell_filter": "FrechetCellFilter", "fmax": fmax, "max_steps": steps},
        "n_candidates": len(candidates),
        "n_stable": int(n_stable),
        "prevalence": n_stable / len(candidates),
        "n_hull_entries": len(hull_rows),
        "n_attempts": k,
        "n_rejected": n_rejected,
        "prototypes": {kind: sum(c["prototype"] == kind for c in candidates)
                       for kind in sorted({c["prototype"] for c in candidates})},
        "elemental_references": refs,
        "n_relaxations_computed": cache.n_computed,
        "wall_time_s": time.perf_counter() - t_start,
        "files": {"initial_structures": "initial-structures.json.gz", "initial_atoms": "initial-atoms.extxyz",
                  "relaxed_structures": "relaxed-structures.json.gz", "summary": "summary.csv.gz",
                  "elemental_references": "elemental-references.json", "hull_entries": "hull-entries.json.gz"},
    }
    write_json(out_dir / "benchmark.json", manifest)
    return manifest


def _columns(rows: List[dict], keys: List[str]) -> dict:
    """A pandas "columns" orient table (``pd.read_json`` reads it)."""
    return {key: {str(i): row[key] for i, row in enumerate(rows)} for key in keys}


def _write_outputs(out_dir: Path, candidates: List[dict], hull_rows: List[dict], refs: Dict[str, float]) -> None:
    import csv
    import io

    import ase.io

    from mlip.io import atomic_write, write_json, write_text
    from mlip.workflows.discovery.inputs import structure_dict

    init_rows = [{"material_id": c["material_id"], "initial_structure": structure_dict(c["initial"])}
                 for c in candidates]
    write_json(out_dir / "initial-structures.json.gz", _columns(init_rows, ["material_id", "initial_structure"]),
               compress=True)
    relaxed_rows = [{"material_id": c["material_id"], "structure": structure_dict(c["relaxed"])} for c in candidates]
    write_json(out_dir / "relaxed-structures.json.gz", _columns(relaxed_rows, ["material_id", "structure"]),
               compress=True)
    write_json(out_dir / "hull-entries.json.gz",
               _columns(hull_rows, ["material_id", "formula", "prototype", "energy", "e_form_per_atom", "structure"]),
               compress=True)
    write_json(out_dir / "elemental-references.json", refs)

    frames = []
    for c in candidates:
        atoms = c["initial"].copy()
        atoms.info = {"material_id": c["material_id"]}
        frames.append(atoms)
    atomic_write(out_dir / "initial-atoms.extxyz", lambda tmp: ase.io.write(tmp, frames, format="extxyz"))

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    cols = ["material_id", "formula", "n_sites", "prototype", "energy", "e_form_per_atom", "e_above_hull"]
    writer.writerow(cols)
    for c in candidates:
        writer.writerow([c["material_id"], c["formula"], c["n_sites"], c["prototype"], f"{c['energy']:.8f}",
                         f"{c['e_form_per_atom']:.8f}", f"{c['e_above_hull']:.8f}"])
    write_text(out_dir / "summary.csv.gz", buf.getvalue(), compress=True)


__all__ = ["ELEMENTS", "MARGIN", "generate_emt_benchmark", "prototype"]
