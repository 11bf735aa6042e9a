"""examples/recipes/equiformer_v3-sige/pretraining/teacher_labels.py: the teacher's labels of the training and
validation structures, moved to the DFT energy scale by a per-element constant, with the DFT labels where the
teacher is outside its data."""

import json
from pathlib import Path

import numpy as np
from ase import Atoms
from ase.io import read, write

from mlip.data import read_dataset
from mlip.testing.scripts import script_module

SCRIPT = (Path(__file__).resolve().parents[2] / "examples" / "recipes" / "equiformer_v3-sige" / "pretraining"
          / "teacher_labels.py")
SHIFT = {14: 0.1, 32: 0.25}  # E_DFT - E_teacher per atom


def _frame(rng, kind, k, numbers):
    n = len(numbers)
    atoms = Atoms(numbers=numbers, positions=rng.uniform(0, 5, (n, 3)), cell=[6, 6, 6], pbc=True)
    atoms.info.update(config_type=kind, id=f"{kind}-{k:05d}")
    return atoms


def _labelled(atoms, energy, forces, stress):
    atoms = atoms.copy()
    atoms.info.update(REF_energy=energy, REF_stress=stress)
    atoms.arrays["REF_forces"] = forces
    return atoms


def test_teacher_labels_are_moved_to_the_dft_scale(tmp_path, capsys):
    rng = np.random.default_rng(0)
    frames = {"train": [], "valid": [], "test": []}
    kinds = ["prototype"] * 6 + ["alloy"] * 6 + ["compressed", "isolated_atom"]
    for k, kind in enumerate(kinds * 2):
        numbers = [14] if kind == "isolated_atom" else list(rng.choice([14, 32], size=int(rng.integers(2, 6))))
        split = "train" if k < len(kinds) else ("valid" if k % 2 else "test")
        frames[split].append(_frame(rng, kind, k, numbers))
    teacher = []
    for split, atoms_list in frames.items():
        dft = []
        for atoms in atoms_list:
            n = len(atoms)
            energy = float(rng.normal(-4.0 * n, 0.5))
            dft.append(_labelled(atoms, energy, rng.normal(size=(n, 3)), rng.normal(size=6)))
            offset = sum(SHIFT[z] for z in atoms.numbers)
            noise = 5.0 if atoms.info["config_type"] in ("compressed", "isolated_atom") else 0.0  # out of domain
            teacher.append(_labelled(atoms, energy - offset + noise, rng.normal(size=(n, 3)), rng.normal(size=6)))
        write(tmp_path / f"sige-pbe-{split}.xyz", dft)
    write(tmp_path / "sige-7net0.xyz", teacher)
    with script_module(SCRIPT) as script:
        assert script.main([str(tmp_path), "--out-dir", str(tmp_path / "out")]) == 0
    assert "Si +0.1000 eV, Ge +0.2500 eV" in capsys.readouterr().out
    by_id = {a.info["id"]: a for a in teacher}
    for split in ("train", "valid"):
        written = read(tmp_path / "out" / f"sige-7net0-{split}.xyz", ":")
        dft = {s.atoms.info["id"]: s for s in read_dataset(tmp_path / f"sige-pbe-{split}.xyz")}
        assert [a.info["id"] for a in written] == [a.info["id"] for a in frames[split]]  # no test structure
        for atoms in written:
            ref, source = dft[atoms.info["id"]], by_id[atoms.info["id"]]
            shift = json.loads(atoms.info["teacher_shift_eV"])
            assert list(shift) == ["Si", "Ge"] and np.allclose(list(shift.values()), [0.1, 0.25])
            if atoms.info["config_type"] in ("compressed", "isolated_atom"):  # the DFT labels
                assert np.isclose(atoms.info["REF_energy"], ref.energy)
                assert np.allclose(atoms.arrays["REF_forces"], ref.forces)
            else:  # the teacher's, its energy moved to the DFT scale
                assert np.isclose(atoms.info["REF_energy"], ref.energy)
                assert np.allclose(atoms.arrays["REF_forces"], source.arrays["REF_forces"])
