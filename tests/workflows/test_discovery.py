"""Matbench Discovery pipeline: the miniature EMT benchmark end to end, resume, shards, failures,
input formats, formation energies and metrics."""

import gzip
import itertools
import json
import math
import os

import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk
from ase.calculators.emt import EMT

pd = pytest.importorskip("pandas")
pytest.importorskip("pymatgen")
pytest.importorskip("matbench_discovery")

import mlip  # noqa: E402
from mlip.cli import main  # noqa: E402
from mlip.workflows.discovery.emt_benchmark import generate_emt_benchmark  # noqa: E402
from mlip.workflows.discovery.formation import formation_energies  # noqa: E402
from mlip.workflows.discovery.inputs import (  # noqa: E402
    _structure_dict_without_pymatgen,
    atoms_from_structure_dict,
    read_reference_table,
    read_structures,
    structure_dict,
)
from mlip.workflows.discovery.join import DISCOVERY_COLUMNS, GEO_OPT_KEYS, join_discovery  # noqa: E402
from mlip.workflows.discovery.metrics import (  # noqa: E402
    classification_metrics,
    combined_performance_score,
    discovery_metrics,
    guarded_stable_metrics,
    hull_distances,
)
from mlip.workflows.discovery.relax_campaign import run_discovery_relax  # noqa: E402

EMT_SPEC = "ase.calculators.emt:EMT"
DATE = "2025-01-01"
#: the submission file keeps 4 decimals of e_form: a perfect model is off by at most half a unit
ROUNDING = 5e-5


class CountingEMT(EMT):
    """EMT that records the formula of every structure it computes; optionally interrupts (as a
    kill would) when it first sees the formula ``stop_at``."""

    def __init__(self, stop_at=None, **kwargs):
        super().__init__(**kwargs)
        self.seen = []
        self.stop_at = stop_at

    def calculate(self, atoms=None, properties=("energy",), system_changes=()):
        formula = atoms.get_chemical_formula()
        if formula == self.stop_at:
            raise KeyboardInterrupt("simulated kill")
        self.seen.append(formula)
        super().calculate(atoms, properties, system_changes)


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """A tiny miniature benchmark (seed 0, 6 candidates: 1 stable, 5 unstable; ~10 s)."""
    out = tmp_path_factory.mktemp("bench")
    manifest = generate_emt_benchmark(out, seed=0, n_candidates=6, progress=False)
    return out, manifest


def small_materials():
    """Four small rattled crystals with distinct formulas (fast to relax)."""
    out = []
    for k, (sym, a) in enumerate([("Cu", 3.6), ("Au", 4.07), ("Ni", 3.52), ("Pt", 3.92)]):
        atoms = bulk(sym, "fcc", a=a, cubic=True)
        if k % 2:
            atoms = atoms.repeat((2, 1, 1))
            atoms[0].symbol = "Al"
        atoms.rattle(0.03, seed=k)
        atoms.info["material_id"] = f"m-{k}"
        out.append(atoms)
    return out


@pytest.fixture
def extxyz(tmp_path):
    import ase.io

    path = tmp_path / "initial.extxyz"
    ase.io.write(path, small_materials())
    return path


def write_refs(path):
    """Elemental references from relaxed fcc cells (eV/atom)."""
    from mlip.workflows.relax import relax

    refs = {}
    for sym in ("Cu", "Au", "Ni", "Pt", "Al"):
        res = relax(bulk(sym, "fcc", a=4.0, cubic=True), EMT(), fmax=1e-3, progress=False)
        refs[sym] = res.energy / 4
    path.write_text(json.dumps(refs))
    return path


# --------------------------------------------------------------------------- the miniature benchmark
def test_emt_benchmark_files_and_hull(bench):
    out, manifest = bench
    assert manifest["n_candidates"] == 6 and 1 <= manifest["n_stable"] < 6
    summary = pd.read_csv(out / "summary.csv.gz")
    assert list(summary.columns) == ["material_id", "formula", "n_sites", "prototype", "energy", "e_form_per_atom",
                                     "e_above_hull"]
    # Every candidate lies at least the margin away from the hull, so rounding cannot flip it.
    assert (summary.e_above_hull.abs() >= 1e-3).all()
    init = pd.read_json(out / "initial-structures.json.gz")
    assert list(init.columns) == ["material_id", "initial_structure"]
    assert list(init.material_id) == list(summary.material_id)
    refs = json.loads((out / "elemental-references.json").read_text())
    assert set(refs) == {"Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt"}
    # Formation energies from the stored energies and references (eV/atom).
    for row in summary.itertuples():
        from pymatgen.core import Composition

        comp = Composition(row.formula)
        e_form = (row.energy - sum(n * refs[str(el)] for el, n in comp.items())) / comp.num_atoms
        assert row.e_form_per_atom == pytest.approx(e_form, abs=2e-8)  # 8 decimals in the file
    # Hull distances of binary candidates against an independent lower convex envelope of the
    # known entries of their binary (elements at 0, L1₂ compounds at x = 1/4 and 3/4).
    hull = pd.read_json(out / "hull-entries.json.gz")
    from pymatgen.core import Composition

    checked = 0
    for row in summary.itertuples():
        comp = Composition(row.formula)
        if len(comp) != 2:
            continue
        a, b = sorted(str(el) for el in comp)
        x = comp.get_atomic_fraction(b)
        points = [(0.0, 0.0), (1.0, 0.0)]
        for h in hull.itertuples():
            hc = Composition(h.formula)
            if len(hc) == 2 and {str(el) for el in hc} == {a, b}:
                points.append((hc.get_atomic_fraction(b), h.e_form_per_atom))
        envelope = min(p[1] + (q[1] - p[1]) * (x - p[0]) / (q[0] - p[0])
                       for p, q in itertools.permutations(points, 2) if p[0] <= x <= q[0] and q[0] > p[0])
        assert row.e_above_hull == pytest.approx(row.e_form_per_atom - envelope, abs=2e-8)
        checked += 1
    assert checked >= 1


def test_emt_end_to_end_perfect_metrics_and_file_formats(bench, tmp_path, capsys):
    out, manifest = bench
    run, sub = tmp_path / "run", tmp_path / "sub"
    assert main(["discovery", "relax", str(out / "initial-structures.json.gz"), "--model", EMT_SPEC,
                 "--out-dir", str(run), "--no-progress"]) == 0
    assert main(["discovery", "join", str(run), "--elemental-refs", str(out / "elemental-references.json"),
                 "--out-dir", str(sub), "--date", DATE]) == 0
    csv_path, jsonl_path = sub / f"{DATE}-discovery.csv.gz", sub / f"{DATE}-geo-opt.jsonl.gz"
    assert main(["discovery", "metrics", str(csv_path), "--reference", str(out / "summary.csv.gz"),
                 "--geo-opt", str(jsonl_path), "--reference-structures", str(out / "relaxed-structures.json.gz"),
                 "--kappa-srme", "0.2", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "F1" in text and "CPS" in text

    # The submission files: exactly the benchmark's columns and keys.
    df = pd.read_csv(csv_path)
    assert list(df.columns) == list(DISCOVERY_COLUMNS)
    summary = pd.read_csv(out / "summary.csv.gz").set_index("material_id")
    assert sorted(df.material_id) == sorted(summary.index)
    raw = gzip.decompress(csv_path.read_bytes()).decode().splitlines()[1:]
    assert all(len(line.split(",")[1].split(".")[1]) == 4 for line in raw)  # 4 decimals
    err = (df.set_index("material_id").e_form_per_atom - summary.e_form_per_atom).abs()
    assert err.max() <= ROUNDING + 1e-12
    lines = [json.loads(line) for line in gzip.decompress(jsonl_path.read_bytes()).decode().splitlines()]
    assert len(lines) == len(summary)
    from pymatgen.core import Structure

    ref_structs = {m.material_id: m.atoms for m in read_structures(out / "relaxed-structures.json.gz")}
    for line in lines:
        assert list(line) == list(GEO_OPT_KEYS)
        assert line["converged"] is True and isinstance(line["n_steps"], int)
        s = Structure.from_dict(line["structure"])
        assert np.allclose(s.lattice.matrix, ref_structs[line["material_id"]].cell.array, atol=1e-8)
    import yaml

    model = yaml.safe_load((sub / f"{DATE}-model.yml").read_text())
    for key in ("model_name", "model_key", "model_version", "date_added", "authors", "requirements", "openness",
                "trained_for_benchmark", "train_task", "test_task", "targets", "model_params", "training_set",
                "hyperparams", "metrics"):
        assert key in model
    assert model["hyperparams"]["evaluation"] == {"max_force": 0.02, "max_steps": 500, "ase_optimizer": "FIRE",
                                                  "cell_filter": "FrechetCellFilter", "dtype": "float64",
                                                  "kappa": {"displacement_distance": None}}
    assert model["metrics"]["discovery"]["pred_file"] == csv_path.name

    # EMT as the model follows the reference relaxations exactly: perfect classification, errors
    # only from the 4-decimal rounding, structures identical.
    metrics = json.loads((sub / "metrics.json").read_text())
    full = metrics["full_test_set"]
    assert full["F1"] == 1.0 and full["Accuracy"] == 1.0 and full["FP"] == 0 and full["FN"] == 0
    assert full["TP"] == manifest["n_stable"]
    assert full["DAF"] == pytest.approx(1 / manifest["prevalence"], rel=1e-12)
    assert full["MAE"] <= ROUNDING and full["RMSE"] <= ROUNDING
    assert metrics["rmsd"] < 1e-6 and metrics["n_rmsd"] == len(summary)
    # CPS = 0.5·1 + 0.4·(1 − 0.1) + 0.1·1 with RMSD ≈ 0
    assert metrics["cps"] == pytest.approx(0.96, abs=1e-6)
    assert (sub / "hull-distance-parity.png").stat().st_size > 10_000


# ------------------------------------------------------------------------- resume and shards
def test_kill_and_rerun_loses_nothing_and_redoes_nothing(extxyz, tmp_path):
    run = tmp_path / "run"
    formulas = [a.get_chemical_formula() for a in small_materials()]
    killer = CountingEMT(stop_at=formulas[2])
    with pytest.raises(KeyboardInterrupt):
        run_discovery_relax(extxyz, killer, run, fmax=0.05, progress=False)
    done = sorted((run / "results").glob("*.json"))
    assert [p.stem for p in done] == ["m-0", "m-1"]  # the two finished before the kill
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in done}

    counting = CountingEMT()
    counts = run_discovery_relax(extxyz, counting, run, fmax=0.05, progress=False)
    assert counts["skipped"] == 2 and counts["computed"] == 2 and counts["n_done"] == 4
    assert set(counting.seen) == set(formulas[2:])  # nothing finished was computed again
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in done} == before
    again = CountingEMT()
    assert run_discovery_relax(extxyz, again, run, fmax=0.05, progress=False)["computed"] == 0
    assert again.seen == []

    # The resumed campaign equals an uninterrupted one.
    clean = tmp_path / "clean"
    run_discovery_relax(extxyz, EMT(), clean, fmax=0.05, progress=False)
    for k in range(4):
        a = json.loads((run / "results" / f"m-{k}.json").read_text())
        b = json.loads((clean / "results" / f"m-{k}.json").read_text())
        assert a["energy"] == b["energy"] and a["structure"] == b["structure"]

    # Another model or other settings in the same folder are refused.
    with pytest.raises(ValueError, match="another settings;"):
        run_discovery_relax(extxyz, CountingEMT(), run, fmax=0.02, progress=False)
    with pytest.raises(ValueError, match="another model;"):
        run_discovery_relax(extxyz, EMT(), run, fmax=0.05, progress=False)


def test_fix_symmetry_keeps_a_rocksalt_saddle_that_the_platonic_model_leaves(tmp_path):
    """Rocksalt AlPt (a miniature-discovery candidate, emt-0003) is a saddle point that only exact
    symmetry holds. The shipped Platonic model is not exactly symmetric: relaxed as the benchmark does,
    it leaves Fm-3m (before its repulsive-core stages for a structure 0.56 eV/atom lower; now for one
    barely below the saddle); with fix_symmetry the campaign keeps Fm-3m, says so in its settings, and
    refuses to be mixed with an unconstrained campaign in the same folder."""
    import ase.io
    spglib = pytest.importorskip("spglib")

    path = tmp_path / "b1.extxyz"
    ase.io.write(path, [bulk("AlPt", "rocksalt", a=4.96, cubic=True)])
    calc = mlip.load_calculator("platonic-emt", dtype="float64")
    results = {}
    for fix in (False, True):
        run = tmp_path / f"run-{fix}"
        run_discovery_relax(path, calc, run, progress=False, fix_symmetry=fix)
        (record,) = [json.loads(f.read_text()) for f in (run / "results").glob("*.json")]
        st = record["structure"]
        cell = (st["cell_A"], np.linalg.solve(np.array(st["cell_A"]).T, np.array(st["positions_A"]).T).T,
                [1 if sym == "Al" else 2 for sym in st["symbols"]])
        results[fix] = (record["energy"] / record["n_atoms"], spglib.get_spacegroup(cell, symprec=1e-3))
        assert json.loads((run / "campaign.json").read_text())["settings"].get("fix_symmetry", False) is fix
    assert results[True][1] == "Fm-3m (225)" and results[False][1] != "Fm-3m (225)", results
    assert results[True][0] >= results[False][0], results  # the saddle lies above where it relaxes to
    with pytest.raises(ValueError, match="another settings;"):
        run_discovery_relax(path, calc, tmp_path / "run-True", progress=False, fix_symmetry=False)


def test_two_shards_merged_equal_one_process(extxyz, tmp_path, monkeypatch):
    refs = write_refs(tmp_path / "refs.json")
    one = tmp_path / "one"
    run_discovery_relax(extxyz, EMT_SPEC, one, fmax=0.05, progress=False)
    # Two shards in their own folders, from Slurm array variables.
    shard_dirs = []
    assigned = []
    for k in range(2):
        monkeypatch.setenv("SLURM_ARRAY_TASK_ID", str(k + 3))
        monkeypatch.setenv("SLURM_ARRAY_TASK_MIN", "3")
        monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "2")
        d = tmp_path / f"shard{k}"
        counts = run_discovery_relax(extxyz, EMT_SPEC, d, fmax=0.05, progress=False)
        assert (counts["shard"], counts["n_shards"]) == (k, 2)
        assigned.append(sorted(p.stem for p in (d / "results").glob("*.json")))
        shard_dirs.append(d)
    for var in ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_COUNT"):
        monkeypatch.delenv(var)
    # Balanced by atom count: 4 + 8 + 4 + 8 atoms → 12 each.
    n_atoms = {f"m-{k}": len(a) for k, a in enumerate(small_materials())}
    assert [sum(n_atoms[i] for i in ids) for ids in assigned] == [12, 12]
    assert sorted(assigned[0] + assigned[1]) == sorted(n_atoms)
    # A shard alone cannot be joined without saying so.
    with pytest.raises(ValueError, match="2 of 4 materials have no result"):
        join_discovery(shard_dirs[:1], refs, out_dir=tmp_path / "partial", date=DATE)

    a = join_discovery(one, refs, out_dir=tmp_path / "join-one", date=DATE)
    b = join_discovery(shard_dirs, refs, out_dir=tmp_path / "join-two", date=DATE)
    assert a["discovery"].read_bytes() == b["discovery"].read_bytes()
    assert a["geo_opt"].read_bytes() == b["geo_opt"].read_bytes()
    # torchrun's RANK/WORLD_SIZE into one shared folder gives the same too.
    shared = tmp_path / "shared"
    for rank in range(2):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        run_discovery_relax(extxyz, EMT_SPEC, shared, fmax=0.05, progress=False)
    c = join_discovery(shared, refs, out_dir=tmp_path / "join-shared", date=DATE)
    assert c["discovery"].read_bytes() == a["discovery"].read_bytes()


# ------------------------------------------------------------------------------------ failures
def test_failed_material_recorded_and_counted_unstable(bench, tmp_path):
    out, _ = bench
    summary = pd.read_csv(out / "summary.csv.gz").set_index("material_id")
    stable_id = summary.index[summary.e_above_hull < 0][0]
    unstable_id = summary.index[summary.e_above_hull > 0][0]
    good = [m for m in read_structures(out / "initial-structures.json.gz") if m.material_id in (stable_id, unstable_id)]
    overlap = bulk("Cu", "fcc", a=3.6, cubic=True)
    overlap.positions[1] = overlap.positions[0] + [0.05, 0, 0]
    iron = bulk("Fe", "bcc", a=2.87, cubic=True)
    from mlip.workflows.discovery.inputs import Material

    materials = good + [Material("bad-overlap", overlap), Material("bad-Fe", iron)]
    run = tmp_path / "run"
    counts = run_discovery_relax(materials, EMT_SPEC, run, progress=False)
    assert counts["computed"] == 4 and counts["failed"] == 2
    rec_fe = json.loads((run / "results" / "bad-Fe.json").read_text())
    assert rec_fe["failed"] and "No EMT-potential for Fe" in rec_fe["error"]
    rec_ov = json.loads((run / "results" / "bad-overlap.json").read_text())
    assert rec_ov["failed"] and "0.050 Å apart" in rec_ov["error"]

    res = join_discovery(run, out / "elemental-references.json", out_dir=tmp_path / "sub", date=DATE)
    assert res["n_failed"] == 2
    df = pd.read_csv(res["discovery"]).set_index("material_id")
    assert df.e_form_per_atom.isna().sum() == 2 and df.loc[["bad-Fe", "bad-overlap"]].e_form_per_atom.isna().all()
    lines = {json.loads(x)["material_id"]: json.loads(x)
             for x in gzip.decompress(res["geo_opt"].read_bytes()).decode().splitlines()}
    assert lines["bad-Fe"] == {"material_id": "bad-Fe", "structure": None, "energy": None, "converged": False,
                               "n_steps": None}
    summary_json = json.loads(res["summary"].read_text())
    assert "No EMT-potential for Fe" in summary_json["failed"]["bad-Fe"]

    # Reference: the Fe material is stable in the reference, the overlapping one unstable.
    reference = {mid: {"e_form_per_atom": float(summary.loc[mid, "e_form_per_atom"]),
                       "e_above_hull": float(summary.loc[mid, "e_above_hull"])} for mid in (stable_id, unstable_id)}
    reference["bad-Fe"] = {"e_form_per_atom": -0.2, "e_above_hull": -0.01}
    reference["bad-overlap"] = {"e_form_per_atom": 0.3, "e_above_hull": 0.2}
    m = discovery_metrics(res["discovery"], reference, plot=False, progress=False)["full_test_set"]
    # Missing predictions count as unstable: the stable Fe one is a false negative.
    assert (m["TP"], m["FN"], m["FP"], m["TN"]) == (1, 1, 0, 2)
    assert m["missing_preds"] == 2
    assert m["Recall"] == 0.5 and m["Precision"] == 1.0 and m["F1"] == pytest.approx(2 / 3)
    assert m["Accuracy"] == 0.75  # (TP + TN) / all four materials
    assert m["MAE"] <= ROUNDING  # over the two materials with a prediction


# --------------------------------------------------------------------------------- input files
def test_malformed_input_rejected_naming_file_and_entry(tmp_path, capsys):
    good = structure_dict(bulk("Cu", "fcc", a=3.6))
    bad = dict(good)
    del bad["lattice"]
    path = tmp_path / "structs.json"
    path.write_text(json.dumps({"material_id": {"0": "ok-1", "1": "broken-2"},
                                "initial_structure": {"0": good, "1": bad}}))
    with pytest.raises(ValueError, match=r"structs\.json.*'broken-2'.*not a pymatgen structure dict"):
        read_structures(path)
    assert main(["discovery", "relax", str(path), "--model", EMT_SPEC, "--out-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "structs.json" in err and "broken-2" in err
    assert not (tmp_path / "r").exists()

    disordered = json.loads(json.dumps(good))
    disordered["sites"][0]["species"] = [{"element": "Cu", "occu": 0.5}, {"element": "Au", "occu": 0.5}]
    path.write_text(json.dumps({"x-1": disordered}))
    with pytest.raises(ValueError, match=r"'x-1'.*site 0 is disordered"):
        read_structures(path)
    path.write_text(json.dumps([{"material_id": "a", "structure": good}, {"material_id": "a", "structure": good}]))
    with pytest.raises(ValueError, match="'a' appears twice"):
        read_structures(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="is not JSON"):
        read_structures(path)
    with pytest.raises(ValueError, match="does not exist"):
        read_structures(tmp_path / "missing.json.gz")
    table = tmp_path / "ref.csv"
    table.write_text("material_id,e_form_per_atom,e_above_hull\nq-1,0.1,zero\n")
    with pytest.raises(ValueError, match=r"ref\.csv.*row 0 .*'q-1'.*not a number"):
        read_reference_table(table)


def test_input_formats_agree(tmp_path):
    import zipfile

    import ase.io
    from pymatgen.core import Structure
    from pymatgen.entries.computed_entries import ComputedStructureEntry
    from pymatgen.io.ase import AseAtomsAdaptor

    frames = small_materials()
    structs = {a.info["material_id"]: AseAtomsAdaptor.get_structure(a) for a in frames}
    df = pd.DataFrame({"material_id": list(structs), "initial_structure": [s.as_dict() for s in structs.values()]})
    files = {"columns.json.gz": None, "records.json.bz2": "records", "split.json": "split"}
    for name, orient in files.items():
        df.to_json(tmp_path / name, orient=orient, compression="infer", default_handler=str)
    entries = pd.DataFrame({"material_id": list(structs), "computed_structure_entry": [
        ComputedStructureEntry(s, -1.0 * len(s)).as_dict() for s in structs.values()]})
    entries.to_json(tmp_path / "cse.json.gz")
    ase.io.write(tmp_path / "frames.extxyz", frames)
    with zipfile.ZipFile(tmp_path / "frames.extxyz.zip", "w") as zf:
        zf.write(tmp_path / "frames.extxyz", "frames.extxyz")
    (tmp_path / "lines.jsonl").write_text("\n".join(json.dumps({"material_id": k, "structure": s.as_dict()})
                                                    for k, s in structs.items()))
    for name in [*files, "cse.json.gz", "frames.extxyz", "frames.extxyz.zip", "lines.jsonl"]:
        got = read_structures(tmp_path / name)
        assert [m.material_id for m in got] == list(structs), name
        for m in got:
            ref = frames[int(m.material_id[2:])]
            assert m.atoms.get_chemical_symbols() == ref.get_chemical_symbols()
            assert np.allclose(m.atoms.positions, ref.positions, atol=1e-10)
            assert np.allclose(m.atoms.cell.array, ref.cell.array, atol=1e-10)
            assert (m.entry is not None) == (name == "cse.json.gz")
    # Frames without ids are named after the file.
    plain = [bulk("Cu", "fcc", a=3.6), bulk("Al", "fcc", a=4.05)]
    ase.io.write(tmp_path / "noid.extxyz", plain)
    assert [m.material_id for m in read_structures(tmp_path / "noid.extxyz")] == ["noid-0", "noid-1"]
    # Our pymatgen dicts without pymatgen equal pymatgen's.
    atoms = frames[1].copy()
    atoms.info = {}  # pymatgen would carry atoms.info into Structure.properties
    mine_dict, theirs_dict = _structure_dict_without_pymatgen(atoms), AseAtomsAdaptor.get_structure(atoms).as_dict()
    assert set(mine_dict) == set(theirs_dict) and set(mine_dict["lattice"]) == set(theirs_dict["lattice"])
    assert [set(site) for site in mine_dict["sites"]] == [set(site) for site in theirs_dict["sites"]]
    mine, theirs = Structure.from_dict(mine_dict), Structure.from_dict(theirs_dict)
    assert mine == theirs
    assert np.allclose(mine.frac_coords, theirs.frac_coords, atol=1e-12)
    assert np.allclose(mine.lattice.matrix, theirs.lattice.matrix, atol=1e-12)
    back = atoms_from_structure_dict(theirs.as_dict(), "test")
    assert np.allclose(back.positions, atoms.positions, atol=1e-10)


# ----------------------------------------------------------------------------- formation energies
def test_mp2020_corrections_on_entries():
    """Cu₂O: MP2020 adds its oxide correction, -0.687 eV per O atom, to the plain formation energy;
    an entry without calculation parameters is rejected (no formation energy)."""
    from pymatgen.entries.computed_entries import ComputedStructureEntry
    from pymatgen.io.ase import AseAtomsAdaptor

    from mlip.io import atoms_to_dict, jsonable

    atoms = Atoms("Cu4O2", scaled_positions=[[0.25, 0.25, 0.25], [0.75, 0.75, 0.25], [0.75, 0.25, 0.75],
                                             [0.25, 0.75, 0.75], [0, 0, 0], [0.5, 0.5, 0.5]],
                  cell=np.eye(3) * 4.27, pbc=True)
    record = {"energy": -20.0, "structure": jsonable(atoms_to_dict(atoms))}
    refs = {"Cu": -4.0, "O": -5.0}
    params = {"run_type": "GGA", "hubbards": {}, "is_hubbard": False,
              "potcar_spec": [{"titel": "PAW_PBE Cu_pv 06Sep2000", "hash": None},
                              {"titel": "PAW_PBE O 08Apr2002", "hash": None}]}
    structure = AseAtomsAdaptor.get_structure(atoms)
    entry = ComputedStructureEntry(structure, -99.0, parameters=params).as_dict()  # its energy is replaced
    plain = formation_energies({"x": record}, refs)["x"]["e_form_per_atom"]
    assert plain == pytest.approx((-20.0 + 16.0 + 10.0) / 6, abs=1e-12)
    corrected = formation_energies({"x": record}, refs, {"x": entry})["x"]
    assert corrected["e_form_per_atom"] - plain == pytest.approx(-0.687 * 2 / 6, abs=1e-9)
    rejected = formation_energies({"x": record}, refs,
                                  {"x": ComputedStructureEntry(structure, -99.0).as_dict()})["x"]
    assert math.isnan(rejected["e_form_per_atom"]) and "rejected" in rejected["note"]
    with pytest.raises(ValueError, match="no ComputedStructureEntry"):
        formation_energies({"x": record}, refs, {})


# ------------------------------------------------------------------------------------- metrics
def test_metrics_follow_matbench_discovery(tmp_path):
    from matbench_discovery.metrics import stable_metrics

    rng = np.random.default_rng(0)
    each_true = rng.normal(0.05, 0.1, size=400)
    each_pred = each_true + rng.normal(0, 0.05, size=400)
    each_pred[rng.choice(400, size=20, replace=False)] = np.nan
    ours = classification_metrics(each_true, each_pred)
    theirs = stable_metrics(pd.Series(each_true), pd.Series(each_pred), fillna=True)
    for key in ("F1", "DAF", "Precision", "Recall", "TPR", "FPR", "TNR", "FNR", "TP", "FP", "TN", "FN", "MAE",
                "RMSE", "R2"):
        assert ours[key] == pytest.approx(float(theirs[key]), rel=1e-12), key
    # Independent check from the counts; Accuracy over every material (missing = unstable).
    stable, pred_stable = each_true <= 0, np.nan_to_num(each_pred, nan=1.0) <= 0
    tp, fp = int((stable & pred_stable).sum()), int((~stable & pred_stable).sum())
    fn, tn = int((stable & ~pred_stable).sum()), int((~stable & ~pred_stable).sum())
    assert (ours["TP"], ours["FP"], ours["FN"], ours["TN"]) == (tp, fp, fn, tn)
    assert ours["F1"] == pytest.approx(2 * tp / (2 * tp + fp + fn), rel=1e-12)
    assert ours["DAF"] == pytest.approx((tp / (tp + fp)) / stable.mean(), rel=1e-12)
    assert ours["Accuracy"] == pytest.approx((tp + tn) / 400, rel=1e-12)
    have = ~np.isnan(each_pred)
    assert ours["MAE"] == pytest.approx(np.abs(each_true - each_pred)[have].mean(), rel=1e-12)
    assert ours["missing_preds"] == 20

    # The guarded version (used where matbench-discovery 1.3.1 divides by zero) agrees with it ...
    guarded = guarded_stable_metrics(each_true, each_pred)
    for key, value in theirs.items():
        if key != "Accuracy":  # 1.3.1 divides by the non-missing count; see classification_metrics
            assert guarded[key] == pytest.approx(float(value), rel=1e-12), key
    assert guarded["Accuracy"] == pytest.approx(ours["Accuracy"], rel=1e-12)
    # ... and gives NaN where no material is predicted stable, as the benchmark's current code.
    none_stable = classification_metrics(each_true, np.abs(each_true) + 0.01)
    assert math.isnan(none_stable["F1"]) and math.isnan(none_stable["Precision"])
    assert none_stable["Recall"] == 0 and none_stable["TP"] == 0 and none_stable["FN"] == stable.sum()
    assert none_stable["Accuracy"] == pytest.approx(1 - stable.mean(), rel=1e-12)
    all_wrong = classification_metrics(each_true, -each_true)  # 1.3.1 raises ZeroDivisionError here
    assert math.isnan(all_wrong["F1"]) and all_wrong["Precision"] == 0 and all_wrong["Recall"] == 0
    assert all_wrong["Accuracy"] == 0 and all_wrong["TP"] == 0 and all_wrong["TN"] == 0

    # Hull distances on the fixed reference hull; > 5 eV/atom off is masked; unknown ids refused.
    ref = {"a": {"e_form_per_atom": -0.5, "e_above_hull": 0.1}, "b": {"e_form_per_atom": 0.2, "e_above_hull": -0.05}}
    hd = hull_distances({"a": -0.55, "b": 6.0}, ref)
    assert hd["each_pred"][0] == pytest.approx(0.05) and math.isnan(hd["each_pred"][1]) and hd["n_masked"] == 1
    with pytest.raises(ValueError, match="not in the reference"):
        hull_distances({"zz": 0.0}, ref)
    with pytest.raises(ValueError, match="both stable and unstable"):
        classification_metrics(np.array([0.1, 0.2]), np.array([0.1, 0.2]))


def test_cps_reproduces_the_leaderboard():
    """CPS from the leaderboard's own F1 / κ_SRME / RMSD (rounded there to 3-4 digits)."""
    assert combined_performance_score(0.931, 0.118, 0.0595) == pytest.approx(0.902, abs=6e-4)  # EquiformerV3-OAM
    assert combined_performance_score(0.925, 0.170, 0.061) == pytest.approx(0.888, abs=6e-4)  # eSEN-30M-OAM
    assert combined_performance_score(0.852, 0.412, 0.073) == pytest.approx(0.795, abs=6e-4)  # MACE-MPA-0
    assert combined_performance_score(1.0, 0.0, 0.3) == pytest.approx(0.9)  # RMSD term clipped at 0


def test_cli_help_lists_the_steps(capsys):
    assert main(["discovery", "--help"]) == 0
    text = capsys.readouterr().out
    for step in ("relax", "join", "metrics", "emt-benchmark"):
        assert step in text
    assert os.environ.get("SLURM_ARRAY_TASK_ID") is None
