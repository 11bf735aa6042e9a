"""Does torch.compile speed up the shipped models' energy + forces + stress? Eager against compiled,
side by side in one run, printed as a ratio and written to one JSON file.

    python benchmarks/gpu_compile_probe.py [--atoms 100000] [--out compile_probe.json]
    python benchmarks/gpu_compile_probe.py --device cpu --atoms 500     # checks the script on a CPU

The graph (neighbour list) is built once and reused, so only the model and its autograd derivatives
are timed: the part a fused kernel or a compiler could speed up (issue 6's throughput target for the
Platonic Transformer is 10⁶ atom·steps/s at 100k atoms). The compiled model is checked against the
eager one (energy, forces, stress) before it is timed. Compilation time is reported separately.
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

import torch  # noqa: E402
from ase.build import bulk  # noqa: E402
from gpu_benchmark import Budget, sync, timed  # noqa: E402


def median_seconds(fn, device, repeats=5):
    """Median of ``repeats`` synchronised calls after one warm-up (gpu_benchmark.timed, no budget)."""
    return timed(fn, device, repeats, Budget(float("inf")), max_seconds=float("inf"))


def probe(name, n_atoms, device, dtype=torch.float32):
    import warnings

    from mlip.graph import batch_atoms
    from mlip.pretrained import load

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        potential = load(name).to(device=device, dtype=dtype)
    reps = max(1, round((n_atoms / 4) ** (1 / 3)))
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True) * (reps, reps, reps)
    atoms.rattle(0.05, seed=0)
    graph = batch_atoms([atoms], potential.cutoff, dtype=dtype, device=device)
    rec = dict(model=name, atoms=len(atoms), edges=int(graph.edge_index.shape[1]), dtype=str(dtype))

    def step():
        out = potential(graph)
        return out["energy"], out["forces"], out["stress"]

    ref = [t.detach().clone() for t in step()]
    rec["eager_seconds"] = median_seconds(step, device)
    eager_model = potential.model
    potential.model = torch.compile(eager_model, dynamic=False)  # the graph is fixed here
    try:
        t0 = time.perf_counter()
        got = [t.detach() for t in step()]
        sync(device)
        rec["compile_seconds"] = time.perf_counter() - t0
        scale = [float(r.abs().max()) for r in ref]
        rec["max_rel_diff"] = [float((g - r).abs().max()) / max(s, 1e-30) for g, r, s in zip(got, ref, scale)]
        rec["compiled_seconds"] = median_seconds(step, device)
        rec["speedup"] = rec["eager_seconds"] / rec["compiled_seconds"]
        rec["compiled_atom_steps_per_s"] = len(atoms) / rec["compiled_seconds"]
    except Exception as err:  # record, keep the eager numbers
        rec["error"] = f"{type(err).__name__}: {err}"[:2000]
        rec["traceback"] = traceback.format_exc(limit=4)[-3000:]
    finally:
        potential.model = eager_model
    rec["eager_atom_steps_per_s"] = len(atoms) / rec["eager_seconds"]
    return rec


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--atoms", type=int, default=100_000)
    parser.add_argument("--models", nargs="+", default=["platonic-emt", "equiformer_v3-emt"])
    parser.add_argument("--out", default="compile_probe.json")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    result = dict(torch=torch.__version__, device=str(device), rows=[])
    for name in args.models:
        try:
            rec = probe(name, args.atoms, device)
        except Exception as err:
            rec = dict(model=name, error=f"{type(err).__name__}: {err}"[:2000])
        result["rows"].append(rec)
        print(json.dumps({k: v for k, v in rec.items() if k != "traceback"}), flush=True)
        Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
