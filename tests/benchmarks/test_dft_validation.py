"""benchmarks/accuracy/dft_validation.py: every property's code path, the cache, the comparison and the JSON.

GPAW is too slow for a test; its path differs from the others only in the calculator the method makes
(and is smoke-run by hand, see docs/accuracy.md). Here EMT stands in for the reference on elements
it knows (Cu, Au) at tiny sizes; a method compared with itself must differ by exactly zero; a second run
must compute nothing; the entries a killed run lost must be recomputed and nothing else.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from mlip.testing.scripts import script_module

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy" / "dft_validation.py"

pytestmark = pytest.mark.skipif(not SCRIPT.is_file(),
                                reason="benchmarks/ is not beside the tests (installed tests)")

TINY = ["--elements", "Cu", "Au", "--no-progress", "--eos-volumes", "0.9", "1.1", "5",
        "--phonon-supercell", "2", "--phonon-mesh", "4", "--vacancy-supercell", "1", "--slab-layers", "4",
        "--kappa-supercell", "2", "--kappa-mesh", "5", "--relax-steps", "60"]

#: the largest force on the undisplaced phonon supercell: the v1 run computed it, the script no longer does
#: (ideal diamond has none by symmetry; dropping it changed no frequency)
RESIDUAL = "residual_force_max_eV_per_A"


@pytest.fixture(scope="module")
def dv():
    with script_module(SCRIPT) as module:
        yield module


@pytest.fixture(scope="module")
def first_run(dv, tmp_path_factory):
    out = tmp_path_factory.mktemp("dv")
    argv = ["--out", str(out), "--methods", "emt", "--model", "ase.calculators.emt:EMT", *TINY]
    return out, argv, dv.main(argv)


def _finite(value) -> bool:
    return all(math.isfinite(x) for x in np.asarray(value, dtype=float).ravel())


def test_every_property_of_every_method_is_computed_and_finite(first_run):
    out, _, report = first_run
    assert set(report["methods"]) == {"emt", "EMT"} and report["reference"] == "emt"
    for name, method in report["methods"].items():
        props = method["properties"]
        for prop in ("lattice", "phonons", "kappa"):
            assert set(props[prop]) == {"Cu", "Au"}, (name, prop)
        for prop in ("phases", "elastic", "vacancy", "surface"):
            assert set(props[prop]) == {"Cu"}, (name, prop)
        errors = {f"{p}.{e}": v["error"] for p, per in props.items() for e, v in per.items() if "error" in v}
        assert not errors, errors
        lattice = props["lattice"]["Cu"]
        assert len(lattice["volumes_A3_per_atom"]) == len(lattice["energies_eV_per_atom"]) == 5
        assert lattice["a_A"] > 0 and lattice["B_GPa"] > 0 and lattice["fit_rms_meV_per_atom"] < 5
        assert lattice["a_A"] ** 3 / 8 == pytest.approx(lattice["V0_A3_per_atom"], rel=1e-12)
        phases = props["phases"]["Cu"]
        assert set(phases["curves"]) == {"diamond", "beta_tin", "simple_hexagonal"}
        for phase in ("beta_tin", "simple_hexagonal"):
            assert _finite([phases[phase]["dE_vs_diamond_meV_per_atom"], phases[phase]["c_over_a"]])
        for key in ("C11_GPa", "C12_GPa", "C44_GPa", "C44_clamped_ion_GPa"):
            assert _finite(props["elastic"]["Cu"][key]), key
        for element in ("Cu", "Au"):
            ph = props["phonons"][element]
            assert ph["n_supercell_atoms"] == 16 and ph["n_displacements"] >= 1
            assert len(ph["segments"]) == len(ph["frequencies_THz"]) == len(ph["qpoints"])
            for q, f in zip(ph["qpoints"], ph["frequencies_THz"], strict=True):
                assert np.asarray(f).shape == (len(q), 6) and _finite(f)
            kappa = props["kappa"][element]  # diamond Cu and Au are unstable in EMT: the workflow says so
            assert kappa["computed"] and kappa["status"] and (kappa["status"] == "ok") == (
                kappa["kappa_300K_W_per_mK"] is not None)
        vacancy = props["vacancy"]["Cu"]
        assert vacancy["n_sites"] == 8
        assert vacancy["formation_energy_relaxed_eV"] <= vacancy["formation_energy_unrelaxed_eV"] + 1e-9
        surface = props["surface"]["Cu"]
        assert surface["n_atoms_2x1"] == 2 * surface["n_atoms_1x1"] == 8
        assert _finite([surface["gamma_100_unrelaxed_1x1_J_per_m2"],
                        surface["gamma_100_relaxed_2x1_J_per_m2"]])
    written = json.loads((out / "dft_validation.json").read_text())
    assert written["methods"]["emt"]["properties"]["lattice"]["Cu"]["a_A"] == report["methods"]["emt"][
        "properties"]["lattice"]["Cu"]["a_A"]
    assert (out / "dft_validation.png").stat().st_size > 0


def test_a_method_against_itself_differs_by_zero(first_run):
    """The model ``ase.calculators.emt:EMT`` is EMT itself: every difference and phonon MAE is 0 (and the
    comparison saw the scalars of every property but κ, which diamond Cu and Au, unstable in EMT, do
    not reach)."""
    _, _, report = first_run
    diff = report["differences"]["EMT"]
    assert set(diff["phonon_frequency_mae_THz"]) == {"Cu", "Au"}
    assert all(v == 0.0 for v in diff["phonon_frequency_mae_THz"].values())
    assert diff["absolute"] and all(v == 0.0 for v in diff["absolute"].values())
    groups = {key.split(".")[0] for key in diff["absolute"]}
    assert groups >= {"lattice", "phases", "elastic", "phonons", "vacancy", "surface"}


def test_a_rerun_computes_nothing_and_a_killed_run_only_what_it_lost(dv, first_run):
    """A second run reads everything from the cache. A run killed after its last evaluations is played
    by deleting their entries (the newest files): the resumed run computes exactly those again (the
    relaxations replay from the cache up to there) and gets the same numbers."""
    out, argv, report = first_run
    again = dv.main(argv)
    for name in ("emt", "EMT"):
        assert again["methods"][name]["evaluations"]["computed"] == 0
        assert again["methods"][name]["evaluations"]["cached"] > 0
    assert again["differences"] == report["differences"]
    key = report["methods"]["emt"]["key"]
    files = sorted((out / "cache" / key / "results").glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    lost = files[-5:]
    for path in lost:
        path.unlink()
    resumed = dv.main(argv)
    assert resumed["methods"]["emt"]["evaluations"]["computed"] == len(lost)
    assert all(path.is_file() for path in lost)
    before, after = (dv.scalars(r["methods"]["emt"]["properties"]) for r in (report, resumed))
    assert before.keys() == after.keys()
    for key in before:
        assert after[key] == pytest.approx(before[key], rel=1e-6, abs=1e-9), key


def test_cache_only_refuses_to_compute(dv, tmp_path):
    report = dv.main(["--out", str(tmp_path), "--methods", "emt", "--cache-only", "emt",
                      "--properties", "lattice",
                      *TINY])
    error = report["methods"]["emt"]["properties"]["lattice"]["Cu"]["error"]
    assert error.startswith("LookupError") and "--cache-only" in error
    # the error is one line, and the report names no path of this machine (the output folder is absolute)
    assert "traceback" not in report["methods"]["emt"]["properties"]["lattice"]["Cu"]
    assert str(tmp_path) not in (tmp_path / "dft_validation.json").read_text()


def test_paths_are_recorded_relative_to_the_working_folder(dv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert dv.portable(tmp_path / "run" / "kappa") == str(Path("run") / "kappa")
    assert dv.portable("run/kappa") == "run/kappa"
    assert dv.portable(dv.REPOSITORY / "benchmarks" / "x.json") == str(Path("benchmarks") / "x.json")
    assert dv.portable("/elsewhere/models/a.safetensors") == "a.safetensors"


def test_an_mlip_model_runs_through_mlip_calculator(dv, tmp_path):
    """A shipped model by name (the embedded-atom model trained on EMT, which knows Cu and Au) is compared
    with EMT: its cache is keyed by its weights, and the differences are its numbers minus EMT's."""
    report = dv.main(["--out", str(tmp_path), "--methods", "emt", "--model", "embedded-atom-emt",
                      "--properties", "lattice", "phonons", *TINY])
    method = report["methods"]["embedded-atom-emt"]
    assert method["key"].startswith("mlip-") and method["evaluations"]["computed"] > 0
    props, ref = method["properties"], report["methods"]["emt"]["properties"]
    for element in ("Cu", "Au"):
        assert "error" not in props["lattice"][element], props["lattice"][element]
        assert "error" not in props["phonons"][element], props["phonons"][element]
    diff = report["differences"]["embedded-atom-emt"]
    expected = props["lattice"]["Cu"]["a_A"] - ref["lattice"]["Cu"]["a_A"]
    assert diff["absolute"]["lattice.Cu.a_A"] == pytest.approx(expected)
    assert 0 < diff["phonon_frequency_mae_THz"]["Cu"] < 5


def test_transition_pressure_is_where_the_enthalpies_cross(dv):
    """Two Birch–Murnaghan phases, the dense one higher in energy: at the returned pressure the minimum
    over V of E + PV is the same for both (computed here on a fine grid, independently)."""
    from ase.eos import birchmurnaghan
    from ase.units import GPa

    low = {"bm_parameters": [-5.40, 0.60, 4.2, 20.4], "volumes_A3_per_atom": np.linspace(16.0, 22.0, 9)}
    high = {"bm_parameters": [-5.15, 0.70, 4.5, 15.5], "volumes_A3_per_atom": np.linspace(12.5, 17.0, 9)}
    p = dv.transition_pressure(low, high)
    assert p is not None and 1 < p < 60

    def enthalpy(fit, pressure):
        v = np.linspace(10.0, 24.0, 200001)
        return float(np.min(birchmurnaghan(v, *fit["bm_parameters"]) + pressure * GPa * v))

    assert enthalpy(low, p) == pytest.approx(enthalpy(high, p), abs=2e-4)
    assert enthalpy(low, 0.8 * p) < enthalpy(high, 0.8 * p)
    assert enthalpy(low, 1.2 * p) > enthalpy(high, 1.2 * p)
    assert dv.transition_pressure(low, {**high, "bm_parameters": [-4.0, 0.70, 4.5, 15.5]}) is None


def test_dimer_seed_of_the_100_slab(dv):
    a = 5.43
    flat = dv.slab_100("Si", a, 8, 6.0, dimers=False)
    seeded = dv.slab_100("Si", a, 8, 6.0, dimers=True)
    assert len(flat) == 8 and len(seeded) == 16
    z = seeded.positions[:, 2]
    for level in (z.max(), z.min()):
        pair = np.nonzero(np.abs(z - level) < 0.1)[0]
        assert seeded.get_distance(*pair, mic=True) == pytest.approx(a / np.sqrt(2) - 1.0, abs=1e-9)
    with pytest.raises(ValueError, match="even number of layers"):
        dv.slab_100("Si", a, 7, 6.0, dimers=True)


def test_the_surface_reports_its_dimer_buckled_or_not(dv):
    """prop_surface: the dimer of the relaxed 2×1 top layer, its length and buckling, also when buckled
    (its atoms 0.6 Å apart in height, as PBE's Si(100) dimers are)."""
    from types import SimpleNamespace

    from ase.calculators.lj import LennardJones

    a = 5.43

    def relaxed_as(buckle):
        def relax(atoms, cell, fmax):
            atoms = atoms.copy()
            z = atoms.positions[:, 2]
            atoms.positions[np.argmax(z), 2] += buckle  # one atom of the top dimer up
            return {"atoms": atoms, "energy_eV": 0.0, "converged": True, "n_steps": 0,
                    "fmax_final_eV_per_A": 0.0}
        return relax

    for buckle in (0.0, 0.6):
        ctx = SimpleNamespace(lattice={"Si": a}, calc=LennardJones(), sizes=dv.Sizes(slab_layers=8),
                              start_cells={}, relax=relaxed_as(buckle))
        out = dv.prop_surface(ctx, "Si")
        assert out["dimer_length_A"] == pytest.approx(np.hypot(a / np.sqrt(2) - 1.0, buckle), abs=1e-9)
        assert out["dimer_buckling_A"] == pytest.approx(buckle, abs=1e-9)


def test_gpaw_method_is_the_labeller_and_records_overrides(dv):
    pytest.importorskip("gpaw")
    from mlip.workflows.labelling import GPAW_PBE_SETTINGS

    reference = dv.gpaw_method({})
    assert reference.description["settings"] == GPAW_PBE_SETTINGS
    assert reference.description["reference_settings"]
    cheap = dv.gpaw_method(dv.parse_settings(["ecut_eV=200"]))
    assert cheap.description["settings"]["ecut_eV"] == 200 and not cheap.description["reference_settings"]
    assert cheap.key != reference.key
    with pytest.raises(ValueError, match="unknown gpaw setting"):
        dv.gpaw_method({"ecut": 200})
    with pytest.raises(ValueError, match="KEY=VALUE"):
        dv.parse_settings(["ecut_eV"])


def _kept_cache_without_gpaw(dv, tmp_path, monkeypatch):
    """The repository's GPAW cache copied to ``tmp_path/cache``, on a machine without GPAW (simulated:
    find_spec finds none); returns the cache-only GPAW method."""
    import importlib.util
    import shutil

    kept = SCRIPT.parents[2] / "examples" / "datasets" / "sige-pbe" / "dft-validation"
    shutil.copytree(kept / "cache", tmp_path / "cache")
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "gpaw" else real_find_spec(name, *a))
    return dv.gpaw_method({}, cache_only=True)


def test_the_repository_gpaw_cache_is_found_without_gpaw(dv, tmp_path, monkeypatch):
    """--cache-only gpaw on a machine without GPAW: the key depends on the settings alone, so the
    repository's cache folder is the method's; a changed setting is refused."""
    method = _kept_cache_without_gpaw(dv, tmp_path, monkeypatch)
    assert (tmp_path / "cache" / method.key).is_dir() and not method.mpi
    assert method.description["version"].startswith("not installed")
    with pytest.raises(SystemExit, match="unknown gpaw setting"):
        dv.gpaw_method({"ecut": 300}, cache_only=True)


def test_the_repository_gpaw_results_are_read_without_gpaw(dv, tmp_path, monkeypatch):
    """--cache-only gpaw replays every GPAW property kept in examples/datasets/sige-pbe/dft-validation
    (relaxations step by step, E(V) scans, strained cells, phonon displacements, the vacancy and the slab):
    nothing is computed, the values are those of the v1 report kept beside the cache
    (dft_validation-density-2.5.json), and Si's lattice constant and bulk modulus are PBE's.
    On another machine the replay's coordinates differ by round-off: the sign of a zero's noise, the
    last digits of a fitted lattice constant; the keys must not."""
    _kept_cache_without_gpaw(dv, tmp_path, monkeypatch)
    properties = ["lattice", "phases", "elastic", "phonons", "vacancy", "surface"]
    report = dv.main(["--out", str(tmp_path), "--methods", "gpaw", "--cache-only", "gpaw", "--elements", "Si",
                      "Ge", "--properties", *properties, "--no-progress"])
    gpaw = report["methods"]["gpaw"]
    assert gpaw["evaluations"]["computed"] == 0 and gpaw["evaluations"]["cached"] > 200
    kept = json.loads((SCRIPT.parents[2] / "examples" / "datasets" / "sige-pbe" / "dft-validation"
                       / "dft_validation-density-2.5.json").read_text())["methods"]["gpaw"]["properties"]
    replayed, recorded = dv.scalars(gpaw["properties"]), dv.scalars(kept)
    # the v1 run also computed the undisplaced phonon supercells, which the script no longer does (ideal
    # diamond has no force by symmetry): their largest force is not replayed, the frequencies are
    assert not [k for k in replayed if k.endswith(RESIDUAL)] and [k for k in recorded if k.endswith(RESIDUAL)]
    recorded = {k: v for k, v in recorded.items() if not k.endswith(RESIDUAL)}
    assert set(recorded) <= set(replayed) and len(recorded) > 10
    for key, value in recorded.items():
        assert replayed[key] == pytest.approx(value, rel=1e-6, abs=1e-5), key  # abs: Γ acoustic ≈ 0
    si = gpaw["properties"]["lattice"]["Si"]
    assert si["a_A"] == pytest.approx(dv.LITERATURE["lattice_constant_A"]["Si"], rel=0.005)  # PBE's
    assert 80 < si["B_GPa"] < 100


def test_a_fitted_value_is_pinned_against_round_off_but_not_against_a_change(dv, tmp_path):
    """CachedCalculator.pinned: a value within 1e-6 (relative) of the stored one returns the stored one
    (bit for bit, so structures built from it keep their keys); a real change replaces it; cache-only
    stores nothing."""
    calc = dv.CachedCalculator(dv.emt_method(), tmp_path / "cache", dv.Ranks(mpi=False))
    a = 5.4767916321678
    assert calc.pinned("a.Si", a) == a
    assert calc.pinned("a.Si", a * (1 + 3e-10)) == a
    assert calc.pinned("a.Si", a * 1.001) == a * 1.001
    assert calc.pinned("a.Si", a * 1.001 + 1e-12) == a * 1.001
    reader = dv.CachedCalculator(dv.emt_method(), tmp_path / "other", dv.Ranks(mpi=False), cache_only=True)
    assert reader.pinned("a.Ge", 5.78) == 5.78 and not (tmp_path / "other" / "pinned.json").exists()


def _emt_with_mesh(dv, density: float, key: str):
    """EMT standing in for GPAW at a k-point density: the same energies, but a mesh per structure (by the
    dataset's rule) that is part of the cache key and of the stage accounts, and settings to report."""
    from ase.calculators.emt import EMT

    from mlip.workflows.kpoints import kpoint_mesh

    settings = {"kpoint_density_per_inv_A": density}
    return dv.Method("gpaw", key, lambda atoms: EMT(), {"version": "emt", "settings": settings,
                                                        "overrides": settings},
                     mesh=lambda atoms: kpoint_mesh(atoms, density))


def test_each_property_states_its_meshes_and_cost(dv, tmp_path):
    """The report gives, per property and element, the k-point meshes its structures were computed on
    (one per E–V scan or strained set), the number of evaluations and their recorded wall time, whether
    computed now or read from the cache (the cost of the numbers, which a rerun does not change)."""
    from mlip.workflows.kpoints import kpoint_mesh

    method = _emt_with_mesh(dv, 2.5, "mesh-2.5")
    sizes = dv.Sizes(eos_volumes=[0.9, 1.1, 5], relax_steps=60)
    args = (["Cu"], ["lattice", "elastic"], sizes, tmp_path, dv.Ranks(mpi=False), False, False,
            lambda line: None)
    first = dv.run_method(method, *args)
    again = dv.run_method(method, *args)
    assert again["evaluations"]["computed"] == 0
    for report in (first, again):
        lattice, elastic = report["stages"]["lattice"]["Cu"], report["stages"]["elastic"]["Cu"]
        smallest = dv.scaled(dv.diamond("Cu", report["lattice_constants_A"]["Cu"]), 0.9)
        assert kpoint_mesh(smallest, 2.5) in [tuple(m) for m in lattice["kpoint_meshes"]]
        assert len(elastic["kpoint_meshes"]) == 1  # the strained cells share one mesh
        assert lattice["evaluations"] >= 5 and elastic["evaluations"] >= 4
        assert lattice["label_wall_time_s"] > 0
    assert first["stages"] == again["stages"]
    emt = dv.run_method(dv.emt_method(), *args)
    assert emt["stages"]["lattice"]["Cu"]["kpoint_meshes"] == []


def test_settings_per_property_each_property_from_its_own_run(dv, tmp_path):
    """run_by_property: each group of (property, element) pairs is a run at its own settings (its own cache
    folder and lattice constant); the report takes each number from its group and says which settings
    gave it. Here Au's phonons are set apart from Cu's."""
    sizes = dv.Sizes(eos_volumes=[0.9, 1.1, 5], relax_steps=60, phonon_supercell=2, phonon_mesh=4)
    coarse, dense = _emt_with_mesh(dv, 1.0, "mesh-1.0"), _emt_with_mesh(dv, 3.0, "mesh-3.0")
    ranks = dv.Ranks(mpi=False)
    groups = [(dense, [("lattice", "Cu"), ("lattice", "Au"), ("phases", "Cu"), ("phonons", "Au")]),
              (coarse, [("phonons", "Cu"), ("vacancy", "Cu")])]
    quiet = (sizes, tmp_path, ranks, False, False, lambda line: None)
    merged = dv.run_by_property(groups, ["Cu", "Au"], ["lattice", "phases", "phonons", "vacancy"], *quiet)
    alone = {m.key: dv.run_method(m, ["Cu", "Au"], list(dict.fromkeys(p for p, _ in pairs)), *quiet,
                                  only=pairs) for m, pairs in groups}
    assert list(merged["properties"]) == ["lattice", "phases", "phonons", "vacancy"]
    assert list(merged["properties"]["phonons"]) == ["Cu", "Au"]
    for method, pairs in groups:
        for prop, element in pairs:
            mine, theirs = ({prop: {element: r["properties"][prop][element]}}
                            for r in (merged, alone[method.key]))
            assert dv.scalars(mine) == dv.scalars(theirs) and dv.scalars(mine)
            assert merged["stages"][prop][element] == alone[method.key]["stages"][prop][element]
            assert merged["settings_by_property"][prop][element]["key"] == method.key
    assert "Cu" not in alone[dense.key]["properties"]["phonons"]  # only the pairs of the group
    cu_coarse = merged["settings_by_property"]["phonons"]["Cu"]
    assert cu_coarse["settings"]["kpoint_density_per_inv_A"] == 1.0
    assert cu_coarse["lattice_constant_A"] == alone[coarse.key]["lattice_constants_A"]["Cu"]
    assert (tmp_path / "cache" / "mesh-1.0").is_dir() and (tmp_path / "cache" / "mesh-3.0").is_dir()
    assert merged["evaluations"]["computed"] > 0
    assert all(r["evaluations"]["computed"] == 0 for r in alone.values())  # what the merged run stored
    assert not merged["reference_settings"]


def test_a_property_relaxed_at_one_setting_takes_its_energies_at_another(dv, tmp_path):
    """energy_methods (--converged's vacancy): the structures are relaxed with the group's method, and the
    formation energies are the other method's energies of the same three structures (the perfect cell, the
    unrelaxed and the relaxed vacancy), which it alone computes; the report keeps the first method's numbers
    and says which settings and meshes gave the energies. A Lennard-Jones "dense mesh" stands in so that
    the two methods' numbers differ."""
    from ase.calculators.lj import LennardJones

    from mlip.workflows.kpoints import kpoint_mesh

    sizes = dv.Sizes(eos_volumes=[0.9, 1.1, 5], relax_steps=60, vacancy_supercell=1)
    coarse = _emt_with_mesh(dv, 1.0, "mesh-1.0")
    dense = dv.Method("gpaw", "lj-3.0", lambda atoms: LennardJones(sigma=2.3, epsilon=0.4, rc=6.0),
                      {"overrides": {"kpoint_density_per_inv_A": 3.0}}, mesh=lambda atoms: kpoint_mesh(atoms, 3.0))
    args = (["Cu"], ["lattice", "vacancy"], sizes, tmp_path, dv.Ranks(mpi=False), False, False, lambda line: None)
    alone = dv.run_method(coarse, *args)["properties"]["vacancy"]["Cu"]
    both = dv.run_method(coarse, *args, energy_methods={"vacancy": dense})
    vacancy = both["properties"]["vacancy"]["Cu"]
    names = ("formation_energy_unrelaxed_eV", "formation_energy_relaxed_eV")
    assert vacancy["energies_at"]["at_the_relaxation_settings"] == {k: alone[k] for k in names}
    assert vacancy["relaxation"] == alone["relaxation"]
    stored = [json.loads(path.read_text()) for path in (tmp_path / "cache" / "lj-3.0").rglob("*.json")]
    assert len(stored) == 3  # the three single points, no relaxation step
    perfect = dv.diamond("Cu", both["lattice_constants_A"]["Cu"], cubic=True)
    unrelaxed = perfect.copy()
    del unrelaxed[0]
    e_perfect, e_unrelaxed = (dv.energy_of(s, dense.make(s)) for s in (perfect, unrelaxed))
    reference = (len(perfect) - 1) / len(perfect) * e_perfect
    assert vacancy["formation_energy_unrelaxed_eV"] == pytest.approx(e_unrelaxed - reference, abs=1e-9)
    e_relaxed = [r["energy"] for r in stored if not math.isclose(r["energy"], e_perfect)
                 and not math.isclose(r["energy"], e_unrelaxed)]
    assert vacancy["formation_energy_relaxed_eV"] == pytest.approx(e_relaxed[0] - reference, abs=1e-9)
    for name in names:
        assert not math.isclose(vacancy[name], alone[name], rel_tol=1e-3)
    assert vacancy["energies_at"]["key"] == "lj-3.0" and vacancy["energies_at"]["evaluations"] == 3
    assert vacancy["energies_at"]["overrides"] == {"kpoint_density_per_inv_A": 3.0}
    assert vacancy["energies_at"]["kpoint_meshes"] and both["evaluations"]["computed"] >= 3


def test_property_settings_are_parsed_and_group_the_gpaw_methods(dv):
    pytest.importorskip("gpaw")
    per = dv.parse_property_settings(["phases:kpoint_density_per_inv_A=8", "phases:ecut_eV=500",
                                      "phonons.Ge:kpoint_density_per_inv_A=8"],
                                     {"lattice": {"kpoint_density_per_inv_A": 8.0}})
    assert per == {"lattice": {"kpoint_density_per_inv_A": 8.0},
                   "phases": {"kpoint_density_per_inv_A": 8, "ecut_eV": 500},
                   "phonons.Ge": {"kpoint_density_per_inv_A": 8}}
    groups = dv.gpaw_groups({}, {"lattice": {"kpoint_density_per_inv_A": 8.0},
                                 "elastic": {"kpoint_density_per_inv_A": 8.0},
                                 "phonons.Ge": {"kpoint_density_per_inv_A": 8.0}},
                            ["lattice", "phonons", "elastic", "vacancy"], ["Si", "Ge"], cache_only=False)
    assert [pairs for _, pairs in groups] == [
        [("lattice", "Si"), ("lattice", "Ge"), ("phonons", "Ge"), ("elastic", "Si")],
        [("phonons", "Si"), ("vacancy", "Si")]]
    assert groups[1][0].key == dv.gpaw_method({}).key
    for bad in ("phase:ecut_eV=500", "ecut_eV=500", "lattice:ecut_eV", "phonons.Ge.x:ecut_eV=1"):
        with pytest.raises(ValueError, match="KEY=VALUE"):
            dv.parse_property_settings([bad], {})


def test_a_relaxation_started_at_an_earlier_reports_cells_is_short(dv, first_run, tmp_path):
    """--start-from: each zero-pressure relaxation begins at the earlier report's relaxed cell, so it
    ends within a step or two at the same minimum, and the E–V fit agrees."""
    _, _, report = first_run
    path = tmp_path / "earlier.json"
    path.write_text(json.dumps(report, default=lambda x: np.asarray(x).tolist()))
    cells = dv.start_cells(path, method="emt")
    assert set(cells) == {("diamond", "Cu"), ("diamond", "Au"), ("beta_tin", "Cu"),
                          ("simple_hexagonal", "Cu"), ("surface", "Cu")}
    method = dv.emt_method()
    sizes = dv.Sizes(eos_volumes=[0.9, 1.1, 5], relax_steps=60)
    calc = dv.CachedCalculator(method, tmp_path / "cache" / method.key, dv.Ranks(mpi=False))
    ctx = dv.Context(method, calc, sizes, tmp_path, False, cells)
    earlier = report["methods"]["emt"]["properties"]["phases"]["Cu"]["beta_tin"]
    again = dv.equation_of_state(ctx, "beta_tin", "Cu")
    assert again["relaxation"]["n_steps"] <= 2 < earlier["relaxation"]["n_steps"]
    assert again["c_over_a"] == pytest.approx(earlier["c_over_a"], rel=1e-3)
    assert again["B_GPa"] == pytest.approx(earlier["B_GPa"], rel=1e-3)
    # the surface relaxation starts at the earlier report's relaxed 2×1 slab (on this run's lattice
    # constant, here the same); EMT's diamond-Cu slab does not converge, so the start is checked itself
    ctx.sizes = dv.Sizes(relax_steps=60, slab_layers=4)  # the first run's (TINY)
    ctx.lattice["Cu"] = report["methods"]["emt"]["properties"]["lattice"]["Cu"]["a_A"]
    earlier = report["methods"]["emt"]["properties"]["surface"]["Cu"]
    starts = []

    def relax(atoms, cell, fmax):
        starts.append(atoms.copy())
        return {"atoms": atoms, "energy_eV": 0.0, "converged": True, "n_steps": 0, "fmax_final_eV_per_A": 0.0}

    ctx.relax = relax
    dv.prop_surface(ctx, "Cu")
    assert np.allclose(starts[0].positions, earlier["positions_relaxed_A"])
    assert np.allclose(starts[0].cell, earlier["cell_relaxed_A"])
    with pytest.raises(ValueError, match="no method 'gpaw'"):
        dv.start_cells(path)


def test_a_relaxed_slab_moves_to_another_lattice_constant_about_its_middle(dv):
    """slab_from: an earlier report's relaxed slab, on a lattice 1 % larger, keeps its fractional in-plane
    positions and its shape across the slab scaled by 1.01 about the middle, in the new vacuum."""
    earlier = dv.slab_100("Si", 5.40, 8, 6.0, dimers=True)
    earlier.positions[0] += [0.05, -0.02, 0.1]  # "relaxed"
    start = {"cell_relaxed_A": earlier.cell.array.tolist(), "positions_relaxed_A": earlier.positions.tolist()}
    seeded = dv.slab_100("Si", 5.454, 8, 6.0, dimers=True)
    moved = dv.slab_from(start, seeded)
    assert np.allclose(moved.cell, seeded.cell)
    assert np.allclose(moved.get_scaled_positions()[:, :2], earlier.get_scaled_positions()[:, :2])
    z0, z1 = earlier.positions[:, 2], moved.positions[:, 2]
    assert np.allclose(z1 - z1.mean(), 1.01 * (z0 - z0.mean()))
    assert z1.mean() == pytest.approx(seeded.positions[:, 2].mean())
    assert np.allclose(dv.slab_from(start, earlier).positions, earlier.positions)  # the same lattice: as it was
    with pytest.raises(ValueError, match="not a 16-atom orthogonal slab"):
        dv.slab_from({**start, "positions_relaxed_A": earlier.positions[:8].tolist()}, seeded)


def test_the_converged_reference_is_read_without_gpaw(dv, tmp_path, monkeypatch):
    """--cache-only gpaw --converged on the repository cache: the lattice stage comes from the density-8
    run (its meshes are density 8's, its numbers differ from v1's), Si's phonons, left at the dataset's
    settings, are v1's exactly, nothing is computed, and the report says which settings gave what."""
    from mlip.workflows.kpoints import kpoint_mesh

    _kept_cache_without_gpaw(dv, tmp_path, monkeypatch)
    report = dv.main(["--out", str(tmp_path), "--methods", "gpaw", "--cache-only", "gpaw", "--converged",
                      "--elements", "Si", "Ge", "--properties", "lattice", "phonons", "--no-progress"])
    gpaw = report["methods"]["gpaw"]
    assert gpaw["evaluations"]["computed"] == 0
    kept = json.loads((SCRIPT.parents[2] / dv.CONVERGED_START_FROM).read_text())["methods"]["gpaw"]
    for element in ("Si", "Ge"):
        lattice = gpaw["properties"]["lattice"][element]
        assert "error" not in lattice
        settings = gpaw["settings_by_property"]["lattice"][element]
        assert settings["overrides"] == {"kpoint_density_per_inv_A": 8.0}
        densest = dv.scaled(dv.diamond(element, lattice["a_A"]), 0.84)
        meshes = gpaw["stages"]["lattice"][element]["kpoint_meshes"]
        assert kpoint_mesh(densest, 8.0) in [tuple(m) for m in meshes]
        assert lattice["a_A"] != kept["properties"]["lattice"][element]["a_A"]
    si = gpaw["settings_by_property"]["phonons"]["Si"]
    assert si["overrides"] == {} and si["lattice_constant_A"] == pytest.approx(
        kept["properties"]["lattice"]["Si"]["a_A"], rel=1e-9)
    assert gpaw["settings_by_property"]["phonons"]["Ge"]["overrides"] == {"kpoint_density_per_inv_A": 8.0}
    mine, theirs = ({k: v for k, v in dv.scalars({"phonons": {"Si": r["properties"]["phonons"]["Si"]}}).items()
                     if not k.endswith(RESIDUAL)} for r in (gpaw, kept))
    assert mine == pytest.approx(theirs, rel=1e-6, abs=1e-5) and mine
    stage, v1_stage = gpaw["stages"]["phonons"]["Si"], kept["stages"]["phonons"]["Si"]
    assert stage["kpoint_meshes"] == v1_stage["kpoint_meshes"]
    # v1 computed the undisplaced supercell too (RESIDUAL): one evaluation more
    assert stage["evaluations"] == v1_stage["evaluations"] - 1 == 1
    assert 0 < stage["label_wall_time_s"] < v1_stage["label_wall_time_s"]


def test_the_converged_vacancy_is_relaxed_on_the_dataset_mesh_and_evaluated_on_density_8(dv, tmp_path,
                                                                                        monkeypatch):
    """--converged's vacancy (CONVERGED_ENERGY_SETTINGS), read from the repository cache without GPAW:
    the relaxation is the density-2.5 report's, step for step, and the formation energies are the
    density-8 mesh's (5³ on the 64-site cell) single points of the same three structures, which
    kpoint_checks.py computed: the report keeps the density-2.5 numbers beside them."""
    _kept_cache_without_gpaw(dv, tmp_path, monkeypatch)
    report = dv.main(["--out", str(tmp_path), "--methods", "gpaw", "--cache-only", "gpaw", "--converged",
                      "--elements", "Si", "--properties", "lattice", "vacancy", "--no-progress"])
    gpaw = report["methods"]["gpaw"]
    vacancy = gpaw["properties"]["vacancy"]["Si"]
    kept = json.loads((SCRIPT.parents[2] / dv.CONVERGED_START_FROM).read_text())["methods"]["gpaw"]
    v1 = kept["properties"]["vacancy"]["Si"]
    assert vacancy["relaxation"] == v1["relaxation"]
    names = ("formation_energy_unrelaxed_eV", "formation_energy_relaxed_eV")
    assert vacancy["energies_at"]["at_the_relaxation_settings"] == pytest.approx({k: v1[k] for k in names})
    assert vacancy["energies_at"]["kpoint_meshes"] == [[5, 5, 5]]
    assert vacancy["energies_at"]["overrides"] == {"kpoint_density_per_inv_A": 8.0}
    checks = SCRIPT.parents[2] / "examples/datasets/sige-pbe/dft-validation/kpoint-checks/kpoint_checks.json"
    dense = json.loads(checks.read_text())["vacancy"]["dense"]
    assert {k: vacancy[k] for k in names} == pytest.approx({k: dense[k] for k in names}, abs=1e-9)
    assert vacancy["formation_energy_relaxed_eV"] - v1["formation_energy_relaxed_eV"] > 0.1
    assert gpaw["evaluations"]["computed"] == 0


def test_the_converged_summary_keeps_the_runs_numbers_and_puts_a_checks_beside(tmp_path):
    """kpoint_checks.py --summarize: where the converged run computed a property, its number is the row;
    the earlier check of the same property (made to decide the mesh) is kept beside it under "check."."""
    script = SCRIPT.parents[2] / "examples" / "datasets" / "sige-pbe" / "dft-validation" / "kpoint_checks.py"

    def report(key, c11, mesh, overrides=None):
        method = {"key": key, "properties": {"elastic": {"Si": {"C11_GPa": c11}}},
                  "stages": {"elastic": {"Si": {"kpoint_meshes": [mesh]}}}}
        if overrides:
            method["settings_by_property"] = {"elastic": {"Si": {"overrides": overrides}}}
        path = tmp_path / f"{key}.json"
        path.write_text(json.dumps({"methods": {"gpaw": method}}))
        return path

    coarse = report("coarse", 150.0, [5, 5, 5])
    dense = report("dense", 152.0, [16, 16, 16], {"kpoint_density_per_inv_A": 8.0})
    checks = tmp_path / "checks.json"
    checks.write_text(json.dumps({"elastic": {"v1": {"C11_GPa": 150.0, "mesh": [5, 5, 5]},
                                              "dense": {"C11_GPa": 159.0, "mesh": [16, 16, 16]}}}))
    with script_module(script) as module:
        rows = module.summarize(coarse, dense, checks, [])["rows"]
    assert rows["elastic.Si.C11_GPa"]["converged"] == 152.0 and not rows["elastic.Si.C11_GPa"]["exceeds_tolerance"]
    assert rows["check.elastic.Si.C11_GPa"]["converged"] == 159.0
    assert rows["check.elastic.Si.C11_GPa"]["exceeds_tolerance"]  # +6 % against the 5 % tolerance
