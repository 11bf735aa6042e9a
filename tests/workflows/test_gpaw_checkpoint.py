"""GPAW labels that survive a kill (mlip.workflows.gpaw_checkpoint)."""

import json

import numpy as np
import pytest
from ase.build import bulk

from mlip.workflows import gpaw_checkpoint
from mlip.workflows.gpaw_checkpoint import label_with_checkpoints
from mlip.workflows.labelling import label_atoms


def _cell():
    atoms = bulk("Si", "diamond", a=5.43)
    atoms.rattle(0.05, seed=2)
    return atoms


def _gpaw():
    gpaw = pytest.importorskip("gpaw", reason="GPAW is the optional extra 'dft'")
    return gpaw.GPAW(mode=gpaw.PW(200), xc="PBE", kpts={"size": (2, 2, 2), "gamma": True},
                     occupations=gpaw.FermiDirac(0.1), convergence={"energy": 1e-6, "forces": 1e-4}, txt=None)


class Killed(KeyboardInterrupt):
    """A kill in the middle of an SCF (a labelling run records an ordinary exception as a failed label
    and goes on; an interrupt stops it, as a kill does)."""


def test_a_killed_gpaw_scf_goes_on_from_its_checkpoint(tmp_path, monkeypatch):
    straight = label_atoms(_cell(), _gpaw())
    path = tmp_path / "ck" / "cell.gpw"
    # the first run dies right after its first checkpoint is complete (the .gpw and its .json in place)
    real_replace, calls = gpaw_checkpoint.os.replace, []

    def replace_then_die(src, dst):
        real_replace(src, dst)
        calls.append(dst)
        if str(dst).endswith(".json"):
            raise Killed

    monkeypatch.setattr(gpaw_checkpoint.os, "replace", replace_then_die)
    with pytest.raises(Killed):
        label_with_checkpoints(_cell(), _gpaw(), path, label_atoms, every_steps=2)
    monkeypatch.setattr(gpaw_checkpoint.os, "replace", real_replace)
    meta = json.loads(path.with_name("cell.gpw.json").read_text())
    assert path.is_file() and meta["steps"] == 2 and meta["cpu_seconds"] > 0
    resumed, calc = label_with_checkpoints(_cell(), _gpaw(), path, label_atoms, every_steps=2)
    assert calc.get_fermi_level() < 10  # the calculator that finished it, with its converged state
    assert resumed["resumed_after_scf_steps"] == 2
    assert resumed["energy"] == pytest.approx(straight["energy"], abs=1e-5)
    assert np.abs(np.subtract(resumed["forces"], straight["forces"])).max() < 2e-4
    assert np.abs(np.subtract(resumed["stress"], straight["stress"])).max() < 1e-5
    assert resumed["wall_time_s"] > 0 and not list(path.parent.iterdir())  # done: nothing left behind
    # the CPU time before the kill counts too: the resumed record has more than the first run had
    assert resumed["cpu_time_s"] > meta["cpu_seconds"]


def test_checkpoints_do_not_change_the_labels_and_another_structure_is_not_resumed(tmp_path):
    path = tmp_path / "cell.gpw"
    other = _cell()
    other.positions[0, 0] += 0.05
    # a checkpoint of another structure: written, then not taken up
    calc = _gpaw()
    other_copy = other.copy()
    other_copy.calc = calc
    other_copy.get_potential_energy()
    calc.write(str(path), mode="all")
    assert gpaw_checkpoint._resume(path, _cell()) is None and gpaw_checkpoint._resume(path, other) is not None
    straight = label_atoms(_cell(), _gpaw())
    checked, _ = label_with_checkpoints(_cell(), _gpaw(), path, label_atoms, every_steps=2)
    assert "resumed_after_scf_steps" not in checked
    assert checked["energy"] == pytest.approx(straight["energy"], abs=1e-8)
    assert np.abs(np.subtract(checked["forces"], straight["forces"])).max() < 1e-6
    assert not path.exists()


def test_a_calculator_without_the_hook_labels_as_before(tmp_path):
    from ase.calculators.emt import EMT

    atoms = bulk("Cu", "fcc", a=3.6).repeat(2)
    atoms.rattle(0.02, seed=0)
    record, _ = label_with_checkpoints(atoms, EMT(), tmp_path / "cu.gpw", label_atoms)
    assert record["energy"] == pytest.approx(label_atoms(atoms, EMT())["energy"])
    assert not list(tmp_path.iterdir())


def test_mlip_data_label_goes_on_from_a_gpaw_checkpoint(tmp_path, monkeypatch):
    """A GPAW labelling run killed in the middle of a structure: the next run takes its SCF up again from
    run/checkpoints, and the labels are those of an uninterrupted run."""
    pytest.importorskip("gpaw", reason="GPAW is the optional extra 'dft'")
    from mlip.workflows.labelling import CHECKPOINTS, label_structures, labeller, write_labelled

    cheap = labeller("gpaw", {"ecut_eV": 200.0, "kpoint_density_per_inv_A": 1.5})
    assert cheap.checkpoints
    cell = _cell()
    straight = label_atoms(cell, cheap.make(cell))
    real_replace = gpaw_checkpoint.os.replace

    def replace_then_die(src, dst):
        real_replace(src, dst)
        if str(dst).endswith(".gpw.json"):
            raise Killed

    monkeypatch.setattr(gpaw_checkpoint.os, "replace", replace_then_die)
    with pytest.raises(Killed):
        label_structures([cell], cheap, tmp_path / "run", progress=False)
    monkeypatch.setattr(gpaw_checkpoint.os, "replace", real_replace)
    kept = list((tmp_path / "run" / CHECKPOINTS).glob("*.gpw"))
    assert len(kept) == 1 and not list((tmp_path / "run").glob("results/*.json"))  # no label yet
    assert label_structures([cell], cheap, tmp_path / "run", progress=False)["computed"] == 1
    assert not list((tmp_path / "run" / CHECKPOINTS).iterdir())
    assert write_labelled([cell], tmp_path / "run", tmp_path / "l.xyz")[:3] == (1, [], [])
    from ase.io import read

    frame = read(tmp_path / "l.xyz")
    assert frame.info["REF_energy"] == pytest.approx(straight["energy"], abs=1e-5)
    assert np.abs(frame.arrays["REF_forces"] - np.asarray(straight["forces"])).max() < 2e-4
