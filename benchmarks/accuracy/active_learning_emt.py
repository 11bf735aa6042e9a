"""Active learning against random selection on EMT (issue 57, item 3): equal label budgets, one pool.

    python benchmarks/accuracy/active_learning_emt.py [--work active-learning-emt] [--budgets 50 100 200 400]
        [--per-iteration 50] [--committee 3] [--strategies uncertainty random] [--threads 2]
        [--trust-hi 1.0] [--replicates 2] [--only-replicate K]
        [--json benchmarks/results/active-learning-emt.json] [--plot docs/active-learning-emt.png]

The oracle is ASE's EMT on its seven metals (Al, Cu, Ag, Au, Ni, Pd, Pt). Every stage keeps its output
in ``--work`` and is skipped when it is there, so a killed run continues where it stopped and a larger
``--budgets`` extends the curves of an earlier run:

1. ``initial.xyz``: a small labelled start (``mlip.data.emt``, seed 0: crystals, ordered and random
   alloys, two vacancies, two slabs); ``seeds.xyz``: unlabelled structures to explore from (seed 3:
   crystals, random alloys, vacancies, slabs); ``heldout.xyz``: what the models are scored on, never
   trained on: snapshots of 1,200 K Langevin MD run with EMT from bulk cells (config_type
   ``md_1200K``), slabs (``surface``) and vacancy cells (``vacancy``), seed 2.
2. ``pool.xyz``: one exploration pool for every strategy: the committee trained on ``initial.xyz``
   (``pool-run/iter-000``) explores from the seeds (MD at 300, 800, 1,200 and 1,500 K, relaxations,
   strained and rattled seeds; :func:`mlip.workflows.active_learning.explore.explore`).
3. For each strategy (``uncertainty``: most uncertain with diversity, within the trust window
   ``--trust-lo``/``--trust-hi`` where one is given, in ``WORK/uncertainty-trust``; ``random``: uniform
   over the whole pool), the loop
   :func:`mlip.workflows.active_learning.learn` with that fixed pool, started from that same committee,
   ``--per-iteration`` labels per iteration up to the largest budget, every committee warm-started from
   the last and evaluated on ``heldout.xyz``: the iteration whose label count is a budget gives that
   budget's point.

The record (``--json``) holds, per strategy and budget, the committee mean's force and energy MAE on the
held-out set (in all and per kind) and its uncertainty's rank correlation with the actual force error,
and for each budget the relative force-error reduction of uncertainty over random selection,
1 − MAE_uncertainty / MAE_random (means over ``--replicates`` runs of each strategy with seeds 0, 1, …:
another random draw, and another shuffling and validation split of the members' training, from the same
first committee); ``--plot`` draws the learning curves, one line per run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]  # benchmarks/
DEFAULT_JSON = ROOT / "results" / "active-learning-emt.json"
DEFAULT_PLOT = ROOT.parent / "docs" / "active-learning-emt.png"
ELEMENTS = ["Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt"]
#: the committee's members: the embedded-atom architecture (EMT's own functional form, the cheapest model)
MODEL = {"model": {"name": "embedded_atom", "species": ELEMENTS, "cutoff": 5.0, "log_densities": True},
         "batch_size": 8, "loss": {"energy_weight": 5.0, "forces_weight": 10.0, "stress_weight": 1.0},
         "optimizer": {"lr": 0.005, "warmup_fraction": 0.05, "min_lr_factor": 0.05}}
INITIAL = {"crystal": 10, "ordered_alloy": 8, "random_alloy": 8, "vacancy": 2, "surface": 2}
SEEDS = {"crystal": 10, "random_alloy": 10, "vacancy": 10, "surface": 10}
HELDOUT = {"md_cells": 40, "md_snapshots": 3, "surface": 60, "vacancy": 60}
POOL_EXPLORE = {"temperatures": [300.0, 800.0, 1200.0, 1500.0], "md_runs": 8, "md_steps": 200,
                "md_interval": 20, "relaxations": 20, "relax_steps": 40, "relax_interval": 10,
                "strained": 400, "rattled": 400}
#: the sizes of a run, and those of ``--smoke`` (every stage at a few structures: checks the script)
SIZES = {"initial": INITIAL, "seeds": SEEDS, "heldout": HELDOUT, "pool_explore": POOL_EXPLORE}
SMOKE = {"initial": {"crystal": 4, "random_alloy": 4, "vacancy": 1, "surface": 1},
         "seeds": {"crystal": 2, "vacancy": 1, "surface": 1},
         "heldout": {"md_cells": 3, "md_snapshots": 1, "surface": 2, "vacancy": 2},
         "pool_explore": {"temperatures": [1200.0], "md_runs": 1, "md_steps": 10, "md_interval": 5,
                          "relaxations": 1, "relax_steps": 4, "relax_interval": 2, "strained": 4,
                          "rattled": 4}}


def log(line: str) -> None:
    print(line, flush=True)


def write_frames(path: Path, frames) -> None:
    import ase.io

    from mlip.io import atomic_write

    atomic_write(path, lambda tmp: ase.io.write(tmp, frames, format="extxyz"))


def md_1200k(n_cells: int, n_snapshots: int, seed: int) -> list:
    """EMT-labelled snapshots of Langevin MD at 1,200 K from bulk cells (crystals and alloys)."""
    from ase import units
    from ase.calculators.emt import EMT
    from ase.calculators.singlepoint import SinglePointCalculator
    from ase.constraints import FixCom
    from ase.md import velocitydistribution as vd
    from ase.md.langevin import Langevin

    from mlip.data.emt import generate_emt_dataset

    per = max(1, n_cells // 3)
    cells = generate_emt_dataset({"crystal": per, "ordered_alloy": per, "random_alloy": n_cells - 2 * per},
                                 seed=seed, progress=False)
    frames = []
    for k, cell in enumerate(cells):
        rng = np.random.default_rng([seed, k])
        atoms = cell.copy()
        atoms.calc = EMT()
        vd.thermalize_momenta(atoms, 1200.0, rng=rng)
        vd.Stationary(atoms)
        atoms.set_constraint(FixCom())
        dyn = Langevin(atoms, 2.0 * units.fs, temperature_K=1200.0, friction=0.02 / units.fs, fixcm=False,
                       rng=rng)
        dyn.run(100)
        for j in range(n_snapshots):
            dyn.run(40)
            snap = atoms.copy()
            snap.set_constraint()
            snap.set_momenta(np.zeros((len(snap), 3)))
            snap.calc = SinglePointCalculator(snap, energy=atoms.get_potential_energy(),
                                              forces=atoms.get_forces(), stress=atoms.get_stress())
            snap.info = {"config_type": "md_1200K", "group": f"md1200-{k}", "id": f"md1200-{k}-{j}",
                         "temperature": 1200.0}
            frames.append(snap)
    return frames


def make_data(work: Path, sizes: dict) -> None:
    """initial.xyz, seeds.xyz and heldout.xyz (stage 1)."""
    from mlip.data.emt import generate_emt_dataset

    if not (work / "initial.xyz").is_file():
        write_frames(work / "initial.xyz", generate_emt_dataset(sizes["initial"], seed=0, progress=False))
    if not (work / "seeds.xyz").is_file():
        import ase.io

        covered = set(ase.io.read(work / "initial.xyz", ":")[0].get_chemical_symbols())
        for atoms in ase.io.read(work / "initial.xyz", ":"):
            covered |= set(atoms.get_chemical_symbols())
        # the committee knows the elements of the initial data: seeds with others cannot be explored
        seeds = [a for a in generate_emt_dataset(sizes["seeds"], seed=3, progress=False)
                 if set(a.get_chemical_symbols()) <= covered]
        for atoms in seeds:
            atoms.calc = None
        write_frames(work / "seeds.xyz", seeds)
    if not (work / "heldout.xyz").is_file():
        t0 = time.perf_counter()
        held = sizes["heldout"]
        frames = md_1200k(held["md_cells"], held["md_snapshots"], seed=2)
        frames += generate_emt_dataset({"surface": held["surface"], "vacancy": held["vacancy"]}, seed=2,
                                       progress=False)
        write_frames(work / "heldout.xyz", frames)
        log(f"data: held-out set of {len(frames)} structures ({(time.perf_counter() - t0) / 60:.1f} min)")


def make_pool(work: Path, settings: dict, explore_settings: dict, progress: bool) -> None:
    """pool.xyz: the exploration of the committee trained on initial.xyz (stage 2)."""
    from mlip.calculators import CommitteeCalculator
    from mlip.workflows.active_learning import ExploreSettings, learn
    from mlip.workflows.active_learning.committee import load_committee
    from mlip.workflows.active_learning.explore import explore

    if (work / "pool.xyz").is_file():
        return
    run = work / "pool-run"
    members = sorted((run / "iter-000").glob("member-*.safetensors"))
    if not (run / "summary.json").is_file():  # the first committee, trained on initial.xyz
        members = learn(work / "initial.xyz", "emt", run, seeds=work / "seeds.xyz",
                        settings={**settings, "label_budget": 0}, resume=(run / "learn.json").is_file(),
                        progress=progress, log=log).committee
    calc = CommitteeCalculator(load_committee(members), device="cpu")
    t0 = time.perf_counter()
    import ase.io

    frames = explore(ase.io.read(work / "seeds.xyz", ":"), calc, ExploreSettings.from_dict(explore_settings),
                     run / "pool-explore", settings["seed"], 1, progress=progress)
    for k, frame in enumerate(frames):
        frame.info["id"] = f"pool-{k:05d}"
    write_frames(work / "pool.xyz", frames)
    log(f"pool: {len(frames)} frames ({(time.perf_counter() - t0) / 60:.1f} min)")


def run_strategy(work: Path, strategy: str, settings: dict, budget: int, progress: bool) -> list:
    """The loop with the fixed pool for ``strategy`` up to ``budget`` labels (in ``work/STRATEGY`` for seed
    0, ``work/STRATEGY-seedK`` for replicate K); its per-iteration metrics."""
    from mlip.workflows.active_learning import learn

    name = strategy
    if strategy == "uncertainty" and (settings.get("trust_lo") or settings.get("trust_hi")):
        name += "-trust"  # beside the runs without a window
    else:
        settings = {k: v for k, v in settings.items() if k not in ("trust_lo", "trust_hi")}
    out = work / (name if not settings["seed"] else f"{name}-seed{settings['seed']}")
    # every run starts from one first committee
    start = sorted((work / "pool-run" / "iter-000").glob("member-*.safetensors"))
    result = learn(work / "initial.xyz", "emt", out, heldout=work / "heldout.xyz", pool=work / "pool.xyz",
                   committee=start,
                   settings={**settings, "selection": strategy, "label_budget": budget,
                             "max_iterations": 10 ** 6}, resume=(out / "learn.json").is_file(),
                   progress=progress, log=log)
    return result.iterations


def ceiling(work: Path, settings: dict, progress: bool) -> dict:
    """What labelling the whole pool buys: one member trained as a loop iteration trains (from the first
    committee's member 0, ``finetune_epochs``) on the initial data plus every pool frame labelled by EMT,
    in ``work/ceiling``; its held-out force MAE, in all and per kind (meV/Å). No selection of part of the
    pool, trained so, can be expected to beat it."""
    import ase.io
    from ase.calculators.emt import EMT
    from ase.calculators.singlepoint import SinglePointCalculator

    from mlip.data import read_dataset
    from mlip.pretrained import load_potential
    from mlip.training.evaluation import evaluate_groups
    from mlip.training.samples import atoms_of
    from mlip.workflows.active_learning.committee import train_committee
    from mlip.workflows.distill import student_config

    labelled = work / "ceiling" / "pool-labelled.xyz"
    if not labelled.is_file():
        frames = ase.io.read(work / "pool.xyz", ":")
        for atoms in frames:
            reference = atoms.copy()
            reference.calc = EMT()
            atoms.calc = SinglePointCalculator(atoms, energy=reference.get_potential_energy(),
                                               forces=reference.get_forces(), stress=reference.get_stress())
        labelled.parent.mkdir(parents=True, exist_ok=True)
        write_frames(labelled, frames)
    first = sorted((work / "pool-run" / "iter-000").glob("member-*.safetensors"))[0]
    species = json.loads((work / "pool-run" / "learn.json").read_text())["elements"]  # the members' order
    samples = list(read_dataset(work / "initial.xyz")) + list(read_dataset(labelled))
    t0 = time.perf_counter()
    member = train_committee(student_config(settings["model"], species), samples, work / "ceiling", 1, 0,
                             settings["finetune_epochs"], previous=[first], progress=progress)[0]
    held = list(read_dataset(work / "heldout.xyz", species=species))
    overall, groups = evaluate_groups(load_potential(str(member)), held,
                                      lambda s: str(atoms_of(s).info.get("config_type", "")))
    log(f"ceiling: one member on all {len(samples)} structures: held-out forces MAE "
        f"{overall['forces_mae_meV_per_A']:.1f} meV/Å ({(time.perf_counter() - t0) / 60:.1f} min)")
    return {"n_train": len(samples), "epochs": settings["finetune_epochs"], "members": 1,
            "forces_mae_meV_per_A": overall["forces_mae_meV_per_A"],
            "per_config_type": {k: m["forces_mae_meV_per_A"] for k, (n, m) in groups.items()}}


def point(record: dict) -> dict:
    held = record["heldout"]
    out = {"labels": record["labels"], "forces_mae_meV_per_A": held["forces_mae_meV_per_A"],
           "energy_mae_meV_per_atom": held["energy_mae_meV_per_atom"],
           "rank_correlation": held["rank_correlation"],
           "per_config_type": held["per_config_type"]}
    return out


def summarise(curves: dict, budgets) -> dict:
    """Per budget and strategy: the force MAE of each replicate and their mean (meV/Å), the same per kind of
    held-out structure; and the reduction of the mean force error by uncertainty over random selection,
    1 − mean_uncertainty / mean_random, in all and per kind."""
    table = {}
    for budget in budgets:
        row = {}
        for strategy, replicates in curves.items():
            points = [next((p for p in curve if p["labels"] == budget), None) for curve in replicates]
            if not points or None in points:
                continue
            kinds = sorted(points[0]["per_config_type"])
            row[strategy] = {
                "forces_mae_meV_per_A": [p["forces_mae_meV_per_A"] for p in points],
                "mean_forces_mae_meV_per_A": float(np.mean([p["forces_mae_meV_per_A"] for p in points])),
                "mean_per_config_type": {k: float(np.mean([p["per_config_type"][k]["forces_mae_meV_per_A"]
                                                           for p in points])) for k in kinds},
                "rank_correlation": [p["rank_correlation"] for p in points]}
        if {"uncertainty", "random"} <= set(row):
            u, r = row["uncertainty"], row["random"]
            row["force_error_reduction"] = 1 - u["mean_forces_mae_meV_per_A"] / r["mean_forces_mae_meV_per_A"]
            row["force_error_reduction_per_config_type"] = {
                k: 1 - u["mean_per_config_type"][k] / r["mean_per_config_type"][k]
                for k in u["mean_per_config_type"]}
        table[str(budget)] = row
    return table


def plot(curves: dict, path: Path, top: "dict | None" = None) -> None:
    """The learning curves, in all and per kind; ``top`` (:func:`ceiling`) as a grey line."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    kinds = sorted(next(iter(curves.values()))[0][0]["per_config_type"])
    fig = Figure(figsize=(4 * (len(kinds) + 1), 3.6), constrained_layout=True)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(kinds) + 1)
    colours = {"uncertainty": "tab:blue", "random": "tab:orange"}
    for strategy, replicates in curves.items():
        for r, curve in enumerate(replicates):  # a line per replicate (seed)
            labels = [p["labels"] for p in curve]
            name = f"{strategy}, seed {r}" if len(replicates) > 1 else strategy
            style = ("o-", "s--", "^:", "d-.")[r % 4]
            axes[0].plot(labels, [p["forces_mae_meV_per_A"] for p in curve], style,
                         color=colours.get(strategy), label=name, ms=4)
            for ax, kind in zip(axes[1:], kinds):
                ax.plot(labels, [p["per_config_type"][kind]["forces_mae_meV_per_A"] for p in curve], style,
                        color=colours.get(strategy), label=name, ms=4)
    if top is not None:
        values = [top["forces_mae_meV_per_A"]] + [top["per_config_type"][kind] for kind in kinds]
        for ax, value in zip(axes, values):
            ax.axhline(value, color="grey", lw=1, label=f"whole pool, one member ({top['n_train']})")
    axes[0].set_title("held-out, all")
    for ax, kind in zip(axes[1:], kinds):
        ax.set_title(f"held-out, {kind}")
    for ax in axes:
        ax.set_xlabel("labels (EMT calls) beyond the initial data")
        ax.set_ylabel("force MAE of the committee mean (meV/Å)")
    axes[0].legend(fontsize=7)  # one legend: the panels share their lines
    fig.savefig(str(path), dpi=110)


def git_commit() -> str:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT)
        return done.stdout.strip()
    except OSError:
        return "unknown"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", type=Path, default=Path("active-learning-emt"))
    p.add_argument("--budgets", type=int, nargs="+", default=[50, 100, 200, 400])
    p.add_argument("--per-iteration", type=int, default=50)
    p.add_argument("--committee", type=int, default=3)
    p.add_argument("--epochs", type=int, default=200, help="epochs of the first committee")
    p.add_argument("--finetune-epochs", type=int, default=50)
    p.add_argument("--strategies", nargs="+", default=["uncertainty", "random"])
    p.add_argument("--trust-lo", type=float, default=None,
                   help="trust window of selection by uncertainty, lower bound (eV/Å; runs in "
                        "WORK/uncertainty-trust)")
    p.add_argument("--trust-hi", type=float, default=None,
                   help="trust window, upper bound (eV/Å): more uncertain frames are never labelled")
    p.add_argument("--replicates", type=int, default=1,
                   help="runs of each strategy with seeds 0, 1, ... (the random draw, the members' "
                        "shuffling)")
    p.add_argument("--only-replicate", type=int, default=None, metavar="K",
                   help="run only replicate K (seed K), e.g. replicates in parallel processes; a later run "
                        "without it finds them done and writes the record of all")
    p.add_argument("--ceiling", action="store_true",
                   help="also train one member on the whole pool labelled (what no selection can beat)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (default 1: on two busy cores far faster than torch's default)")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    p.add_argument("--plot", type=Path, default=DEFAULT_PLOT)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--smoke", action="store_true",
                   help="every stage at a few structures, tiny models (checks the script, measures nothing)")
    args = p.parse_args(argv)
    sizes = SMOKE if args.smoke else SIZES
    if any(b % args.per_iteration for b in args.budgets):
        p.error("every budget must be a multiple of --per-iteration")
    import torch

    from mlip.io import write_json

    torch.set_num_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)
    model = args.work / "committee.yaml"
    if not model.is_file():
        import yaml

        smoke = {"model": {**MODEL["model"], "hidden": 8, "num_radial": 4, "num_densities": 2}}
        model.write_text(yaml.safe_dump({**MODEL, **smoke} if args.smoke else MODEL))
    settings = {"committee": args.committee, "model": str(model), "epochs": args.epochs,
                "finetune_epochs": args.finetune_epochs, "per_iteration": args.per_iteration, "seed": 0,
                "trust_lo": args.trust_lo, "trust_hi": args.trust_hi}
    t0 = time.perf_counter()
    make_data(args.work, sizes)
    first = {k: v for k, v in settings.items() if k not in ("trust_lo", "trust_hi")}
    make_pool(args.work, first, sizes["pool_explore"], not args.no_progress)
    curves = {}
    for seed in range(args.replicates) if args.only_replicate is None else [args.only_replicate]:
        for strategy in args.strategies:
            iterations = run_strategy(args.work, strategy, {**settings, "seed": seed}, max(args.budgets),
                                      not args.no_progress)
            curves.setdefault(strategy, []).append([point(r) for r in iterations if "heldout" in r])
    top = ceiling(args.work, first, not args.no_progress) if args.ceiling else None
    table = summarise(curves, args.budgets)
    for budget, row in table.items():
        cells = [f"{s} {row[s]['mean_forces_mae_meV_per_A']:.1f}" for s in args.strategies if row.get(s)]
        if "force_error_reduction" in row:
            cells.append(f"reduction {100 * row['force_error_reduction']:.0f} %")
        log(f"{budget} labels: force MAE (meV/Å) " + ", ".join(cells))
    import ase.io

    record = {"oracle": "emt", "elements": ELEMENTS, "model": MODEL, "settings": settings,
              **sizes, "smoke": args.smoke,
              "pool_size": len(ase.io.read(args.work / "pool.xyz", ":")),
              "heldout_size": len(ase.io.read(args.work / "heldout.xyz", ":")),
              "budgets": args.budgets, "curves": curves, "by_budget": table, "ceiling": top,
              "minutes_this_run": (time.perf_counter() - t0) / 60, "threads": torch.get_num_threads(),
              "torch": torch.__version__, "cpu": platform.processor() or platform.machine(),
              "load_average": os.getloadavg(), "commit": git_commit(), "date": time.strftime("%Y-%m-%d")}
    write_json(args.json, record)
    plot(curves, args.plot, top)
    log(f"wrote {args.json} and {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
