"""Our models next to a MACE model trained on the same data with the same wall-clock budget.

    python benchmarks/accuracy/mace_baseline.py --train emt-train.xyz --test emt-test.xyz --minutes 60 \\
        --mace-python /work/venvs/mace/bin/python --ours platonic-emt --ours equiformer_v3-emt --out mace-run/

Run with the package's Python. MACE (mace-torch, never a dependency of this package: it pins
e3nn 0.4.4 and installs top-level ``tests``/``scripts`` packages) lives in its own virtualenv, whose
Python runs ``benchmarks/accuracy/mace_helper.py`` in subprocesses; see benchmarks/README.md for the setup.

1. MACE is trained with its own ``mace_run_train`` on ``--train`` (validation fraction 0.1, seed 0;
   a small CPU model by default, see ``mace_arguments``) for ``--minutes`` of wall-clock time,
   counted from the start of MACE's training loop like ``mlip train``'s ``max_minutes``; the epoch
   running when the budget is spent stops after its current batch, is validated and checkpointed,
   and MACE saves its best checkpoint as a model (details in mace_helper.py). ``--mace-model``
   skips training and uses a model file that exists.
2. Test errors on ``--test`` in float64, for MACE (``MACECalculator(..., default_dtype="float64")``,
   predictions written to JSON by the helper) and for each ``--ours`` (a shipped model's name or a
   checkpoint path; ``mlip.training.evaluation.evaluate(potential, samples, dtype="float64")``),
   both with :func:`mlip.training.evaluation.error_metrics`: MAE/RMSE of energy per atom
   (meV/atom), force components (meV/Å), stress components (meV/Å³; structures with a stress label).
3. Cost of an MD step: energy + forces + stress in float32 on the CPU, positions moved by
   σ = 1e-3 Å before every call (nothing cached, neighbour list rebuilt), median of ``--repeats``
   calls after ``--warmup`` calls. ``--md-cells cu-au`` (default): a 256-atom fcc Cu cell (a = 3.61 Å,
   cubic × 4) and a 500-atom Cu–Au solid solution (a = 3.75 Å, cubic × 5, 50 % Au at random with
   default_rng(0), rattled 0.05 Å with seed 1); ``si-ge``: a 216-atom diamond Si cell (a = 5.47 Å,
   cubic × 3) and a 512-atom Si–Ge solid solution (a = 5.62 Å, cubic × 4, 50 % Ge the same way,
   rattled the same way). The same structures (written to OUT/md_cells.xyz) go to both programs.

Threads: ``OMP_NUM_THREADS`` from the environment (or ``--threads``, which sets it for the MACE
subprocesses and ``torch.set_num_threads`` here); the table states the thread counts each side used.
Timings are taken one after the other in one run: compare the ratios, not absolute times across runs.

Writes OUT/mace_baseline.json and OUT/mace_baseline.md (the table printed at the end), OUT/mace/
(MACE's work folder: log, checkpoints, model, budget report, predictions, timings).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import shutil
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np

# --md-cells: the pure crystal and the rattled half-and-half solid solution whose MD step is timed, the
# cells a model card times too (its speed and this comparison are of the same pair)
from mlip.workflows.model_card.measure import MD_CELLS, md_cells

HELPER = Path(__file__).resolve().with_name("mace_helper.py")
MACE_NAME = "mace_baseline"
MACE_R_MAX = 5.0  # Å: MACE's cutoff, and the radius within which an isolated atom has no neighbour


def label_keys(path: Path) -> dict:
    """The extxyz keys of a file's energy, forces and stress labels: ``mlip data label``'s ``REF_`` keys
    (:data:`mlip.workflows.labelling.LABEL_KEYS`) when its first frame has them, else ASE's own."""
    import ase.io

    from mlip.workflows.labelling import LABEL_KEYS

    first = ase.io.read(path, index=0)
    if LABEL_KEYS["energy"] in first.info:
        return dict(LABEL_KEYS)
    return {"energy": "energy", "forces": "forces", "stress": "stress"}


def mace_arguments(train: Path, work_dir: Path, e0s: str, keys: dict = None) -> list:
    """mace_run_train arguments (mace-torch 0.3.16): a small CPU model, the file's label ``keys``
    (:func:`label_keys`; default ASE's), no Stage Two (SWA needs to know the number of epochs in
    advance, which a wall-clock budget does not; pass ``--mace-extra "--swa --start_swa N"`` to switch
    it on at epoch N). ``e0s``: MACE's ``--E0s``."""
    keys = keys or {"energy": "energy", "forces": "forces", "stress": "stress"}
    return [
        "--name", MACE_NAME, "--seed", "0", "--work_dir", str(work_dir),
        "--train_file", str(train), "--valid_fraction", "0.1",
        "--energy_key", keys["energy"], "--forces_key", keys["forces"], "--stress_key", keys["stress"],
        "--model", "MACE", "--num_channels", "32", "--max_L", "1", "--correlation", "3",
        "--num_interactions", "2", "--r_max", str(MACE_R_MAX),
        "--E0s", e0s,
        "--loss", "stress", "--energy_weight", "1", "--forces_weight", "10", "--stress_weight", "10",
        "--compute_stress", "True", "--error_table", "PerAtomRMSEstressvirials",
        "--batch_size", "8", "--valid_batch_size", "16", "--lr", "0.01", "--amsgrad",
        "--ema", "--ema_decay", "0.99",
        "--max_num_epochs", "1000000", "--patience", "1000000",  # the wall-clock budget stops it
        "--default_dtype", "float32", "--device", "cpu", "--plot", "False", "--pin_memory", "False",
    ]


def mace_e0s(kind: str, train_atoms, r_max: float = MACE_R_MAX) -> str:
    """MACE's ``--E0s`` value. ``isolated``: the labelled energies of the training set's isolated atoms
    (one atom, no neighbour within ``r_max``; the same structures ``reference_energies: isolated_atoms``
    uses), as a ``{Z: eV}`` dict. MACE needs these: its energy is E0 plus readouts of features that
    vanish for an atom without neighbours, so an isolated atom gets exactly E0 and every small cluster
    lies on the way to it. ``average``: MACE's least-squares fit, which on data holding isolated atoms
    and clusters pins them near the bulk energy (the 2026-12-01 run: clusters 1.8 eV/atom too low)."""
    if kind == "average":
        return "average"
    from mlip.training.reference_energies import isolated_atom_energies
    from mlip.training.samples import atoms_of

    numbers = sorted({int(z) for sample in train_atoms for z in atoms_of(sample).numbers})
    try:
        energies = isolated_atom_energies(train_atoms, numbers, r_max)
    except ValueError as err:
        raise SystemExit(f"--mace-e0s isolated: {err}; use --mace-e0s average") from None
    return "{" + ", ".join(f"{z}: {float(e)!r}" for z, e in zip(numbers, energies)) + "}"


def time_steps(calc, atoms, warmup: int, repeats: int):
    """Median seconds per energy+forces+stress call; the same loop as mace_helper.py's ``time``."""
    atoms = atoms.copy()
    atoms.calc = calc
    rng = np.random.default_rng(0)
    times = []
    for k in range(warmup + repeats):
        atoms.positions += rng.normal(scale=1e-3, size=atoms.positions.shape)
        t0 = time.perf_counter()
        atoms.get_potential_energy()
        atoms.get_forces()
        atoms.get_stress()
        if k >= warmup:
            times.append(time.perf_counter() - t0)
    return float(np.median(times)), times


def mace_predictions(pred_json: Path, samples) -> dict:
    """The dict :func:`mlip.training.evaluation.predictions` returns, from the helper's JSON."""
    from mlip.training.evaluation import flatten_predictions

    preds = json.loads(pred_json.read_text())["predictions"]
    if len(preds) != len(samples):
        raise RuntimeError(f"{pred_json}: {len(preds)} predictions for {len(samples)} test structures")
    return flatten_predictions(samples, [p["energy"] for p in preds], [p["forces"] for p in preds],
                               [p["stress"] for p in preds])


def run_helper(mace_python, args, log: Path, env) -> None:
    cmd = [mace_python, str(HELPER)] + [str(a) for a in args]
    with open(log, "a") as fh:
        fh.write("$ " + shlex.join(cmd) + "\n")
        fh.flush()
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
    if proc.returncode != 0:
        tail = log.read_text().splitlines()[-30:]
        raise SystemExit(f"MACE helper failed (exit {proc.returncode}): {shlex.join(cmd)}\n"
                         f"last lines of {log}:\n" + "\n".join(tail))


def training_info(potential) -> dict:
    meta = getattr(potential, "metadata", None) or {}
    info = {"trained": meta.get("trained")}
    training = meta.get("training") or {}
    config = training.get("config") or {}
    if config.get("max_minutes") is not None:
        info["max_minutes"] = config["max_minutes"]
    for key in ("n_train", "n_valid"):
        if key in training:
            info[key] = training[key]
    if "epoch" in meta:
        info["epochs"] = meta["epoch"]
    return info


def fmt(x, digits=1):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{x:.{digits}f}"


def table(rows, sizes) -> str:
    """Markdown table of ``rows``, with the MD columns of the cells of ``sizes`` atoms."""
    a, b = sizes
    head = (f"| model | params | E MAE (meV/atom) | F MAE (meV/Å) | S MAE (meV/Å³) | ms/step {a} | ms/step {b} "
            f"| atom·steps/s {a} | atom·steps/s {b} | cost vs MACE {a} | cost vs MACE {b} | aim met |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        m, t = r["test"], r["md"]
        lines.append(
            f"| {r['model']} | {r['n_parameters']:,} | {fmt(m.get('energy_mae_meV_per_atom'), 2)} "
            f"| {fmt(m.get('forces_mae_meV_per_A'), 1)} | {fmt(m.get('stress_mae_meV_per_A3'), 2)} "
            f"| {fmt(t[str(a)]['ms_per_step'])} | {fmt(t[str(b)]['ms_per_step'])} "
            f"| {fmt(t[str(a)]['atom_steps_per_s'], 0)} | {fmt(t[str(b)]['atom_steps_per_s'], 0)} "
            f"| {fmt(r.get(f'cost_vs_mace_{a}'), 2)} | {fmt(r.get(f'cost_vs_mace_{b}'), 2)} "
            f"| {r.get('aim_met', '–')} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train", required=True, help="training extxyz (ASE's energy/forces/stress labels)")
    p.add_argument("--test", required=True, help="test extxyz")
    p.add_argument("--minutes", type=float, default=60.0, help="MACE's wall-clock training budget (default 60)")
    p.add_argument("--mace-python", default="/work/venvs/mace/bin/python", help="Python of the MACE virtualenv")
    p.add_argument("--ours", action="append", default=[], metavar="NAME_OR_PATH",
                   help="our model: shipped name or checkpoint path; repeatable")
    p.add_argument("--out", default="mace-run", help="output folder (default mace-run)")
    p.add_argument("--mace-model", default=None, help="use this trained MACE .model instead of training one")
    p.add_argument("--mace-e0s", choices=("isolated", "average"), default="isolated",
                   help="MACE's per-element energies: the training set's isolated atoms (default) or MACE's "
                        "least-squares 'average'")
    p.add_argument("--mace-extra", default="", help="extra mace_run_train arguments (override the defaults)")
    p.add_argument("--threads", type=int, default=None, help="threads for both (default: OMP_NUM_THREADS / torch's)")
    p.add_argument("--md-cells", choices=sorted(MD_CELLS), default="cu-au",
                   help="the pure and alloy cells whose MD step is timed (default cu-au)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=10)
    args = p.parse_args(argv)

    import ase.io
    import torch

    import mlip
    from mlip.calculators.model_loading import potential_of
    from mlip.training.evaluation import error_metrics, evaluate

    env = dict(os.environ)
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
        torch.set_num_threads(args.threads)
    out = Path(args.out)
    mace_dir = out / "mace"
    train, test = Path(args.train).resolve(), Path(args.test).resolve()
    from mlip.data import read_dataset

    test_samples = read_dataset(test)   # ASE's label keys or mlip data label's REF_ ones
    train_atoms = read_dataset(train)
    n_train = len(train_atoms)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "mace.log"
    log.write_text("")  # the MACE helpers' output of this run
    cells_path = out / "md_cells.xyz"
    cells = md_cells(args.md_cells)
    sizes = [len(c) for c in cells]
    ase.io.write(cells_path, cells, format="extxyz")
    result = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "host": platform.node(),
              "train": str(train), "test": str(test), "n_train": n_train, "n_test": len(test_samples),
              "minutes": args.minutes, "threads_here": torch.get_num_threads(), "torch": torch.__version__,
              "mlip": mlip.__version__, "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS"), "models": []}

    # Every --ours is loaded before an hour of MACE training, not after it; the float64 potentials
    # are kept for the evaluation below.
    evaluated = {}
    for spec in args.ours:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                evaluated[spec] = potential_of(mlip.load_calculator(spec, device="cpu", dtype="float64"))
        except Exception as err:
            raise SystemExit(f"--ours {spec}: cannot be loaded ({err})") from None

    # --- MACE: train within the budget, predict the test set (float64), time MD steps (float32)
    if args.mace_model:
        model_path = Path(args.mace_model).resolve()
        # a model trained by this script keeps its budget record beside it
        record = model_path.parent / "budget.json"
        budget = json.loads(record.read_text()) if record.is_file() else None
        arguments = model_path.parent / "arguments.json"  # and the arguments it was trained with
        if arguments.is_file():
            result.update(json.loads(arguments.read_text()))
    else:
        if mace_dir.exists():  # stale checkpoints would be picked up by MACE's load_latest
            shutil.rmtree(mace_dir)
        mace_dir.mkdir(parents=True)
        e0s = mace_e0s(args.mace_e0s, train_atoms)
        result["mace_e0s"] = e0s
        mace_args = mace_arguments(train, mace_dir.resolve(), e0s, label_keys(train)) + shlex.split(args.mace_extra)
        result["mace_arguments"] = mace_args
        (mace_dir / "arguments.json").write_text(json.dumps({"mace_e0s": e0s, "mace_arguments": mace_args}, indent=1))
        print(f"training MACE for {args.minutes} min (log: {log}) ...", flush=True)
        t0 = time.time()
        run_helper(args.mace_python, ["train", "--budget-s", args.minutes * 60, "--report",
                                      mace_dir / "budget.json", "--"] + mace_args, log, env)
        budget = json.loads((mace_dir / "budget.json").read_text())
        budget["wall_s_including_setup"] = time.time() - t0
        model_path = mace_dir / f"{MACE_NAME}.model"
        stage_two = mace_dir / f"{MACE_NAME}_stagetwo.model"  # written when --swa reached its start epoch
        if stage_two.exists():
            model_path = stage_two
        if not model_path.exists():
            raise SystemExit(f"MACE wrote no {model_path}; see {log}")
        print(f"MACE: {budget['batches']} batches = {budget['epochs_equivalent']:.2f} epochs in "
              f"{budget['train_loop_s']:.0f} s of training loop ({budget['wall_s_including_setup']:.0f} s in all)",
              flush=True)
    mace_dir.mkdir(parents=True, exist_ok=True)
    run_helper(args.mace_python, ["predict", "--model", model_path, "--structures", test,
                                  "--out", mace_dir / "test_predictions.json"], log, env)
    pred_json = json.loads((mace_dir / "test_predictions.json").read_text())
    run_helper(args.mace_python, ["time", "--model", model_path, "--structures", cells_path,
                                  "--out", mace_dir / "timing.json", "--warmup", args.warmup,
                                  "--repeats", args.repeats], log, env)
    mace_timing = json.loads((mace_dir / "timing.json").read_text())
    mace_row = {"model": "MACE", "source": str(model_path), "n_parameters": pred_json["n_parameters"],
                "test": error_metrics(mace_predictions(mace_dir / "test_predictions.json", test_samples)),
                "md": {}, "threads": mace_timing["torch_threads"], "training": budget}
    for r in mace_timing["rows"]:
        mace_row["md"][str(r["atoms"])] = {"ms_per_step": 1e3 * r["s_per_step"],
                                           "atom_steps_per_s": r["atoms"] / r["s_per_step"], "all_s": r["all_s"]}
    rows = [mace_row]

    # --- ours
    for spec in args.ours:
        potential = evaluated[spec]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # A separate load: evaluation casts its potential to float64, timing runs in float32.
            calc = mlip.load_calculator(spec, device="cpu", dtype="float32")
        row = {"model": spec, "n_parameters": int(sum(q.numel() for q in potential.parameters())),
               "training": training_info(potential), "threads": torch.get_num_threads()}
        row["test"] = evaluate(potential, test_samples, dtype="float64")
        row["md"] = {}
        for atoms in cells:
            sec, all_s = time_steps(calc, atoms, args.warmup, args.repeats)
            row["md"][str(len(atoms))] = {"ms_per_step": 1e3 * sec, "atom_steps_per_s": len(atoms) / sec,
                                          "all_s": all_s}
        for n in sizes:
            row[f"cost_vs_mace_{n}"] = row["md"][str(n)]["ms_per_step"] / mace_row["md"][str(n)]["ms_per_step"]
        keys = ("energy_mae_meV_per_atom", "forces_mae_meV_per_A", "stress_mae_meV_per_A3")
        as_accurate = all(not math.isfinite(mace_row["test"][k]) or row["test"][k] <= mace_row["test"][k]
                          for k in keys)
        cheaper = all(row[f"cost_vs_mace_{n}"] < 1 for n in sizes)
        row["as_accurate_as_mace"], row["cheaper_than_mace"] = as_accurate, cheaper
        row["aim_met"] = "yes" if as_accurate and cheaper else (
            "accuracy only" if as_accurate else "cost only" if cheaper else "no")
        rows.append(row)
        print(f"{spec}: evaluated", flush=True)

    result["models"] = rows
    text = table(rows, sizes)
    notes = [
        f"Test set {test.name} ({len(test_samples)} structures). "
        + (f"MACE trained on {train.name} ({n_train} structures, 10 % for validation) for {args.minutes:g} min of "
           f"training loop ({budget['epochs_equivalent']:.2f} epochs)." if budget
           else f"MACE model given with --mace-model ({model_path.name}); its training is not described here."),
        "Errors: float64, MAE of energy per atom, force components and stress components (structures with a stress "
        "label). MD step: energy + forces + stress, float32, median of "
        f"{args.repeats} calls after {args.warmup}; threads: MACE {mace_row['threads']}, ours {torch.get_num_threads()}. "
        "cost vs MACE = our ms/step ÷ MACE's (below 1 is cheaper). aim met: every MAE ≤ MACE's and cheaper at both sizes.",
    ]
    if result.get("mace_e0s"):
        notes.append(f"MACE's per-element energies (--E0s): {result['mace_e0s']}"
                     + (" (the training set's isolated atoms)." if result["mace_e0s"] != "average"
                        else " (MACE's least-squares fit)."))
    if result.get("mace_arguments"):
        notes.append("mace_run_train " + shlex.join(str(a) for a in result["mace_arguments"]))
    md = "# MACE baseline\n\n" + text + "\n\n" + "\n\n".join(notes) + "\n"
    print()
    print(md)
    (out / "mace_baseline.md").write_text(md)
    (out / "mace_baseline.json").write_text(json.dumps(result, indent=1, default=float))
    print(f"wrote {out / 'mace_baseline.json'} and {out / 'mace_baseline.md'}")


if __name__ == "__main__":
    main()
