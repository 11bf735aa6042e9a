"""Workflows: model resolution, relaxation (FIRE ± FrechetCellFilter) and MD (NVE/NVT/NPT)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.build import bulk, fcc111
from ase.calculators.emt import EMT
from ase.constraints import FixAtoms

import mlip
from mlip.models import create_model
from mlip.pretrained import UntrainedModelWarning
from mlip.workflows import (
    MDResult,
    is_untrained,
    relax,
    resolve_calculator,
    run_md,
    save_energy_plot,
)

EMT_PATH = "ase.calculators.emt:EMT"


def tiny_potential(species=("Cu",), cutoff=3.0, seed=0):
    return create_model(
        "platonic", species=list(species), cutoff=cutoff, seed=seed,
        channels=4, num_layers=1, num_heads=1, head_dim=4,
    )


@pytest.fixture
def one_thread():
    """Small graphs run fastest (and steadily on a busy machine) on one torch thread."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def cu32(a=3.61) -> Atoms:
    return bulk("Cu", "fcc", a=a, cubic=True).repeat((2, 2, 2))


class CountingEMT(EMT):
    """EMT that raises once it has been asked for ``fail_at`` calculations (simulates OOM etc.)."""

    def __init__(self, fail_at=None, nan_at=None):
        super().__init__()
        self.calls = 0
        self.fail_at = fail_at
        self.nan_at = nan_at

    def calculate(self, atoms=None, properties=("energy",), system_changes=None):
        self.calls += 1
        if self.fail_at is not None and self.calls >= self.fail_at:
            raise RuntimeError(f"simulated failure in force call {self.calls}")
        if system_changes is None:
            super().calculate(atoms, properties)
        else:
            super().calculate(atoms, properties, system_changes)
        if self.nan_at is not None and self.calls >= self.nan_at:
            self.results["forces"] = np.full_like(self.results["forces"], np.nan)


# ---------------------------------------------------------------------------------------- resolve_calculator
def test_resolve_calculator_accepts_all_forms(tmp_path, one_thread):
    from mlip.calculators import MLIPCalculator

    # import path of an ASE calculator class
    calc = resolve_calculator(EMT_PATH)
    assert isinstance(calc, EMT)
    # calculator instances pass through untouched; classes are instantiated
    emt = EMT()
    assert resolve_calculator(emt) is emt
    assert isinstance(resolve_calculator(EMT), EMT)
    # a Potential object, with dtype honoured
    potential = tiny_potential()
    calc = resolve_calculator(potential, device="cpu", dtype="float64")
    assert isinstance(calc, MLIPCalculator) and calc.dtype == torch.float64
    assert not is_untrained(calc)  # no metadata: unknown, not flagged
    # a checkpoint path, as str and as Path
    path = mlip.save_potential(potential, tmp_path / "tiny.safetensors")
    for spec in (str(path), path):
        calc = resolve_calculator(spec, device="cpu", dtype="float32")
        assert isinstance(calc, MLIPCalculator) and calc.dtype == torch.float32
        assert calc.potential.species == ["Cu"]
    # shipped names: "default" is a trained model; an untrained one says so
    import warnings

    for name in ("default", mlip.pretrained.DEFAULT_MODEL):
        with warnings.catch_warnings():
            warnings.simplefilter("error", UntrainedModelWarning)
            calc = resolve_calculator(name, device="cpu")
        assert isinstance(calc, MLIPCalculator) and not is_untrained(calc)
    with pytest.warns(UntrainedModelWarning):
        calc = resolve_calculator("platonic-untrained", device="cpu")
    assert isinstance(calc, MLIPCalculator)
    assert is_untrained(calc)
    # with note= (the command line's stderr) the warning becomes one NOTE line, and only for an untrained model
    notes = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", UntrainedModelWarning)
        assert is_untrained(resolve_calculator("platonic-untrained", device="cpu", note=notes.append))
        resolve_calculator(path, device="cpu", note=notes.append)
    assert notes == ["NOTE: model 'platonic-untrained' is UNTRAINED (random weights): results are not physical"]
    atoms = bulk("Cu", "fcc", a=3.61)
    atoms.calc = calc
    assert np.isfinite(atoms.get_potential_energy())


@pytest.mark.parametrize(
    "spec, error, fragments",
    [
        ("garbage", ValueError, ["garbage", "platonic-untrained", "module:ClassName"]),
        ("", ValueError, ["empty"]),
        ("no/such/model.safetensors", FileNotFoundError, ["does not exist", "platonic-untrained"]),
        ("missing.safetensors", FileNotFoundError, ["does not exist"]),
        ("no_such_module_xyz:Calc", ValueError, ["cannot import", "no_such_module_xyz"]),
        ("ase.calculators.emt:NoSuchClass", ValueError, ["NoSuchClass in ase.calculators.emt is not defined"]),
        ("ase.atoms:Atoms", ValueError, ["not an ASE calculator class"]),
    ],
)
def test_resolve_calculator_rejects_garbage(spec, error, fragments):
    with pytest.raises(error) as info:
        resolve_calculator(spec)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_resolve_calculator_rejects_other_types_and_directories(tmp_path):
    with pytest.raises(TypeError, match="model must be"):
        resolve_calculator(42)
    with pytest.raises(ValueError, match="directory"):
        resolve_calculator(str(tmp_path))
    with pytest.raises(ValueError, match="without arguments"):
        resolve_calculator("ase.calculators.singlepoint:SinglePointCalculator")


# ---------------------------------------------------------------------------------------- relax
def test_relax_rattled_cu_with_emt_converges_and_lowers_energy():
    atoms = bulk("Cu", "fcc", a=3.70, cubic=True)  # EMT's lattice constant is ~3.59 Å: strained
    atoms.rattle(0.1, seed=0)
    before = atoms.copy()
    ref = atoms.copy()
    ref.calc = EMT()
    e0 = ref.get_potential_energy()

    result = relax(atoms, EMT_PATH, fmax=0.05, steps=300, progress=False)

    assert result.converged
    assert 0 < result.n_steps <= 300
    assert result.fmax_final < 0.05
    assert np.abs(result.atoms.get_forces()).max() < 0.05
    assert result.energy < e0 - 1e-3
    assert result.energy == pytest.approx(result.atoms.get_potential_energy())
    # the cell relaxed (FrechetCellFilter for bulk): it shrank towards EMT's lattice constant
    assert result.atoms.get_volume() < atoms.get_volume() - 1.0
    # the input was not modified
    assert np.array_equal(atoms.positions, before.positions) and np.array_equal(atoms.cell, before.cell)


def test_relax_without_cell_filter_keeps_cell():
    atoms = bulk("Cu", "fcc", a=3.70, cubic=True)
    atoms.rattle(0.1, seed=1)
    result = relax(atoms, EMT(), fmax=0.05, steps=300, cell_filter=False, progress=False)
    assert result.converged
    assert np.allclose(result.atoms.cell, atoms.cell)


def test_relax_slab_moves_positions_only_and_honours_fixatoms(tmp_path):
    slab = fcc111("Cu", size=(2, 2, 3), a=3.61, vacuum=6.0)
    slab.set_constraint(FixAtoms(mask=slab.get_tags() == 3))
    slab.rattle(0.05, seed=2)
    traj = tmp_path / "slab.traj"
    result = relax(slab, EMT(), fmax=0.05, steps=300, trajectory=str(traj), progress=False)
    assert result.converged
    assert np.allclose(result.atoms.cell, slab.cell)  # no cell filter for pbc=[T, T, F]
    fixed = slab.get_tags() == 3
    assert np.allclose(result.atoms.positions[fixed], slab.positions[fixed])
    assert not np.allclose(result.atoms.positions[~fixed], slab.positions[~fixed])
    from ase.io import read

    frames = read(str(traj), index=":")
    assert len(frames) == result.n_steps + 1


def test_relax_stops_at_a_failed_force_call():
    calc = CountingEMT(fail_at=4)
    atoms = bulk("Cu", "fcc", a=3.70, cubic=True)
    atoms.rattle(0.1, seed=0)
    with pytest.raises(RuntimeError, match="simulated failure"):
        relax(atoms, calc, progress=False)
    assert calc.calls == 4  # nothing was computed after the failure


def test_relax_rejects_nonfinite_forces():
    atoms = bulk("Cu", "fcc", a=3.70, cubic=True)
    atoms.rattle(0.1, seed=0)
    with pytest.raises(RuntimeError, match="non-finite forces"):
        relax(atoms, CountingEMT(nan_at=3), cell_filter=False, progress=False)


def test_relax_with_mlip_potential(one_thread):
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True)
    atoms.rattle(0.05, seed=3)
    result = relax(atoms, tiny_potential(), fmax=0.05, steps=5, progress=True)
    assert result.n_steps <= 5
    assert np.isfinite(result.energy) and np.isfinite(result.fmax_final)


# ---------------------------------------------------------------------------------------- md
def test_nve_energy_drift_with_emt():
    result = run_md(cu32(), EMT(), ensemble="nve", temperature=300, timestep=1.0, steps=200, seed=0,
                    log_interval=1, progress=False)
    assert isinstance(result, MDResult)
    assert len(result.times) == 201
    assert result.times[-1] == pytest.approx(0.2)  # ps
    assert np.allclose(result.total_energies, result.potential_energies + result.kinetic_energies)
    print(f"EMT NVE: drift {result.drift_mev_per_atom_per_ps:+.5f} meV/atom/ps, "
          f"max deviation {result.max_deviation_mev_per_atom:.5f} meV/atom")
    # Measured with ASE 3.29 EMT for seeds 0-3: |drift| 0.0003-0.003 meV/atom/ps and max deviation
    # ~0.01 meV/atom. Velocity Verlet at 1 fs on a smooth potential has bounded O(dt²) energy
    # fluctuations and no systematic drift; a force that is not −∂E/∂r, or an energy with jumps,
    # gives drifts of meV/atom/ps and more. 1 meV/atom/ps leaves ~300x headroom for noise yet
    # catches such bugs.
    assert abs(result.drift_mev_per_atom_per_ps) < 1.0
    assert result.max_deviation_mev_per_atom < 1.0
    # equipartition from the perfect lattice: T falls from ~300 K towards ~150 K
    assert 200 < result.temperatures[0] < 400
    assert result.temperatures[-1] < result.temperatures[0]


def test_md_is_reproducible_with_a_seed():
    a = run_md(cu32(), EMT(), steps=20, seed=7, progress=False)
    b = run_md(cu32(), EMT(), steps=20, seed=7, progress=False)
    c = run_md(cu32(), EMT(), steps=20, seed=8, progress=False)
    assert np.array_equal(a.total_energies, b.total_energies)
    assert not np.array_equal(a.total_energies, c.total_energies)


def test_md_keeps_existing_velocities():
    first = run_md(cu32(), EMT(), steps=10, seed=0, progress=False)
    second = run_md(first.atoms, EMT(), steps=10, seed=123, progress=False)
    assert second.kinetic_energies[0] == pytest.approx(first.kinetic_energies[-1])


def test_nvt_langevin_leaves_no_extra_constraint(tmp_path):
    atoms = cu32()
    result = run_md(atoms, EMT(), ensemble="nvt", temperature=500, timestep=2.0, steps=100, friction=0.05,
                    seed=0, progress=False)
    assert result.drift_mev_per_atom_per_ps is None and result.conserved_energies.size == 0
    assert result.atoms.constraints == [] and atoms.constraints == []
    assert np.all(np.isfinite(result.temperatures))
    # the thermostat heated the lattice well above the ~250 K that NVE equipartition would give
    assert result.temperatures[len(result.temperatures) // 2:].mean() > 300


def test_npt_changes_volume_and_stays_finite(tmp_path):
    atoms = cu32()
    log = tmp_path / "npt.log"
    result = run_md(atoms, EMT(), ensemble="npt", temperature=300, timestep=1.0, steps=200, pressure=10.0,
                    pdamp=100.0, seed=0, logfile=str(log), log_interval=20, progress=False)
    v0, v1 = result.volumes[0], result.volumes[-1]
    assert v0 == pytest.approx(atoms.get_volume())
    assert v1 < 0.97 * v0  # 10 GPa compresses Cu (B ≈ 140 GPa) by several %
    assert np.all(np.isfinite(result.atoms.positions)) and np.all(np.isfinite(result.atoms.cell.array))
    assert np.all(np.isfinite(result.total_energies))
    lengths = result.atoms.cell.lengths()
    assert np.allclose(lengths, lengths[0])  # isotropic barostat keeps the cubic shape
    assert result.drift_mev_per_atom_per_ps is not None  # MTK conserved quantity is tracked
    lines = log.read_text().splitlines()
    assert "stress" in lines[0] and len(lines) == 1 + 11


def test_npt_anisotropic_runs():
    result = run_md(bulk("Cu", "fcc", a=3.61, cubic=True), EMT(), ensemble="npt", barostat="anisotropic",
                    steps=20, pressure=1.0, pdamp=100.0, seed=0, progress=False)
    assert np.all(np.isfinite(result.volumes))


@pytest.mark.parametrize("kind", ["slab", "molecule"])
def test_npt_needs_3d_periodic_cell(kind):
    if kind == "slab":
        atoms = fcc111("Cu", size=(2, 2, 2), vacuum=5.0)
    else:
        atoms = Atoms("Cu2", positions=[[0, 0, 0], [0, 0, 2.4]])
    with pytest.raises(ValueError, match="periodic in all three directions"):
        run_md(atoms, EMT(), ensemble="npt", steps=2, progress=False)


def test_md_rejects_bad_arguments():
    with pytest.raises(ValueError, match="ensemble"):
        run_md(cu32(), EMT(), ensemble="nph", steps=1, progress=False)
    with pytest.raises(ValueError, match="timestep"):
        run_md(cu32(), EMT(), timestep=0.0, steps=1, progress=False)
    atoms = cu32()
    atoms.set_constraint(FixAtoms(indices=[0]))
    with pytest.raises(ValueError, match="constraints"):
        run_md(atoms, EMT(), ensemble="npt", steps=1, progress=False)


def test_md_stops_at_a_failed_force_call():
    calc = CountingEMT(fail_at=6)
    with pytest.raises(RuntimeError, match="simulated failure"):
        run_md(cu32(), calc, steps=50, seed=0, progress=False)
    assert calc.calls == 6


def test_md_molecule_zero_rotation_and_outputs(tmp_path):
    from ase.cluster import Icosahedron
    from ase.io import read

    cluster = Icosahedron("Cu", noshells=2)
    cluster.set_cell([0, 0, 0])
    cluster.pbc = False
    cluster.translate([500.0, -800.0, 300.0])
    traj, log, png = tmp_path / "md.traj", tmp_path / "md.log", tmp_path / "energy.png"
    result = run_md(cluster, EMT(), ensemble="nve", temperature=300, steps=25, seed=0, trajectory=str(traj),
                    logfile=str(log), log_interval=10, progress=True)
    atoms = result.atoms
    # no net momentum and no net angular momentum (ZeroRotation is kept by NVE up to O(dt²))
    assert np.allclose(atoms.get_momenta().sum(axis=0), 0.0, atol=1e-10)
    com = atoms.get_center_of_mass()
    angular = np.cross(atoms.positions - com, atoms.get_momenta()).sum(axis=0)
    assert np.allclose(angular, 0.0, atol=1e-6)
    assert np.isnan(result.volumes).all()
    # frames at steps 0, 10, 20 and the final step 25
    assert np.allclose(result.times, [0.0, 0.01, 0.02, 0.025])
    assert len(read(str(traj), index=":")) == 4
    assert len(log.read_text().splitlines()) == 1 + 4
    save_energy_plot(result, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = result.to_dict()
    assert summary["ensemble"] == "nve" and len(summary["total_energies"]) == 4
    assert summary["volumes"] == [None] * 4  # NaN → null in JSON


def test_md_with_mlip_potential_float32(one_thread):
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecation noise from the workflow itself
        result = run_md(atoms, tiny_potential(), ensemble="nvt", steps=5, log_interval=1, seed=0,
                        progress=False)
    assert len(result.times) == 6 and np.all(np.isfinite(result.total_energies))
    assert result.atoms.calc.dtype == torch.float32


def test_symmetry_preserving_relaxation_without_shear():
    """FixSymmetry + FrechetCellFilter(mask=[1,1,1,0,0,0]): a strained fcc cell relaxes isotropically,
    keeps its space group and its cell angles."""
    pytest.importorskip("spglib")
    atoms = bulk("Cu", "fcc", a=3.7, cubic=True)
    result = relax(atoms, EMT(), fmax=1e-4, steps=300, fix_symmetry=True, cell_mask=[1, 1, 1, 0, 0, 0],
                   progress=False)
    assert result.converged
    assert result.spacegroup_initial == result.spacegroup_final == "Fm-3m (225)"
    assert not result.symmetry_broken
    lengths = result.atoms.cell.lengths()
    assert np.allclose(lengths, lengths[0], rtol=1e-10)
    assert abs(lengths[0] - 3.7) > 0.05  # really relaxed (EMT Cu: a ≈ 3.59 Å)
    assert np.allclose(result.atoms.cell.angles(), 90.0, atol=1e-8)
    assert not any(type(c).__name__ == "FixSymmetry" for c in result.atoms.constraints)
    with pytest.raises(ValueError, match="cell_mask"):
        relax(atoms, EMT(), fix_symmetry=True, cell_mask=[1, 1, 1], progress=False)


class CallCountingEMT(EMT):
    calls = 0

    def calculate(self, *args, **kwargs):
        CallCountingEMT.calls += 1
        super().calculate(*args, **kwargs)


def test_displacement_forces_resume_and_refuse_foreign_cache(tmp_path):
    from mlip.workflows.phonons.displacement_forces import displacement_forces

    base = bulk("Cu", "fcc", a=3.6, cubic=True)
    structures = []
    for k in range(4):
        s = base.copy()
        s.positions[k % len(s), k % 3] += 0.03
        structures.append(s)
    expected = displacement_forces(structures, EMT(), progress=False)
    # A run that dies after two structures keeps those two on disk...
    calc = CallCountingEMT()
    CallCountingEMT.calls = 0
    with pytest.raises(RuntimeError, match="boom"):

        class Dying(CallCountingEMT):
            def calculate(self, *args, **kwargs):
                if CallCountingEMT.calls >= 2:
                    raise RuntimeError("boom")
                super().calculate(*args, **kwargs)

        displacement_forces(structures, Dying(), cache_dir=tmp_path / "fc", progress=False)
    assert sorted(p.name for p in (tmp_path / "fc").glob("forces_*.npy")) == ["forces_00000.npy", "forces_00001.npy"]
    # ... and the rerun computes only the other two, with identical results.
    CallCountingEMT.calls = 0
    resumed = displacement_forces(structures, calc, cache_dir=tmp_path / "fc", progress=False)
    assert CallCountingEMT.calls == 2
    for a, b in zip(resumed, expected):
        assert np.array_equal(a, b)
    # A half-written or corrupt file is recomputed, not trusted.
    (tmp_path / "fc" / "forces_00003.npy").write_bytes(b"garbage")
    CallCountingEMT.calls = 0
    again = displacement_forces(structures, CallCountingEMT(), cache_dir=tmp_path / "fc", progress=False)
    assert CallCountingEMT.calls == 1 and np.array_equal(again[3], expected[3])
    # Other structures → the cache is refused.
    other = [s.copy() for s in structures]
    other[0].positions[0, 0] += 0.01
    with pytest.raises(ValueError, match="different structures"):
        displacement_forces(other, calc, cache_dir=tmp_path / "fc", progress=False)
