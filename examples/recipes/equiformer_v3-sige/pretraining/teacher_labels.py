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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", help="folder of sige-pbe-{train,valid}.xyz and sige-7net0.xyz")
    parser.add_argument("--out-dir", required=True, help="where the two teacher files are written")
    parser.add_argument("--teacher", default="sige-7net0.xyz", help="the teacher's labels in DATA_DIR")
    args = parser.parse_args(argv)
    data = Path(args.data_dir)
    teacher = {a.info["id"]: a for a in ase.io.read(data / args.teacher, ":")}
    # the DFT frames as mlip reads them (whichever label keys the file uses)
    splits = {name: read_dataset(data / f"sige-pbe-{name}.xyz") for name in ("train", "valid")}
    missing = [s.atoms.info["id"] for frames in splits.values() for s in frames if s.atoms.info["id"] not in teacher]
    if missing:
        parser.error(f"{len(missing)} structures have no teacher label in {args.teacher} (first: {missing[0]})")
    fitted = [s for s in splits["train"] if s.atoms.info["config_type"] not in DFT_LABELLED]
    offsets = energy_offsets(fitted, [teacher[s.atoms.info["id"]].info["REF_energy"] for s in fitted])
    species = (14, 32)
    shift = [offsets[z] for z in species]
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, frames in splits.items():
        written = []
        for dft in frames:
            frame = teacher[dft.atoms.info["id"]].copy()
            if not np.allclose(frame.positions, dft.atoms.positions) or (frame.numbers != dft.atoms.numbers).any():
                parser.error(f"{dft.atoms.info['id']}: the teacher's structure differs from the DFT one")
            if dft.atoms.info["config_type"] in DFT_LABELLED:
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
    print(f"teacher energies moved by Si {shift[0]:+.4f} eV, Ge {shift[1]:+.4f} eV per atom "
          f"(least squares over {len(fitted)} training structures; {', '.join(DFT_LABELLED)}: GPAW's labels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
