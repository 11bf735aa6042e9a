"""mlip.workflows.labelling: reference labels for structures, sharded, resumable, with provenance."""

import json
import math

import numpy as np
import pytest
from ase.build import bulk, fcc111
from ase.calculators.emt import EMT
from ase.io import read

from mlip.data import read_dataset
from mlip.testing.datasets import emt_cells
from mlip.workflows.kpoints import band_edges, kpoint_mesh
from mlip.workflows.labelling import (GPAW_PBE_SETTINGS, gpaw_calculator, interleaved, label_structures,
                                      labeller, result_id, structure_id, write_labelled)
from mlip.workflows.sharding import result_path


def test_kpoint_mesh_follows_the_reciprocal_lattice_and_skips_vacuum():
    cubic = bulk("Cu", "fcc", a=4.0, cubic=True)  # |b| = 2π/4 Å⁻¹ = 1.5708: 2.5 · 1.5708 = 3.93 → 4
    assert kpoint_mesh(cubic, 2.5) == (4, 4, 4)
    long = cubic.repeat((1, 1, 3))  # |b_z| = 2π/12: 2.5 · 0.5236 = 1.31 → 2
    assert kpoint_mesh(long, 2.5) == (4, 4, 2)
    slab = fcc111("Cu", (1, 1, 3), vacuum=6.0)
    assert slab.pbc.tolist() == [True, True, False]
    assert kpoint_mesh(slab, 2.5)[2] == 1
    molecule = bulk("Cu").copy()
    molecule.pbc = False
    assert kpoint_mesh(molecule, 2.5) == (1, 1, 1)
    with pytest.raises(ValueError, match="positive"):
        kpoint_mesh(cubic, 0)
    # even: each periodic size rounded up to even (a shifted mesh), vacuum directions stay 1
    assert kpoint_mesh(long, 2.5, even=True) == (4, 4, 2)
    assert kpoint_mesh(cubic, 3.5, even=True) == (6, 6, 6)  # 3.5 · 1.5708 = 5.50 → 6
    assert kpoint_mesh(cubic, 3.0, even=True) == (6, 6, 6)  # 4.71 → 5 → 6
    assert kpoint_mesh(slab, 2.5, even=True)[2] == 1


def test_emt_labels_round_trip_through_the_dataset_reader(tmp_path):
    cells = emt_cells(4, seed=3, label=False)
    for k, atoms in enumerate(cells):
        atoms.info["id"] = f"cell-{k}"
        atoms.info["config_type"] = "rattled"
    counts = label_structures(cells, labeller("emt"), tmp_path / "run", progress=False)
    assert counts["computed"] == 4 and counts["failed"] == 0
    n, failed, missing = write_labelled(cells, tmp_path / "run", tmp_path / "labelled.xyz")
    assert (n, failed, missing) == (4, [], [])
    samples = read_dataset(tmp_path / "labelled.xyz")
    for atoms, sample in zip(cells, samples):
        ref = atoms.copy()
        ref.calc = EMT()
        assert sample.energy == pytest.approx(ref.get_potential_energy(), abs=1e-10)
        assert np.allclose(sample.forces, ref.get_forces(), atol=1e-10)
        assert np.allclose(sample.stress, ref.get_stress(voigt=True), atol=1e-10)
    from ase.io import read

    frames = read(tmp_path / "labelled.xyz", ":")
    assert [f.info["id"] for f in frames] == [f"cell-{k}" for k in range(4)]
    for frame in frames:
        assert frame.info["calculator"] == "emt" and frame.info["config_type"] == "rattled"
        assert frame.info["calculator_version"] and json.loads(frame.info["calculator_settings"]) == {}
        assert math.isfinite(frame.info["label_wall_time_s"])


def test_a_rerun_computes_only_what_is_missing(tmp_path):
    cells = emt_cells(3, seed=1, label=False)
    run = tmp_path / "run"
    assert label_structures(cells, labeller("emt"), run, progress=False)["computed"] == 3
    result_path(run, result_id(cells[1])).unlink()  # as if killed while labelling it
    counts = label_structures(cells, labeller("emt"), run, progress=False)
    assert (counts["skipped"], counts["computed"]) == (2, 1)
    # shards split the work and together cover it
    other = tmp_path / "sharded"
    done = [label_structures(cells, labeller("emt"), other, n_shards=2, shard_index=k,
                             progress=False)["computed"] for k in range(2)]
    assert sorted(done) == [1, 2]
    assert write_labelled(cells, other, tmp_path / "all.xyz")[0] == 3


class FailsOnGold(EMT):
    """EMT that fails like an SCF that does not converge, for structures holding gold."""

    def calculate(self, atoms=None, properties=("energy",), system_changes=()):
        if 79 in atoms.numbers:
            raise RuntimeError("SCF did not converge")
        super().calculate(atoms, properties, system_changes)


class NoSettings(EMT):
    def __init__(self):
        super().__init__()


class CountedEMT(EMT):
    """EMT that counts its instances (a model-based calculator loads its weights in __init__)."""

    made = 0

    def __init__(self):
        super().__init__()
        CountedEMT.made += 1


def test_a_calculator_class_is_made_once_for_all_structures(tmp_path):
    cells = emt_cells(3, seed=1, label=False)
    CountedEMT.made = 0
    lab = labeller(f"{__name__}:CountedEMT")
    assert label_structures(cells, lab, tmp_path / "run", progress=False)["computed"] == 3
    assert CountedEMT.made == 1
    write_labelled(cells, tmp_path / "run", tmp_path / "l.xyz")
    for atoms, sample in zip(cells, read_dataset(tmp_path / "l.xyz")):  # each structure its own labels
        ref = atoms.copy()
        ref.calc = EMT()
        assert sample.energy == pytest.approx(ref.get_potential_energy(), abs=1e-10)


def test_failures_are_recorded_and_reported_not_dropped(tmp_path):
    cells = [bulk("Cu", "fcc", a=3.6, cubic=True), bulk("Au", "fcc", a=4.08, cubic=True)]
    counts = label_structures(cells, labeller(f"{__name__}:FailsOnGold"), tmp_path / "run", progress=False)
    assert counts["failed"] == 1
    silver = bulk("Ag", "fcc", a=4.1)
    n, failed, missing = write_labelled(cells + [silver], tmp_path / "run", tmp_path / "out.xyz")
    assert n == 1 and missing == [structure_id(bulk("Ag", "fcc", a=4.1))]
    assert failed[0][0] == structure_id(cells[1]) and "SCF did not converge" in failed[0][1]


def test_a_structure_changed_under_its_id_is_labelled_again(tmp_path):
    cells = emt_cells(2, seed=5, label=False)
    for k, atoms in enumerate(cells):
        atoms.info["id"] = f"cell-{k}"
    label_structures(cells, labeller("emt"), tmp_path / "run", progress=False)
    cells[0].positions[0] += 0.1
    counts = label_structures(cells, labeller("emt"), tmp_path / "run", progress=False)
    assert (counts["skipped"], counts["computed"]) == (1, 1)
    write_labelled(cells, tmp_path / "run", tmp_path / "out.xyz")
    sample = read_dataset(tmp_path / "out.xyz")[0]
    ref = cells[0].copy()
    ref.calc = EMT()
    assert sample.energy == pytest.approx(ref.get_potential_energy(), abs=1e-10)


def test_kinds_take_turns():
    kinds = ["a", "a", "a", "b", "c", "c"]
    atoms = [bulk("Cu") for _ in kinds]
    for a, kind in zip(atoms, kinds):
        a.info["config_type"] = kind
    assert interleaved(atoms) == [0, 3, 4, 1, 5, 2]


def test_structure_ids_are_stable_and_distinct():
    a, b = bulk("Cu", "fcc", a=3.6), bulk("Cu", "fcc", a=3.61)
    assert structure_id(a) == structure_id(a.copy()) != structure_id(b)
    a.info["id"] = "mine"
    assert structure_id(a) == "mine"


def test_a_zero_keeps_its_key_whatever_the_sign_of_its_round_off():
    """A coordinate that is zero up to round-off (a symmetrised relaxation step gives ±1e-18) must key
    the same result on every machine; a real change of 1e-7 Å must not."""
    a = bulk("Si", "diamond", a=5.43)
    plus, minus, moved = a.copy(), a.copy(), a.copy()
    plus.cell[0, 0], minus.cell[0, 0] = 1e-18, -1e-18
    plus.positions[0, 1], minus.positions[0, 1] = 3e-19, -3e-19
    moved.positions[0, 1] = 1e-7
    assert result_id(plus) == result_id(minus) == result_id(a) != result_id(moved)
    assert structure_id(plus) == structure_id(minus)


def test_bad_calculator_names_and_settings_are_one_line_errors():
    with pytest.raises(ValueError, match="unknown calculator 'vasp'"):
        labeller("vasp")
    with pytest.raises(ValueError, match="takes no settings"):
        labeller("emt", {"cutoff": 3})
    with pytest.raises(ValueError, match="unknown gpaw setting.*ecut"):
        labeller("gpaw", {"ecut": 300})
    with pytest.raises(ValueError, match="Nope in ase.calculators.emt is not defined"):
        labeller("ase.calculators.emt:Nope")
    with pytest.raises(ValueError, match="cannot import no_such_module_xyz"):
        labeller("no_such_module_xyz:Calc")
    with pytest.raises(ValueError, match="units in ase is not a class"):
        labeller("ase:units")
    with pytest.raises(ValueError, match="does not accept the settings"):
        labeller(f"{__name__}:NoSettings", {"bogus": 1})


def test_gpaw_labels_with_the_dataset_settings(tmp_path):
    pytest.importorskip("gpaw", reason="GPAW is the optional extra 'dft'")
    si = bulk("Si", "diamond", a=5.47)
    # cheaper settings than the dataset's, to keep the test short; the provenance records them
    lab = labeller("gpaw", {"ecut_eV": 200.0, "kpoint_density_per_inv_A": 1.0})
    assert lab.settings["xc"] == GPAW_PBE_SETTINGS["xc"] and lab.settings["ecut_eV"] == 200.0
    assert label_structures([si], lab, tmp_path / "run", progress=False)["computed"] == 1
    write_labelled([si], tmp_path / "run", tmp_path / "si.xyz")
    sample = read_dataset(tmp_path / "si.xyz")[0]
    assert abs(sample.forces).max() < 1e-3  # diamond: forces vanish by symmetry
    assert sample.stress[3:] == pytest.approx([0, 0, 0], abs=1e-5) and sample.stress[0] == pytest.approx(
        sample.stress[1], abs=1e-7)



def test_gpaw_runs_with_one_blas_thread_unless_told_otherwise(monkeypatch):
    """GPAW parallelises over MPI ranks: each rank's BLAS gets one thread (threaded BLAS beside the ranks
    oversubscribes the cores), unless OMP_NUM_THREADS says how many."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from mlip.workflows.labelling import _one_blas_thread

    controller = threadpoolctl.ThreadpoolController()
    if not controller.select(user_api="blas").lib_controllers:
        pytest.skip("no BLAS library that threadpoolctl can see")
    limiter = controller.limit(limits=2, user_api="blas")
    try:
        if {i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"} == {1}:
            pytest.skip("BLAS runs one thread here whatever it is told")
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        assert not _one_blas_thread()
        assert {i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"} != {1}
        monkeypatch.delenv("OMP_NUM_THREADS")
        assert _one_blas_thread()
        assert {i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"} == {1}
    finally:
        limiter.restore_original_limits()


def test_without_threadpoolctl_gpaw_warns_of_threaded_blas(monkeypatch):
    import sys

    from mlip.workflows.labelling import _one_blas_thread

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # an import of it raises ImportError
    with pytest.warns(UserWarning, match="OMP_NUM_THREADS=1"):
        assert not _one_blas_thread()


class BandsOnAMesh:
    """The eigenvalue interface of a finished GPAW calculation, on given bands [k-points, bands]."""

    def __init__(self, eigenvalues, fermi):
        self.eigenvalues, self.fermi = np.asarray(eigenvalues, float), fermi

    def get_fermi_level(self):
        return self.fermi

    def get_ibz_k_points(self):
        return np.zeros((len(self.eigenvalues), 3))

    def get_eigenvalues(self, kpt):
        return self.eigenvalues[kpt]


def test_band_edges_tell_a_metal_from_a_semiconductor():
    semiconductor = band_edges(BandsOnAMesh([[-3.0, -1.0, 1.5], [-2.5, -0.5, 0.9]], fermi=0.0))
    assert semiconductor["gap_eV"] == pytest.approx(1.4) and not semiconductor["band_crosses_fermi_level"]
    assert semiconductor["n_ibz_kpoints"] == 2
    # the second band is below the Fermi level at one k-point and above it at the other: a metal
    metal = band_edges(BandsOnAMesh([[-3.0, -0.2, 2.0], [-2.5, 0.3, 2.2]], fermi=0.0))
    assert metal["gap_eV"] == 0.0 and metal["band_crosses_fermi_level"]


def test_gpaw_labels_a_metal_again_on_the_metal_mesh(tmp_path):
    pytest.importorskip("gpaw", reason="GPAW is the optional extra 'dft'")
    with pytest.raises(ValueError, match="unknown gpaw setting.*metal_density"):
        labeller("gpaw", {"metal_density": 3.0})
    cheap = {"ecut_eV": 200.0, "kpoint_density_per_inv_A": 1.0, "kpoint_even": True, "gamma_centred": False,
             "metal_kpoint_density_per_inv_A": 2.0}
    lab = labeller("gpaw", cheap)
    assert "metal_gap_eV" not in lab.settings  # optional settings are recorded only where given
    al, si = bulk("Al", "fcc", a=4.04), bulk("Si", "diamond", a=5.47)
    al.info["id"], si.info["id"] = "al", "si"
    assert label_structures([al, si], lab, tmp_path / "run", progress=False)["computed"] == 2
    write_labelled([al, si], tmp_path / "run", tmp_path / "labelled.xyz")
    frames = {a.info["id"]: a for a in read(tmp_path / "labelled.xyz", ":")}
    al_details, si_details = (json.loads(frames[k].info["label_details"]) for k in ("al", "si"))
    assert al_details["metal"] and al_details["band_gap_eV"] == 0.0
    assert al_details["first_kpoint_mesh"] == list(kpoint_mesh(al, 1.0, even=True))
    assert al_details["kpoint_mesh"] == list(kpoint_mesh(al, 2.0))
    assert not si_details["metal"] and si_details["band_gap_eV"] > 0.3
    assert si_details["mpi_ranks"] == al_details["mpi_ranks"] == 1  # pytest runs GPAW without mpiexec
    assert si_details["kpoint_mesh"] == list(kpoint_mesh(si, 1.0, even=True))
    assert "first_kpoint_mesh" not in si_details
    # the metal's labels are the metal mesh's
    reference = al.copy()
    dense = {**lab.settings, "kpoint_density_per_inv_A": 2.0, "gamma_centred": True, "kpoint_even": False}
    reference.calc = gpaw_calculator(al, dense)
    energy = reference.get_potential_energy(force_consistent=True)
    assert frames["al"].info["REF_energy"] == pytest.approx(energy, abs=1e-4)


def test_the_command_line_makes_and_labels_a_dataset(tmp_path, capsys):
    from mlip.testing.cli import run_cli

    structures, labelled, run = tmp_path / "s.xyz", tmp_path / "l.xyz", tmp_path / "run"
    code, out, err = run_cli(capsys, "data", "structures", "Cu", "Au", "-o", structures,
                             "--count", "prototype=3", "--count", "compressed=2", "--no-progress")
    assert code == 0 and "wrote 7 structures" in out, err
    code, out, err = run_cli(capsys, "data", "structures", "Cu", "-o", structures)
    assert code == 2 and "exists" in err and "--overwrite" in err  # nothing the user has is overwritten
    args = ["data", "label", structures, "--calculator", "emt", "--out-dir", run, "-o", labelled,
            "--no-progress"]
    code, out, err = run_cli(capsys, *args, "--shards", "2", "--shard-index", "0")
    assert code == 0 and "not yet" in out and not labelled.exists()  # half the shards: no file yet
    code, out, err = run_cli(capsys, *args, "--shards", "2", "--shard-index", "1")
    assert code == 0 and "wrote 7 labelled structures" in out
    assert len(read_dataset(labelled)) == 7
    code, out, err = run_cli(capsys, *args[:3], "--calculator", "emt", "--setting", "x=1", "--out-dir", run,
                             "-o", labelled)
    assert code == 2 and err.strip() == "mlip: error: the emt calculator takes no settings, got x"
