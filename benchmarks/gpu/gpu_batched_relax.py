"""Batched relaxation throughput (structures per minute) through torch-sim, when it is installed.

    python benchmarks/gpu/gpu_batched_relax.py [--structures 2000] [--seconds 45] [--out batched_relax.json]
    python benchmarks/gpu/gpu_batched_relax.py --device cpu --structures 4 --steps 5   # checks the script

Relaxes rattled, strained small fcc cells (4 to 16 atoms, the size of Matbench Discovery's WBM
structures) with :func:`mlip.workflows.discovery.batched_relax.relax_batched` (FIRE on a Fréchet cell filter,
structures leaving the batch as they converge) and the shipped Platonic model, stopping after
``--seconds``. The target of issue 39 is 10⁴ structures per minute on a GPU. Without torch-sim
(``mlip.integrations.torchsim`` not importable: Python < 3.12 or the ``torchsim`` extra missing)
it writes ``{"status": "not installed", "reason": ...}`` and exits 0.
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


def structures(n, seed=0):
    """(key, atoms) pairs: fcc Cu cells of 4, 8 or 16 atoms, strained up to 3 % and rattled."""
    from ase.build import bulk

    rng = np.random.default_rng(seed)
    for k in range(n):
        reps = [(1, 1, 1), (1, 1, 2), (1, 2, 2)][k % 3]
        atoms = bulk("Cu", "fcc", a=3.61, cubic=True) * reps
        atoms.set_cell(atoms.cell.array @ (np.eye(3) + 0.03 * rng.uniform(-1, 1, (3, 3))), scale_atoms=True)
        atoms.rattle(0.05, seed=k)
        yield f"cu-{k}", atoms


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--model", default="platonic-emt")
    parser.add_argument("--structures", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--fmax", type=float, default=0.05)
    parser.add_argument("--max-atoms", type=int, default=16384, help="atoms in one batch")
    parser.add_argument("--seconds", type=float, default=45.0, help="stop after this long")
    parser.add_argument("--out", default="batched_relax.json")
    args = parser.parse_args(argv)
    result = dict(torch=torch.__version__, device=args.device, python=sys.version.split()[0])
    try:
        from mlip.integrations.torchsim import MLIPModel
        from mlip.workflows.discovery.batched_relax import relax_batched
    except Exception as err:  # ImportError, mlip.extras.MissingExtraError
        result.update(status="not installed", reason=f"{type(err).__name__}: {err}"[:500])
        Path(args.out).write_text(json.dumps(result, indent=1))
        print(f"batched relaxation: not installed ({result['reason']})")
        return 0
    try:
        import warnings

        from mlip.pretrained import load_potential

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = MLIPModel(load_potential(args.model), device=args.device, dtype="float32")
        t0 = time.perf_counter()
        done = converged = failed = 0
        for _key, outcome, _seconds in relax_batched(structures(args.structures), model, fmax=args.fmax,
                                                     steps=args.steps, max_atoms=args.max_atoms):
            done += 1
            if isinstance(outcome, Exception):
                failed += 1
            elif outcome.converged:
                converged += 1
            if time.perf_counter() - t0 > args.seconds:
                break
        elapsed = time.perf_counter() - t0
        result.update(status="ok", model=args.model, structures_done=done, converged=converged, failed=failed,
                      seconds=elapsed, structures_per_minute=60 * done / elapsed, fmax=args.fmax,
                      steps=args.steps, max_atoms=args.max_atoms)
        print(f"batched relaxation: {done} structures ({converged} converged, {failed} failed) in "
              f"{elapsed:.1f} s = {result['structures_per_minute']:.0f} per minute")
    except Exception as err:
        result.update(status="error", error=f"{type(err).__name__}: {err}"[:2000],
                      traceback=traceback.format_exc(limit=4)[-3000:])
        print(f"batched relaxation: error {result['error'][:200]}")
    Path(args.out).write_text(json.dumps(result, indent=1))
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
