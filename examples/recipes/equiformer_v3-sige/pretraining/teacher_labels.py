"""The pre-training set of the two-stage Si–Ge recipe: SevenNet-0's labels of the training and validation
structures, on the energy scale of the GPAW labels.

The teacher's energies and GPAW's differ by a constant per element (pseudopotentials, codes), and the
teacher's isolated atoms are far outside its training data (SevenNet-0 gives Si −1.31 and Ge −0.94 eV,
0.93 and 0.56 eV below GPAW's, while its crystals lie only about 0.12–0.13 eV per atom below): anchoring
the model at the teacher's isolated atoms (the recipe's ``reference_energies: isolated_atoms``) and then at
GPAW's would shift every condensed structure by 0.4–0.8 eV per atom when fine-tuning starts. So the
teacher's energies are moved by the per-element constant fitted by least squares to E_GPAW − E_teacher over
the training structures both label (isolated atoms and the compressed dimers, where the teacher has no
repulsive wall, left out). The isolated atoms and the compressed dimers (one or two atoms: seconds of GPAW
each) carry GPAW's labels: pre-training and fine-tuning then share the isolated-atom references, the energy
scale and the output scale (the RMS force, which the dimers dominate; ``init_from`` keeps stage 1's), so
the loss and its Huber δ mean the same in both stages. The other forces and stresses are the teacher's.

    python examples/recipes/equiformer_v3-sige/pretraining/teacher_labels.py \\
        examples/datasets/sige-pbe/work --out-dir out/pretraining

writes OUT_DIR/sige-7net0-train.xyz and sige-7net0-valid.xyz (the teacher's frames of the structures of
sige-pbe-train.xyz and sige-pbe-valid.xyz, matched by ``id``, GPAW's labels for the isolated atoms and the
compressed dimers; the test structures are not used) and prints
the constants (also in every frame's ``teacher_shift_eV``).

For the v2 set (issue 55; ``examples/datasets/sige-pbe/v2``) two options:

    python examples/recipes/equiformer_v3-sige/pretraining/teacher_labels.py examples/datasets/sige-pbe/work \
        --out-dir out/pretraining-v2 --fit-to examples/datasets/sige-pbe/work/v2/sige-pbe-v2-train.xyz \
        --additions examples/datasets/sige-pbe/v2/additions.xyz

``--fit-to``: the DFT labels the constants are fitted to (default: DATA_DIR/sige-pbe-train.xyz), here the
v2 training labels (converged k-points) as far as they exist: v1's energies carry the k-mesh's
cell-dependent error. ``--additions``: structures v1 does not have (``v2/additions.py``); the ones in
v2's training and validation parts (``v2/assemble.py``'s split of them) are added with the teacher's
labels from ``--additions-teacher`` (default DATA_DIR/additions-7net0.xyz), moved alike.
"""

import argparse
import json
import sys
from pathlib import Path

import ase.io
import numpy as np

from mlip.data import read_dataset
from mlip.io import atomic_write
from mlip.training.evaluation import energy_offsets

#: config types labelled by GPAW in both stages and left out of the fit: where the teacher is outside its data
DFT_LABELLED = ("isolated_atom", "compressed")


def additions_parts(additions) -> dict:
    """id → part of the v2 set's split of the structures v1 does not have (``v2/assemble.py``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples" / "datasets" / "sige-pbe" / "v2"))
    try:
        from assemble import additions_parts as parts_of
    finally:
        sys.path.pop(0)
    return parts_of(additions)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", help="folder of sige-pbe-{train,valid}.xyz and sige-7net0.xyz")
    parser.add_argument("--out-dir", required=True, help="where the two teacher files are written")
    parser.add_argument("--teacher", default="sige-7net0.xyz", help="the teacher's labels in DATA_DIR")
    parser.add_argument("--fit-to", default=None,
                        help="DFT labels the per-element constants are fitted to (default: the train split)")
    parser.add_argument("--additions", default=None,
                        help="structures without DFT labels whose v2 train and valid parts are added")
    parser.add_argument("--additions-teacher", default="additions-7net0.xyz",
                        help="the teacher's labels of --additions, in DATA_DIR")
    args = parser.parse_args(argv)
    data = Path(args.data_dir)
    teacher = {a.info["id"]: a for a in ase.io.read(data / args.teacher, ":")}
    # the DFT frames as mlip reads them (whichever label keys the file uses), and None for a structure
    # that only the teacher labels
    splits = {name: [(s.atoms, s) for s in read_dataset(data / f"sige-pbe-{name}.xyz")]
              for name in ("train", "valid")}
    if args.additions:
        additions = ase.io.read(args.additions, ":")
        teacher.update((a.info["id"], a) for a in ase.io.read(data / args.additions_teacher, ":"))
        part_of = additions_parts(additions)
        for atoms in additions:
            if part_of[str(atoms.info["id"])] in splits:
                splits[part_of[str(atoms.info["id"])]].append((atoms, None))
    missing = [a.info["id"] for pairs in splits.values() for a, _ in pairs if a.info["id"] not in teacher]
    if missing:
        parser.error(f"{len(missing)} structures have no teacher label (first: {missing[0]})")
    fit_pool = read_dataset(args.fit_to) if args.fit_to else [dft for _, dft in splits["train"] if dft]
    fitted = [s for s in fit_pool if s.atoms.info["config_type"] not in DFT_LABELLED
              and s.atoms.info["id"] in teacher]
    if not fitted:
        parser.error(f"no structure of {args.fit_to} has a teacher label to fit the constants to")
    offsets = energy_offsets(fitted, [teacher[s.atoms.info["id"]].info["REF_energy"] for s in fitted])
    species = (14, 32)
    if set(species) - set(offsets):
        parser.error(f"the structures fitted to ({len(fitted)}) do not hold both Si and Ge")
    shift = [offsets[z] for z in species]
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, pairs in splits.items():
        written = []
        for atoms, dft in pairs:
            frame = teacher[atoms.info["id"]].copy()
            if not np.allclose(frame.positions, atoms.positions) or (frame.numbers != atoms.numbers).any():
                parser.error(f"{atoms.info['id']}: the teacher's structure differs from the DFT one")
            if dft is not None and atoms.info["config_type"] in DFT_LABELLED:
                frame.info.update(REF_energy=dft.energy, label_source="gpaw")
                frame.arrays["REF_forces"] = np.asarray(dft.forces)
                frame.info.pop("REF_stress", None)
                if dft.stress is not None:
                    frame.info["REF_stress"] = np.asarray(dft.stress).reshape(-1)
            else:
                frame.info["REF_energy"] += float(sum(s * np.count_nonzero(frame.numbers == z)
                                                      for s, z in zip(shift, species)))
            frame.info["teacher_shift_eV"] = json.dumps(dict(zip(("Si", "Ge"), map(float, shift))))
            written.append(frame)
        path = out / f"sige-7net0-{name}.xyz"
        atomic_write(path, lambda tmp, frames=written: ase.io.write(tmp, frames, format="extxyz"))
        print(f"{path}: {len(written)} structures")
    over = f"structures of {Path(args.fit_to).name}" if args.fit_to else "training structures"
    print(f"teacher energies moved by Si {shift[0]:+.4f} eV, Ge {shift[1]:+.4f} eV per atom "
          f"(least squares over {len(fitted)} {over}; {', '.join(DFT_LABELLED)}: GPAW's labels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
