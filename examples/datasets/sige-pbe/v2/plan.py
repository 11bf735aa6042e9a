"""The v2 labels of the Si–Ge set (issue 55): its periodic structures labelled again on the k-point study's
rule, in order of value, in tranches that are each a complete labelled file.

    python examples/datasets/sige-pbe/v2/plan.py            # the tranche files (once) and the reused labels
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

The order is cut into tranches of :data:`TRANCHE` structures (``tranche-01.xyz``, ...), labelled one after
another into one results folder, so that each finished tranche is written as a labelled file and a
stopped run loses at most the calculation in progress.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict, List

import numpy as np

HERE = Path(__file__).resolve().parent
SET = HERE.parent
#: the v2 rule: overrides of the dataset's GPAW settings
V2_SETTINGS = {"kpoint_density_per_inv_A": 8.0}
#: turns per round of each periodic kind
WEIGHTS: Dict[str, int] = {"prototype": 3, "strained": 3, "rattled": 3, "ordered_alloy": 2, "vacancy": 1,
                           "surface": 1, "interstitial": 1, "random_alloy": 1, "liquid": 1, "amorphous": 1}
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


def main() -> None:
    from ase.io import read, write

    structures = read(SET / "sige-structures.xyz", ":")
    run = HERE / "run"
    reused = reuse_study_labels(structures, run)
    if sorted(HERE.glob("tranche-*.xyz")):  # the order is fixed once labelling has started
        print(f"{len(reused)} labels reused from the k-point study; the tranche files exist and are kept")
        return
    order = value_order(structures, reused)
    for k in range(0, len(order), TRANCHE):
        write(HERE / f"tranche-{k // TRANCHE + 1:02d}.xyz", order[k:k + TRANCHE], format="extxyz")
    counts: Dict[str, int] = {}
    for atoms in order[:TRANCHE]:
        counts[atoms.info["config_type"]] = counts.get(atoms.info["config_type"], 0) + 1
    print(f"{len(order)} periodic structures in {-(-len(order) // TRANCHE)} tranches; {len(reused)} labels "
          f"reused from the k-point study; tranche 1: {counts}")


if __name__ == "__main__":
    main()
