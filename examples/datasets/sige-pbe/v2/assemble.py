"""The v2 Si–Ge set as far as it is labelled, split as v1 was: the files a v2 training reads.

    STEPS=data bash examples/datasets/sige-pbe/models.sh      # once: v1's split (work/sige-pbe-*.xyz)
    python examples/datasets/sige-pbe/v2/assemble.py           # work/v2/sige-pbe-v2{,-train,-valid,-test}.xyz

Every periodic structure with a v2 label (``v2/run``) and every structure without a periodic direction
with its v1 label (Γ is its only k-point under every rule, so its v1 label is its v2 label; plan.py) goes
into the part of v1's split it was in; the structures v1 does not have (additions.py) are split 80/10/10
per kind, each MD trajectory or path whole; what the active-learning loop labelled (``learn.sh``,
``learn/run/iter-*/labelled.xyz``, or an unfinished iteration's labels so far; GPAW on the v2 rule) goes
to train. A v2 model is therefore tested on structures that no v1 or v2 model trained on, and v1 and v2
models can be compared on the same test structures. A periodic structure v1 did not split (its v1 label
failed) goes to train and is counted. Rerun it whenever tranches have been
labelled: the files are rewritten (atomically) from the results alone.

``sige-pbe-v2-train-replay.xyz`` is the training file plus v1's periodic training structures that have no
v2 label yet, with their v1 labels weighted for forces only (``config_energy_weight`` and
``config_stress_weight`` 0, MACE's keys, which ``mlip train`` and MACE both read): their energies and
stresses carry the coarse mesh's cell-dependent error, their forces far less (docs/data.md). Fine-tuning
on the few v2 labels alone forgets what the rest of v1 taught (the pilot of 2026-12-06:
``examples/recipes/equiformer_v3-sige/v2/pilot.py``); replaying v1's forces keeps it.
``sige-pbe-v2-valid-replay.xyz`` is the validation file with v1's unrelabelled periodic validation
structures added the same way: a validation loss (which weighs each frame as the training loss does) that
also sees forgetting, on about 100 frames instead of the few v2 has labelled (not used by a recipe yet).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict, List

HERE = Path(__file__).resolve().parent
SET = HERE.parent
PARTS = ("train", "valid", "test")


def v1_parts(work: Path) -> Dict[str, List]:
    """v1's split: {part: its labelled frames}, from ``work/sige-pbe-{train,valid,test}.xyz``."""
    from ase.io import read

    parts: Dict[str, List] = {}
    for part in PARTS:
        path = work / f"sige-pbe-{part}.xyz"
        if not path.is_file():
            sys.exit(f"{path} is missing: build v1's split first "
                     "(STEPS=data bash examples/datasets/sige-pbe/models.sh)")
        parts[part] = read(path, ":")
    return parts


def additions_parts(additions: List) -> Dict[str, str]:
    """id → part for the structures v1 does not have (additions.py): 80/10/10 per kind, whole MD
    trajectories and paths in one part (their frames are correlated), seed 0."""
    from mlip.data.splits import split_dataset

    parts = split_dataset(additions, (0.8, 0.1, 0.1), seed=0, group_by="group", stratify_by="config_type")
    return {str(a.info["id"]): part for part, frames in zip(PARTS, parts) for a in frames}


def loop_frames(run: Path) -> List:
    """The frames the active-learning loop in ``run`` (``learn.sh``) has labelled, in iteration order;
    none when it has not run. SystemExit when its oracle is not GPAW on the v2 rule."""
    import json

    from ase.io import read

    if not (run / "learn.json").is_file():
        return []
    record = json.loads((run / "learn.json").read_text())
    settings = record.get("oracle_settings", {})
    if record.get("oracle") != "gpaw" or float(settings.get("kpoint_density_per_inv_A", 0)) != 8.0:
        sys.exit(f"{run}: its oracle is {record.get('oracle')!r} with {settings}, not GPAW on the v2 rule "
                 "(kpoint_density_per_inv_A=8.0)")
    from mlip.workflows.labelling import labelled_frames

    frames = []
    for iteration in sorted(run.glob("iter-*")):
        if (iteration / "labelled.xyz").is_file():
            labelled = read(iteration / "labelled.xyz", ":")
        elif (iteration / "selected.xyz").is_file() and (iteration / "labels").is_dir():
            # an iteration still labelling (or one the loop never finished): what it has labelled so far
            labelled = labelled_frames(read(iteration / "selected.xyz", ":"), iteration / "labels")[0]
        else:
            continue
        for atoms in labelled:
            atoms.info.setdefault("config_type", "active_learning")
            frames.append(atoms)
    return frames


def forces_only(v1_frames: List, relabelled: set) -> List:
    """v1's periodic frames whose id has no v2 label (``relabelled``), weighted for their forces only
    (``config_energy_weight`` and ``config_stress_weight`` 0): the coarse mesh moved their energies and
    stresses by cell, their forces far less."""
    out = []
    for atoms in v1_frames:
        if atoms.pbc.any() and str(atoms.info["id"]) not in relabelled:
            atoms.info.update(config_energy_weight=0.0, config_stress_weight=0.0,
                              label_note="v1 label (k-point density 2.5): forces only")
            out.append(atoms)
    return out


def assemble(work: Path, out: Path) -> Dict[str, Dict[str, int]]:
    """Write the v2 files into ``out``; {part: {config_type: frames}}."""
    from ase.io import read, write

    from mlip.io import atomic_write
    from mlip.workflows.labelling import labelled_frames

    v1 = v1_parts(work)
    part_of = {str(a.info["id"]): part for part, frames in v1.items() for a in frames}
    structures = read(SET / "sige-structures.xyz", ":")
    periodic = [a for a in structures if a.pbc.any()]
    if (HERE / "additions.xyz").exists():
        additions = read(HERE / "additions.xyz", ":")
        part_of.update(additions_parts(additions))
        periodic += additions
    v2, _, _ = labelled_frames(periodic, HERE / "run")
    from_loop = loop_frames(HERE / "learn" / "run")
    gamma_only: List = []
    for part in PARTS:
        for atoms in v1[part]:
            if not atoms.pbc.any():
                atoms.info["label_note"] = ("v1 label: Γ is the only k-point of a structure without "
                                            "periodicity")
                gamma_only.append(atoms)
    frames = {part: [] for part in PARTS}
    counts: Dict[str, Dict[str, int]] = {part: {} for part in PARTS}
    unsplit = 0
    loop_ids = {id(atoms) for atoms in from_loop}
    for atoms in v2 + gamma_only + from_loop:
        part = part_of.get(str(atoms.info["id"]))
        if part is None:
            part, unsplit = "train", unsplit + (id(atoms) not in loop_ids)
        frames[part].append(atoms)
        kind = str(atoms.info.get("config_type"))
        counts[part][kind] = counts[part].get(kind, 0) + 1
    out.mkdir(parents=True, exist_ok=True)
    everything = [a for part in PARTS for a in frames[part]]
    files = [("sige-pbe-v2.xyz", everything)] + [(f"sige-pbe-v2-{p}.xyz", frames[p]) for p in PARTS]
    relabelled = {str(a.info["id"]) for a in v2 + from_loop}
    replay = forces_only(v1["train"], relabelled)
    files.append(("sige-pbe-v2-train-replay.xyz", frames["train"] + replay))
    files.append(("sige-pbe-v2-valid-replay.xyz", frames["valid"] + forces_only(v1["valid"], relabelled)))
    for name, chunk in files:
        atomic_write(out / name, lambda tmp, chunk=chunk: write(tmp, chunk, format="extxyz"))
    print(f"v2: {len(v2)} periodic structures labelled, {len(gamma_only)} without periodicity (v1 labels), "
          f"{len(from_loop)} from the active-learning loop (to train); {unsplit} not in v1's split (to train); "
          f"{len(replay)} v1 periodic training structures replayed for their forces (the -replay file)")
    for part in PARTS:
        n_periodic = sum(bool(a.pbc.any()) for a in frames[part])
        print(f"  {part}: {len(frames[part])} frames, {n_periodic} periodic; "
              f"by kind {dict(sorted(counts[part].items()))}")
    return counts


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--work", type=Path, default=SET / "work", help="where v1's split files are")
    p.add_argument("--out", type=Path, default=SET / "work" / "v2", help="folder of the v2 files")
    args = p.parse_args(argv)
    assemble(args.work, args.out)


if __name__ == "__main__":
    main()
