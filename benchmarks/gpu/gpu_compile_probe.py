"""Eager against compiled (``MLIPCalculator(..., compile=True)``) for the shipped models at large sizes on
a GPU: atom·steps/s of the network with its derivatives on a fixed graph, and of a full calculator
step (neighbour list included, as in MD), side by side in one run, written to one JSON file.

    python benchmarks/gpu/gpu_compile_probe.py [--atoms 100000] [--out compile_probe.json] [--budget 150]
    python benchmarks/gpu/gpu_compile_probe.py --device cpu --atoms 64 --no-compile   # checks the script

The compiled evaluation is the user option's (``mlip.calculators.compiled_network``: energy, forces and
stress in one graph, dynamic shapes). Its results are checked against the eager ones before it is timed, and its first
call (the compilation) is timed apart. The target of issue 39 for the Platonic Transformer is 10⁶
atom·steps/s at 100k atoms. ``--budget`` bounds the measurements after the compilation: the full
calculator steps are skipped, with the reason recorded, when they would not fit.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_bootstrap  # noqa: E402,F401

import numpy as np  # noqa: E402
import torch  # noqa: E402
from gpu_benchmark import Budget, cu_supercell, sync, timed  # noqa: E402


def rel_diffs(got, ref):
    return [float((g - r).abs().max()) / max(float(r.abs().max()), 1e-30) for g, r in zip(got, ref)]


def probe(rec, save, name, n_atoms, device, budget_seconds, compile_network_too=True, dtype="float32"):
    """Fill ``rec`` with the measurements of model ``name``, calling ``save()`` after each phase (so a
    run killed by its time limit keeps what it measured)."""
    import warnings

    from ase.calculators.calculator import all_changes

    from mlip.calculators import MLIPCalculator
    from mlip.calculators.compiled_network import is_compiled
    from mlip.graph import batch_atoms
    from mlip.pretrained import load_potential

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        potential = load_potential(name)
    calcs = {"eager": MLIPCalculator(potential, device=device, dtype=dtype)}
    if compile_network_too:
        calcs["compiled"] = MLIPCalculator(potential, device=device, dtype=dtype, compile=True)
    atoms = cu_supercell(n_atoms)
    graph = batch_atoms([atoms], potential.cutoff, dtype=calcs["eager"].dtype, device=device)
    rec.update(atoms=len(atoms), edges=int(graph.edge_index.shape[1]), dtype=dtype, device=str(device))

    def network_step(calc):
        # the compiled calculator's evaluation (energy, forces and stress in one graph) or the potential's
        compiled = calc.compiled
        out = compiled(graph, compute_stress=True) if compiled is not None else calc.potential(graph)
        return out["energy"], out["forces"], out["stress"]

    budget = Budget(budget_seconds)
    ref = [t.detach().clone() for t in network_step(calcs["eager"])]
    rec["eager_network_seconds"] = timed(lambda: network_step(calcs["eager"]), device, 5, budget)
    rec["eager_network_atom_steps_per_s"] = len(atoms) / rec["eager_network_seconds"]
    save()
    if "compiled" in calcs:
        t0 = time.perf_counter()
        got = [t.detach() for t in network_step(calcs["compiled"])]
        sync(device)
        rec["compile_seconds"] = time.perf_counter() - t0
        budget = Budget(budget_seconds)  # the compilation is not counted
        rec["compiled"] = is_compiled(calcs["compiled"])
        rec["max_rel_diff_energy_forces_stress"] = rel_diffs(got, ref)
        rec["compiled_network_seconds"] = timed(lambda: network_step(calcs["compiled"]), device, 5, budget)
        rec["network_speedup"] = rec["eager_network_seconds"] / rec["compiled_network_seconds"]
        rec["compiled_network_atom_steps_per_s"] = len(atoms) / rec["compiled_network_seconds"]
        save()
    # the full calculator step: neighbour list, graph, network, derivatives, copies to the host
    if budget.left() < 8 * sum(rec[f"{m}_network_seconds"] for m in calcs) + 5:
        rec["calculator_skipped"] = "predicted time exceeds the remaining budget"
        return
    rng = np.random.default_rng(0)
    for mode, calc in calcs.items():
        def step(calc=calc):
            atoms.positions += rng.normal(scale=1e-3, size=atoms.positions.shape)
            calc.calculate(atoms, ["energy", "forces", "stress"], all_changes)

        rec[f"{mode}_calculator_seconds"] = timed(step, device, 3, budget)
        rec[f"{mode}_calculator_atom_steps_per_s"] = len(atoms) / rec[f"{mode}_calculator_seconds"]
        save()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--atoms", type=int, default=100_000)
    parser.add_argument("--models", nargs="+", default=["platonic-emt"])
    parser.add_argument("--budget", type=float, default=150.0, help="seconds of measurements after compiling")
    parser.add_argument("--no-compile", action="store_true", help="eager only (checks the script quickly)")
    parser.add_argument("--out", default="compile_probe.json")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    result = dict(torch=torch.__version__, device=str(device), rows=[])
    if device.type == "cuda" and not torch.cuda.is_available():
        result["error"] = "no CUDA device visible to torch"
        Path(args.out).write_text(json.dumps(result, indent=1))
        print(result["error"])
        return 2
    if device.type == "cuda":
        result["device_name"] = torch.cuda.get_device_name(device)
    def save():
        Path(args.out).write_text(json.dumps(result, indent=1))

    for name in args.models:
        rec = dict(model=name)
        result["rows"].append(rec)
        try:
            probe(rec, save, name, args.atoms, device, args.budget, compile_network_too=not args.no_compile)
        except Exception as err:
            rec.update(error=f"{type(err).__name__}: {err}"[:2000],
                       traceback=traceback.format_exc(limit=4)[-3000:])
        save()
        print(json.dumps({k: v for k, v in rec.items() if k != "traceback"}), flush=True)
    print(f"wrote {args.out}")
    return 0 if all("error" not in r for r in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
