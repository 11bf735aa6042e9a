"""``mlip data label --calculator chgnet``: CHGNet as a named teacher (mlip.workflows.labelling)."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.io import read, write

from mlip.cli import main
from mlip.extras import MissingExtraError
from mlip.testing.datasets import emt_cells
from mlip.workflows.labelling import (CHGNET_LABEL_NOTE, CHGNET_SETTINGS, Labeller, label_structures, labeller,
                                      write_labelled)

ROOT = Path(__file__).resolve().parents[2]


def _hide(monkeypatch, module):
    for name in list(sys.modules):
        if name == module or name.startswith(module + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)


def test_unknown_chgnet_setting_is_named():
    with pytest.raises(ValueError, match="unknown chgnet setting.*device.*accepted: model, use_device"):
        labeller("chgnet", {"device": "cuda"})


def test_missing_chgnet_names_the_extra(monkeypatch, tmp_path, capsys):
    _hide(monkeypatch, "chgnet")
    with pytest.raises(MissingExtraError, match=r"chgnet is not installed \(needed for labelling with "
                                                r"CHGNet\): pip install 'mlip-torch\[teacher\]'"):
        labeller("chgnet")
    write(tmp_path / "s.xyz", bulk("Si", "diamond", a=5.43))
    code = main(["data", "label", str(tmp_path / "s.xyz"), "--calculator", "chgnet", "--out-dir",
                 str(tmp_path / "run"), "-o", str(tmp_path / "l.xyz")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("mlip: error: chgnet is not installed")


def test_the_note_of_a_labeller_goes_into_every_frame(tmp_path):
    cells = emt_cells(2, seed=0, label=False)
    noted = Labeller("emt-teacher", "1", {}, lambda atoms: EMT(), note="EMT stands in for a teacher")
    label_structures(cells, noted, tmp_path / "a", progress=False)
    write_labelled(cells, tmp_path / "a", tmp_path / "a.xyz")
    assert [f.info["label_note"] for f in read(tmp_path / "a.xyz", ":")] == ["EMT stands in for a teacher"] * 2
    label_structures(cells, labeller("emt"), tmp_path / "b", progress=False)
    write_labelled(cells, tmp_path / "b", tmp_path / "b.xyz")
    assert all("label_note" not in f.info for f in read(tmp_path / "b.xyz", ":"))


def test_the_note_says_whose_labels_they_are():
    assert "CHGNet 0.3.0" in CHGNET_LABEL_NOTE and "PBE+U" in CHGNET_LABEL_NOTE
    assert "not DFT" in CHGNET_LABEL_NOTE and "total eV per cell" in CHGNET_LABEL_NOTE
    assert CHGNET_SETTINGS["model"] == "0.3.0" and CHGNET_SETTINGS["use_device"] == "cpu"


@pytest.mark.skipif(not (ROOT / "pyproject.toml").is_file(), reason="not a source checkout")
def test_the_teacher_extra_pins_chgnet():
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as fh:
        extras = tomllib.load(fh)["project"]["optional-dependencies"]
    assert extras["teacher"] == ["chgnet==0.4.2"]


def test_chgnet_labels_total_energies_with_the_note(tmp_path):
    pytest.importorskip("chgnet", reason="CHGNet is the optional extra 'teacher' (pip install "
                                         "'mlip-torch[teacher]'); not installed here")
    from mlip.data.chemistries import generate_chemistries

    frames = generate_chemistries(["Na", "Cl", "Mg", "O"], 2, counts={"crystal": 1, "cluster": 1},
                                  unaries=False, progress=False)
    small = bulk("NaCl", "rocksalt", a=5.69)
    small.info["id"] = "nacl-1"
    double = small.repeat((2, 1, 1))
    double.info["id"] = "nacl-2"
    structures = frames + [small, double]
    lab = labeller("chgnet")
    counts = label_structures(structures, lab, tmp_path / "run", progress=False)
    assert counts["failed"] == 0 and counts["computed"] == len(structures)
    n, failed, missing = write_labelled(structures, tmp_path / "run", tmp_path / "l.xyz")
    assert (n, failed, missing) == (len(structures), [], [])
    out = read(tmp_path / "l.xyz", ":")
    for frame in out:
        assert frame.info["calculator"] == "chgnet" and frame.info["label_note"] == CHGNET_LABEL_NOTE
        assert json.loads(frame.info["calculator_settings"]) == CHGNET_SETTINGS
        assert np.isfinite(frame.arrays["REF_forces"]).all()
        assert ("REF_stress" in frame.info) == bool(frame.pbc.all())
    e1, e2 = out[-2].info["REF_energy"], out[-1].info["REF_energy"]
    assert e2 == pytest.approx(2 * e1, rel=1e-5)  # total energy of the cell, not per atom
    assert -5.0 < e1 / len(small) < -2.5  # eV/atom of rock salt NaCl, near its PBE value
