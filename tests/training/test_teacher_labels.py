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


def test_v2_fits_the_constants_to_the_given_labels_and_adds_the_structures_without_dft(tmp_path, capsys):
    """``--fit-to``: the constants come from those DFT labels (here shifted by other constants than the
    split's); ``--additions``: the additions in v2's train and valid parts join those files with the
    teacher's labels moved by the same constants, and the ones in v2's test part stay out."""
    rng = np.random.default_rng(1)
    frames = {split: [_frame(rng, "prototype", k + 10 * i, list(rng.choice([14, 32], size=4)))
                      for k in range(6)] for i, split in enumerate(("train", "valid", "test"))}
    teacher, fit = [], []
    for split, atoms_list in frames.items():
        write(tmp_path / f"sige-pbe-{split}.xyz",
              [_labelled(a, -16.0, rng.normal(size=(4, 3)), rng.normal(size=6)) for a in atoms_list])
        for atoms in atoms_list:
            energy = float(rng.normal(-16.0, 0.5))
            teacher.append(_labelled(atoms, energy, rng.normal(size=(4, 3)), rng.normal(size=6)))
            if split == "train":  # the converged labels: E_teacher + 0.2 per Si, 0.3 per Ge
                offset = sum({14: 0.2, 32: 0.3}[z] for z in atoms.numbers)
                fit.append(_labelled(atoms, energy + offset, rng.normal(size=(4, 3)), rng.normal(size=6)))
    write(tmp_path / "sige-7net0.xyz", teacher)
    write(tmp_path / "fit.xyz", fit)
    additions = []
    for g in range(10):
        for k in range(3):
            atoms = _frame(rng, "md_crystal", 100 + 3 * g + k, list(rng.choice([14, 32], size=8)))
            atoms.info["group"] = f"run-{g}"
            additions.append(atoms)
    write(tmp_path / "additions.xyz", additions)
    extra = [_labelled(a, float(rng.normal(-32.0, 0.5)), rng.normal(size=(8, 3)), rng.normal(size=6))
             for a in additions]
    write(tmp_path / "additions-7net0.xyz", extra)
    with script_module(SCRIPT) as script:
        assert script.main([str(tmp_path), "--out-dir", str(tmp_path / "out"), "--fit-to",
                            str(tmp_path / "fit.xyz"), "--additions", str(tmp_path / "additions.xyz")]) == 0
        part_of = script.additions_parts(read(tmp_path / "additions.xyz", ":"))
    assert "Si +0.2000 eV, Ge +0.3000 eV per atom (least squares over 6 structures of fit.xyz" in \
        capsys.readouterr().out
    assert sorted(set(part_of.values())) == ["test", "train", "valid"]
    extra_by_id = {a.info["id"]: a for a in extra}
    for split in ("train", "valid"):
        written = read(tmp_path / "out" / f"sige-7net0-{split}.xyz", ":")
        expected = [a.info["id"] for a in frames[split]] + [i for i, p in part_of.items() if p == split]
        assert [a.info["id"] for a in written] == expected
        for atoms in written[len(frames[split]):]:
            source = extra_by_id[atoms.info["id"]]
            offset = sum({14: 0.2, 32: 0.3}[z] for z in atoms.numbers)
            assert np.isclose(atoms.info["REF_energy"], source.info["REF_energy"] + offset)
            assert np.allclose(atoms.arrays["REF_forces"], source.arrays["REF_forces"])
