"""The Si–Ge recipes' training step beside MACE's on the same data: cost per epoch and where it goes.

    python benchmarks/speed/training_step.py --threads 2 \\
        --train examples/datasets/sige-pbe/work/sige-pbe-train.xyz \\
        --mace-python /work/venvs/mace/bin/python --out benchmarks/results/training-step-sige.json

For every recipe (``--recipes``, default ``equiformer_v3-sige`` and ``platonic-sige``: their
``examples/recipes/<name>/stage1.yaml``) a step is what ``mlip train`` does per batch: the batch's graph,
the forward pass with forces and stress kept differentiable, the loss, the backward pass (a double
backward through the forces) and AdamW. Steps run on the batches of the trainer's first epoch (its seeded
order), ``--warmup`` untimed ones first, then ``--steps`` timed in each of ``--rounds`` rounds, the
recipes alternating round by round so that a load on the machine falls on all of them alike. Reported:
seconds per step by stage (graph, forward with forces and stress, backward, optimiser), seconds per epoch
(the mean step over the epoch's number of batches, scaled to the set's mean atoms per batch, as
``ablations.seconds_per_step`` does), structures per second, and each recipe's ratio to the first.

``--profile-steps`` more steps of each recipe run under ``torch.profiler``; every operator's self time is
put in one of three stages: the **forward** pass (the energy), the **force backward** (the autograd pass
inside the potential that gives forces and stress, kept as a graph) and the **parameter backward**
(``loss.backward()``, which differentiates that graph again); the optimiser is a fourth. The JSON has
each stage's share and its ten costliest operators.

``--compile`` adds for every recipe an arm whose step is ``mlip train``'s compiled one (``compile: true``,
:mod:`mlip.training.compiled_step`: forward, forces and stress, loss and parameter gradients as one
torch.compile graph; AdamW eager), from the same starting weights on the same batches. The steps then
cycle over the first ``--steps`` batches of the epoch, and every arm first takes one untimed pass over
them (at least ``--warmup`` steps), so that the compiled arms have compiled a graph for each batch before
the timed rounds; the JSON gives the compilation's cost apart (wall and process CPU seconds of that
pass, the graphs compiled, per-step times), the losses of both arms' first step (same weights, same
batch), and each step's process CPU time beside its wall time. Set ``TORCHINDUCTOR_COMPILE_THREADS=1``
on a small machine; whether the inductor cache (``/tmp/torchinductor_<user>``) was warm decides the
compile time.

``--device cuda`` runs the recipes on a GPU (``benchmarks/gpu/gpu_check.sh``'s ``train`` stage), each
stage's time taken after the device's queued work; MACE, when asked for, stays on the CPU.

MACE (``--mace-python``, its own virtualenv: ``benchmarks/README.md``) trains on the same file with the
settings of ``mace_baseline.py`` (batch size 8, 32 channels, L = 1, correlation 3, 2 interactions,
r_max 5 Å) for ``--mace-seconds`` through ``mace_helper.py``; its seconds per batch are the training
loop's time over the batches it ran (its per-epoch validation included, a few per cent), and its seconds
per epoch those times the batches of an epoch of the whole file (MACE holds out 10 % for validation).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ("equiformer_v3-sige", "platonic-sige")
STAGES = ("forward", "force backward", "parameter backward", "optimiser")


class Recipe:
    """One recipe's model, optimiser and batches, stepping as the trainer does."""

    def __init__(self, name: str, samples, compiled: bool = False, cycle: int = 0, device: str = "cpu"):
        import torch
        import yaml

        from mlip.models import create_model
        from mlip.training import TrainConfig

        self.name = name + (" compiled" if compiled else "")
        self.recipe = name
        config = TrainConfig.from_dict(yaml.safe_load((ROOT / "examples" / "recipes" / name / "stage1.yaml")
                                                      .read_text()))
        args = dict(config.model)
        self.config = config
        self.device = torch.device(device)
        self.potential = create_model(args.pop("name"), seed=0, **args).float().to(self.device)
        self.optimizer = torch.optim.AdamW(self.potential.parameters(), 1e-4)
        self.samples = samples
        self.batch_size = config.batch_size
        self.order = np.random.default_rng([config.seed, 0]).permutation(len(samples))
        self.next = 0
        self.batches_per_epoch = math.ceil(len(samples) / self.batch_size)
        self.atoms_per_batch = sum(s.n_atoms for s in samples) / self.batches_per_epoch
        #: steps cycle over this many batches (0: they walk on through the epoch)
        self.cycle = cycle
        self.compiled = None
        if compiled:
            from mlip.training.compiled_step import CompiledStep

            self.compiled = CompiledStep(self.potential, config, 1.0)

    def clock(self) -> float:
        """Seconds now, after the device's queued work (a GPU runs asynchronously)."""
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def step(self, profiler_ranges: bool = False) -> Dict[str, float]:
        """One training step on the next batch: seconds per stage, the batch's atoms, the step's
        process CPU seconds and its loss."""
        import torch

        import mlip
        from mlip.training.samples import atoms_of, batch_targets
        from mlip.training.loss import loss_terms

        bs = self.batch_size
        index = self.next % self.cycle if self.cycle else self.next
        chunk = [self.samples[i] for i in self.order[(index * bs) % len(self.samples):][:bs]]
        self.next += 1
        clock = self.clock
        c0 = time.process_time()
        t0 = clock()
        graph = mlip.batch_atoms([atoms_of(s) for s in chunk], self.potential.cutoff, dtype=torch.float32)
        graph = graph.to(self.device)
        targets = batch_targets(chunk, torch.float32, self.device)
        t1 = clock()
        if self.compiled is not None:  # loss and gradients from the compiled graph
            self.optimizer.zero_grad()
            loss = self.compiled(graph, targets)
            if loss is None:
                raise RuntimeError(f"the compiled step fell back to eager: {self.compiled.failure}")
            t2 = t3 = clock()
            self.optimizer.step()
            t4 = clock()
            return {"graph": t1 - t0, "forward with forces and stress": t2 - t1, "backward": t3 - t2,
                    "optimiser": t4 - t3, "atoms": sum(s.n_atoms for s in chunk),
                    "cpu": time.process_time() - c0, "loss": float(loss.detach())}
        with torch.profiler.record_function("model"):
            out = self.potential(graph, compute_forces=True, compute_stress=True, create_graph=True)
            loss, _ = loss_terms(out, targets, 1.0, self.config)
        t2 = clock()
        with torch.profiler.record_function("parameter backward"):
            self.optimizer.zero_grad()
            loss.backward()
        t3 = clock()
        with torch.profiler.record_function("optimiser"):
            self.optimizer.step()
        t4 = clock()
        return {"graph": t1 - t0, "forward with forces and stress": t2 - t1, "backward": t3 - t2,
                "optimiser": t4 - t3, "atoms": sum(s.n_atoms for s in chunk),
                "cpu": time.process_time() - c0, "loss": float(loss.detach())}


def stage_of(event) -> str:
    """The stage of a profiler event (see the module docstring), from its enclosing ranges."""
    names = []
    parent = event
    while parent is not None:
        names.append(parent.name)
        parent = parent.cpu_parent
    if "optimiser" in names:
        return "optimiser"
    if "parameter backward" in names:
        return "parameter backward"
    if any(n.startswith("autograd::engine::evaluate_function") for n in names):
        return "force backward"
    return "forward"


def profile(recipe: Recipe, steps: int) -> Dict[str, object]:
    """Self CPU time per stage and its costliest operators over ``steps`` steps."""
    import torch
    from torch.profiler import ProfilerActivity

    with torch.profiler.profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            recipe.step()
    totals: Dict[str, float] = {s: 0.0 for s in STAGES}
    ops: Dict[str, Dict[str, List[float]]] = {s: {} for s in STAGES}
    for event in prof.events():
        if event.name in ("model", "parameter backward", "optimiser") or event.name.startswith(
                ("autograd::engine::evaluate_function", "ProfilerStep")):
            continue
        stage = stage_of(event)
        us = float(event.self_cpu_time_total)
        totals[stage] += us
        entry = ops[stage].setdefault(event.name, [0.0, 0])
        entry[0] += us
        entry[1] += 1
    whole = sum(totals.values()) or 1.0
    return {"steps": steps,
            "stages": {s: {"self_ms_per_step": totals[s] / 1000 / steps, "share": totals[s] / whole,
                           "top_operators": top_operators(ops[s], steps)}
                       for s in STAGES}}


def top_operators(ops: Dict[str, List[float]], steps: int, count: int = 10) -> List[Dict[str, object]]:
    """The ``count`` operators of most self time in {name: [self µs, calls]}, per step."""
    ranked = sorted(ops.items(), key=lambda kv: -kv[1][0])[:count]
    return [{"name": n, "self_ms_per_step": v[0] / 1000 / steps, "calls_per_step": v[1] / steps}
            for n, v in ranked]


def step_wall(part: Dict[str, float]) -> float:
    """A step's wall seconds: the sum of its stages."""
    return sum(v for k, v in part.items() if k not in ("atoms", "cpu", "loss"))


def warm_up(recipe: Recipe, steps: int) -> Dict[str, object]:
    """``steps`` untimed steps: their wall and process CPU seconds (a compiled arm's compilation, with
    the graphs it compiled) and the first step's loss."""
    from torch._dynamo.utils import counters

    graphs = counters["stats"]["unique_graphs"]
    parts = [recipe.step() for _ in range(steps)]
    return {"steps": steps, "wall_s": sum(step_wall(p) for p in parts), "cpu_s": sum(p["cpu"] for p in parts),
            "first_loss": parts[0]["loss"] if parts else None, "step_wall_s": [step_wall(p) for p in parts],
            "graphs_compiled": counters["stats"]["unique_graphs"] - graphs}


def time_recipes(recipes: List[Recipe], steps: int, warmup: int, rounds: int) -> Dict[str, dict]:
    warmups = {recipe.name: warm_up(recipe, warmup) for recipe in recipes}
    per: Dict[str, List[Dict[str, float]]] = {r.name: [] for r in recipes}
    for _ in range(rounds):
        for recipe in recipes:
            parts = [recipe.step() for _ in range(steps)]
            per[recipe.name].append({k: sum(p[k] for p in parts) for k in parts[0]})
    out = {}
    for recipe in recipes:
        rounds_ = per[recipe.name]
        stage_keys = [k for k in rounds_[0] if k not in ("atoms", "cpu", "loss")]
        # per atom, so that rounds over batches of different sizes compare; the median round
        per_atom = sorted(sum(r[k] for k in stage_keys) / r["atoms"] for r in rounds_)
        step = per_atom[len(per_atom) // 2] * recipe.atoms_per_batch
        cpu_per_atom = sorted(r["cpu"] / r["atoms"] for r in rounds_)
        cpu_step = cpu_per_atom[len(cpu_per_atom) // 2] * recipe.atoms_per_batch
        atoms = sum(r["atoms"] for r in rounds_)
        out[recipe.name] = {
            "seconds_per_step": step,
            "seconds_per_epoch": step * recipe.batches_per_epoch,
            "cpu_seconds_per_step": cpu_step, "cpu_seconds_per_epoch": cpu_step * recipe.batches_per_epoch,
            "round_seconds_per_atom": [sum(r[k] for k in stage_keys) / r["atoms"] for r in rounds_],
            "round_cpu_seconds_per_atom": [r["cpu"] / r["atoms"] for r in rounds_],
            "warmup": warmups[recipe.name],
            "structures_per_second": recipe.batch_size / step,
            "batch_size": recipe.batch_size, "batches_per_epoch": recipe.batches_per_epoch,
            "stage_seconds_per_step": {k: sum(r[k] for r in rounds_) / atoms * recipe.atoms_per_batch
                                       for k in stage_keys},
            "parameters": recipe.potential.num_parameters(),
        }
    return out


def mace_isolated_e0s(samples) -> str:
    """MACE's ``--E0s``: the training set's isolated atoms (``mace_baseline.mace_e0s``), from the samples
    as mlip reads them (whichever label keys the file uses)."""
    sys.path.insert(0, str(ROOT / "benchmarks" / "accuracy"))
    from mace_baseline import mace_e0s

    return mace_e0s("isolated", samples)


def time_mace(mace_python: str, train: Path, seconds: float, threads: int, e0s: str,
              n_structures: int) -> Dict[str, object]:
    """MACE trained ``seconds`` on ``train`` by ``mace_helper.py`` (see the module docstring); ``e0s``:
    :func:`mace_isolated_e0s`."""
    sys.path.insert(0, str(ROOT / "benchmarks" / "accuracy"))
    from mace_baseline import label_keys, mace_arguments

    with tempfile.TemporaryDirectory() as work:
        report = Path(work) / "report.json"
        args = mace_arguments(train.resolve(), Path(work) / "mace", e0s, label_keys(train))
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        helper = ROOT / "benchmarks" / "accuracy" / "mace_helper.py"
        subprocess.run([mace_python, str(helper), "train", "--budget-s",
                        str(seconds), "--report", str(report), "--", *args], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        result = json.loads(report.read_text())
    per_batch = result["train_loop_s"] / result["batches"]
    batches = math.ceil(n_structures / 8)  # batch size 8 over the whole file, as for our recipes
    return {"seconds_per_step": per_batch, "seconds_per_epoch": per_batch * batches, "batch_size": 8,
            "structures_per_second": 8 / per_batch, "batches_timed": result["batches"],
            "mace": result["mace"], "torch_threads": result["torch_threads"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True, help="the training extxyz (labels under REF_ keys)")
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (the GPU check); MACE runs on the CPU")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile-steps", type=int, default=5, help="0: no profile")
    parser.add_argument("--compile", action="store_true",
                        help="add each recipe's compiled step as a second arm (see the module docstring)")
    parser.add_argument("--mace-python", help="the MACE virtualenv's python (none: MACE is left out)")
    parser.add_argument("--mace-seconds", type=float, default=120.0)
    parser.add_argument("--out", help="the JSON record")
    args = parser.parse_args(argv)

    import torch

    from mlip.data import read_dataset

    torch.set_num_threads(args.threads)
    samples = read_dataset(args.train)
    e0s = mace_isolated_e0s(samples) if args.mace_python else None  # before the hours of timing
    if args.compile:  # each recipe eager then compiled, on the same batches (see the module docstring)
        recipes = [Recipe(name, samples, compiled, cycle=args.steps, device=args.device)
                   for name in args.recipes for compiled in (False, True)]
        rows = time_recipes(recipes, args.steps, max(args.warmup, args.steps), args.rounds)
        for recipe in recipes:
            if recipe.compiled is not None:
                row, eager = rows[recipe.name], rows[recipe.recipe]
                row["speedup_over_eager"] = eager["seconds_per_step"] / row["seconds_per_step"]
                row["cpu_speedup_over_eager"] = eager["cpu_seconds_per_step"] / row["cpu_seconds_per_step"]
    else:
        recipes = [Recipe(name, samples, device=args.device) for name in args.recipes]
        rows = time_recipes(recipes, args.steps, args.warmup, args.rounds)
    if args.profile_steps:
        for recipe in recipes:
            rows[recipe.name]["profile"] = profile(recipe, args.profile_steps)
    if args.mace_python:
        rows["MACE"] = time_mace(args.mace_python, Path(args.train), args.mace_seconds, args.threads, e0s,
                                 len(samples))
    first = rows[args.recipes[0]]["seconds_per_epoch"]
    for name, row in rows.items():
        row["epoch_ratio_to_first"] = row["seconds_per_epoch"] / first
        line = (f"{name:20s} {row['seconds_per_step'] * 1000:8.1f} ms/step  "
                f"{row['seconds_per_epoch'] / 60:6.2f} min/epoch  "
                f"{row['structures_per_second']:6.1f} structures/s  ratio {row['epoch_ratio_to_first']:.2f}")
        if "profile" in row:
            shares = row["profile"]["stages"].items()
            line += "  [" + ", ".join(f"{s} {v['share']:.0%}" for s, v in shares) + "]"
        print(line)
    record = {"train": Path(args.train).name, "structures": len(samples), "threads": args.threads,
              "device": args.device,
              "steps": args.steps, "warmup": args.warmup, "rounds": args.rounds, "torch": torch.__version__,
              "rows": rows,
              "command": "python benchmarks/speed/training_step.py " + " ".join(argv or sys.argv[1:])}
    if args.out:
        from mlip.io import write_json

        write_json(args.out, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
