"""The ``mlip`` command line (run in-process through ``mlip.cli.main``) and the example scripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ase.build import bulk
from ase.io import read, write

import mlip
from mlip.testing.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CU_CIF = EXAMPLES / "structures" / "cu_fcc.cif"
EMT = "ase.calculators.emt:EMT"


def assert_clean_error(code, err, *fragments):
    assert code == 2
    assert "mlip: error:" in err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"


@pytest.fixture
def rattled_cu(tmp_path):
    atoms = bulk("Cu", "fcc", a=3.70, cubic=True)
    atoms.rattle(0.1, seed=0)
    path = tmp_path / "cu_rattled.extxyz"
    write(path, atoms)
    return path


# ---------------------------------------------------------------------------------------- info / create
def test_info_default_and_untrained_models(capsys):
    code, out, err = run_cli(capsys, "info", "default")
    assert code == 0
    assert "equiformer_v3" in out and "Cu" in out and "cutoff" in out and "parameters" in out
    assert "package version" in out and "hyperparameters:" in out and "metadata:" in out
    assert "UNTRAINED" not in err
    code, out, err = run_cli(capsys, "info", "platonic-untrained")
    assert code == 0 and "trained:" in out and "NO" in out
    assert "UNTRAINED" in err


def test_info_json(capsys):
    code, out, _ = run_cli(capsys, "info", "platonic-untrained", "--json")
    assert code == 0
    header = json.loads(out)
    assert header["architecture"] == "platonic" and header["metadata"]["trained"] is False
    assert header["num_parameters"] > 0


def test_create_then_info(tmp_path, capsys):
    path = tmp_path / "cuau.safetensors"
    hyper = ["--set", "num_layers=1", "--set", "channels=8", "--set", "attention=linear"]
    base = ["create", "platonic", "--species", "Cu", "Au", "--cutoff", "4.5", "--seed", "3", *hyper]
    code, out, _ = run_cli(capsys, *base, "-o", path)
    assert code == 0 and path.is_file() and str(path) in out
    header = mlip.read_header(path)
    assert header["species"] == ["Cu", "Au"] and header["cutoff"] == 4.5
    assert header["hyperparameters"]["num_layers"] == 1 and header["hyperparameters"]["channels"] == 8
    assert header["hyperparameters"]["attention"] == "linear"
    assert header["metadata"]["trained"] is False and header["metadata"]["seed"] == 3
    # same seed → same weights
    again = tmp_path / "again.safetensors"
    run_cli(capsys, *base, "-o", again)
    a, b = mlip.load_potential(path), mlip.load_potential(again)
    assert all(np.array_equal(x.detach(), y.detach()) for x, y in zip(a.parameters(), b.parameters()))

    code, out, err = run_cli(capsys, "info", path)
    assert code == 0 and "Cu Au" in out and "4.5" in out and "num_layers: 1" in out
    assert "UNTRAINED" in err


def test_create_from_the_shipped_mp_config_has_the_published_size(tmp_path, capsys):
    path = tmp_path / "eqv3-mp.safetensors"
    config = ROOT / "models" / "configs" / "equiformer_v3_mp.yaml"
    code, out, _ = run_cli(capsys, "create", "--config", config, "--seed", "0", "-o", path)
    assert code == 0 and "30,278,113 parameters" in out
    code, out, _ = run_cli(capsys, "info", path)
    assert code == 0 and "equiformer_v3" in out and "30,278,113" in out and "lmax: 4" in out
    # Command-line values override the file.
    small = tmp_path / "small.safetensors"
    code, _, _ = run_cli(capsys, "create", "--config", config, "--species", "Cu", "--cutoff", "4", "--set", "lmax=2",
                     "--set", "num_layers=1", "--set", "channels=8", "--set", "num_embeddings=null", "-o", small)
    header = mlip.read_header(small)
    assert code == 0 and header["species"] == ["Cu"] and header["cutoff"] == 4.0
    assert header["hyperparameters"]["lmax"] == 2 and header["hyperparameters"]["mmax"] == 2


def write_text(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "config, fragments",
    [
        (None, ["cannot read model config", "missing.yaml"]),
        ("name: equiformer_v3\nspecies: [Cu\n", ["not valid YAML"]),
        ("- just\n- a list\n", ["must be a mapping"]),
        ("name: equiformer_v3\ncutoff: 5\n", ["lacks species"]),
        ("name: equiformer_v3\nspecies: [Cu, yes]\ncutoff: 5\n", ["species must be a list"]),
        ("name: equiformer_v3\nspecies: [Cu]\ncutoff: 5\nlmax: 2\nmmax: 3\n", ["mmax"]),
    ],
)
def test_create_config_errors(tmp_path, capsys, config, fragments):
    path = tmp_path / "missing.yaml" if config is None else write_text(tmp_path, "bad.yaml", config)
    code, _, err = run_cli(capsys, "create", "--config", path, "-o", tmp_path / "x.safetensors")
    assert_clean_error(code, err, *fragments)
    assert not (tmp_path / "x.safetensors").exists()


@pytest.mark.parametrize(
    "argv, fragments",
    [
        (["create", "--species", "Cu", "--cutoff", "4"], ["architecture"]),
        (["create", "platonic", "--cutoff", "4"], ["--species"]),
        (["create", "nope", "--species", "Cu", "--cutoff", "4"], ["unknown architecture", "nope"]),
        (["create", "platonic", "--species", "Cu", "Xx", "--cutoff", "4"], ["Xx"]),
        (["create", "platonic", "--species", "Cu", "--cutoff", "4", "--set", "bogus=1"], ["bogus"]),
        (["create", "platonic", "--species", "Cu", "--cutoff", "4", "--set", "channels"], ["key=value"]),
        (["create", "platonic", "--species", "Cu", "--cutoff", "4", "--set", "channels=abc"], ["channels"]),
        (["create", "platonic", "--species", "Cu", "--cutoff", "-1"], ["positive"]),
        (["info", "no-such-model"], ["no-such-model", "platonic-untrained"]),
    ],
)
def test_create_and_info_errors(tmp_path, capsys, argv, fragments):
    if argv[0] == "create":
        argv = argv + ["-o", str(tmp_path / "x.safetensors")]
    code, _, err = run_cli(capsys, *argv)
    assert_clean_error(code, err, *fragments)
    assert not (tmp_path / "x.safetensors").exists()


def test_info_corrupt_checkpoint(tmp_path, capsys):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a checkpoint")
    code, _, err = run_cli(capsys, "info", bad)
    assert_clean_error(code, err, "bad.safetensors")


def test_info_prints_nothing_of_a_header_that_does_not_describe_its_weights(tmp_path, capsys):
    from mlip.checkpoint import write_with_header
    from mlip.models import create_model

    good = mlip.save_potential(create_model("platonic", species=["Cu"], cutoff=4.0, channels=4, num_layers=1),
                               tmp_path / "good.safetensors")
    header = mlip.read_header(good)
    cases = {"os:system": ({"architecture": "os:system"}, "unknown architecture 'os:system'"),
             "wider": ({"hyperparameters": {**header["hyperparameters"], "channels": 8}}, "shape mismatch"),
             "huge": ({"hyperparameters": {**header["hyperparameters"], "channels": 10**6}},
                      "the header does not match the weights")}
    for name, (change, fragment) in cases.items():
        crafted = write_with_header(good, tmp_path / f"{name}.safetensors", {**header, **change})
        code, out, err = run_cli(capsys, "info", crafted)
        assert_clean_error(code, err, f"{name}.safetensors", fragment)
        assert out == ""


def test_info_on_a_directory_says_so(tmp_path, capsys):
    code, _, err = run_cli(capsys, "info", tmp_path)
    assert_clean_error(code, err, f"{tmp_path} is a directory, not a checkpoint")
    assert "does not exist" not in err


def test_a_reader_that_stops_early_ends_the_command_quietly():
    """``mlip info … | head -1``: the reader of stdout is gone before the output is written; the command
    ends at once without a message, with the status of a Unix tool ended by SIGPIPE (141)."""
    from mlip.cli import EXIT_BROKEN_PIPE

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written: the first write fails
    try:
        done = subprocess.run([sys.executable, "-m", "mlip", "info", "embedded-atom-emt"], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (EXIT_BROKEN_PIPE, "")


# ---------------------------------------------------------------------------------------- relax
def test_relax_with_emt_writes_readable_structure(rattled_cu, tmp_path, capsys):
    out_path = tmp_path / "relaxed.extxyz"
    code, out, err = run_cli(capsys, "relax", rattled_cu, "--model", EMT, "--fmax", "0.05", "-o", out_path)
    assert code == 0, err
    assert "converged: yes" in out and "energy:" in out and str(out_path) in out
    assert "UNTRAINED" not in err
    relaxed = read(out_path)
    assert len(relaxed) == 4
    assert relaxed.info["converged"] is True
    assert np.abs(relaxed.get_forces()).max() < 0.05
    start = read(rattled_cu)
    assert relaxed.get_potential_energy() < _emt_energy(start)
    assert relaxed.get_volume() < start.get_volume()  # cell relaxed towards EMT's a ≈ 3.59 Å


def _emt_energy(atoms):
    from ase.calculators.emt import EMT as EMTCalc

    atoms = atoms.copy()
    atoms.calc = EMTCalc()
    return atoms.get_potential_energy()


def test_relax_default_output_name_and_no_cell_filter(rattled_cu, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(capsys, "relax", rattled_cu, "--model", EMT, "--no-cell-filter", "--no-progress")
    assert code == 0
    relaxed = read(tmp_path / "cu_rattled_relaxed.extxyz")
    assert np.allclose(relaxed.cell, read(rattled_cu).cell)
    assert "positions only" in out


def test_relax_fix_symmetry_keeps_a_rocksalt_saddle_point(tmp_path, capsys):
    """Rocksalt CuAu is a saddle point of the energy that only exact symmetry holds (EMT stays there;
    the shipped Platonic model, not exactly symmetric, relaxes away from it in the discovery benchmark).
    With --fix-symmetry the relaxation keeps Fm-3m and says so; the forces it leaves are the
    symmetrised ones, so the structure is converged in the constrained sense."""
    pytest.importorskip("spglib")
    structure = tmp_path / "cuau_b1.extxyz"
    write(structure, bulk("CuAu", "rocksalt", a=5.2, cubic=True))
    out_path = tmp_path / "relaxed.extxyz"
    code, out, err = run_cli(capsys, "relax", structure, "--model", "platonic-emt", "--fix-symmetry", "--fmax", "0.02",
                         "--threads", "1", "--no-progress", "-o", out_path)
    assert code == 0, err
    assert "symmetry:  Fm-3m (225) -> Fm-3m (225) (kept)" in out, out
    relaxed = read(out_path)
    assert relaxed.info["converged"] is True
    import spglib

    cell = (relaxed.cell.array, relaxed.get_scaled_positions(), relaxed.numbers)
    assert spglib.get_spacegroup(cell, symprec=1e-5) == "Fm-3m (225)"


def test_relax_untrained_model_says_so(tmp_path, capsys):
    out_path = tmp_path / "cu.extxyz"
    code, out, err = run_cli(capsys, "relax", CU_CIF, "--model", "platonic-untrained", "--steps", "2", "--threads", "1",
                         "-o", out_path)
    assert code == 3, err  # two steps do not converge: exit status 3, the structure is still written
    assert "NOTE: model 'platonic-untrained' is UNTRAINED (random weights)" in err
    assert out_path.is_file() and "float64" in out  # relaxations default to float64


# ---------------------------------------------------------------------------------------- md
def test_md_nve_with_emt_writes_outputs(tmp_path, capsys):
    out_dir = tmp_path / "md"
    code, out, err = run_cli(capsys, "md", CU_CIF, "--model", EMT, "--ensemble", "nve", "--temperature", "300",
                         "--timestep", "1", "--steps", "100", "--seed", "0", "--supercell", "2", "2", "2",
                         "--out-dir", out_dir)
    assert code == 0, err
    for name in ("md.traj", "md.log", "energy.png", "md_summary.json"):
        assert (out_dir / name).is_file(), name
    summary = json.loads((out_dir / "md_summary.json").read_text())
    assert summary["n_atoms"] == 32 and summary["settings"]["ensemble"] == "nve"
    assert abs(summary["drift_mev_per_atom_per_ps"]) < 1.0
    assert len(summary["total_energies"]) == 11
    assert "NVE energy drift:" in out and "meV/atom/ps" in out
    frames = read(out_dir / "md.traj", index=":")
    assert len(frames) == 11 and len(frames[-1]) == 32


def test_md_npt_and_nvt_with_emt(tmp_path, capsys):
    code, out, err = run_cli(capsys, "md", CU_CIF, "--model", EMT, "--ensemble", "npt", "--pressure", "5",
                         "--steps", "40", "--supercell", "2", "--seed", "1", "--out-dir", tmp_path / "npt")
    assert code == 0, err
    summary = json.loads((tmp_path / "npt" / "md_summary.json").read_text())
    assert summary["volumes"][-1] != summary["volumes"][0]
    assert "volume:" in out
    code, out, err = run_cli(capsys, "md", CU_CIF, "--model", EMT, "--ensemble", "nvt", "--friction", "0.05",
                         "--steps", "20", "--out-dir", tmp_path / "nvt")
    assert code == 0, err
    assert json.loads((tmp_path / "nvt" / "md_summary.json").read_text())["drift_mev_per_atom_per_ps"] is None


def test_md_default_model_float32(tmp_path, capsys):
    code, out, err = run_cli(capsys, "md", CU_CIF, "--steps", "4", "--log-interval", "2", "--threads", "1",
                         "--out-dir", tmp_path / "md")
    assert code == 0, err
    assert "UNTRAINED" not in err and "float32" in out
    summary = json.loads((tmp_path / "md" / "md_summary.json").read_text())
    from mlip import pretrained

    assert summary["untrained"] is False and summary["model"] == pretrained.DEFAULT_MODEL


def test_md_npt_on_a_molecule_is_a_clean_error(tmp_path, capsys):
    path = tmp_path / "dimer.xyz"
    path.write_text("2\n\nCu 0 0 0\nCu 0 0 2.4\n")
    code, _, err = run_cli(capsys, "md", path, "--model", EMT, "--ensemble", "npt", "--steps", "2",
                       "--out-dir", tmp_path / "o")
    assert_clean_error(code, err, "periodic in all three directions")
    code, _, err = run_cli(capsys, "md", path, "--model", EMT, "--supercell", "2", "--out-dir",
                           tmp_path / "o")
    assert_clean_error(code, err, "non-periodic")


# ---------------------------------------------------------------------------------------- bad input
def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("command", ["relax", "md"])
def test_bad_input_exits_2_naming_the_problem(tmp_path, capsys, command):
    extra = ["--steps", "1", "--no-progress"]
    if command == "md":
        extra += ["--out-dir", str(tmp_path / "o")]
    cases = [
        # missing file
        ([tmp_path / "missing.xyz"], ["missing.xyz", "does not exist"]),
        # a symbol that is not an element
        ([_write(tmp_path, "xx.xyz", "2\n\nXx 0 0 0\nCu 0 0 2.5\n")], ["xx.xyz", "Xx"]),
        # an element the model does not cover (the default model: Al Cu Ag Au Ni Pd Pt)
        ([_write(tmp_path, "fe.xyz", "2\n\nFe 0 0 0\nCu 0 0 2.5\n")], ["Fe", "not supported"]),
        # NaN coordinates (rejected for every model, also foreign calculators)
        ([_write(tmp_path, "nan.xyz", "2\n\nCu nan 0 0\nCu 0 0 2.5\n"), "--model", EMT], ["NaN"]),
        # unreadable content
        ([_write(tmp_path, "junk.xyz", "this is not a structure\n")], ["junk.xyz", "cannot read"]),
        # unknown model name / missing checkpoint / bad import path
        ([CU_CIF, "--model", "no-such-model"], ["no-such-model", "platonic-untrained"]),
        ([CU_CIF, "--model", str(tmp_path / "nope.safetensors")], ["nope.safetensors", "does not exist"]),
        ([CU_CIF, "--model", "no_such_pkg.mod:Calc"], ["no_such_pkg"]),
    ]
    for args, fragments in cases:
        code, _, err = run_cli(capsys, command, *args, *extra)
        assert_clean_error(code, err, *fragments)


def test_argparse_errors_return_2(capsys):
    code, _, err = run_cli(capsys, "md", str(CU_CIF), "--ensemble", "nph")
    assert code == 2 and "invalid choice" in err
    code, _, err = run_cli(capsys, "relax", str(CU_CIF), "--fmax", "-1")
    assert code == 2 and "positive" in err
    code, _, _ = run_cli(capsys)
    assert code == 2


def test_python_dash_m_mlip():
    proc = subprocess.run(
        [sys.executable, "-m", "mlip", "--help"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0
    for command in ("info", "create", "relax", "md"):
        assert command in proc.stdout


# ---------------------------------------------------------------------------------------- examples
@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_example_runs(script, tmp_path):
    env = dict(os.environ)
    # Small structures run fastest on one thread, and a single thread keeps the run time steady
    # when other processes share the CPU: torch's OpenMP and numpy's OpenBLAS worker threads
    # spin-wait, and on a loaded 2-core machine that made these scripts 5-50x slower.
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")  # same for numpy/scipy (FrechetCellFilter's expm/logm)
    # The timeout guards against a hang, it is not a speed check: the longest example takes ~35 s of CPU
    # and took more than 120 s on a loaded machine beside the other xdist worker.
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip(), "examples print what they did"


def test_phonons_with_emt_writes_json_and_plots(tmp_path, capsys):
    pytest.importorskip("phonopy")
    out = tmp_path / "ph"
    code, stdout, _ = run_cli(capsys, "phonons", CU_CIF, "--model", EMT, "--supercell", "2", "--mesh", "8",
                          "--tmax", "600", "--tstep", "100", "--out-dir", out, "--no-progress")
    assert code == 0, stdout
    assert "Fm-3m (225)" in stdout and "IMAGINARY" not in stdout
    data = json.loads((out / "phonons.json").read_text())
    assert data["supercell"]["matrix"] == [[2, 0, 0], [0, 2, 0], [0, 0, 2]]
    for name in ("band_structure.png", "dos.png", "thermal_properties.png"):
        assert (out / name).stat().st_size > 1000
    # A molecule has no phonon band structure: a clean error that says why.
    mol = tmp_path / "h2o.xyz"
    write(mol, __import__("ase.build", fromlist=["molecule"]).molecule("H2O"))
    code, _, err = run_cli(capsys, "phonons", mol, "--model", EMT, "--out-dir", tmp_path / "m")
    assert_clean_error(code, err, "periodic")


def test_an_uncovered_element_names_the_shipped_models_that_cover_it(tmp_path, capsys):
    from mlip import pretrained

    assert pretrained.covering(["Cu", "Au"])[0] == pretrained.DEFAULT_MODEL
    assert set(pretrained.covering(["Cu", "Au"])) >= {"equiformer_v3-emt", "platonic-emt", "embedded-atom-emt"}
    assert pretrained.covering(["Cu", "Og"]) == []  # no shipped model knows oganesson
    path = _write(tmp_path, "fe.xyz", "2\n\nFe 0 0 0\nCu 0 0 2.5\n")
    others = pretrained.covering(["Fe", "Cu"])
    code, _, err = run_cli(capsys, "relax", path, "--steps", "1", "--no-progress")
    assert_clean_error(code, err, "Fe", "not supported", *others)
    assert ("shipped models that cover it" in err) == bool(others)
