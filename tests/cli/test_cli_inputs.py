"""Command-line input handling: unreadable structure files, frame indices, data formats, element
errors, md output folders that hold an earlier run, relax exit status, kappa stage lines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from ase.build import bulk
from ase.calculators.emt import EMT as EMTCalc
from ase.calculators.singlepoint import SinglePointCalculator
from ase.io import read, write

from mlip.testing.cli import run_cli
from mlip.testing.structures import disordered_cuau_cif
from mlip.cli import EXIT_NOT_CONVERGED

ROOT = Path(__file__).resolve().parents[2]
CU_CIF = ROOT / "examples" / "structures" / "cu_fcc.cif"
EMT = "ase.calculators.emt:EMT"


def assert_clean_error(code, err, *fragments):
    assert code == 2, err
    assert "mlip: error:" in err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("mlip: error:") and sum("mlip: error" in line for line in lines) == 1, err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"


def labelled(symbol, a, path):
    """A one-frame extxyz with EMT energy and forces."""
    atoms = bulk(symbol, "fcc", a=a, cubic=True)
    atoms.rattle(0.02, seed=1)
    atoms.calc = EMTCalc()
    atoms.get_potential_energy()
    atoms.get_forces()
    write(path, atoms, format="extxyz")
    return path


# ------------------------------------------------------------------------------ unreadable structures
def test_garbage_cif_names_the_file_the_format_and_the_error(tmp_path, capsys):
    garbage = tmp_path / "g.cif"
    garbage.write_text("this is\nnot a cif file\n_cell_length_a x\n")
    out_dir = tmp_path / "md"
    code, _, err = run_cli(capsys, "md", garbage, "--model", EMT, "--steps", "2", "--out-dir", out_dir)
    # ASE's CIF reader stops with a bare AssertionError: say which reader failed on which file.
    assert_clean_error(code, err, f"{str(garbage)!r}", "format cif, guessed from the file", "AssertionError")
    assert not out_dir.exists()
    # A format given with --format is the one named (and used).
    relax = ["relax", CU_CIF, "--model", EMT, "-o", tmp_path / "r.extxyz"]
    code, _, err = run_cli(capsys, *relax, "--format", "vasp")
    assert_clean_error(code, err, "cu_fcc.cif", "format vasp, from --format")
    code, _, err = run_cli(capsys, *relax, "--format", "nosuch")
    assert_clean_error(code, err, "--format 'nosuch' is not a format ASE knows")
    assert not (tmp_path / "r.extxyz").exists()


def test_format_option_reads_a_file_whose_name_says_nothing(tmp_path, capsys):
    path = tmp_path / "structure.txt"
    write(path, bulk("Cu", "fcc", a=3.6, cubic=True), format="vasp")
    code, _, err = run_cli(capsys, "relax", path, "--model", EMT, "-o", tmp_path / "r.extxyz")
    assert_clean_error(code, err, "structure.txt", "format unknown; name it with --format")
    code, out, err = run_cli(capsys, "relax", path, "--format", "vasp", "--model", EMT, "--no-progress",
                         "-o", tmp_path / "r.extxyz")
    assert code == 0, err
    assert len(read(tmp_path / "r.extxyz")) == 4


@pytest.mark.parametrize("index", ["7", "1", "-3", "-2"])
def test_index_beyond_a_one_frame_file(tmp_path, capsys, index):
    # ASE raises an empty StopIteration for 7 and quietly returns the only frame for -3.
    code, _, err = run_cli(capsys, "md", CU_CIF, "--index", index, "--model", EMT, "--steps", "2",
                       "--out-dir", tmp_path / "md")
    assert_clean_error(code, err, f"cu_fcc.cif: frame {index} requested but the file has 1 frame")


def test_index_within_and_beyond_a_two_frame_file(tmp_path, capsys):
    path = tmp_path / "two.traj"
    write(path, [bulk("Cu", "fcc", a=3.6, cubic=True), bulk("Cu", "fcc", a=3.7, cubic=True)])
    for index in ("2", "-3"):
        code, _, err = run_cli(capsys, "relax", path, "--index", index, "--model", EMT, "-o",
                               tmp_path / "r.xyz")
        assert_clean_error(code, err, f"two.traj: frame {index} requested but the file has 2 frames")
    code, out, err = run_cli(capsys, "relax", path, "--index", "-2", "--model", EMT, "--steps", "0",
                         "--no-progress", "--no-cell-filter", "-o", tmp_path / "r.extxyz")
    assert code in (0, EXIT_NOT_CONVERGED), err
    assert read(tmp_path / "r.extxyz").cell.lengths()[0] == pytest.approx(3.6)


def test_empty_structure_file(tmp_path, capsys):
    path = tmp_path / "empty.xyz"
    path.write_text("")
    for given in ([], ["--format", "extxyz"]):  # the same message whether the format is given or guessed
        code, _, err = run_cli(capsys, "relax", path, *given, "--model", EMT, "-o", tmp_path / "r.xyz")
        assert_clean_error(code, err, "empty.xyz: the file holds no structure")


# ------------------------------------------------------------------------------ partial occupancy
def test_a_partially_occupied_site_is_refused_naming_it(tmp_path, capsys):
    path = tmp_path / "cuau.cif"
    path.write_text(disordered_cuau_cif(cu=0.5, au=0.5))
    for command in (["relax", path, "-o", tmp_path / "r.extxyz"], ["md", path, "--out-dir", tmp_path / "md"]):
        code, _, err = run_cli(capsys, *command, "--model", EMT, "--steps", "1", "--no-progress")
        # ASE reads the site as Au; nothing is run on a structure the file does not describe
        assert_clean_error(code, err, "cuau.cif: site Cu1 (Cu 0.5, Au 0.5 at 0, 0, 0) is partially occupied",
                           "order the structure first", "--majority-species")
    assert not (tmp_path / "r.extxyz").exists() and not (tmp_path / "md").exists()
    # a tie has no majority species
    code, _, err = run_cli(capsys, "relax", path, "--majority-species", "--model", EMT,
                           "-o", tmp_path / "r.extxyz")
    assert_clean_error(code, err, "site Cu1 (Cu 0.5, Au 0.5 at 0, 0, 0) has no majority species")


def test_majority_species_puts_the_species_of_highest_occupancy_and_says_so(tmp_path, capsys):
    path = tmp_path / "cuau.cif"
    path.write_text(disordered_cuau_cif(cu=0.25, au=0.75))
    out = tmp_path / "r.extxyz"
    code, _, err = run_cli(capsys, "relax", path, "--majority-species", "--model", EMT, "--steps", "0",
                           "--no-progress", "-o", out)
    assert code in (0, EXIT_NOT_CONVERGED), err
    assert "NOTE: --majority-species: 1 partially occupied site(s)" in err and "-> Au" in err
    assert read(out).get_chemical_formula() == "AuCu3"


# ------------------------------------------------------------------------------ md output folder
def test_md_refuses_an_out_dir_with_an_earlier_run_unless_overwrite(tmp_path, capsys):
    out_dir = tmp_path / "run"
    base = ["md", CU_CIF, "--model", EMT, "--seed", "0", "--no-progress", "--out-dir", out_dir]
    code, _, err = run_cli(capsys, *base, "--steps", "4", "--log-interval", "2")
    assert code == 0, err
    assert len(read(out_dir / "md.traj", index=":")) == 3
    before = {p.name: p.read_bytes() for p in out_dir.iterdir()}

    code, _, err = run_cli(capsys, *base, "--steps", "2", "--log-interval", "1")
    assert_clean_error(code, err, f"{out_dir} already holds md.traj, md.log", "md_summary.json",
                       "another --out-dir", "--overwrite")
    assert {p.name: p.read_bytes() for p in out_dir.iterdir()} == before  # nothing touched

    code, _, err = run_cli(capsys, *base, "--steps", "2", "--log-interval", "1", "--overwrite")
    assert code == 0, err
    assert len(read(out_dir / "md.traj", index=":")) == 3  # steps 0, 1, 2 of the new run only
    assert (out_dir / "md.log").read_bytes() != before["md.log"]

    # A folder with unrelated files is fine.
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    code, _, err = run_cli(capsys, "md", CU_CIF, "--model", EMT, "--steps", "2", "--no-progress",
                       "--out-dir", other)
    assert code == 0, err
    assert (other / "notes.txt").read_text() == "mine" and (other / "md.traj").is_file()


# ------------------------------------------------------------------------------ md settings and explosions
def test_md_refuses_implausible_settings_and_options_its_ensemble_ignores(tmp_path, capsys):
    out_dir = tmp_path / "md"
    base = ["md", CU_CIF, "--model", EMT, "--steps", "2", "--no-progress", "--out-dir", out_dir]
    outside = "is outside the plausible range of MD"
    refused = {("--temperature", "1e9"): f"temperature 1e+09 K {outside} (0 to 10000 K",
               ("--timestep", "1000"): f"timestep 1000 fs {outside} (0.01 to 10 fs",
               ("--ensemble", "npt", "--pressure", "1e5"): f"pressure 100000 GPa {outside} (-100 to 1000 GPa",
               ("--pressure", "5"): "--pressure applies to --ensemble npt only (this run is nve)",
               ("--ensemble", "npt", "--friction", "0.1"): "--friction applies to --ensemble nvt only",
               ("--barostat", "anisotropic"): "--barostat applies to --ensemble npt only",
               ("--temperature", "-5"): "must be a non-negative number",
               ("--timestep", "0"): "must be a positive",
               ("--ensemble", "npt", "--pressure", "nan"): "must be a finite number"}
    for options, fragment in refused.items():
        code, _, err = run_cli(capsys, *base, *options)
        assert code == 2 and fragment in err and "Traceback" not in err, (options, err)
        if "plausible" in fragment:
            assert "pass --allow-extreme to run it anyway" in err
        assert not out_dir.exists()
    code, _, err = run_cli(capsys, *base, "--timestep", "12", "--allow-extreme")
    assert code == 0, err
    assert json.loads((out_dir / "md_summary.json").read_text())["settings"]["timestep_fs"] == 12


def test_md_that_explodes_stops_with_its_files_readable(tmp_path, capsys):
    out_dir = tmp_path / "md"
    code, _, err = run_cli(capsys, "md", CU_CIF, "--model", EMT, "--supercell", "2", "--timestep", "60",
                           "--allow-extreme", "--steps", "300", "--log-interval", "5", "--seed", "0",
                           "--no-progress", "--out-dir", out_dir)
    assert code == 1 and "the simulation exploded" in err and "hold the run up to step 0" in err, err
    assert len(read(out_dir / "md.traj", index=":")) == 1
    assert len((out_dir / "md.log").read_text().splitlines()) == 2
    assert not (out_dir / "md_summary.json").exists()  # the run did not finish


def test_md_too_large_for_the_memory_is_refused_before_any_file(tmp_path, capsys):
    out_dir = tmp_path / "md"
    code, _, err = run_cli(capsys, "md", CU_CIF, "--supercell", "60", "--steps", "1", "--no-progress",
                           "--out-dir", out_dir)
    assert_clean_error(code, err, "864,000 atoms with about 77 neighbours each", "GB is available")
    assert not (out_dir / "md.traj").exists() and not (out_dir / "md.log").exists()


# ------------------------------------------------------------------------------ relax exit status
def test_relax_that_does_not_converge_exits_3_and_still_writes(tmp_path, capsys):
    structure = tmp_path / "cu.extxyz"
    atoms = bulk("Cu", "fcc", a=3.7, cubic=True)
    atoms.rattle(0.1, seed=0)
    write(structure, atoms)
    out_path = tmp_path / "relaxed.extxyz"
    code, out, err = run_cli(capsys, "relax", structure, "--model", EMT, "--steps", "2", "--fmax", "0.001",
                         "--no-progress", "-o", out_path)
    assert code == EXIT_NOT_CONVERGED == 3
    assert "converged: NO" in out and "exit status 3" in err and "Traceback" not in err
    relaxed = read(out_path)
    assert relaxed.info["converged"] is False and relaxed.info["n_steps"] == 2
    code, out, err = run_cli(capsys, "relax", structure, "--model", EMT, "--fmax", "0.05", "--no-progress",
                         "-o", out_path, "--overwrite")  # the earlier result is replaced only when asked
    assert code == 0 and "converged: yes" in out


def test_relax_help_documents_the_exit_status(capsys):
    code, out, _ = run_cli(capsys, "relax", "--help")
    assert code == 0
    assert "3 not converged" in " ".join(out.split())


# ------------------------------------------------------------------------------ eval
def test_eval_on_a_cif_points_to_the_format_option(tmp_path, capsys):
    code, _, err = run_cli(capsys, "eval", EMT, CU_CIF, "--out-dir", tmp_path / "ev")
    assert_clean_error(code, err, "cu_fcc.cif", "--format {extxyz,db,mptrj}")
    assert "format=" not in err  # the Python keyword means nothing on the command line
    data = labelled("Cu", 3.6, tmp_path / "cu_labels.txt")
    code, out, err = run_cli(capsys, "eval", EMT, data, "--format", "extxyz", "--out-dir", tmp_path / "ev")
    assert code == 0, err
    metrics = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert metrics["n_structures"] == 1 and metrics["energy_mae_meV_per_atom"] < 1e-6  # EMT on EMT labels
    code, _, err = run_cli(capsys, "eval", EMT, data, "--format", "db", "--out-dir", tmp_path / "ev-db")
    assert_clean_error(code, err, "cu_labels.txt", "not an ASE database")


def test_eval_element_error_names_the_symbol_and_the_file(tmp_path, capsys):
    model = tmp_path / "cu.safetensors"
    code, _, err = run_cli(capsys, "create", "platonic", "--species", "Cu", "--cutoff", "4", "--seed", "0",
                       "--set", "num_layers=1", "--set", "channels=8", "-o", model)
    assert code == 0, err
    data = labelled("Pt", 3.92, tmp_path / "pt.extxyz")
    code, _, err = run_cli(capsys, "eval", model, data, "--out-dir", tmp_path / "ev")
    assert_clean_error(code, err, "pt.extxyz: frame 0", "Pt", "(Cu)")
    assert "78" not in err.replace(str(tmp_path), "")  # the symbol, not Z (the path may hold 78)


def test_reference_energy_fit_names_the_element_and_the_file(tmp_path):
    from mlip.data import read_dataset
    from mlip.training import fit_reference_energies

    samples = read_dataset(labelled("Cu", 3.6, tmp_path / "cu.extxyz")) + read_dataset(
        labelled("Pt", 3.92, tmp_path / "pt.extxyz"))
    with pytest.raises(ValueError) as info:
        fit_reference_energies(samples, [29])
    message = str(info.value)
    assert "pt.extxyz: frame 0" in message and "contains Pt" in message and "(Cu)" in message
    message = message.replace(str(tmp_path), "")  # the symbol, not the atomic number (the path may hold 78)
    assert "Z=" not in message and "78" not in message
    # Structures built in memory are named by their position.
    in_memory = []
    for sample in samples:
        atoms = sample.atoms.copy()
        atoms.calc = SinglePointCalculator(atoms, energy=sample.energy, forces=sample.forces)
        in_memory.append(atoms)
    with pytest.raises(ValueError, match=r"structure 1 contains Pt"):
        fit_reference_energies(in_memory, [29])


# ------------------------------------------------------------------------------ kappa stage lines
def test_kappa_without_progress_prints_one_line_per_stage(tmp_path, capsys):
    pytest.importorskip("phono3py")
    structure = tmp_path / "cu.extxyz"
    write(structure, bulk("Cu", "fcc", a=3.61, cubic=True))
    code, out, err = run_cli(capsys, "kappa", structure, "--model", EMT, "--fc2-supercell", "2",
                         "--fc3-supercell", "2", "--mesh", "5", "--fmax", "0.01", "--relax-steps", "50",
                         "--no-progress", "--threads", "1", "--out-dir", tmp_path / "k")
    assert code == 0, err
    stages = [line.split(":")[0] for line in out.splitlines() if line.startswith("stage ")]
    assert stages == ["stage relax", "stage fc2", "stage fc3", "stage conductivity"], out
    assert "32 atoms each" in out and "q-mesh [5, 5, 5]" in out
    assert np.isfinite(float(out.split("κ(300 K) = ")[1].split()[0]))


def test_kappa_batch_reads_with_the_given_format(tmp_path, capsys):
    path = tmp_path / "crystals.txt"
    write(path, [bulk("Cu", "fcc", a=3.61, cubic=True)], format="extxyz")
    code, _, err = run_cli(capsys, "kappa", path, "--batch", "--model", EMT, "--out-dir", tmp_path / "k")
    assert_clean_error(code, err, "cannot read structures file", "crystals.txt")
    # Read as extxyz, the file gets as far as the check of each frame's settings.
    code, _, err = run_cli(capsys, "kappa", path, "--batch", "--format", "extxyz", "--model", EMT,
                       "--out-dir", tmp_path / "k")
    assert_clean_error(code, err, "crystals.txt, frame 0: atoms.info lacks fc2_supercell")
