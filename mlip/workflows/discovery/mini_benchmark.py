"""The machinery of a miniature Matbench Discovery in which a calculator plays DFT.

A :class:`Recipe` names the structures; :func:`build_benchmark` relaxes them with the recipe's
calculator (the *truth*) and writes the benchmark's files. Two recipes ship:
:mod:`.emt_benchmark` (ASE's EMT over seven fcc metals) and :mod:`.teacher_benchmark` (any ASE
calculator, e.g. a foundation potential, over binary chemical systems). Whatever the recipe:

* elemental references: the recipe's phases of each element, relaxed (FIRE + FrechetCellFilter, the
  relaxation protocol of :mod:`.relax_campaign`); μ_el = the lowest converged energy per atom (eV/atom);
* the "known" hull (the role of the Materials Project): the elements and the recipe's known compounds,
  relaxed; one pymatgen ``PhaseDiagram`` per hull group of the recipe (a set of elements);
* candidates (the role of WBM): the recipe's candidates in turn, given unrelaxed; their reference
  relaxed structure, energy, formation energy and hull distance (against the diagram of the group
  holding their elements) come from the same relaxation. Candidates whose relaxation did not converge
  (or failed, where the recipe records failures), or whose hull distance lies within ``margin`` of
  zero, are replaced by the next ones, so that the stability labels do not hinge on the 4-decimal
  rounding of the submission file.

Files written to ``out_dir`` (the benchmark's formats; ``mlip discovery relax``, ``join`` and
``metrics`` read them):

* ``initial-structures.json.gz``: pandas "columns" JSON, ``material_id`` and ``initial_structure``
  (pymatgen dicts), and the same structures as ``initial-atoms.extxyz`` (``material_id`` in info);
* ``relaxed-structures.json.gz``: ``material_id`` and ``structure``, the reference relaxed ones;
* ``summary.csv.gz``: ``material_id``, ``formula``, ``n_sites``, ``prototype``, ``energy`` (eV),
  ``e_form_per_atom`` and ``e_above_hull`` (eV/atom), then the recipe's extra columns (``system``);
* ``elemental-references.json``: ``{element: eV/atom}``;
* ``hull-entries.json.gz``: the known hull's entries (``material_id``, ``formula``, ``prototype``,
  ``energy``, ``e_form_per_atom``, ``structure``);
* ``benchmark.json``: the settings, counts and timings.

Every relaxation is cached in ``out_dir/work/`` as it finishes (:class:`ReferenceCache`), so an
interrupted generation resumes where it stopped; ``work/settings.json`` ties the folder to its
settings (another seed, protocol or calculator is refused).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from ase import Atoms

#: hull distances closer to zero than this (eV/atom) are not used for candidates
MARGIN = 1e-3

#: what :func:`build_benchmark` writes, by role
FILES = {"initial_structures": "initial-structures.json.gz", "initial_atoms": "initial-atoms.extxyz",
         "relaxed_structures": "relaxed-structures.json.gz", "summary": "summary.csv.gz",
         "elemental_references": "elemental-references.json", "hull_entries": "hull-entries.json.gz"}

SUMMARY_COLUMNS = ["material_id", "formula", "n_sites", "prototype", "energy", "e_form_per_atom",
                   "e_above_hull"]


class Recipe:
    """The structures of a miniature benchmark; subclasses fill in the methods.

    Attributes:
        name: the prefix of material ids (``<name>-0001``, ``<name>-ref-...``).
        label: the truth calculator in messages (``EMT``).
        description: ``benchmark.json``'s description.
        elements: every element, in order.
        min_candidates: the smallest number of candidates accepted.
        require_both_classes: refuse a benchmark whose candidates are all stable or all unstable.
        record_failures: a relaxation that raises counts as a rejected structure (recorded in the
            cache) instead of stopping the generation.
        extra_columns: summary columns after the standard ones (``system``: the hull group's name).
    """

    name = "mini"
    label = "the calculator"
    description = "miniature Matbench Discovery"
    elements: Tuple[str, ...] = ()
    min_candidates = 1
    require_both_classes = False
    record_failures = False
    extra_columns: Tuple[str, ...] = ()

    def calculator(self, atoms: Atoms):
        """The truth calculator for ``atoms``."""
        raise NotImplementedError

    def element_phases(self, element: str) -> Dict[str, Atoms]:
        """Unrelaxed phases of ``element`` by name."""
        raise NotImplementedError

    def known_compounds(self, elements: Dict[str, Atoms]) -> List[Tuple[str, str, Atoms]]:
        """(key, prototype, unrelaxed atoms) of the known compounds, given each element's relaxed
        lowest phase; ``key`` names the cache entry ``ref-<key>`` and the id ``<name>-ref-<key>``."""
        raise NotImplementedError

    def hull_groups(self) -> Dict[str, Tuple[str, ...]]:
        """{name: elements}: one phase diagram per group; every candidate lies in one."""
        raise NotImplementedError

    def candidates(self, rng: np.random.Generator, elements: Dict[str, Atoms],
                   n_candidates: int) -> Callable[[int], Tuple[str, Atoms]]:
        """``next_candidate(k)`` for k = 0, 1, ...: (prototype label, unrelaxed atoms), drawn from
        ``rng`` in order (the same calls give the same candidates)."""
        raise NotImplementedError


class ReferenceCache:
    """Relaxations by the truth calculator, stored as they finish in ``folder`` (resumable
    generation): a stored result is reused when its input structure is the same."""

    def __init__(self, folder: Path, calculator: Callable[[Atoms], Any], fmax: float, steps: int,
                 record_failures: bool = False):
        self.folder, self.calculator, self.fmax, self.steps = folder, calculator, fmax, steps
        self.record_failures = record_failures
        self.n_computed = 0

    def relax(self, key: str, atoms: Atoms) -> Dict[str, Any]:
        """The relaxation record of ``atoms`` (:func:`.relax_campaign.relax_material`), or with
        ``record_failures`` ``{"failed": True, "converged": False, "error"}`` for one that raised."""
        from mlip.workflows.discovery.relax_campaign import failure_record, relax_material
        from mlip.workflows.fingerprints import structures_fingerprint
        from mlip.workflows.sharding import read_result, write_result

        fingerprint = structures_fingerprint([atoms])
        old = read_result(self.folder, key)
        if old is not None and old.get("fingerprint") == fingerprint:
            return old
        t0 = time.perf_counter()
        try:
            record = relax_material(atoms, self.calculator(atoms), fmax=self.fmax, steps=self.steps)
        except Exception as err:  # KeyboardInterrupt passes through
            if not self.record_failures:
                raise
            record = {**failure_record(err, time.perf_counter() - t0), "converged": False}
            record.pop("traceback")
        record["fingerprint"] = fingerprint
        write_result(self.folder, key, record)
        self.n_computed += 1
        return {"id": key, **record}


def relaxed_structure(record: dict) -> Atoms:
    """The relaxed structure of a relaxation record (periodic; Å)."""
    from mlip.workflows.discovery.formation import relaxed_atoms

    return relaxed_atoms(record)


def perturbed(rng: np.random.Generator, atoms: Atoms) -> Atoms:
    """A copy rattled by 0.05 Å (normal) and strained by up to ±3 % (symmetric strain)."""
    atoms = atoms.copy()
    eps = rng.uniform(-0.03, 0.03, size=(3, 3))
    eps = 0.5 * (eps + eps.T)
    atoms.set_cell(atoms.cell.array @ (np.eye(3) + eps), scale_atoms=True)
    atoms.positions += rng.normal(0, 0.05, size=atoms.positions.shape)
    return atoms


def claim_folder(out_dir: Path, settings: Dict[str, Any], what: str) -> None:
    """Record ``settings`` in ``out_dir/work/settings.json``, or refuse a folder built with others."""
    from mlip.io import jsonable, read_json, write_json

    work = out_dir / "work"
    old = read_json(work / "settings.json")
    if old is not None and old != jsonable(settings):
        raise ValueError(f"{out_dir} holds {what} built with other settings ({old}); "
                         f"use another folder (or delete it)")
    write_json(work / "settings.json", settings)


def build_benchmark(recipe: Recipe, out_dir: Path, settings: Dict[str, Any], seed: int, n_candidates: int,
                    fmax: float, steps: int, margin: float, progress: bool,
                    what: Optional[str] = None) -> Dict[str, Any]:
    """Build the benchmark of ``recipe`` in ``out_dir`` (see the module docstring) and return the
    contents of ``benchmark.json``: ``description``, ``settings`` (spread), ``protocol`` and the counts.

    Args:
        recipe: the structures and the truth calculator.
        out_dir: output folder.
        settings: what ties the folder (``work/settings.json``) and opens ``benchmark.json``.
        seed: the random seed of the candidates.
        n_candidates: number of candidates.
        fmax, steps: the relaxation protocol (eV/Å, FIRE steps).
        margin: minimum |hull distance| of a candidate (eV/atom).
        progress: progress bars.
        what: the benchmark in the refusal of a folder built with other settings.
    """
    from mlip.extras import require

    require("pymatgen", "discovery", f"the {recipe.label} benchmark's convex hull")
    from pymatgen.analysis.phase_diagram import PDEntry, PhaseDiagram
    from pymatgen.core import Composition
    from tqdm.auto import tqdm

    from mlip.io import write_json
    from mlip.workflows.discovery.formation import plain_formation_energy
    from mlip.workflows.discovery.inputs import structure_dict

    if int(n_candidates) < recipe.min_candidates:
        need = " (stable and unstable materials are needed)" if recipe.require_both_classes else ""
        raise ValueError(f"n_candidates must be >= {recipe.min_candidates}{need}, got {n_candidates}")
    if not margin >= 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    out_dir = Path(out_dir)
    claim_folder(out_dir, settings, what or f"a {recipe.label} benchmark")
    t_start = time.perf_counter()
    cache = ReferenceCache(out_dir / "work", recipe.calculator, fmax, steps, recipe.record_failures)
    rng = np.random.default_rng(seed)

    # --- elemental references
    phases = {el: recipe.element_phases(el) for el in recipe.elements}
    refs: Dict[str, float] = {}
    lowest: Dict[str, Atoms] = {}
    hull_rows: List[dict] = []
    bar = tqdm(total=sum(map(len, phases.values())), desc="known hull", unit="structure",
               disable=not progress, dynamic_ncols=True)
    for el in recipe.elements:
        best = None
        for phase, atoms in phases[el].items():
            rec = cache.relax(f"ref-{el}-{phase}", atoms)
            bar.update(1)
            if not rec["converged"]:
                continue
            e = rec["energy"] / rec["n_atoms"]
            if best is None or e < best[0]:
                best = (e, phase, rec)
        if best is None:
            raise RuntimeError(f"no converged {recipe.label} relaxation of elemental {el}")
        refs[el] = best[0]
        lowest[el] = relaxed_structure(best[2])
        hull_rows.append({"material_id": f"{recipe.name}-ref-{el}", "formula": el, "prototype": best[1],
                          "energy": best[2]["energy"], "e_form_per_atom": 0.0,
                          "structure": structure_dict(lowest[el])})
    compounds = recipe.known_compounds(lowest)
    bar.total += len(compounds)
    bar.refresh()
    pd_entries = [PDEntry(Composition(el), refs[el]) for el in recipe.elements]
    n_known_rejected = 0
    for key, proto, atoms in compounds:
        rec = cache.relax(f"ref-{key}", atoms)
        bar.update(1)
        if not rec["converged"]:
            n_known_rejected += 1
            continue
        relaxed = relaxed_structure(rec)
        e_form = plain_formation_energy(relaxed.get_chemical_symbols(), rec["energy"], refs)
        pd_entries.append(PDEntry(Composition(relaxed.get_chemical_formula()), rec["energy"]))
        hull_rows.append({"material_id": f"{recipe.name}-ref-{key}",
                          "formula": relaxed.get_chemical_formula(), "prototype": proto, "energy": rec["energy"], "e_form_per_atom": e_form,
                          "structure": structure_dict(relaxed)})
    bar.close()
    groups = recipe.hull_groups()
    diagrams = {}
    for group, members in groups.items():
        inside = [e for e in pd_entries if {str(x) for x in e.composition.elements} <= set(members)]
        diagrams[group] = PhaseDiagram(inside)

    def group_of(atoms: Atoms) -> str:
        present = set(atoms.get_chemical_symbols())
        for group, members in groups.items():
            if present <= set(members):
                return group
        raise RuntimeError(f"candidate {atoms.get_chemical_formula()} lies in no hull group of the recipe")

    # --- candidates
    next_candidate = recipe.candidates(rng, lowest, int(n_candidates))
    candidates: List[dict] = []
    n_rejected = {"not_converged": 0, "near_hull": 0}
    if recipe.record_failures:
        n_rejected["failed"] = 0
    max_attempts = 6 * int(n_candidates) + 50
    bar = tqdm(total=int(n_candidates), desc="candidates", unit="material", disable=not progress,
               dynamic_ncols=True)
    k = 0
    while len(candidates) < int(n_candidates):
        if k >= max_attempts:
            raise RuntimeError(f"only {len(candidates)} usable candidates after {k} attempts")
        kind, atoms = next_candidate(k)
        k += 1
        rec = cache.relax(f"cand-{k:05d}", atoms)
        if rec.get("failed"):
            n_rejected["failed"] += 1
            continue
        if not rec["converged"]:
            n_rejected["not_converged"] += 1
            continue
        relaxed = relaxed_structure(rec)
        comp = Composition(relaxed.get_chemical_formula())
        group = group_of(atoms)
        e_hull = float(diagrams[group].get_decomp_and_e_above_hull(PDEntry(comp, rec["energy"]),
                                                                    allow_negative=True)[1])
        if abs(e_hull) < margin:
            n_rejected["near_hull"] += 1
            continue
        e_form = plain_formation_energy(relaxed.get_chemical_symbols(), rec["energy"], refs)
        candidates.append({"material_id": f"{recipe.name}-{len(candidates) + 1:04d}",
                           "formula": atoms.get_chemical_formula(), "n_sites": len(atoms), "prototype": kind,
                           "energy": rec["energy"], "e_form_per_atom": e_form, "e_above_hull": e_hull,
                           "system": group, "initial": atoms, "relaxed": relaxed})
        bar.update(1)
    bar.close()
    n_stable = sum(c["e_above_hull"] <= 0 for c in candidates)
    if recipe.require_both_classes and n_stable == 0:
        raise RuntimeError(f"no stable candidate among {len(candidates)} (seed {seed}): use more candidates")
    if recipe.require_both_classes and n_stable == len(candidates):
        raise RuntimeError(f"no unstable candidate among {len(candidates)} (seed {seed}): "
                           "use more candidates")

    # --- files
    write_benchmark_files(out_dir, candidates, hull_rows, refs, list(recipe.extra_columns))
    manifest = {
        "description": recipe.description,
        **settings,
        "protocol": {"optimizer": "FIRE", "cell_filter": "FrechetCellFilter", "fmax": fmax,
                     "max_steps": steps},
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
        "files": dict(FILES),
    }
    if "system" in recipe.extra_columns:
        manifest["n_known_rejected"] = n_known_rejected
        manifest["per_system"] = {g: {"n_candidates": sum(c["system"] == g for c in candidates),
                                      "n_stable": sum(c["system"] == g and c["e_above_hull"] <= 0
                                                      for c in candidates),
                                      "n_hull_entries": sum(1 for e in pd_entries
                                                            if {str(x) for x in e.composition.elements}
                                                            <= set(groups[g]))}
                                  for g in groups}
        if n_stable in (0, len(candidates)):
            manifest["warning"] = (f"all {len(candidates)} candidates are "
                                   f"{'unstable' if n_stable == 0 else 'stable'}: F1 is undefined; "
                                   "use more candidates")
    write_json(out_dir / "benchmark.json", manifest)
    return manifest


def _columns(rows: List[dict], keys: List[str]) -> dict:
    """A pandas "columns" orient table (``pd.read_json`` reads it)."""
    return {key: {str(i): row[key] for i, row in enumerate(rows)} for key in keys}


def write_benchmark_files(out_dir: Path, candidates: List[dict], hull_rows: List[dict],
                          refs: Dict[str, float], extra_columns: Sequence[str] = ()) -> None:
    """Write the files of the module docstring (all but ``benchmark.json``) from the candidates
    (``material_id``, ``formula``, ``n_sites``, ``prototype``, ``energy``, ``e_form_per_atom``,
    ``e_above_hull``, ``initial`` and ``relaxed`` Atoms, and ``extra_columns``), the known hull's
    rows and the elemental references (eV/atom)."""
    import csv
    import io

    import ase.io

    from mlip.io import atomic_write, write_json, write_text
    from mlip.workflows.discovery.inputs import structure_dict

    out_dir = Path(out_dir)
    init_rows = [{"material_id": c["material_id"], "initial_structure": structure_dict(c["initial"])}
                 for c in candidates]
    write_json(out_dir / FILES["initial_structures"],
               _columns(init_rows, ["material_id", "initial_structure"]), compress=True)
    relaxed_rows = [{"material_id": c["material_id"], "structure": structure_dict(c["relaxed"])}
                    for c in candidates]
    write_json(out_dir / FILES["relaxed_structures"], _columns(relaxed_rows, ["material_id", "structure"]),
               compress=True)
    write_json(out_dir / FILES["hull_entries"],
               _columns(hull_rows, ["material_id", "formula", "prototype", "energy", "e_form_per_atom",
                                    "structure"]), compress=True)
    write_json(out_dir / FILES["elemental_references"], refs)

    frames = []
    for c in candidates:
        atoms = c["initial"].copy()
        atoms.info = {"material_id": c["material_id"]}
        frames.append(atoms)
    atomic_write(out_dir / FILES["initial_atoms"], lambda tmp: ase.io.write(tmp, frames, format="extxyz"))

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(SUMMARY_COLUMNS + list(extra_columns))
    for c in candidates:
        writer.writerow([c["material_id"], c["formula"], c["n_sites"], c["prototype"], f"{c['energy']:.8f}",
                         f"{c['e_form_per_atom']:.8f}", f"{c['e_above_hull']:.8f}"]
                        + [c[key] for key in extra_columns])
    write_text(out_dir / FILES["summary"], buf.getvalue(), compress=True)


__all__ = ["FILES", "MARGIN", "Recipe", "ReferenceCache", "SUMMARY_COLUMNS", "build_benchmark",
           "claim_folder", "perturbed", "relaxed_structure", "write_benchmark_files"]
