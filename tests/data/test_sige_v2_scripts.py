"""The v2 Si–Ge scripts (examples/datasets/sige-pbe/v2/): the structures additions.py makes, and the value
order plan.py gives them. The MD of additions.py and GPAW are left out (minutes to hours)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from ase.neighborlist import neighbor_list

from mlip.testing.scripts import script_module

V2 = Path(__file__).resolve().parents[2] / "examples" / "datasets" / "sige-pbe" / "v2"


def _load(name):
    path = V2 / name
    if not path.is_file():
        pytest.skip("examples/ is not beside the tests (installed tests)")
    return script_module(path)


@pytest.fixture(scope="module")
def additions():
    with _load("additions.py") as module:
        yield module


@pytest.fixture(scope="module")
def plan():
    with _load("plan.py") as module:
        yield module


def test_transition_path_runs_from_diamond_to_beta_tin(additions):
    frames = additions.transition_path_frames()
    assert len(frames) == 2 * additions.PATH_POINTS * 2
    assert len({a.info["id"] for a in frames}) == len(frames)
    for element in ("Si", "Ge"):
        path = [a for a in frames if a.get_chemical_symbols()[0] == element and a.info["volume_scale"] == 1.0]
        start, end = path[0], path[-1]
        cell = start.cell.lengths()
        assert cell[2] / cell[0] == pytest.approx(math.sqrt(2))
        # the start is the diamond crystal: four neighbours at the bond length a·√3/4
        i, d = neighbor_list("id", start, 1.1 * additions.A_PBE[element] * math.sqrt(3) / 4)
        assert np.bincount(i).tolist() == [4] * 4
        assert d == pytest.approx(additions.A_PBE[element] * math.sqrt(3) / 4)
        assert start.get_volume() / 4 == pytest.approx(additions.A_PBE[element] ** 3 / 8)
        end_cell = end.cell.lengths()
        assert end_cell[2] / end_cell[0] == pytest.approx(additions.BETA_TIN_C_OVER_A)
        assert end.get_volume() / start.get_volume() == pytest.approx(additions.BETA_TIN_VOLUME_RATIO)
        # β-Sn: six neighbours within 10 % of the nearest (four at d1, two at ≈ 1.05 d1)
        d_end = neighbor_list("d", end, 4.0)
        assert np.count_nonzero(d_end < 1.1 * d_end.min()) == 6 * 4
    # the two volumes of a path point share a group, so a split keeps them together
    assert frames[0].info["group"] == frames[1].info["group"] != frames[2].info["group"]


def test_zincblende_cell_orders_the_sublattices_and_alloys_keep_their_composition(additions):
    rng = np.random.default_rng(0)
    cell = additions.diamond_cell(4, True, rng)
    i, j = neighbor_list("ij", cell, 2.6)
    symbols = np.array(cell.get_chemical_symbols())
    assert len(i) == 4 * 8 and (symbols[i] != symbols[j]).all()  # every bond Si–Ge
    for n_si in (0, 2, 6, 8):
        atoms = additions.diamond_cell(n_si, False, rng)
        assert atoms.get_chemical_symbols().count("Si") == n_si
        a = (n_si / 8) * additions.A_PBE["Si"] + (1 - n_si / 8) * additions.A_PBE["Ge"]
        assert atoms.cell.lengths() == pytest.approx([a] * 3)  # Vegard


def test_value_order_takes_the_additions_in_turns(plan, additions):
    from ase.build import bulk

    def frame(kind, k):
        atoms = bulk("Si", "diamond", a=5.43, cubic=True)
        atoms.info = {"config_type": kind, "id": f"{kind}-{k:05d}"}
        return atoms

    structures = [frame(kind, k) for kind in plan.WEIGHTS for k in range(5)]
    order = plan.value_order(structures, first_ids=["amorphous-00003"])
    assert order[0].info["id"] == "amorphous-00003"
    kinds = [a.info["config_type"] for a in order[1:]]
    first_round = kinds[:sum(plan.WEIGHTS.values())]
    assert first_round.count("md_crystal") == plan.WEIGHTS["md_crystal"] == 3
    assert first_round.count("transition_path") == plan.WEIGHTS["transition_path"]
    assert sorted(a.info["id"] for a in order) == sorted(a.info["id"] for a in structures)


def test_test_first_puts_unlabelled_test_structures_of_every_kind_first(plan):
    """plan.py --test-first: up to N test-split structures per kind that have no label yet, kinds in the
    plan's order, each in its order in the plan; then everything else, nothing lost or doubled."""
    from ase.build import bulk

    def frame(kind, k):
        atoms = bulk("Si", "diamond", a=5.43)
        atoms.info = {"config_type": kind, "id": f"{kind}-{k}"}
        return atoms

    order = [frame(kind, k) for k in range(4) for kind in ("vacancy", "prototype")]
    test = {"prototype-1", "prototype-2", "prototype-3", "vacancy-0", "vacancy-3"}
    first, rest = plan.test_first(order, test, 2, labelled={"prototype-1"})
    assert [a.info["id"] for a in first] == ["prototype-2", "prototype-3", "vacancy-0", "vacancy-3"]
    assert [a.info["id"] for a in first + rest][4:] == [a.info["id"] for a in order
                                                       if a.info["id"] not in {a.info["id"] for a in first}]


def test_noise_compares_v1_with_v2_and_removes_a_constant_per_element(tmp_path):
    """noise.py: one row per structure labelled in both runs (not failed); a constant per element between
    the two codes' settings is no noise (the isolated-atom references absorb it), what is left per
    structure is; forces and stress as mean absolute differences."""
    import json

    from ase.build import bulk

    from mlip.workflows.labelling import result_id

    structures, shift = [], {"Si": 0.010, "Ge": -0.004}  # eV per atom, v1 − v2
    for k, (symbols, kind) in enumerate([(["Si", "Si"], "prototype"), (["Ge", "Ge"], "prototype"),
                                         (["Si", "Ge"], "alloy"), (["Si", "Si"], "strained"),
                                         (["Ge", "Ge"], "strained")]):
        atoms = bulk("Si", "diamond", a=5.4 + 0.1 * k)
        atoms.set_chemical_symbols(symbols)
        atoms.info.update(id=f"{kind}-{k:05d}", config_type=kind)
        structures.append(atoms)
    rng = np.random.default_rng(0)
    for run in ("v1", "v2"):
        (tmp_path / run / "results").mkdir(parents=True)
    extra = {"strained-00003": 0.02}  # a structure-dependent error of 20 meV/atom in one cell
    for atoms in structures:
        key, n = result_id(atoms), len(atoms)
        forces, stress = rng.normal(size=(n, 3)), rng.normal(size=6)
        energy = -4.0 * n
        v1_energy = energy + sum(shift[s] for s in atoms.get_chemical_symbols()) + n * extra.get(
            atoms.info["id"], 0.0)
        for run, e, f in (("v2", energy, forces), ("v1", v1_energy, forces + 0.01)):
            record = {"id": key, "energy": e, "forces": f.tolist(), "stress": stress.tolist()}
            (tmp_path / run / "results" / f"{key}.json").write_text(json.dumps(record))
    failed = structures[0].copy()
    failed.info["id"] = "prototype-00099"
    (tmp_path / "v2" / "results" / f"{result_id(failed)}.json").write_text(
        json.dumps({"id": result_id(failed), "failed": "no convergence"}))
    with _load("noise.py") as noise:
        rows = noise.compare(structures + [failed], tmp_path / "v1", tmp_path / "v2")
        kinds = noise.by_kind(rows)
    assert [r["structure"] for r in rows] == [result_id(a) for a in structures]
    assert all(r["force_mae_meV_per_A"] == pytest.approx(10.0) and r["stress_mae_GPa"] == 0.0 for r in rows)
    left = {r["structure"].split(".")[0]: r["dE_structure_meV_per_atom"] for r in rows}
    # the least-squares constants take a share of the one cell's 20 meV/atom; it stands out alone
    assert max(left, key=lambda k: abs(left[k])) == "strained-00003" and abs(left["strained-00003"]) > 10
    assert set(kinds) == {"alloy", "prototype", "strained"} and kinds["strained"]["n"] == 2


def test_learn_seeds_are_small_cells_of_every_kind_and_the_path(additions):
    """learn_seeds.py: PER_KIND periodic cells of MIN_ATOMS–MAX_ATOMS atoms of each kind (slabs too), and
    the two paths' ends and middles; the same inputs give the same seeds."""
    from ase.build import bulk

    with _load("learn_seeds.py") as module:
        structures = []
        for kind in module.KINDS:
            for k, n in enumerate((4, 8, 16, 16, 32)):
                atoms = bulk("Si", "diamond", a=5.43, cubic=True).repeat((1, 1, max(1, n // 8)))[:n]
                atoms.info.update(config_type=kind, id=f"{kind}-{k:05d}", extra="dropped")
                if kind == "surface":
                    atoms.pbc = (True, True, False)
                structures.append(atoms)
        path = additions.transition_path_frames()
        first, again = module.seeds(structures, path), module.seeds(structures, path)
        assert [a.info["id"] for a in first] == [a.info["id"] for a in again]
        kinds = [a.info["config_type"] for a in first]
        assert kinds == [k for k in module.KINDS for _ in range(module.PER_KIND)] + ["transition_path"] * 6
        assert all(module.MIN_ATOMS <= len(a) <= module.MAX_ATOMS for a in first[:-6])
        assert all(set(a.info) == {"id", "config_type"} for a in first)
        ends = first[-6:]
        assert [a.get_chemical_symbols()[0] for a in ends] == ["Si"] * 3 + ["Ge"] * 3
        with pytest.raises(ValueError, match="0 liquid cells of 8-16 atoms"):
            module.seeds([a for a in structures if a.info["config_type"] != "liquid"], path)


def test_what_the_loop_labelled_joins_v2_train_only_from_gpaw_on_the_v2_rule(tmp_path):
    import json

    from ase.build import bulk
    from ase.io import write

    with _load("assemble.py") as assemble:
        run = tmp_path / "run"
        assert assemble.loop_frames(run) == []  # the loop has not run
        (run / "iter-001").mkdir(parents=True)
        (run / "iter-002").mkdir()
        frames = []
        for k in range(3):
            atoms = bulk("Si", "diamond", a=5.43 + 0.01 * k)
            atoms.info.update(id=f"explore-{k}", config_type="explore_md", REF_energy=-10.0 - k)
            frames.append(atoms)
        write(run / "iter-002" / "labelled.xyz", frames[2:])
        write(run / "iter-001" / "labelled.xyz", frames[:2])
        record = {"oracle": "gpaw", "oracle_settings": {"kpoint_density_per_inv_A": 8.0}}
        (run / "learn.json").write_text(json.dumps(record))
        assert [a.info["id"] for a in assemble.loop_frames(run)] == ["explore-0", "explore-1", "explore-2"]
        # an iteration still labelling: its labels so far, not the structures it has not labelled yet
        from mlip.workflows.labelling import label_structures, labeller

        selected = [bulk("Cu", "fcc", a=3.6 + 0.01 * k, cubic=True) for k in range(2)]
        for k, atoms in enumerate(selected):
            atoms.info.update(id=f"explore-3{k}", config_type="explore_rattled")
        (run / "iter-003").mkdir()
        write(run / "iter-003" / "selected.xyz", selected)
        label_structures(selected[1:], labeller("emt"), run / "iter-003" / "labels", progress=False)
        loop = assemble.loop_frames(run)
        assert [a.info["id"] for a in loop] == ["explore-0", "explore-1", "explore-2", "explore-31"]
        assert loop[-1].info["config_type"] == "explore_rattled" and "REF_energy" in loop[-1].info
        record["oracle_settings"] = {"kpoint_density_per_inv_A": 2.5}
        (run / "learn.json").write_text(json.dumps(record))
        with pytest.raises(SystemExit, match="not GPAW on the v2 rule"):
            assemble.loop_frames(run)


def test_spend_sums_recorded_times_once_per_calculation(tmp_path):
    """spend.py: a result's recorded seconds count once, in the stage that computed it (a label reused
    from another stage does not count again), a failed calculation records none, CPU time is summed
    where a result records it, and an unfinished calculation counts its checkpoint's seconds so far,
    apart."""
    import json

    def write(path, record):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record))

    write(tmp_path / "study/results/a.json", {"id": "a", "energy": -1.0, "wall_time_s": 3600.0})
    write(tmp_path / "study/results/b.json", {"id": "b", "energy": -1.0, "wall_time_s": 1800.0})
    write(tmp_path / "labels/results/a.json", {"id": "a", "energy": -1.0, "wall_time_s": 3600.0,
                                               "label_details": {"from": "study/results/a.json"}})
    write(tmp_path / "labels/results/c.json", {"id": "c", "failed": "no convergence"})
    write(tmp_path / "labels/results/d.json", {"id": "d", "energy": -1.0, "wall_time_s": 900.0,
                                               "cpu_time_s": 720.0})
    write(tmp_path / "labels/results/f.json", {"id": "f", "energy": -1.0, "wall_time_s": 1800.0,
                                               "cpu_time_s": 1440.0, "label_details": {"mpi_ranks": 2}})
    write(tmp_path / "labels/checkpoints/e.gpw.json", {"seconds": 7200.0, "steps": 3})
    write(tmp_path / "validation/x/results/p.json", {"id": "p", "seconds": 360.0})
    stages = {"study": ("study", None), "labels": ("labels", "labels/checkpoints"),
              "validation": ("validation/*", None)}
    with _load("spend.py") as spend:
        rows = spend.spend(tmp_path, stages)
        text = spend.table(rows)
    assert rows["study"] == {"results": 2, "hours": 1.5, "with_cpu": 0, "cpu_hours": 0, "machine_hours": 1.5,
                             "unfinished": 0, "unfinished_hours": 0}
    # d: one rank's 0.2 CPU hours, 0.1 of the 2-core machine; f: two ranks' 0.4 each, 0.4 of the machine
    assert rows["labels"] == {"results": 2, "hours": 0.75, "with_cpu": 2, "cpu_hours": pytest.approx(1.0),
                              "machine_hours": pytest.approx(0.5), "unfinished": 1, "unfinished_hours": 2.0}
    assert rows["validation"]["hours"] == pytest.approx(0.1)
    assert rows["total"] == {"results": 5, "hours": pytest.approx(2.35), "with_cpu": 2,
                             "cpu_hours": pytest.approx(1.0), "machine_hours": pytest.approx(2.1),
                             "unfinished": 1, "unfinished_hours": 2.0}
    assert "| **total** | 5 | **2.4** | 1.00 (2) | **2.1** | 1 (2.0) |" in text


def test_v1_frames_replayed_for_their_forces_only_where_v2_has_no_label():
    """assemble.forces_only: v1's periodic frames without a v2 label, energy and stress weighted 0
    (their coarse-mesh error is by cell), forces kept; molecules and relabelled structures left out."""
    from ase import Atoms
    from ase.build import bulk

    with _load("assemble.py") as assemble:
        frames = [bulk("Si", "diamond", a=5.43), bulk("Ge", "diamond", a=5.66), Atoms("Si2", [[0, 0, 0], [0, 0, 2.3]])]
        for k, atoms in enumerate(frames):
            atoms.info["id"] = f"f{k}"
        replay = assemble.forces_only(frames, relabelled={"f1"})
    assert [a.info["id"] for a in replay] == ["f0"]
    assert replay[0].info["config_energy_weight"] == replay[0].info["config_stress_weight"] == 0.0
    assert "config_forces_weight" not in replay[0].info


def test_which_weights_ships_the_last_only_when_both_periodic_errors_are_lower(tmp_path, capsys):
    with _load("which_weights.py") as module:
        best = {"energy_mae_meV_per_atom": 16.5, "forces_mae_meV_per_A": 59.0}
        assert module.choose(best, {"energy_mae_meV_per_atom": 7.9, "forces_mae_meV_per_A": 53.8}) == "last"
        # lower energies at higher forces (platonic-sige, 2026-12-07): the best epoch's
        assert module.choose(best, {"energy_mae_meV_per_atom": 7.9, "forces_mae_meV_per_A": 59.5}) == "best"
        assert module.choose(best, dict(best)) == "best"
        # a folder without both checkpoints: one line, exit status 2
        assert module.main([str(tmp_path)]) == 2
        assert "has no best.safetensors" in capsys.readouterr().err
