"""The v2 labels of the Si–Ge set (issue 55): its periodic structures labelled again on the k-point study's
rule, in order of value, in tranches that are each a complete labelled file.

    python examples/datasets/sige-pbe/v2/plan.py            # the tranche files (once) and the reused labels
    python examples/datasets/sige-pbe/v2/plan.py --test-first 2   # the next tranches begin with the test part
    bash examples/datasets/sige-pbe/v2/label.sh             # resumable, under mpiexec; hours to days

The rule (docs/data.md, "The k-point convergence study"): a Γ-centred mesh of density 8 Å⁻¹, the study's
reference, for every periodic structure. Of the cheaper rules none met the issue's targets (2 meV/atom,
10 meV/Å, 0.05 GPa) on every kind: every sampled periodic structure was a metal at this physics (PBE,
Fermi–Dirac 0.1 eV), and on metals the stress needs the reference mesh. Nothing else changes (PBE, PW
400 eV, Fermi–Dirac 0.1 eV, force-consistent energy): v1 and v2 differ only in sampling. Structures with
no periodic direction (isolated atoms, clusters, compressed dimers and trimers) have Γ as their only
k-point under every rule, so their v1 labels are v2 labels already and are not relabelled.

The whole set at this rule would cost about 25–45× v1's 8.6 CPU hours of periodic labels, far beyond the
issue's budget, so the structures are labelled in order of value:

- the structures the study already computed on this mesh come first, their labels reused as they are;
- then the kinds take turns with weights (:data:`WEIGHTS`): the near-equilibrium crystals that set the
  lattice constants, elastic constants, phonons and κ (prototypes, strained, rattled: three turns each;
  ordered alloys: two), then one turn each for defects, surfaces, random alloys, liquid and amorphous;
- within a kind, a seeded random order of cells of at most :data:`MAX_ATOMS` atoms (the cost of a label
  grows with the cell; larger cells follow at the end).

What v1 lacks (``additions.xyz`` from additions.py: MD snapshots of crystals at 300–900 K, the diamond →
β-Sn path) joins the order as two more kinds. When it appears after labelling has started, the tranches
with labels are kept as they are and the rest is planned again with it.

``--test-first N`` plans the tranches not yet started again, beginning with up to N unlabelled structures
of the test part per kind (v1's test split; the additions' test part from assemble.py): on 2026-12-06 the
v2 test file had 4 periodic structures of 4 kinds, too few to rank a recipe or judge a target, so
tranche-02 begins with 2 test structures of each of the 12 periodic kinds (24), then the value order.

The order is cut into tranches of :data:`TRANCHE` structures (``tranche-01.xyz``, ...), labelled one after
another into one results folder, so that each finished tranche is written as a labelled file and a
stopped run loses at most the calculation in progress.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

HERE = Path(__file__).resolve().parent
SET = HERE.parent
#: the v2 rule: overrides of the dataset's GPAW settings
V2_SETTINGS = {"kpoint_density_per_inv_A": 8.0}
#: turns per round of each periodic kind
WEIGHTS: Dict[str, int] = {"prototype": 3, "strained": 3, "rattled": 3, "md_crystal": 3, "ordered_alloy": 2,
                           "transition_path": 2, "vacancy": 1, "surface": 1, "interstitial": 1,
                           "random_alloy": 1, "liquid": 1, "amorphous": 1}
#: cells up to this size first, in each kind
MAX_ATOMS = 16
#: structures per tranche file
TRANCHE = 40


def value_order(structures: List, first_ids: List[str], seed: int = 0) -> List:
    """The periodic ``structures`` in labelling order (module docstring): ``first_ids`` first, then the
    kinds taking weighted turns."""
    rng = np.random.default_rng(seed)
    first_ids = set(first_ids)
    first = [a for a in structures if a.info["id"] in first_ids]
    queues: Dict[str, List] = {}
    for kind in WEIGHTS:
        frames = [a for a in structures if a.info.get("config_type") == kind and a.pbc.any()
                  and a.info["id"] not in first_ids]
        frames = [frames[k] for k in rng.permutation(len(frames))]
        queues[kind] = ([a for a in frames if len(a) <= MAX_ATOMS]
                        + sorted((a for a in frames if len(a) > MAX_ATOMS), key=len))
    other = sorted({str(a.info.get("config_type")) for a in structures if a.pbc.any()} - set(WEIGHTS))
    if other:
        sys.exit(f"periodic kinds without a weight: {', '.join(other)}")
    order = list(first)
    while any(queues.values()):
        for kind, turns in WEIGHTS.items():
            for _ in range(turns):
                if queues[kind]:
                    order.append(queues[kind].pop(0))
    return order


def reuse_study_labels(structures: List, run: Path) -> List[str]:
    """Write the k-point study's results on the v2 mesh as v2 results in ``run`` (the provenance a v2
    labelling run would give them; only where the study's mesh is the v2 mesh); their ids."""
    from mlip.io import write_json
    from mlip.workflows.kpoints import kpoint_mesh
    from mlip.workflows.labelling import labeller, result_id

    provenance = labeller("gpaw", V2_SETTINGS).provenance
    by_key = {result_id(a): a for a in structures}
    reused = []
    for path in sorted((SET / "kpoint-study" / "results").glob("g8.*.json")):
        record = json.loads(path.read_text())
        key = record["id"][len("g8."):]
        atoms = by_key.get(key)
        if record.get("failed") or atoms is None:
            continue
        if list(record["mesh"]) != list(kpoint_mesh(atoms, V2_SETTINGS["kpoint_density_per_inv_A"])):
            sys.exit(f"{path.name}: the study's mesh is not the v2 mesh")
        out = {"id": key, "energy": record["energy"], "forces": record["forces"],
               "wall_time_s": record["wall_time_s"],
               "label_details": {"kpoint_mesh": record["mesh"], "band_gap_eV": record["gap_eV"],
                                 "from": f"kpoint-study/results/{path.name}"},
               **provenance}
        if "stress" in record:
            out["stress"] = record["stress"]
        target = run / "results" / f"{key}.json"
        if not target.exists():
            write_json(target, out)
        reused.append(str(atoms.info["id"]))
    return reused


def started_tranches(tranches: Dict[Path, List], run: Path) -> List[Path]:
    """The tranche files (``tranches``: path → its structures, in order) up to the last one that
    label.sh has started: with a result of its own in ``run`` (a label reused from the k-point study
    does not count) or a labelled file."""
    from mlip.workflows.labelling import result_id
    from mlip.workflows.sharding import load_results

    results = load_results(run)
    files = list(tranches)
    last = 0
    for k, path in enumerate(files):
        records = [results.get(result_id(a)) for a in tranches[path]]
        labelled_here = any(r is not None and "from" not in r.get("label_details", {}) for r in records)
        if labelled_here or (HERE / "labelled" / path.name).exists():
            last = k + 1
    return files[:last]


def write_tranches(order: List, first_number: int) -> None:
    """``order`` cut into tranche files numbered from ``first_number``; tranche files after them go."""
    from ase.io import write

    from mlip.io import atomic_write

    number = first_number
    for k in range(0, len(order), TRANCHE):
        chunk = order[k:k + TRANCHE]
        atomic_write(HERE / f"tranche-{number:02d}.xyz", lambda tmp, c=chunk: write(tmp, c, format="extxyz"))
        number += 1
    for path in sorted(HERE.glob("tranche-*.xyz")):
        if int(path.stem.split("-")[1]) >= number:
            path.unlink()


def test_first(order: List, test_ids: set, per_kind: int, labelled: set) -> Tuple[List, List]:
    """(first, rest): up to ``per_kind`` structures of each kind whose id is in ``test_ids`` (the test
    part) and not ``labelled``, in their order in ``order``, kinds in :data:`WEIGHTS`' order; then the rest
    of ``order``."""
    picked = []
    for kind in WEIGHTS:
        picked += [a for a in order if a.info.get("config_type") == kind and str(a.info["id"]) in test_ids
                   and str(a.info["id"]) not in labelled][:per_kind]
    ids = {id(a) for a in picked}
    return picked, [a for a in order if id(a) not in ids]


def test_ids(work: Path, additions: List) -> set:
    """The ids of v1's test part (``work/sige-pbe-test.xyz``) and of the additions' (assemble.py's split)."""
    from ase.io import read

    from assemble import additions_parts  # this folder's

    path = work / "sige-pbe-test.xyz"
    if not path.is_file():
        sys.exit(f"{path} is missing: build v1's split first "
                 "(STEPS=data bash examples/datasets/sige-pbe/models.sh)")
    ids = {str(a.info["id"]) for a in read(path, ":")}
    return ids | {key for key, part in additions_parts(additions).items() if part == "test"}


def main(argv=None) -> None:
    import argparse

    from ase.io import read

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--test-first", type=int, default=0, metavar="N",
                        help="plan the tranches not yet started again, beginning with up to N unlabelled "
                             "structures of the test part per kind (so that the test file measures every "
                             "kind early)")
    args = parser.parse_args(argv)
    structures = read(SET / "sige-structures.xyz", ":")
    additions = read(HERE / "additions.xyz", ":") if (HERE / "additions.xyz").exists() else []
    run = HERE / "run"
    reused = reuse_study_labels(structures, run)
    existing = {path: read(path, ":") for path in sorted(HERE.glob("tranche-*.xyz"))}
    planned = {str(a.info["id"]) for frames in existing.values() for a in frames}
    if args.test_first:
        from mlip.workflows.labelling import labelled_frames

        kept = started_tranches(existing, run)
        kept_ids = {str(a.info["id"]) for path in kept for a in existing[path]}
        rest = [a for path in existing if path not in kept for a in existing[path]]
        done, _, _ = labelled_frames([a for frames in existing.values() for a in frames], run)
        labelled = {str(a.info["id"]) for a in done} | kept_ids
        first, rest = test_first(rest, test_ids(SET / "work", additions), args.test_first, labelled)
        write_tranches(first + rest, len(kept) + 1)
        print(f"{len(kept)} tranche(s) kept; tranche-{len(kept) + 1:02d} begins with {len(first)} test "
              f"structures ({', '.join(sorted({a.info['config_type'] for a in first}))}); "
              f"{len(first) + len(rest)} planned")
        return
    if existing and all(str(a.info["id"]) in planned for a in additions):
        print(f"{len(reused)} labels reused from the k-point study; the tranche files exist and are kept")
        return
    # the first plan, or additions (additions.py) not yet planned: the tranches labelling has started
    # are kept as they are, the rest is planned again with the additions
    kept = started_tranches(existing, run) if existing else []
    kept_ids = {str(a.info["id"]) for path in kept for a in existing[path]}
    order = value_order([a for a in structures + additions if str(a.info["id"]) not in kept_ids], reused)
    write_tranches(order, len(kept) + 1)
    counts: Dict[str, int] = {}
    for atoms in order:
        counts[atoms.info["config_type"]] = counts.get(atoms.info["config_type"], 0) + 1
    print(f"{len(kept)} tranches kept (labelling started); {len(order)} periodic structures planned in "
          f"{-(-len(order) // TRANCHE)} more tranches from tranche-{len(kept) + 1:02d}; {len(reused)} labels "
          f"reused from the k-point study; by kind {counts}")


if __name__ == "__main__":
    main()
