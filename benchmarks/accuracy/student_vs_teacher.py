"""A distilled student against its teacher: held-out errors, a miniature Matbench Discovery, κ and cost.

    python benchmarks/accuracy/student_vs_teacher.py --student path/to/student.json --teacher chgnet --out svt
    python benchmarks/accuracy/student_vs_teacher.py --student chgnet --teacher chgnet --out svt-self -n 40  # plumbing
    python benchmarks/accuracy/student_vs_teacher.py --student equiformer_v3-emt --teacher emt --out svt-emt \\
        --systems Cu-Au Cu-Pt -n 30 --kappa-compounds Cu:fcc:3.61 Au:fcc:4.08

Stages (``--stages``, default all; each resumable, a rerun recomputes nothing that is done):

* ``discovery``: a miniature Matbench Discovery whose truth is the teacher
  (:func:`mlip.workflows.discovery.teacher_benchmark.generate_teacher_benchmark` over ``--systems``,
  ``-n`` candidates, in ``OUT/discovery/benchmark`` or a shared ``--benchmark-dir``); the student
  relaxes every candidate (:func:`mlip.workflows.discovery.relax_campaign.run_discovery_relax`, FIRE +
  FrechetCellFilter, float64), ``join`` turns its energies into formation energies against the teacher's
  elemental references, and ``metrics`` scores its hull distances against the teacher's: F1, precision,
  recall, DAF, MAE, RMSE, R², RMSD of the relaxed structures, per system too; plot
  ``OUT/discovery/hull-distance-parity.png``;
* ``heldout``: the student's errors against ``--heldout`` files, per ``family`` and ``config_type``;
* ``dft``: student and teacher against first-principles labels (``--dft``, e.g. the Si–Ge GPAW set),
  energies after per-element offsets fitted on each file (the codes' zeros of energy differ);
* ``kappa``: κ(300 K) of ``--kappa-compounds`` (default Si, NaCl, MgO) by the student and by the teacher
  through the package's κ protocol (:func:`mlip.workflows.phonons.kappa_comparison.compare_kappa`:
  conventional cell, ``--kappa-supercell``-fold fc2/fc3 supercells, ``--kappa-mesh``³ q-mesh) and the
  student's κ_SRME against the teacher; plot ``OUT/kappa/kappa-bars.png``;
* ``cost``: seconds per energy+forces+stress call of student and teacher at about 64 and 512 atoms,
  alternating in one run.

``OUT/student_vs_teacher.json`` holds every stage's results (a run of some stages keeps the others'
earlier results), with the wall time of each stage in this run and what it computed. More stages plug
into :data:`STAGES` (a name → a function of the :class:`Context` returning a JSON-able dict).

--student takes a checkpoint path, a shipped model name, an ASE calculator class ``package.module:Class``
or, to check the plumbing with the teacher itself, ``emt`` / ``chgnet``; --teacher takes ``emt``,
``chgnet`` or ``package.module:Class`` (:func:`mlip.workflows.labelling.labeller`).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "speed"))  # platonic_md_step.py

JSON_NAME = "student_vs_teacher.json"
#: the date of the submission files (fixed, so that reruns rewrite the same files)
DATE = "2000-01-01"
#: calculator names served by mlip.workflows.labelling.labeller rather than resolve_calculator
LABELLER_NAMES = ("emt", "chgnet")


@dataclass
class Context:
    """What every stage gets: the arguments, the output folder and the two calculators (loaded once,
    on first use)."""

    args: argparse.Namespace
    out: Path
    _cache: Dict[str, Any] = field(default_factory=dict)

    @property
    def progress(self) -> bool:
        return not self.args.no_progress

    def student(self):
        """The student's ASE calculator (float64 for mlip models)."""
        if "student" not in self._cache:
            self._cache["student"] = student_calculator(self.args.student, self.args.device)
        return self._cache["student"]

    def teacher(self):
        """The teacher's ASE calculator (one instance for every structure)."""
        if "teacher" not in self._cache:
            from mlip.workflows.discovery.teacher_benchmark import truth_calculator

            if self.args.teacher == "gpaw":
                raise ValueError("the teacher must be one calculator for every cell; gpaw's k-points depend "
                                 "on the cell: use emt, chgnet or package.module:Class")
            make, _, _ = truth_calculator(self.args.teacher, self.teacher_settings)
            self._cache["teacher"] = make(None)
        return self._cache["teacher"]

    @property
    def teacher_settings(self) -> Dict[str, Any]:
        return dict(self.args.teacher_setting)


def student_calculator(spec: str, device: str = "auto", dtype: str = "float64"):
    """The student: ``emt``/``chgnet`` through the labeller (the teacher as its own student), anything
    else through :func:`mlip.workflows.resolve_calculator` in ``dtype``."""
    if spec in LABELLER_NAMES:
        from mlip.workflows.labelling import labeller

        return labeller(spec).make(None)
    from mlip.calculators.model_loading import resolve_calculator

    return resolve_calculator(spec, device=device, dtype=dtype)


# ------------------------------------------------------------------------------------------ discovery
def stage_discovery(ctx: Context) -> Dict[str, Any]:
    """The miniature discovery benchmark with the teacher as the truth (see the module docstring)."""
    from mlip.workflows.discovery.join import join_discovery
    from mlip.workflows.discovery.relax_campaign import run_discovery_relax
    from mlip.workflows.discovery.teacher_benchmark import generate_teacher_benchmark

    args = ctx.args
    folder = ctx.out / "discovery"
    bench = Path(args.benchmark_dir) if args.benchmark_dir else folder / "benchmark"
    manifest = generate_teacher_benchmark(bench, calculator=args.teacher, systems=args.systems,
                                          seed=args.seed, n_candidates=args.n,
                                          calculator_settings=ctx.teacher_settings,
                                          progress=ctx.progress)
    relax = run_discovery_relax(bench / "initial-structures.json.gz", ctx.student(), folder / "relax",
                                n_shards=1, shard_index=0, progress=ctx.progress, dtype="float64",
                                device=args.device)
    joined = join_discovery(folder / "relax", bench / "elemental-references.json",
                            out_dir=folder / "submission", date=DATE)
    scores = discovery_scores(bench, Path(joined["discovery"]), Path(joined["geo_opt"]), folder, ctx.progress)
    return {
        "benchmark": {"folder": str(bench), "systems": manifest["systems"], "seed": manifest["seed"],
                      "n_candidates": manifest["n_candidates"], "n_stable": manifest["n_stable"],
                      "prevalence": manifest["prevalence"], "calculator": manifest["calculator"],
                      **({"warning": manifest["warning"]} if "warning" in manifest else {})},
        **scores,
        "n_failed": joined["n_failed"],
        "n_not_converged": joined["n_not_converged"],
        "computed": {"teacher_relaxations": manifest["n_relaxations_computed"],
                     "student_relaxations": relax["computed"]},
    }


HEADLINE = ("F1", "Precision", "Recall", "DAF", "Accuracy", "MAE", "RMSE", "R2", "TP", "FP", "TN", "FN")


def discovery_scores(bench: Path, predictions: Path, geo_opt: Path, out_dir: Path, progress: bool
                     ) -> Dict[str, Any]:
    """The student's hull-distance metrics against the teacher's (all, and per system), the RMSD of its
    relaxed structures and the parity plot ``out_dir/hull-distance-parity.png``."""
    import csv
    import gzip

    import numpy as np

    from mlip.workflows.discovery.inputs import read_reference_table, read_structures
    from mlip.workflows.discovery.join import read_discovery_csv
    from mlip.workflows.discovery.metrics import (
        guarded_stable_metrics,
        hull_distances,
        plot_hull_distances,
        read_geo_opt,
        structure_rmsd,
    )

    ref = read_reference_table(bench / "summary.csv.gz")
    with gzip.open(bench / "summary.csv.gz", "rt") as fh:
        system_of = {row["material_id"]: row["system"] for row in csv.DictReader(fh)}
    hd = hull_distances(read_discovery_csv(predictions), ref)
    t, p = hd["each_true"], hd["each_pred"]
    overall = {k: _plain(v) for k, v in guarded_stable_metrics(t, p).items() if k in HEADLINE}
    reference = {m.material_id: m.atoms for m in read_structures(bench / "relaxed-structures.json.gz")}
    rmsd = structure_rmsd(read_geo_opt(geo_opt), reference, progress=progress)
    values = [v for v in rmsd.values() if v is not None]
    per_system = {}
    ids = np.array(hd["ids"])
    for system in sorted(set(system_of.values())):
        sel = np.array([system_of[m] == system for m in ids])
        metrics = guarded_stable_metrics(t[sel], p[sel])
        per_system[system] = {"n": int(sel.sum()), "n_stable": int((t[sel] <= 0).sum()),
                              **{k: _plain(metrics[k]) for k in ("F1", "MAE", "RMSE", "TP", "FP", "FN")}}
    plot = out_dir / "hull-distance-parity.png"
    plot_hull_distances(t, p, plot, overall)
    return {"metrics": overall, "RMSD": float(np.mean(values)) if values else None, "n_rmsd": len(values),
            "n_materials": len(ids), "n_missing": hd["n_missing"], "n_masked": hd["n_masked"],
            "per_system": per_system, "units": "eV/atom (MAE, RMSE), Å (RMSD)",
            "files": {"parity_plot": str(plot), "submission": str(predictions)}}


def _plain(value) -> Optional[float]:
    """A float, or None for NaN (strict JSON)."""
    value = float(value)
    return value if math.isfinite(value) else None


# ------------------------------------------------------------------------------------------ κ
def stage_kappa(ctx: Context) -> Dict[str, Any]:
    """κ(300 K) by student and teacher and the student's κ_SRME (see the module docstring)."""
    from mlip.workflows.phonons.kappa_comparison import compare_kappa

    args = ctx.args
    folder = ctx.out / "kappa"
    result = compare_kappa(ctx.student(), ctx.teacher(), folder, compounds=args.kappa_compounds,
                           supercell=args.kappa_supercell, mesh=args.kappa_mesh, progress=ctx.progress)
    plot = folder / "kappa-bars.png"
    plot_kappa_bars(result, plot)
    result["files"] = {"bars": str(plot)}
    result["units"] = "W/(m K) (κ, trace/3 at 300 K); κ_SRME dimensionless, 0 best, 2 worst"
    return result


def plot_kappa_bars(result: Dict[str, Any], path: Path) -> None:
    """Bars of κ by student and teacher per compound (log scale), κ_SRME above each pair."""
    from mlip.extras import require

    matplotlib = require("matplotlib", "plot", "the κ bars")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mlip.io import atomic_write

    names = list(result["compounds"])
    rows = [result["compounds"][n] for n in names]
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(names), 4))
    x = list(range(len(names)))
    for shift, key, label, color in ((-0.2, "kappa_reference", "teacher", "tab:blue"),
                                     (0.2, "kappa_model", "student", "tab:orange")):
        heights = [r[key] if r[key] is not None and r[key] > 0 else math.nan for r in rows]
        ax.bar([i + shift for i in x], heights, width=0.4, label=label, color=color)
    finite = [r[k] for r in rows for k in ("kappa_reference", "kappa_model") if r[k] is not None and r[k] > 0]
    ax.set_yscale("log")
    top = max(finite) if finite else 1.0
    for i, r in enumerate(rows):
        text = "κ_SRME " + (f"{r['srme']:.3f}" if r["srme"] is not None else "n/a")
        status = [s for s in (r["status_model"], r["status_reference"]) if s != "ok"]
        ax.text(i, top * 1.6, text + (f"\n({', '.join(status)})" if status else ""), ha="center", fontsize=8)
    ax.set_ylim(bottom=(min(finite) if finite else 1.0) / 4, top=top * 6)
    ax.set_xticks(x)
    ax.set_xticklabels(names)
    ax.set_ylabel("κ at 300 K (W/(m·K))")
    mean = result.get("mean_srme")
    ax.set_title("student vs teacher" + (f": mean κ_SRME {mean:.3f}" if mean is not None else ""),
                 fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=130, format="png", bbox_inches="tight"))
    plt.close(fig)


# ------------------------------------------------------------------------------------------ held-out errors
#: the units of the error stages' metrics
ERROR_UNITS = "meV/atom (energy), meV/Å (forces), meV/Å³ (stress)"


def grouped_errors(calc, samples, groups_of, **options) -> Dict[str, Any]:
    """``{"overall": metrics, "groups": {group: {"n": ..., **metrics}}}`` of ``calc`` on ``samples`` in
    float64 (:func:`mlip.training.evaluation.evaluate_groups` with ``options``), JSON-plain."""
    from mlip.training.evaluation import evaluate_groups

    def plain(metrics):
        return {k: _plain(v) for k, v in metrics.items()}

    overall, groups = evaluate_groups(calc, samples, groups_of, dtype="float64", **options)
    return {"overall": plain(overall), "groups": {g: {"n": n, **plain(m)} for g, (n, m) in groups.items()}}


def stage_heldout(ctx: Context) -> Dict[str, Any]:
    """The student's errors against the labels of ``--heldout`` files (the teacher's on compositions that
    training never saw, and any other reference, e.g. an independent model's or DFT's on the same
    frames), overall and per ``family`` and ``config_type`` of the frames, in float64."""
    from mlip.data import read_dataset

    def groups_of(sample) -> List[str]:
        info = sample.atoms.info
        return [f"{key}:{info[key]}" for key in ("family", "config_type") if key in info]

    results = {}
    for path in ctx.args.heldout:
        samples = read_dataset(path)
        results[str(path)] = {"n": len(samples), **grouped_errors(ctx.student(), samples, groups_of)}
    return {"files": results, "dtype": "float64 (mlip students)", "units": ERROR_UNITS}


# ------------------------------------------------------------------------------------------ against DFT
def stage_dft(ctx: Context) -> Dict[str, Any]:
    """Student and teacher against first-principles labels of ``--dft`` files (e.g. the Si–Ge GPAW PBE
    set), overall and per ``config_type``, in float64. Energies are compared after removing per-element
    offsets fitted on each file (``evaluate_groups(align_energies=True)``): GPAW's PAW energies and the
    Materials Project's, which a foundation teacher imitates, have different zeros for every element.
    Forces and stress are compared as they are."""
    from mlip.data import read_dataset

    def groups_of(sample) -> List[str]:
        return [f"config_type:{sample.atoms.info.get('config_type', 'unknown')}"]

    results = {}
    for path in ctx.args.dft:
        samples = read_dataset(path)
        results[str(path)] = {"n": len(samples), **{
            who: grouped_errors(calc, samples, groups_of, align_energies=True)
            for who, calc in (("student", ctx.student()), ("teacher", ctx.teacher()))}}
    return {"files": results, "dtype": "float64 (mlip students)",
            "energies": "after per-element offsets fitted on each file (energy_offset_<element>_eV)",
            "units": ERROR_UNITS}


# ------------------------------------------------------------------------------------------ cost
def stage_cost(ctx: Context) -> Dict[str, Any]:
    """Seconds per energy+forces+stress call of the student (float32, as MD runs it) and of the teacher
    on the κ compounds' conventional cells repeated to about 64 and 512 atoms, timed in alternating rounds
    in one run (the minimum over rounds of the median of ``--cost-repeats`` calls; positions moved before
    each call), and their ratio."""
    import torch
    from platonic_md_step import time_steps  # the timing of the MD-step benchmarks

    from mlip.workflows.phonons.kappa_comparison import kappa_compound

    args = ctx.args
    previous_threads = torch.get_num_threads()  # main() may run inside a larger program (the tests)
    torch.set_num_threads(args.cost_threads)
    try:
        student = (student_calculator(args.student, "cpu", dtype="float32")
                   if args.student not in LABELLER_NAMES else ctx.student())
        teacher = ctx.teacher()
        cells = {}
        for spec in args.kappa_compounds:
            name, unit = kappa_compound(spec)
            for target in (64, 512):
                atoms = unit.repeat(max(1, round((target / len(unit)) ** (1 / 3))))
                atoms.info = {}
                cells[f"{name}-{len(atoms)}"] = atoms
        times: Dict[str, Dict[str, List[float]]] = {key: {"student": [], "teacher": []} for key in cells}
        for _ in range(args.cost_rounds):
            for key, atoms in cells.items():
                for who, calc in (("student", student), ("teacher", teacher)):
                    times[key][who].append(time_steps(calc, atoms.copy(), args.cost_repeats))
        out = {}
        for key, t in times.items():
            s, te = min(t["student"]), min(t["teacher"])
            out[key] = {"student_s": s, "teacher_s": te, "teacher_over_student": te / s}
    finally:
        torch.set_num_threads(previous_threads)
    return {"cells": out, "threads": args.cost_threads, "rounds": args.cost_rounds,
            "repeats": args.cost_repeats, "student_dtype": "float32"}


# ------------------------------------------------------------------------------------------ driver
#: the stages in running order: name → function of the Context returning a JSON-able dict
STAGES: Dict[str, Callable[[Context], Dict[str, Any]]] = {
    "heldout": stage_heldout,
    "dft": stage_dft,
    "discovery": stage_discovery,
    "kappa": stage_kappa,
    "cost": stage_cost,
}


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    from mlip.cli.data_label import parse_setting
    from mlip.workflows.discovery.teacher_benchmark import DEFAULT_SYSTEMS
    from mlip.workflows.phonons.kappa_comparison import DEFAULT_MESH, DEFAULT_SUPERCELL, KAPPA_COMPOUNDS

    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--student", required=True,
                   help="checkpoint path, shipped model name, package.module:Class, or emt/chgnet (the teacher "
                        "as its own student)")
    p.add_argument("--teacher", required=True, help="emt, chgnet or package.module:Class")
    p.add_argument("--teacher-setting", type=parse_setting, action="append", metavar="KEY=VALUE", default=[],
                   help="a setting of the teacher calculator (repeatable)")
    p.add_argument("--out", required=True, help="output folder (resumable)")
    p.add_argument("--stages", nargs="+", default=None, choices=list(STAGES),
                   help="stages to run (default: all, heldout only with --heldout)")
    p.add_argument("--heldout", nargs="+", default=[], metavar="FILE",
                   help="labelled extxyz files for the heldout stage: the teacher's labels of structures "
                        "training never saw, or another reference's")
    p.add_argument("--dft", nargs="+", default=[], metavar="FILE",
                   help="first-principles labelled extxyz files for the dft stage (student and teacher "
                        "against them, energies aligned per element), e.g. the Si-Ge GPAW PBE set")
    p.add_argument("--cost-threads", type=int, default=2,
                   help="torch threads of the cost stage (default: %(default)s)")
    p.add_argument("--cost-rounds", type=int, default=2, help="alternating rounds of the cost stage")
    p.add_argument("--cost-repeats", type=int, default=5, help="timed calls per cell, model and round")
    p.add_argument("--device", default="auto", help="device of an mlip student (default: %(default)s)")
    p.add_argument("--systems", nargs="+", metavar="A-B", default=list(DEFAULT_SYSTEMS),
                   help="binary systems of the discovery stage (default: %(default)s)")
    p.add_argument("-n", type=int, default=100,
                   help="candidates of the discovery stage (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the discovery benchmark (default: %(default)s)")
    p.add_argument("--benchmark-dir", default=None,
                   help="the teacher's discovery benchmark folder, to share between students "
                        "(default: OUT/discovery/benchmark)")
    p.add_argument("--kappa-compounds", nargs="+", default=list(KAPPA_COMPOUNDS), metavar="NAME",
                   help=f"{', '.join(KAPPA_COMPOUNDS)} or FORMULA:STRUCTURE:A (default: %(default)s)")
    p.add_argument("--kappa-supercell", type=int, default=DEFAULT_SUPERCELL,
                   help="fc2 and fc3 supercell of the conventional cell, n×n×n (default: %(default)s)")
    p.add_argument("--kappa-mesh", type=int, default=DEFAULT_MESH, help="q-mesh n×n×n (default: %(default)s)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Run the chosen stages and return the contents of ``OUT/student_vs_teacher.json``."""
    from mlip.io import read_json, write_json
    from mlip.workflows.discovery.teacher_benchmark import parse_systems
    from mlip.workflows.phonons.kappa_comparison import kappa_compound

    args = parse_args(argv)
    if args.stages is None:
        files = {"heldout": args.heldout, "dft": args.dft}
        args.stages = [name for name in STAGES if files.get(name, True)]
    for stage, files in (("heldout", args.heldout), ("dft", args.dft)):
        if stage in args.stages and not files:
            raise ValueError(f"the {stage} stage needs --{stage} FILE [FILE ...] (labelled extxyz)")
        for path in files:
            if not Path(path).is_file():
                raise ValueError(f"--{stage} file {path} does not exist")
    if "discovery" in args.stages:  # bad inputs refused before anything runs
        parse_systems(args.systems)
        if args.n < 1:
            raise ValueError(f"-n must be >= 1, got {args.n}")
    if "kappa" in args.stages:
        for spec in args.kappa_compounds:
            kappa_compound(spec, args.kappa_supercell, args.kappa_mesh)
    out = Path(args.out)
    ctx = Context(args, out)
    path = out / JSON_NAME
    report = read_json(path) or {}
    if report and (report.get("student") != args.student or report.get("teacher") != args.teacher):
        raise ValueError(f"{out} holds the results of student {report.get('student')!r} against teacher "
                         f"{report.get('teacher')!r}; use another folder")
    report.update(benchmark="student_vs_teacher", student=args.student, teacher=args.teacher,
                  teacher_settings=ctx.teacher_settings)
    report.setdefault("stages", {})
    order: List[str] = [name for name in STAGES if name in args.stages]
    for name in order:
        print(f"stage {name} ...", flush=True)
        t0 = time.perf_counter()
        result = STAGES[name](ctx)
        result["wall_time_s"] = time.perf_counter() - t0
        report["stages"][name] = result
        write_json(path, report)
        print(f"stage {name}: {summary_line(name, result)} ({result['wall_time_s']:.1f} s)", flush=True)
    print(f"wrote {path}")
    return report


def summary_line(name: str, result: Dict[str, Any]) -> str:
    """One line of a stage's headline numbers."""
    if name == "discovery":
        m = result["metrics"]

        def show(key, scale=1.0, unit=""):
            return "n/a" if m.get(key) is None else f"{m[key] * scale:.3f}{unit}"

        rmsd = "n/a" if result["RMSD"] is None else f"{result['RMSD']:.4f} Å"
        return (f"F1 {show('F1')}, precision {show('Precision')}, recall {show('Recall')}, "
                f"MAE {show('MAE', 1e3, ' meV/atom')}, RMSE {show('RMSE', 1e3, ' meV/atom')}, RMSD {rmsd} "
                f"over {result['n_materials']} candidates")
    if name == "kappa":
        parts = [f"{mid} {r['kappa_model'] if r['kappa_model'] is None else round(r['kappa_model'], 2)} vs "
                 f"{r['kappa_reference'] if r['kappa_reference'] is None else round(r['kappa_reference'], 2)}"
                 for mid, r in result["compounds"].items()]
        mean = result["mean_srme"]
        return f"κ student vs teacher (W/(m K)): {'; '.join(parts)}; mean κ_SRME " + (
            "n/a" if mean is None else f"{mean:.3f}")
    if name == "heldout":
        return "; ".join(f"{Path(f).name}: energy {r['overall']['energy_mae_meV_per_atom']:.1f} meV/atom, "
                         f"forces {r['overall']['forces_mae_meV_per_A']:.1f} meV/Å MAE"
                         for f, r in result["files"].items())
    if name == "dft":
        return "; ".join(f"{Path(f).name}: " + ", ".join(
            f"{who} energy {r[who]['overall']['energy_mae_meV_per_atom']:.1f} meV/atom (aligned), forces "
            f"{r[who]['overall']['forces_mae_meV_per_A']:.1f} meV/Å MAE" for who in ("student", "teacher"))
            for f, r in result["files"].items())
    if name == "cost":
        return "; ".join(f"{k} student {1e3 * c['student_s']:.1f} ms, teacher {1e3 * c['teacher_s']:.1f} ms "
                         f"({c['teacher_over_student']:.2f}×)" for k, c in result["cells"].items())
    return ", ".join(f"{k}={v}" for k, v in result.items() if isinstance(v, (int, float)))


if __name__ == "__main__":
    try:
        main()
    except ValueError as err:
        raise SystemExit(f"student_vs_teacher: error: {err}") from None
