"""Architecture ablations with the training pipeline: same data, same wall-clock budget per variant.

    python benchmarks/accuracy/ablations.py --train emt-train.xyz --test emt-test.xyz --minutes 8 --out ablations
    python benchmarks/accuracy/ablations.py ... --only eqv3-gate eqv3-separate     # a subset (e.g. one per core)
    python benchmarks/accuracy/ablations.py --out ablations --report                # the table of finished variants
    python benchmarks/accuracy/ablations.py --train sige-pbe-train.xyz --valid sige-pbe-valid.xyz --n-train 0 \
        --test sige-pbe-test.xyz --minutes 60 --out ablations-sige \
        --config platonic=examples/recipes/platonic-sige/stage1.yaml \
        --config equiformer=examples/recipes/equiformer_v3-sige/stage1.yaml \
        --config embedded_atom=benchmarks/configs/embedded_atom_sige_stage1.yaml

Each variant starts from an architecture's stage-1 config (by default the EMT ones:
``benchmarks/configs/*_emt_stage1.yaml`` and ``examples/recipes/embedded-atom-emt/stage1.yaml``;
``--config KIND=PATH`` gives another) with one switch changed, trains on the first ``--n-train``
structures of the training file (validation, which picks the best epoch: the next ``--n-valid``, or the
``--valid`` file; ``--n-train 0``: the whole file, split as ``mlip train`` splits it without
``--valid``, i.e. the shipped models' training data) for ``--minutes`` of wall-clock time, and is then
evaluated on the first ``--n-test`` structures of the test file (float64). The cosine schedule needs a
number of epochs: it is set from the variant's training steps and validation batches timed on the data
(:func:`mlip.training.budget.calibrate`, as ``examples/recipes/train_on_budget.py`` does) so that the
schedule ends near the budget (``max_minutes`` stops it in any case). Results go to ``OUT/<variant>/result.json``
(written when the variant finishes, so a rerun skips it; a variant killed after an epoch resumes there)
and the table to ``OUT/ablations.md``;
``--mace OUT/mace_baseline.json`` adds the row of MACE trained on the same files for the same minutes
(``benchmarks/accuracy/mace_baseline.py``).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Optional

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
#: the stage-1 config each variant starts from, by architecture (``--config KIND=PATH`` replaces one)
BASES = {"platonic": ROOT / "benchmarks" / "configs" / "platonic_emt_stage1.yaml",
         "equiformer": ROOT / "benchmarks" / "configs" / "equiformer_v3_emt_stage1.yaml",
         "embedded_atom": ROOT / "examples" / "recipes" / "embedded-atom-emt" / "stage1.yaml"}

#: name → (base config, model overrides, what it tests)
VARIANTS = {
    "platonic-T-softmax": ("platonic", {}, "Platonic: stage-1 settings (tetrahedral, softmax)"),
    "platonic-O-softmax": ("platonic", {"group": "octahedral"}, "Platonic: octahedral group (24 frames)"),
    "platonic-T-linear": ("platonic", {"attention": "linear"}, "Platonic: linear attention"),
    "platonic-T-average-I": ("platonic", {"average_over": "icosahedral"},
                             "Platonic: tetrahedral, averaged over its 5 cosets in I (exactly I-invariant, "
                             "5× cost)"),
    "eqv3-swiglu-merged": ("equiformer", {"activation": "swiglu_s2", "norm": "merged"},
                           "EquiformerV3: SwiGLU-S², merged norm"),
    "eqv3-gate-merged": ("equiformer", {"activation": "gate", "norm": "merged"},
                         "EquiformerV3: gate activation"),
    "eqv3-swiglu-separate": ("equiformer", {"activation": "swiglu_s2", "norm": "separate"},
                             "EquiformerV3: separate layer norm"),
    "eqv3-embedded-atom": ("equiformer", {"terms": {"embedded_atom": {}}},
                           "EquiformerV3 (stage-1 settings) with an embedded-atom term beside it"),
    "embedded-atom": ("embedded_atom", {}, "the embedded-atom term alone: radial densities, no angles"),
}
KEYS = ("energy_mae_meV_per_atom", "forces_mae_meV_per_A", "stress_mae_meV_per_A3")
#: a variant's budget, timed step and planned epochs, kept beside its run so that a killed run resumes
PLAN_NAME = "plan.json"


def variant_config(name: str, out: Path, minutes: float, epochs: int, bases: dict = BASES) -> dict:
    from mlip.io import read_yaml

    kind, overrides, _ = VARIANTS[name]
    cfg = read_yaml(bases[kind], "training config")
    cfg["model"].update(overrides)
    cfg.update(epochs=int(epochs), max_minutes=float(minutes) * 1.15, out_dir=str(out / name))
    cfg["data"] = {}
    return cfg


def seconds_per_step(cfg: dict, samples, n_steps: int = 20, n_warmup: int = 5) -> float:
    """Mean time of one training step (forward, forces, stress, backward, AdamW) over an epoch.

    The probe times ``n_steps`` steps on the batches the trainer's first epoch starts with (its seeded
    permutation), after ``n_warmup`` untimed ones, and scales the time per atom to the mean atoms per
    batch of the whole training set (20 random batches of 8 EMT structures average within ±10 % of
    the set's mean size, 95 % of draws). The first steps are slow (the first 5 at 1.35× the later
    ones, one thread): the earlier probe (1 warm-up, 6 steps on the file's first batches, unscaled)
    overestimated the minutes per epoch of the 60-minute ablation runs by 19–61 %; this one, timed
    afterwards beside another one-thread job, by -4 to +15 %.
    """
    import mlip
    from mlip.models import create_model
    from mlip.training import TrainConfig
    from mlip.training.samples import atoms_of, batch_targets
    from mlip.training.loss import loss_terms

    config = TrainConfig.from_dict(cfg)
    args = dict(config.model)
    potential = create_model(args.pop("name"), seed=0, **args).float()
    opt = torch.optim.AdamW(potential.parameters(), 1e-4)
    bs = config.batch_size
    order = np.random.default_rng([config.seed, 0]).permutation(len(samples))
    seconds, atoms = 0.0, 0
    for b in range(n_warmup + n_steps):
        chunk = [samples[i] for i in order[(b * bs) % len(samples):][:bs]]
        t0 = time.perf_counter()
        graph = mlip.batch_atoms([atoms_of(s) for s in chunk], potential.cutoff, dtype=torch.float32)
        out = potential(graph, compute_forces=True, compute_stress=True, create_graph=True)
        loss, _ = loss_terms(out, batch_targets(chunk, torch.float32, "cpu"), 1.0, config)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if b >= n_warmup:
            seconds += time.perf_counter() - t0
            atoms += sum(s.n_atoms for s in chunk)
    atoms_per_batch = sum(s.n_atoms for s in samples) / math.ceil(len(samples) / bs)
    return seconds / atoms * atoms_per_batch


def run_variant(name: str, args, train_samples, valid_samples, test_samples) -> dict:
    from mlip.checkpoint import load_potential
    from mlip.io import read_json, write_json
    from mlip.training import TrainConfig, budget, train
    from mlip.training.evaluation import evaluate

    out = Path(args.out)
    # A variant killed after an epoch (its train_state and the plan of the same budget) goes on from there;
    # any other unfinished attempt (no result.json, checked by main) starts over.
    plan = read_json(out / name / PLAN_NAME)
    resume = (plan is not None and plan.get("minutes") == args.minutes
              and (out / name / "train_state.safetensors").is_file())
    if resume:
        step, epochs = plan["seconds_per_step"], plan["epochs"]
        print(f"{name}: resuming the killed run", flush=True)
    else:
        # the epochs that fit, from training steps and validation batches timed on the data as the
        # trainer runs them (the recipes' calibration); max_minutes (1.15 × the budget) stops a run that
        # would overrun
        probe = TrainConfig.from_dict(variant_config(name, out, args.minutes, 1, args.bases))
        calibration = budget.calibrate(probe, train_samples, valid_samples, args.minutes)
        step, epochs = calibration.seconds_per_step, calibration.epochs
        print(f"{name}: {calibration.seconds_per_epoch:.1f} s per epoch, {epochs} epochs in {args.minutes:g} min",
              flush=True)
        (out / name).mkdir(parents=True, exist_ok=True)
        write_json(out / name / PLAN_NAME,
                   {"minutes": args.minutes, "seconds_per_step": step, "epochs": epochs})
    cfg = variant_config(name, out, args.minutes, epochs, args.bases)
    result = train(TrainConfig.from_dict(cfg), train_samples, valid_samples, progress=False, resume=resume,
                   overwrite=not resume)
    metrics = evaluate(load_potential(result.best), test_samples, batch_size=16, dtype="float64")
    record = {"variant": name, "what": VARIANTS[name][2], "model": cfg["model"], "epochs_planned": epochs,
              "epochs_run": result.epochs_run, "minutes": result.history[-1]["minutes"],
              "seconds_per_step": step,
              "n_parameters": sum(p.numel() for p in load_potential(result.best).parameters()),
              "n_train": len(train_samples), "n_test": len(test_samples),
              "test": {k: metrics[k] for k in KEYS}}
    write_json(out / name / "result.json", record)
    return record


def finished(out: Path) -> list:
    """The result.json records of the variants finished under ``out``, in the order of VARIANTS."""
    paths = (out / name / "result.json" for name in VARIANTS)
    return [json.loads(path.read_text()) for path in paths if path.is_file()]


def mace_entry(path: Path) -> dict:
    """MACE's entry of a ``benchmarks/accuracy/mace_baseline.py`` JSON."""
    return next(r for r in json.loads(Path(path).read_text())["models"] if r["model"] == "MACE")


def mace_row(path: Path) -> str:
    """The ablation table's row of MACE from a ``benchmarks/accuracy/mace_baseline.py`` JSON (its training
    loop's minutes and epochs, its test errors; trained on the same files for the same minutes)."""
    mace = mace_entry(path)
    budget, t = mace["training"], mace["test"]
    minutes, epochs = budget["train_loop_s"] / 60, budget["epochs_equivalent"]
    threads = budget.get("torch_threads", mace.get("threads"))
    return (f"| MACE | mace_run_train, the same data and minutes ({threads} thread(s)) "
            f"| {mace['n_parameters']:,} | — | {minutes / max(epochs, 1e-9):.2f} | {epochs:.1f} "
            f"| {minutes:.1f} | "
            f"{t[KEYS[0]]:.1f} | {t[KEYS[1]]:.1f} | {t[KEYS[2]]:.2f} |")


def report(out: Path, mace: Optional[Path] = None) -> str:
    """The table of the finished variants (and MACE's row, from ``mace``), written to OUT/ablations.md."""
    rows = finished(out)
    lines = ["| variant | what changes | params | probe s/step | min/epoch | epochs | minutes | "
             "energy MAE (meV/atom) | force MAE (meV/Å) | stress MAE (meV/Å³) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = r["test"]
        per_epoch = r["minutes"] / max(r["epochs_run"], 1)
        lines.append(f"| {r['variant']} | {r['what']} | {r['n_parameters']:,} | {r['seconds_per_step']:.2f} "
                     f"| {per_epoch:.2f} | {r['epochs_run']} | {r['minutes']:.1f} | "
                     f"{t[KEYS[0]]:.1f} | {t[KEYS[1]]:.1f} | {t[KEYS[2]]:.2f} |")
    if mace is not None:
        lines.append(mace_row(mace))
    if rows:
        r = rows[0]
        lines += ["", f"Each variant: {r['n_train']} training structures, one CPU thread, the planned epochs "
                  f"(from a timed probe) run to the end; minutes = its actual training time (min/epoch: "
                  f"training and validation); errors on "
                  f"{r['n_test']} test structures (float64)."]
    text = "\n".join(lines) + "\n"
    (out / "ablations.md").write_text(text, encoding="utf-8")
    return text


def plot(out: Path, path: Path, mace: Optional[Path] = None) -> None:
    """``path`` (PNG): each finished variant's test force MAE against its minutes per epoch (MACE's too, from
    ``mace``), and its validation force MAE along its training minutes (``OUT/<variant>/metrics.json``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from mlip.io import atomic_write

    fig = Figure(figsize=(12, 4.8), constrained_layout=True)
    FigureCanvasAgg(fig)
    cost, curves = fig.subplots(1, 2)
    for k, r in enumerate(finished(out)):
        name, colour = r["variant"], f"C{k % 10}"
        cost.plot(r["minutes"] / max(r["epochs_run"], 1), r["test"][KEYS[1]], "o", color=colour, label=name)
        history = json.loads((out / name / "metrics.json").read_text())
        curves.plot([h["minutes"] for h in history], [h["valid_" + KEYS[1]] for h in history], "-",
                    color=colour, label=name)
    if mace is not None:
        m = mace_entry(mace)
        minutes, epochs = m["training"]["train_loop_s"] / 60, m["training"]["epochs_equivalent"]
        cost.plot(minutes / max(epochs, 1e-9), m["test"][KEYS[1]], "k*", ms=12, label="MACE")
    cost.set_xscale("log")
    cost.set_xlabel("minutes per epoch (one thread)")
    cost.set_ylabel("test force MAE (meV/Å)")
    cost.set_title("accuracy against cost per epoch")
    cost.legend(fontsize=7)
    curves.set_yscale("log")
    curves.set_xlabel("training minutes")
    curves.set_ylabel("validation force MAE (meV/Å)")
    curves.set_title("learning curves")
    curves.legend(fontsize=7)
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", default="emt-train.xyz")
    parser.add_argument("--test", default="emt-test.xyz")
    parser.add_argument("--minutes", type=float, default=8.0)
    parser.add_argument("--n-train", type=int, default=1200,
                        help="first N structures for training (the next --n-valid validate); 0: the whole file, "
                             "split as mlip train splits it (what the shipped models saw)")
    parser.add_argument("--n-valid", type=int, default=150)
    parser.add_argument("--valid", help="a validation file (then --train's first --n-train structures, or all "
                                        "with --n-train 0, train)")
    parser.add_argument("--config", action="append", default=[], metavar="KIND=PATH",
                        help=f"the base config of an architecture ({', '.join(BASES)}); default the EMT "
                             "stage-1 configs")
    parser.add_argument("--n-test", type=int, default=500)
    parser.add_argument("--only", nargs="*", choices=sorted(VARIANTS))
    parser.add_argument("--out", default="ablations")
    parser.add_argument("--report", action="store_true", help="only write the table of finished variants")
    parser.add_argument("--plot", metavar="PNG",
                        help="with the table, a plot of the finished variants' force errors against their cost "
                             "and of their learning curves")
    parser.add_argument("--mace", help="mace_baseline.json of MACE trained on the same files and minutes: "
                                       "a row of the table")
    args = parser.parse_args(argv)
    args.bases = dict(BASES)
    for item in args.config:
        kind, _, path = item.partition("=")
        if kind not in BASES or not path:
            parser.error(f"--config {item!r}: give KIND=PATH with KIND one of {', '.join(BASES)}")
        if not Path(path).is_file():
            parser.error(f"--config {item!r}: no file {path}")
        args.bases[kind] = Path(path)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.report:
        from mlip.data import read_dataset

        train_all = list(read_dataset(args.train))
        if args.valid:
            train_samples = train_all[:args.n_train] if args.n_train > 0 else train_all
            valid_samples = list(read_dataset(args.valid))
        elif args.n_train > 0:
            train_samples = train_all[:args.n_train]
            valid_samples = train_all[args.n_train:args.n_train + args.n_valid]
        else:  # exactly the shipped models' data: mlip train's split (valid_fraction 0.1, seed 0, by group)
            from mlip.data import train_valid_split

            train_samples, valid_samples = train_valid_split(train_all, 0.1, 0)
        test_samples = list(read_dataset(args.test))[:args.n_test]
        for name in args.only or list(VARIANTS):
            if (out / name / "result.json").is_file():
                print(f"{name}: done already")
                continue
            record = run_variant(name, args, train_samples, valid_samples, test_samples)
            print(name, json.dumps(record["test"]), flush=True)
    print(report(out, args.mace))
    if args.plot:
        plot(out, Path(args.plot), args.mace)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
