"""Brillouin-zone sampling of a GPAW dataset: which k-point rule converges the labels, and at what cost.

    python benchmarks/data/kpoint_convergence.py sample examples/datasets/sige-pbe/sige-structures.xyz \\
        -o examples/datasets/sige-pbe/kpoint-study/sample.xyz
    mpiexec -n 2 gpaw python benchmarks/data/kpoint_convergence.py -- run \\
        examples/datasets/sige-pbe/kpoint-study/sample.xyz --out examples/datasets/sige-pbe/kpoint-study
    python benchmarks/data/kpoint_convergence.py report examples/datasets/sige-pbe/kpoint-study \\
        --structures examples/datasets/sige-pbe/sige-structures.xyz --run examples/datasets/sige-pbe/run \\
        -o benchmarks/results/kpoint-convergence-sige.json

``sample`` picks, for every ``config_type`` periodic in some direction, structures spread over its range of
sizes (the smallest, middle and largest third; more prototypes, one per structure type), seeded.
Kinds with no periodic direction (isolated atoms, clusters, compressed dimers and trimers) have a single
k-point, Γ, under every rule: their labels are converged in k by construction and are not sampled.

``run`` labels every sampled structure under every rule of :data:`RULES` with the dataset's physics
(:data:`mlip.workflows.labelling.GPAW_PBE_SETTINGS`: PBE, PW 400 eV, Fermi–Dirac 0.1 eV, force-consistent
energy); only the mesh differs. The reference is a Γ-centred mesh of density 8 Å⁻¹ (``g8``); ``g10``
checks the reference itself on the smallest cells. Each result is written as soon as it is known
(:mod:`mlip.workflows.sharding`: resumable, failures recorded), structure by structure, the reference
first, the kinds taking turns, so a run stopped early has complete comparisons of some of every kind.
Besides energy, forces and stress, each result keeps the mesh, the number of irreducible k-points, the
wall time, and what tells a metal from a semiconductor on that mesh: the Fermi level, the band gap
(0 when a band crosses the Fermi level between k-points) and the smearing entropy per atom.

``report`` sets every rule against the reference: the energy error per atom (raw, and with a constant
per element fitted over the sample removed: a constant per element is absorbed by a model's
isolated-atom references, so only the structure-dependent part is noise to a model), the force MAE
and the stress MAE per structure, their worst case per ``config_type``, and the cost relative to the
dataset's rule ``g2.5``. It also scores per-structure policies that label a structure on a cheap mesh
and, where that calculation finds a metal (gap below a threshold), again on a dense one, and estimates
the cost of relabelling the whole set under each (the sample's metallic share per kind). The chosen
policy is the cheapest that meets :data:`TARGETS` on every kind.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

#: eV/Å³ per GPa
EV_PER_A3_PER_GPA = 1.0 / 160.21766208
#: the convergence targets: structure-dependent energy (meV/atom), force MAE (meV/Å), stress MAE (GPa)
TARGETS = {"energy_meV_per_atom": 2.0, "forces_meV_per_A": 10.0, "stress_GPa": 0.05}


@dataclass(frozen=True)
class Rule:
    """A Brillouin-zone rule: n_i = ⌈density · |b_i|⌉ (rounded up to even when ``even``), Γ-centred or
    a plain Monkhorst–Pack mesh (shifted off Γ when even)."""

    density: float
    gamma_centred: bool
    even: bool = False

    def mesh(self, atoms) -> Tuple[int, int, int]:
        from mlip.workflows.kpoints import kpoint_mesh

        return kpoint_mesh(atoms, self.density, even=self.even)


#: the candidate rules; ``g2.5`` is the dataset's v1 rule, ``g8`` the reference
RULES: Dict[str, Rule] = {
    "g8": Rule(8.0, True),
    "g2.5": Rule(2.5, True),
    "s3.5": Rule(3.5, False, even=True),
    "s4.5": Rule(4.5, False, even=True),
    "s6": Rule(6.0, False, even=True),
    "g6": Rule(6.0, True),
}
REFERENCE = "g8"
#: the reference checked against a denser one, on cells of at most this many atoms
DENSE_CHECK = ("g10", Rule(10.0, True), 2)
#: structures sampled per periodic kind (prototypes: the smallest cell of each of this many structure types)
PER_KIND, PROTOTYPES = 3, 7
FIXED_PROTOTYPES = ("diamond", "zincblende", "beta_tin", "simple_hexagonal")


def sample_structures(structures: Sequence, seed: int = 0) -> List:
    """The study's sample of ``structures`` (see the module docstring), each frame's ``info`` kept."""
    rng = np.random.default_rng(seed)
    kinds: Dict[str, List] = {}
    for atoms in structures:
        kinds.setdefault(str(atoms.info.get("config_type", "")), []).append(atoms)
    chosen = []
    for kind in sorted(kinds):
        frames = [a for a in kinds[kind] if a.pbc.any()]
        if not frames:
            continue
        if kind == "prototype":
            # the semiconducting ground state, its alloy and the two metallic high-pressure phases always,
            # then others at random: the smallest cell of each
            names = sorted({str(a.info.get("prototype", "")) for a in frames} - set(FIXED_PROTOTYPES))
            names = [n for n in FIXED_PROTOTYPES if any(a.info.get("prototype") == n for a in frames)] + [
                str(n) for n in rng.permutation(names)]
            for name in names[:PROTOTYPES]:
                chosen.append(min((a for a in frames if str(a.info.get("prototype", "")) == name),
                                  key=lambda a: (len(a), str(a.info.get("id", "")))))
            continue
        by_size = sorted(frames, key=lambda a: (len(a), str(a.info.get("id", ""))))
        for third in np.array_split(np.arange(len(by_size)), PER_KIND):
            if len(third):
                chosen.append(by_size[int(third[int(rng.integers(len(third)))])])
    return chosen


def study_order(sample: Sequence) -> List[Tuple[str, Any]]:
    """[(rule name, atoms)] in the order they are computed: the smallest structure of each kind first
    (kinds taking turns), and for each structure the reference, then the rules from the cheapest."""
    from mlip.workflows.labelling import interleaved

    by_size = sorted(range(len(sample)), key=lambda k: len(sample[k]))
    ordered = [sample[by_size[k]] for k in interleaved([sample[k] for k in by_size])]
    items = []
    for atoms in ordered:
        names = [REFERENCE] + sorted((n for n in RULES if n != REFERENCE),
                                     key=lambda n: np.prod(RULES[n].mesh(atoms)))
        if len(atoms) <= DENSE_CHECK[2] and atoms.info.get("config_type") in ("prototype", "ordered_alloy"):
            names.append(DENSE_CHECK[0])
        items += [(name, atoms) for name in names]
    return items


def rule_by_name(name: str) -> Rule:
    return DENSE_CHECK[1] if name == DENSE_CHECK[0] else RULES[name]


def item_id(name: str, atoms) -> str:
    """``<rule>.<result id of the structure>`` (rule names hold dots: the record names its rule too)."""
    from mlip.workflows.labelling import result_id

    return f"{name}.{result_id(atoms)}"


def compute(name: str, atoms) -> Dict[str, Any]:
    """The labels of ``atoms`` under rule ``name`` (dataset physics), with cost and metallicity."""
    from mlip.workflows.kpoints import band_edges
    from mlip.workflows.labelling import GPAW_PBE_SETTINGS, gpaw_calculator, label_atoms

    rule = rule_by_name(name)
    settings = {**GPAW_PBE_SETTINGS, "kpoint_density_per_inv_A": rule.density,
                "gamma_centred": rule.gamma_centred}
    mesh = rule.mesh(atoms)
    calc = gpaw_calculator(atoms, settings, mesh=mesh)
    record = label_atoms(atoms, calc)
    extrapolated = float(calc.get_potential_energy())  # to zero smearing: E_free + TS/2
    record.update(band_edges(calc))
    record.update({"rule": name, "rule_settings": asdict(rule), "mesh": list(mesh), "n_atoms": len(atoms),
                   "config_type": str(atoms.info.get("config_type", "")),
                   "structure_id": str(atoms.info.get("id", "")),
                   "entropy_TS_eV_per_atom": 2 * (extrapolated - record["energy"]) / len(atoms),
                   "gpaw_version": _version("gpaw")})
    return record


def _version(module: str) -> str:
    from importlib.metadata import version

    return version(module)


def run(sample_path: str, out: str, progress: bool) -> None:
    from ase.io import read

    from mlip.workflows.sharding import run_sharded

    try:
        from gpaw.mpi import world
        writer = world.rank == 0
    except ImportError:
        sys.exit("this step needs GPAW: pip install '.[dft]' (docs/data.md)")
    sample = read(sample_path, ":")
    items = [(item_id(name, atoms), (name, atoms)) for name, atoms in study_order(sample)]
    counts = run_sharded(items, lambda _, payload: compute(*payload), out, n_shards=1, shard_index=0,
                         progress=progress and writer, desc="k-point study", write=writer)
    if writer:
        print(f"k-point study: {counts['skipped'] + counts['computed']}/{counts['assigned']} calculations "
              f"done ({counts['failed']} failed this run)", flush=True)


# ----------------------------------------------------------------------------------------------- report

#: per-structure policies scored by ``report``: (cheap rule, dense rule for metals); a structure is a metal
#: when the cheap calculation's gap is at most the threshold (eV; 0: a band crosses the Fermi level)
CHEAP, DENSE, GAP_THRESHOLDS = ("g2.5", "s3.5", "s4.5"), ("s4.5", "s6", "g6", "g8"), (0.0, 0.1, 0.3)


def by_structure(results: Dict[str, dict]) -> Dict[str, Dict[str, dict]]:
    """{structure key: {rule: record}} of the successful results."""
    out: Dict[str, Dict[str, dict]] = {}
    for record in results.values():
        if not record.get("failed"):
            out.setdefault(record["id"][len(record["rule"]) + 1:], {})[record["rule"]] = record  # see item_id
    return out


def errors(record: dict, ref: dict) -> Dict[str, float]:
    """``record`` against the reference ``ref`` of the same structure: ΔE per atom (meV), force MAE and
    max (meV/Å), stress MAE (GPa; absent without stress)."""
    n = ref["n_atoms"]
    df = np.abs(np.asarray(record["forces"]) - np.asarray(ref["forces"]))
    out = {"dE_meV_per_atom": 1000 * (record["energy"] - ref["energy"]) / n,
           "force_mae_meV_per_A": 1000 * float(df.mean()), "force_max_meV_per_A": 1000 * float(df.max())}
    if "stress" in record and "stress" in ref:
        ds = np.abs(np.asarray(record["stress"]) - np.asarray(ref["stress"])) / EV_PER_A3_PER_GPA
        out["stress_mae_GPa"] = float(ds.mean())
    return out


def structure_dependent(rows: List[Dict[str, Any]], compositions: Dict[str, Dict[str, int]]) -> None:
    """Adds ``dE_structure_meV_per_atom`` to each row: its energy error less the constant per element
    fitted (least squares on the total energies) over the rows, and ``element_constants_meV``."""
    elements = sorted({e for r in rows for e in compositions[r["structure"]]})
    counts = np.array([[compositions[r["structure"]].get(e, 0) for e in elements] for r in rows], float)
    totals = np.array([r["dE_meV_per_atom"] * r["n_atoms"] for r in rows])
    mu = np.linalg.lstsq(counts, totals, rcond=None)[0] if rows else np.zeros(len(elements))
    for r, c, t in zip(rows, counts, totals):
        r["dE_structure_meV_per_atom"] = float((t - c @ mu) / r["n_atoms"])
    for r in rows:
        r["element_constants_meV"] = dict(zip(elements, map(float, mu)))


def complete(study: Dict[str, Dict[str, dict]]) -> Dict[str, Dict[str, dict]]:
    """The structures of ``study`` with a result under every rule of :data:`RULES` (a structure still
    in progress would score the policies on different structures)."""
    return {key: rules for key, rules in study.items() if all(name in rules for name in RULES)}


def policy_rows(study: Dict[str, Dict[str, dict]], cheap: str, dense: Optional[str], threshold: float,
                compositions: Dict[str, Dict[str, int]]) -> List[Dict[str, Any]]:
    """One row per structure of ``study`` (each with every rule: :func:`complete`): the errors of the
    labels the policy keeps, its cost (wall seconds and irreducible k-points, both calculations where a
    metal is labelled twice) and whether it took the structure for a metal. ``dense`` None: ``cheap``
    everywhere."""
    rows = []
    for key, rules in sorted(study.items()):
        ref, first = rules[REFERENCE], rules[cheap]
        metal = dense is not None and first["gap_eV"] <= threshold
        kept = rules[dense] if metal else first
        row = {"structure": key, "config_type": ref["config_type"], "n_atoms": ref["n_atoms"], "metal": metal,
               "reference_gap_eV": ref["gap_eV"], "mesh": kept["mesh"],
               "wall_time_s": first["wall_time_s"] + (kept["wall_time_s"] if metal else 0.0),
               "n_ibz_kpoints": first["n_ibz_kpoints"] + (kept["n_ibz_kpoints"] if metal else 0),
               **errors(kept, ref)}
        v1 = rules["g2.5"]
        # the cost: irreducible k-points (a GPAW calculation's time is about proportional to them, and they
        # do not depend on what else the machine runs), and the wall time, which does
        row["cost_vs_v1"] = row["n_ibz_kpoints"] / v1["n_ibz_kpoints"]
        row["wall_time_vs_v1"] = row["wall_time_s"] / v1["wall_time_s"]
        rows.append(row)
    structure_dependent(rows, compositions)
    return rows


def worst_by_kind(rows: List[Dict[str, Any]]) -> Dict[str, Dict[str, float]]:
    """{config_type: worst |structure-dependent ΔE| (and raw), force MAE, stress MAE over its rows,
    their number, the metals among them and the mean cost against the v1 rule (irreducible k-points, and
    wall time)}."""
    out: Dict[str, Dict[str, float]] = {}
    for kind in sorted({r["config_type"] for r in rows}):
        mine = [r for r in rows if r["config_type"] == kind]
        out[kind] = {"n": len(mine), "metals": sum(r["metal"] for r in mine),
                     "energy_meV_per_atom": max(abs(r["dE_structure_meV_per_atom"]) for r in mine),
                     "energy_raw_meV_per_atom": max(abs(r["dE_meV_per_atom"]) for r in mine),
                     "forces_meV_per_A": max(r["force_mae_meV_per_A"] for r in mine),
                     "stress_GPa": max(r.get("stress_mae_GPa", 0.0) for r in mine),
                     "cost_vs_v1": float(np.mean([r["cost_vs_v1"] for r in mine])),
                     "wall_time_vs_v1": float(np.mean([r["wall_time_vs_v1"] for r in mine]))}
    return out


def meets(cell: Dict[str, float]) -> bool:
    return all(cell[key] <= limit for key, limit in TARGETS.items())


def full_set_hours(worst: Dict[str, Dict[str, float]], v1_seconds: Dict[str, float]) -> float:
    """Estimated CPU hours (this machine, 2 ranks) to relabel the set under a policy: each kind's v1
    labelling time times the policy's mean cost ratio on the kind's sample; kinds without a periodic
    direction keep their labels (nan where a periodic kind has no sample yet)."""
    total = 0.0
    for kind, seconds in v1_seconds.items():
        if kind in NON_PERIODIC:
            continue
        total += seconds * worst[kind]["cost_vs_v1"] if kind in worst else math.nan
    return total / 3600


#: the kinds with no periodic direction: Γ only, converged in k by construction
NON_PERIODIC = ("isolated_atom", "cluster", "compressed")


def v1_label_seconds(structures_path: str, run_dir: str) -> Dict[str, float]:
    """The v1 labelling seconds of the whole set per kind, from the run's stored results."""
    from ase.io import read

    from mlip.workflows.labelling import result_id
    from mlip.workflows.sharding import load_results

    results = load_results(run_dir)
    seconds: Dict[str, float] = {}
    for atoms in read(structures_path, ":"):
        record = results.get(result_id(atoms), {})
        kind = str(atoms.info.get("config_type", ""))
        seconds[kind] = seconds.get(kind, 0.0) + float(record.get("wall_time_s", math.nan))
    return seconds


def report(out: str, structures_path: Optional[str], run_dir: Optional[str],
           json_path: Optional[str]) -> Dict[str, Any]:
    """Scores every rule and policy (module docstring), prints one line per policy and kind, writes
    the JSON record; returns it."""
    from ase.io import read

    from mlip.workflows.labelling import result_id
    from mlip.workflows.sharding import load_results

    results = load_results(out)
    study = by_structure(results)
    compositions = {}
    for atoms in read(Path(out) / "sample.xyz", ":"):
        symbols = atoms.get_chemical_symbols()
        compositions[result_id(atoms)] = {e: symbols.count(e) for e in sorted(set(symbols))}
    v1_seconds = v1_label_seconds(structures_path, run_dir) if structures_path and run_dir else {}
    # every rule alone, the reference included (it meets the targets against itself by definition; its
    # own error is the check against the denser rule below)
    policies = [(name, None, 0.0) for name in RULES]
    policies += [(c, d, t) for c in CHEAP for d in DENSE for t in GAP_THRESHOLDS
                 if RULES[d].density > RULES[c].density]
    scored = []
    finished = complete(study)
    for cheap, dense, threshold in policies:
        rows = policy_rows(finished, cheap, dense, threshold, compositions)
        if not rows:
            continue
        worst = worst_by_kind(rows)
        name = cheap if dense is None else f"{cheap}, metals {dense} (gap <= {threshold} eV)"
        scored.append({"policy": name, "cheap": cheap, "dense": dense, "gap_threshold_eV": threshold,
                       "kinds": worst, "meets_targets": all(meets(c) for c in worst.values()),
                       "kinds_missing_targets": [k for k, c in worst.items() if not meets(c)],
                       "full_set_cpu_hours": full_set_hours(worst, v1_seconds) if v1_seconds else None,
                       "rows": rows})
    dense_check = [{"structure": key, "config_type": rules[REFERENCE]["config_type"],
                    **errors(rules[REFERENCE], rules[DENSE_CHECK[0]])}
                   for key, rules in sorted(study.items()) if REFERENCE in rules and DENSE_CHECK[0] in rules]
    passing = [p for p in scored if p["meets_targets"]]
    cost = (lambda p: p["full_set_cpu_hours"]) if v1_seconds else (
        lambda p: float(np.mean([c["cost_vs_v1"] for c in p["kinds"].values()])))
    chosen = min(passing, key=cost)["policy"] if passing else None
    command = " ".join(["python benchmarks/data/kpoint_convergence.py report", str(out)]
                       + ([f"--structures {structures_path}"] if structures_path else [])
                       + ([f"--run {run_dir}"] if run_dir else [])
                       + ([f"-o {json_path}"] if json_path else []))
    summary = {"command": command, "reference": REFERENCE, "rules": {k: asdict(v) for k, v in RULES.items()},
               "targets": TARGETS, "n_results": len(results),
               "n_failed": sum(bool(r.get("failed")) for r in results.values()),
               "structures_with_reference": sum(REFERENCE in r for r in study.values()),
               "structures_complete": len(finished),
               "reference_against_denser": {"rule": DENSE_CHECK[0], **asdict(DENSE_CHECK[1]),
                                            "rows": dense_check},
               "v1_label_seconds_by_kind": v1_seconds, "policies": scored, "chosen": chosen}
    if json_path:
        from mlip.io import atomic_write

        atomic_write(json_path, lambda tmp: Path(tmp).write_text(json.dumps(summary, indent=1)))
    for p in scored:
        hours = p["full_set_cpu_hours"]
        print(f"{p['policy']}: {'meets' if p['meets_targets'] else 'misses'} the targets"
              + (f"; full set ~{hours:.1f} h" if hours is not None else ""))
        for kind, c in p["kinds"].items():
            print(f"  {kind:14s} n={c['n']} metals={c['metals']} |dE| {c['energy_meV_per_atom']:6.2f} "
                  f"(raw {c['energy_raw_meV_per_atom']:6.2f}) meV/atom, "
                  f"F {c['forces_meV_per_A']:6.2f} meV/A, S {c['stress_GPa']:.3f} GPa, "
                  f"cost {c['cost_vs_v1']:.1f}x v1")
    for row in dense_check:
        print(f"{REFERENCE} against {DENSE_CHECK[0]}, {row['structure']}: "
              f"dE {row['dE_meV_per_atom']:+.2f} meV/atom, F {row['force_mae_meV_per_A']:.2f} meV/A"
              + (f", S {row['stress_mae_GPa']:.3f} GPa" if "stress_mae_GPa" in row else ""))
    print(f"chosen: {chosen}")
    return summary


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("sample", help="pick the structures of the study")
    p.add_argument("structures")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("run", help="label the sample under every rule (GPAW, under mpiexec)")
    p.add_argument("sample")
    p.add_argument("--out", required=True)
    p.add_argument("--no-progress", action="store_true")
    p = sub.add_parser("report", help="every rule against the reference")
    p.add_argument("out")
    p.add_argument("--structures", help="the whole set, for the cost of relabelling it (with --run)")
    p.add_argument("--run", help="the set's v1 labelling folder (its results' wall times)")
    p.add_argument("-o", "--output", help="the JSON record")
    args = parser.parse_args(argv)
    if args.step == "sample":
        from ase.io import read, write

        chosen = sample_structures(read(args.structures, ":"), seed=args.seed)
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        write(args.output, chosen, format="extxyz")
        print(f"{args.output}: {len(chosen)} structures")
    elif args.step == "run":
        run(args.sample, args.out, progress=not args.no_progress)
    else:
        report(args.out, args.structures, args.run, args.output)


if __name__ == "__main__":
    main()
