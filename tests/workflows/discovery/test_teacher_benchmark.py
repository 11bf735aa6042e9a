"""The teacher benchmark (any calculator plays DFT over binary systems), with EMT as the teacher on two
fcc-metal systems: files and hulls, the teacher as its own student scores perfectly, a rerun recomputes
nothing, failures are recorded, bad inputs are refused in one line."""

import gzip
import itertools
import json

import numpy as np
import pytest
from ase.calculators.emt import EMT

pd = pytest.importorskip("pandas")
pytest.importorskip("pymatgen")
pytest.importorskip("matbench_discovery")

from mlip.cli import main  # noqa: E402
from mlip.workflows.discovery.join import join_discovery  # noqa: E402
from mlip.workflows.discovery.metrics import discovery_metrics  # noqa: E402
from mlip.workflows.discovery.mini_benchmark import MARGIN, ReferenceCache  # noqa: E402
from mlip.workflows.discovery.relax_campaign import run_discovery_relax  # noqa: E402
from mlip.workflows.discovery.teacher_benchmark import (  # noqa: E402
    KNOWN_PROTOTYPES,
    generate_teacher_benchmark,
    parse_systems,
    truth_calculator,
)

#: two systems and a seed whose 6 candidates hold stable and unstable ones (checked below)
SYSTEMS = ["Cu-Au", "Cu-Pt"]
SEED = 1
N = 6
#: the submission file keeps 4 decimals of e_form: a perfect model is off by at most half a unit
ROUNDING = 5e-5


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("teacher")
    manifest = generate_teacher_benchmark(out, "emt", SYSTEMS, seed=SEED, n_candidates=N, progress=False)
    return out, manifest


def _binary_envelope(hull, a, b, x):
    """The lower convex envelope of the known formation energies of a-b at fraction x of b (eV/atom)."""
    from pymatgen.core import Composition

    points = [(0.0, 0.0), (1.0, 0.0)]
    for h in hull.itertuples():
        comp = Composition(h.formula)
        if {str(el) for el in comp} == {a, b}:
            points.append((comp.get_atomic_fraction(b), h.e_form_per_atom))
    return min(p[1] + (q[1] - p[1]) * (x - p[0]) / (q[0] - p[0])
               for p, q in itertools.permutations(points, 2) if p[0] <= x <= q[0] and q[0] > p[0])


@pytest.mark.slow
def test_files_systems_and_hull_distances(bench):
    from pymatgen.core import Composition

    out, manifest = bench
    assert manifest["n_candidates"] == N and 1 <= manifest["n_stable"] < N  # F1 is defined
    assert manifest["systems"] == SYSTEMS and manifest["calculator"]["calculator"] == "emt"
    summary = pd.read_csv(out / "summary.csv.gz")
    assert list(summary.columns) == ["material_id", "formula", "n_sites", "prototype", "energy",
                                     "e_form_per_atom", "e_above_hull", "system"]
    assert set(summary.system) <= set(SYSTEMS)
    assert (summary.e_above_hull.abs() >= MARGIN).all()
    refs = json.loads((out / "elemental-references.json").read_text())
    assert set(refs) == {"Cu", "Au", "Pt"}
    hull = pd.read_json(out / "hull-entries.json.gz")
    # every system: 3 elements' worth of references + one entry per known decoration
    n_known = sum(2 if both else 1 for _, both in KNOWN_PROTOTYPES)
    assert len(hull) == len(refs) + len(SYSTEMS) * n_known == manifest["n_hull_entries"]
    for row in summary.itertuples():
        comp = Composition(row.formula)
        a, b = row.system.split("-")
        assert {str(el) for el in comp} == {a, b}  # candidates stay within their system
        e_form = (row.energy - sum(n * refs[str(el)] for el, n in comp.items())) / comp.num_atoms
        assert row.e_form_per_atom == pytest.approx(e_form, abs=2e-8)
        # the hull distance is against the system's own hull, not the other system's entries
        envelope = _binary_envelope(hull, a, b, comp.get_atomic_fraction(b))
        assert row.e_above_hull == pytest.approx(row.e_form_per_atom - envelope, abs=2e-8)
    init = pd.read_json(out / "initial-structures.json.gz")
    assert list(init.material_id) == list(summary.material_id)


@pytest.mark.slow
def test_teacher_as_student_is_perfect(bench, tmp_path):
    out, _ = bench
    run = tmp_path / "run"
    run_discovery_relax(out / "initial-structures.json.gz", "ase.calculators.emt:EMT", run, n_shards=1,
                        shard_index=0, progress=False)
    joined = join_discovery(run, out / "elemental-references.json", out_dir=tmp_path / "sub",
                            date="2000-01-01")
    result = discovery_metrics(joined["discovery"], out / "summary.csv.gz", geo_opt=joined["geo_opt"],
                               reference_structures=out / "relaxed-structures.json.gz", plot=False,
                               progress=False)
    full = result["full_test_set"]
    assert full["F1"] == 1.0 and full["FP"] == 0 and full["FN"] == 0
    assert full["MAE"] <= ROUNDING
    assert result["rmsd"] < 1e-6


@pytest.mark.slow
def test_rerun_recomputes_nothing_and_other_settings_are_refused(bench):
    out, manifest = bench
    before = {name: (out / name).read_bytes() for name in ("summary.csv.gz", "initial-structures.json.gz")}
    again = generate_teacher_benchmark(out, "emt", SYSTEMS, seed=SEED, n_candidates=N, progress=False)
    assert again["n_relaxations_computed"] == 0 and manifest["n_relaxations_computed"] > 0
    assert {name: (out / name).read_bytes() for name in before} == before
    with pytest.raises(ValueError, match="other settings"):
        generate_teacher_benchmark(out, "emt", SYSTEMS, seed=SEED + 1, n_candidates=N, progress=False)


@pytest.mark.parametrize("systems, message", [
    (["CuAu"], "unknown system 'CuAu'"),
    (["Cu-Xx"], "Xx is not an element"),
    (["Cu-Cu"], "two different elements"),
    (["Cu-Au", "Au-Cu"], "given twice"),
    (["Mg-O"], "emt calculator cannot compute Mg"),
])
def test_bad_systems_are_refused_in_one_line(tmp_path, systems, message):
    with pytest.raises(ValueError, match=message) as info:
        generate_teacher_benchmark(tmp_path / "b", "emt", systems, n_candidates=4, progress=False)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "b").exists()  # refused before anything is written


def test_bad_counts_and_calculators_are_refused(tmp_path):
    with pytest.raises(ValueError, match="n_candidates must be >= 1, got 0"):
        generate_teacher_benchmark(tmp_path / "b", "emt", ["Cu-Au"], n_candidates=0, progress=False)
    with pytest.raises(ValueError, match="unknown calculator"):
        generate_teacher_benchmark(tmp_path / "b", "nonsense", ["Cu-Au"], n_candidates=4, progress=False)
    with pytest.raises(ValueError, match="settings go with a calculator name"):
        truth_calculator(EMT(), {"x": 1})
    assert parse_systems("Mg-O") == [("Mg", "O")]


def test_truth_calculator_forms():
    make, label, provenance = truth_calculator(EMT())
    atoms_calc = make(None)
    assert isinstance(atoms_calc, EMT) and make(None) is atoms_calc and label == "EMT"
    assert provenance == {"calculator": "ase.calculators.emt.EMT"}
    make, label, provenance = truth_calculator("emt")
    assert label == "emt" and isinstance(make(None), EMT) and provenance["calculator"] == "emt"


def test_reference_cache_records_a_failure_once(tmp_path):
    from ase.build import bulk

    calls = []

    def broken(atoms):
        calls.append(1)
        raise RuntimeError("SCF did not converge\nsecond line")

    cache = ReferenceCache(tmp_path, broken, fmax=0.05, steps=10, record_failures=True)
    atoms = bulk("Cu", "fcc", a=3.6)
    record = cache.relax("cand-00001", atoms)
    assert record["failed"] and not record["converged"] and "SCF did not converge" in record["error"]
    reopened = ReferenceCache(tmp_path, broken, fmax=0.05, steps=10, record_failures=True)
    again = reopened.relax("cand-00001", atoms)
    assert again["failed"] and len(calls) == 1  # stored: not recomputed
    strict = ReferenceCache(tmp_path / "strict", broken, fmax=0.05, steps=10)
    with pytest.raises(RuntimeError, match="SCF"):
        strict.relax("cand-00001", atoms)


def test_cli_refuses_bad_input_and_lists_the_step(tmp_path, capsys):
    assert main(["discovery", "--help"]) == 0
    assert "teacher-benchmark" in capsys.readouterr().out
    status = main(["discovery", "teacher-benchmark", str(tmp_path / "b"), "--calculator", "emt",
                   "--systems", "Mg-O", "--no-progress"])
    err = capsys.readouterr().err
    assert status == 2 and "cannot compute Mg" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_cli_builds_the_benchmark(bench, tmp_path, capsys):
    out, manifest = bench
    status = main(["discovery", "teacher-benchmark", str(out), "--calculator", "emt", "--systems", *SYSTEMS,
                   "--seed", str(SEED), "-n", str(N), "--no-progress"])
    text = capsys.readouterr().out
    assert status == 0 and f"candidates: {N} ({manifest['n_stable']} stable" in text
    lines = gzip.decompress((out / "summary.csv.gz").read_bytes()).decode().splitlines()
    assert len(lines) == N + 1
    assert np.isclose(json.loads((out / "benchmark.json").read_text())["prevalence"], manifest["prevalence"])
