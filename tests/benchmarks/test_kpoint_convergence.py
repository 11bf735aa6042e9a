"""benchmarks/data/kpoint_convergence.py: the sample, the order of the calculations, and the report's scores.

GPAW is too slow for a test (the study itself runs for hours under mpiexec); the report is checked on
results written here with known differences from the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk
from ase.io import write

from mlip.data.structures import generate_structures
from mlip.workflows.labelling import result_id
from mlip.workflows.sharding import write_result

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "kpoint_convergence.py"


@pytest.fixture(scope="module")
def structures():
    counts = {"prototype": 14, "rattled": 7, "surface": 3, "cluster": 2, "compressed": 2}
    return generate_structures(["Cu", "Au"], counts=counts, seed=0, progress=False)


def test_sample_takes_every_periodic_kind_over_its_sizes(script, structures):
    sample = script.sample_structures(structures, seed=0)
    kinds = [a.info["config_type"] for a in sample]
    assert set(kinds) == {"prototype", "rattled", "surface"}  # no cluster, compressed or isolated atom
    assert kinds.count("rattled") == script.PER_KIND and kinds.count("surface") == script.PER_KIND
    prototypes = [a.info["prototype"] for a in sample if a.info["config_type"] == "prototype"]
    assert len(prototypes) == len(set(prototypes)) <= script.PROTOTYPES
    present = {a.info["prototype"] for a in structures if a.info["config_type"] == "prototype"}
    assert [p for p in script.FIXED_PROTOTYPES if p in present] == prototypes[:len(present & set(
        script.FIXED_PROTOTYPES))]
    rattled = sorted(len(a) for a in structures if a.info["config_type"] == "rattled")
    picked = sorted(len(a) for a in sample if a.info["config_type"] == "rattled")
    assert picked[0] <= rattled[2] and picked[-1] >= rattled[-3]  # smallest and largest third both sampled
    again = script.sample_structures(structures, seed=0)
    assert [a.info["id"] for a in again] == [a.info["id"] for a in sample]


def test_each_structure_starts_with_the_reference(script, structures):
    sample = script.sample_structures(structures, seed=0)
    items = script.study_order(sample)
    per_structure = {}
    for name, atoms in items:
        per_structure.setdefault(atoms.info["id"], []).append(name)
    assert len(per_structure) == len(sample)
    for names in per_structure.values():
        assert names[0] == script.REFERENCE
        assert set(script.RULES) <= set(names) <= set(script.RULES) | {script.DENSE_CHECK[0]}
    first_kinds = [atoms.info["config_type"] for name, atoms in items if name == script.REFERENCE][:3]
    assert len(set(first_kinds)) == 3  # the kinds take turns


def _record(script, name, atoms, energy, forces, gap, seconds, stress=None):
    record = {"rule": name, "n_atoms": len(atoms), "config_type": atoms.info["config_type"],
              "energy": energy, "forces": np.asarray(forces, float).tolist(), "gap_eV": gap,
              "wall_time_s": seconds, "n_ibz_kpoints": int(10 * seconds), "mesh": [4, 4, 4]}
    if stress is not None:
        record["stress"] = list(stress)
    return record


def test_report_scores_rules_and_chooses_the_cheapest_policy_that_meets_the_targets(script, tmp_path):
    cells = []
    for k, (symbols, kind) in enumerate([("Si2", "prototype"), ("Ge2", "prototype"), ("SiGe", "rattled")]):
        atoms = Atoms(symbols, positions=[[0, 0, 0], [1.4, 1.4, 1.4]], cell=np.eye(3) * 5.5, pbc=True)
        atoms.info.update({"config_type": kind, "id": f"cell-{k}"})
        cells.append(atoms)
    write(tmp_path / "sample.xyz", cells, format="extxyz")
    gaps = [1.0, 0.0, 0.8]  # the second cell is a metal
    zeros = np.zeros((2, 3))
    stress = np.zeros(6)
    # (rule, seconds, per-cell force error in eV/Å): g2.5 and s3.5 miss on the metal, s4.5 and s6 do not
    rules = {"g8": (100.0, [0, 0, 0]), "g2.5": (1.0, [0.0, 0.05, 0.0]), "s3.5": (3.0, [0.0, 0.06, 0.0]),
             "s4.5": (6.0, [0.0, 0.0, 0.0]), "s6": (14.0, [0.0, 0.0, 0.0]), "g6": (15.0, [0.0, 0.0, 0.0])}
    for name, (seconds, force_error) in rules.items():
        for atoms, gap, df in zip(cells, gaps, force_error):
            forces = zeros + np.array([[df, 0, 0], [-df, 0, 0]])
            # every rule shifts the energy by a constant per element: no structure-dependent error
            energy = -10.0 + (0.0 if name == "g8" else 0.004 * atoms.get_chemical_symbols().count("Si"))
            record = _record(script, name, atoms, energy, forces, gap, seconds,
                             stress=stress + (0.001 if (name == "g2.5" and gap == 0) else 0))
            write_result(tmp_path, f"{name}.{result_id(atoms)}", record)
    # a structure in progress (the reference and one rule) is left out of the policies' scores
    extra = Atoms("Si2", positions=[[0, 0, 0], [1.4, 1.4, 1.4]], cell=np.eye(3) * 6.0, pbc=True)
    extra.info.update({"config_type": "prototype", "id": "cell-3"})
    write(tmp_path / "sample.xyz", cells + [extra], format="extxyz")
    for name, energy in (("g8", -5.0), ("g2.5", -4.0)):
        record = _record(script, name, extra, energy, zeros, 0.0, 1.0, stress=stress)
        write_result(tmp_path, f"{name}.{result_id(extra)}", record)
    summary = script.report(str(tmp_path), None, None, str(tmp_path / "record.json"))
    assert (tmp_path / "record.json").is_file() and summary["structures_with_reference"] == 4
    assert summary["structures_complete"] == 3
    scored = {p["policy"]: p for p in summary["policies"]}
    g25 = scored["g2.5"]["kinds"]["prototype"]
    assert g25["energy_meV_per_atom"] == pytest.approx(0.0, abs=1e-9)  # the element constants removed
    assert g25["energy_raw_meV_per_atom"] == pytest.approx(4.0)  # Si2: 4 meV per Si atom
    assert g25["forces_meV_per_A"] == pytest.approx(50 * 2 / 6)  # 2 of 6 components off by 50 meV/Å
    assert g25["stress_GPa"] == pytest.approx(0.001 * 160.21766208)
    assert not scored["s3.5"]["meets_targets"] and scored["s3.5"]["kinds_missing_targets"] == ["prototype"]
    assert scored["s4.5"]["meets_targets"] and scored["s6"]["meets_targets"]
    policy = scored["s3.5, metals s4.5 (gap <= 0.0 eV)"]
    assert policy["meets_targets"]
    metal = [r for r in policy["rows"] if r["metal"]]
    assert len(metal) == 1 and metal[0]["wall_time_s"] == pytest.approx(3.0 + 6.0)  # labelled twice
    # the cheapest passing one: g2.5 for semiconductors, s4.5 for the metal, (1 + 1 + 7) / 3 × v1
    assert summary["chosen"] == "g2.5, metals s4.5 (gap <= 0.0 eV)"
    assert scored[summary["chosen"]]["kinds"]["prototype"]["cost_vs_v1"] == pytest.approx((1 + 7) / 2)


def test_report_chooses_the_reference_alone_when_every_cell_is_a_metal_only_it_converges(script, tmp_path):
    # a cheap first calculation that finds a metal and a relabelling on the reference mesh costs more than
    # the reference mesh alone
    cells = []
    for k, symbols in enumerate(["Ge2", "SiGe"]):
        atoms = Atoms(symbols, positions=[[0, 0, 0], [1.4, 1.4, 1.4]], cell=np.eye(3) * 5.5, pbc=True)
        atoms.info.update({"config_type": "rattled", "id": f"cell-{k}"})
        cells.append(atoms)
    write(tmp_path / "sample.xyz", cells, format="extxyz")
    for name in script.RULES:
        seconds = 100.0 if name == script.REFERENCE else 10.0
        for k, atoms in enumerate(cells):
            stress = np.full(6, 0.0 if name == script.REFERENCE else 0.001 * (k + 1))  # 0.16+ GPa off
            record = _record(script, name, atoms, -10.0, np.zeros((2, 3)), 0.0, seconds, stress=stress)
            write_result(tmp_path, f"{name}.{result_id(atoms)}", record)
    summary = script.report(str(tmp_path), None, None, None)
    scored = {p["policy"]: p for p in summary["policies"]}
    assert scored[script.REFERENCE]["meets_targets"]
    assert scored[f"g2.5, metals {script.REFERENCE} (gap <= 0.0 eV)"]["meets_targets"]
    assert summary["chosen"] == script.REFERENCE


def test_structure_dependent_error_removes_only_a_constant_per_element(script):
    rows = [{"structure": k, "n_atoms": n, "dE_meV_per_atom": e} for k, n, e in
            [("a", 2, 3.0), ("b", 2, -1.0), ("c", 2, 1.0), ("d", 4, 1.0)]]
    compositions = {"a": {"Si": 2}, "b": {"Ge": 2}, "c": {"Si": 1, "Ge": 1}, "d": {"Si": 2, "Ge": 2}}
    script.structure_dependent(rows, compositions)
    assert all(r["dE_structure_meV_per_atom"] == pytest.approx(0.0, abs=1e-12) for r in rows)
    assert rows[0]["element_constants_meV"] == pytest.approx({"Ge": -1.0, "Si": 3.0})
    rows[3]["dE_meV_per_atom"] = 2.0  # 4 meV more in one structure: no constant per element explains it
    script.structure_dependent(rows, compositions)
    assert max(abs(r["dE_structure_meV_per_atom"]) for r in rows) > 0.2


def test_rules_use_the_dataset_physics_and_differ_only_in_the_mesh(script):
    si = bulk("Si", "diamond", a=5.43)  # |b| = 2π√3/5.43 = 2.004 Å⁻¹
    assert script.RULES["g2.5"].mesh(si) == (6, 6, 6) and script.RULES["g2.5"].gamma_centred
    assert script.RULES["s3.5"].mesh(si) == (8, 8, 8) and not script.RULES["s3.5"].gamma_centred
    assert script.RULES[script.REFERENCE].mesh(si) == (17, 17, 17)
