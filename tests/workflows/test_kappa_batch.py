"""κ over a file of crystals: sharding, resume, the merged results file, κ_SRME against a reference."""

import gzip
import json

import numpy as np
import pytest
from ase.build import bulk

pytest.importorskip("phono3py")

from mlip.cli import main  # noqa: E402
from mlip.models import create_model  # noqa: E402
from mlip.workflows.phonons.kappa_batch import (  # noqa: E402
    load_kappa_table,
    merge_kappa_batch,
    read_kappa_structures,
    run_kappa_batch,
    score_kappa_batch,
)

EMT = "ase.calculators.emt:EMT"
FAST = dict(relax=False)  # the structures below are already at EMT's equilibrium lattice constants


def crystal(symbol, a, material_id, mesh=4):
    atoms = bulk(symbol, "fcc", a=a, cubic=True)
    atoms.info.update(material_id=material_id, fc2_supercell=np.diag([2, 2, 2]), fc3_supercell=np.diag([2, 2, 2]),
                      q_point_mesh=np.array([mesh, mesh, mesh]))
    return atoms


@pytest.fixture
def structures_file(tmp_path):
    import ase.io

    path = tmp_path / "structures.extxyz"
    ase.io.write(path, [crystal("Cu", 3.5898, "emt-Cu"), crystal("Al", 3.9943, "emt-Al")])
    return path


def test_reading_checks_every_frame(tmp_path):
    import ase.io

    bad = crystal("Cu", 3.59, "a")
    del bad.info["q_point_mesh"]
    ase.io.write(tmp_path / "missing.extxyz", [crystal("Cu", 3.59, "x"), bad])
    with pytest.raises(ValueError, match=r"frame 1: atoms.info lacks q_point_mesh"):
        read_kappa_structures(tmp_path / "missing.extxyz")
    ase.io.write(tmp_path / "dup.extxyz", [crystal("Cu", 3.59, "x"), crystal("Al", 4.0, "x")])
    with pytest.raises(ValueError, match="'x' appears twice"):
        read_kappa_structures(tmp_path / "dup.extxyz")
    with pytest.raises(ValueError, match="does not exist"):
        read_kappa_structures(tmp_path / "nope.extxyz")


def test_two_shards_equal_one_process_and_the_merged_file(structures_file, tmp_path):
    one = run_kappa_batch(structures_file, EMT, tmp_path / "one", progress=False, **FAST)
    assert one["computed"] == 2 and one["merged"] is not None
    first = run_kappa_batch(structures_file, EMT, tmp_path / "two", n_shards=2, shard_index=0, progress=False, **FAST)
    assert first["computed"] == 1 and first["merged"] is None  # the other shard is not done yet
    second = run_kappa_batch(structures_file, EMT, tmp_path / "two", n_shards=2, shard_index=1, progress=False, **FAST)
    assert second["computed"] == 1 and second["merged"] is not None
    a, b = load_kappa_table(one["merged"]), load_kappa_table(second["merged"])
    assert set(a) == set(b) == {"emt-Cu", "emt-Al"}
    for mid in a:
        assert np.allclose(a[mid]["kappa"], b[mid]["kappa"], rtol=1e-12)
    # A rerun redoes nothing.
    again = run_kappa_batch(structures_file, EMT, tmp_path / "one", progress=False, **FAST)
    assert again["skipped"] == 2 and again["computed"] == 0
    # The merged file: gzip'ed pandas "columns" JSON with the Matbench Discovery column names.
    with gzip.open(one["merged"], "rt") as fh:
        table = json.load(fh)
    for column in ("material_id", "kappa_tot_rta", "kappa_p_rta", "kappa_c", "mode_kappa_tot_rta", "mode_weights",
                   "has_imag_ph_modes", "broken_symmetry", "errors"):
        assert set(table[column]) == {"0", "1"}, column
    row = {col: table[col]["0"] for col in table}
    kappa = np.asarray(row["kappa_tot_rta"])
    assert kappa.shape == (1, 6)  # one temperature, Voigt
    assert np.allclose(kappa[0, :3], kappa[0, 0]) and np.abs(kappa[0, 3:]).max() < 1e-8 * kappa[0, 0]  # cubic
    # Wigner: total = particle + coherence; the mode-resolved κ sums to the total.
    assert np.allclose(kappa, np.asarray(row["kappa_p_rta"]) + np.asarray(row["kappa_c"]), rtol=1e-10)
    modes = np.asarray(row["mode_kappa_tot_rta"])[0]
    assert np.allclose(modes.sum(axis=(0, 1)) / np.sum(row["mode_weights"]), kappa[0], rtol=1e-8)
    assert 5 < kappa[0, 0] < 40  # EMT fcc metals: tens of W/(m·K) (phonons only)


def test_scores_against_a_reference_and_failures(structures_file, tmp_path):
    import ase.io

    ref = run_kappa_batch(structures_file, EMT, tmp_path / "ref", progress=False, **FAST)["merged"]
    assert score_kappa_batch(ref, ref)["srme"] == 0.0
    # A prediction with a perturbed lattice constant has a small, non-zero error; a material the
    # calculator cannot handle (EMT has no Fe) and a missing one score 2.
    frames = [crystal("Cu", 3.62, "emt-Cu"), crystal("Fe", 3.6, "emt-Al")]
    ase.io.write(tmp_path / "pred.extxyz", frames)
    pred = run_kappa_batch(tmp_path / "pred.extxyz", EMT, tmp_path / "pred", progress=False, **FAST)
    assert pred["failed"] == 0  # run_kappa reports the failure in its result; the campaign goes on
    scores = score_kappa_batch(pred["merged"], ref)
    per = scores["per_material"]
    assert 0 < per["emt-Cu"]["srme"] < 1 and per["emt-Cu"]["status"] == "ok"
    assert per["emt-Al"]["srme"] == 2 and per["emt-Al"]["status"] == "failed"
    assert scores["srme"] == pytest.approx((per["emt-Cu"]["srme"] + 2) / 2)
    # The folder of a campaign works as well as its merged file, and a missing material scores 2.
    partial = merge_kappa_batch(tmp_path / "pred", ["emt-Cu"])
    assert score_kappa_batch(partial, ref)["per_material"]["emt-Al"]["status"] == "missing"
    assert score_kappa_batch(tmp_path / "pred", ref)["srme"] == pytest.approx(scores["srme"])


def test_cli_batch_with_reference_and_single(structures_file, tmp_path, capsys):
    ref_dir = tmp_path / "ref"
    code = main(["kappa", str(structures_file), "--batch", "--model", EMT, "--out-dir", str(ref_dir),
                 "--no-relax", "--no-progress"])
    assert code == 0
    merged = next(ref_dir.glob("*-phonons-kappa-2.json.gz"))
    code = main(["kappa", str(structures_file), "--batch", "--model", EMT, "--out-dir", str(tmp_path / "p"),
                 "--no-relax", "--no-progress", "--reference", str(merged)])
    out = capsys.readouterr().out
    assert code == 0 and "κ_SRME 0.0000" in out
    assert json.loads((tmp_path / "p" / "kappa_srme.json").read_text())["n_materials"] == 2
    # One structure, compared with a kappa.json of another run.
    import ase.io

    single = tmp_path / "cu.extxyz"
    ase.io.write(single, crystal("Cu", 3.5898, "x"))
    code = main(["kappa", str(single), "--model", EMT, "--fc3-supercell", "2", "--mesh", "4", "--no-relax",
                 "--out-dir", str(tmp_path / "s"), "--no-progress",
                 "--reference", str(ref_dir / "materials" / "emt-Cu" / "kappa.json")])
    out = capsys.readouterr().out
    assert code == 0 and "κ(300 K) =" in out and "κ_SRME 0.0000" in out
    # Settings that belong to each frame are refused in batch mode.
    code = main(["kappa", str(structures_file), "--batch", "--model", EMT, "--mesh", "4", "--out-dir",
                 str(tmp_path / "x")])
    assert code == 2 and "atoms.info" in capsys.readouterr().err


def test_a_campaign_folder_refuses_another_model_or_settings(structures_file, tmp_path):
    run_kappa_batch(structures_file, EMT, tmp_path / "c", progress=False, **FAST)
    with pytest.raises(ValueError, match="another settings"):
        run_kappa_batch(structures_file, EMT, tmp_path / "c", progress=False, relax=False, temperatures=(200.0,))
    tiny = create_model("platonic", species=["Cu", "Al"], cutoff=3.0, seed=0, channels=4, num_layers=1,
                        num_heads=1, head_dim=2)
    with pytest.raises(ValueError, match="another model"):
        run_kappa_batch(structures_file, tiny, tmp_path / "c", progress=False, **FAST)
