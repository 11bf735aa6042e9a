"""Cost of one MD step (energy + forces + stress, float32) of shipped models and checkpoints, side by side.

    python benchmarks/speed/shipped_md_step.py [MODEL ...] [--rounds 3] [--repeats 10] [--threads 1]
        [--json out.json] [--cells cu-au|si-ge] [--compile MODEL ...] [--mace-model FILE --mace-python PYTHON]

MODEL is a shipped name (``equiformer_v3-emt``, ...) or a checkpoint path; by default every trained model
the package ships. The structures are the model cards' (``mlip card``): a 256-atom fcc Cu
cell and a 500-atom Cu-Au solid solution. The models are timed in alternating rounds, each round timing
every model once per structure (median of ``--repeats`` calls after 3 warm-up calls, positions moved
before every call so that the neighbour list is rebuilt as in MD), and the report gives the median over
the rounds and each model's cost relative to the first one: on a noisy machine compare those ratios,
not the absolute times. Each row also gives the median CPU time of the process per step (``cpu_ms``),
the steadier measure on a shared machine.

``--cells si-ge``: the Si–Ge cards' cells instead (216-atom diamond Si, 512-atom Si–Ge solid solution).
``--compile MODEL ...`` adds those models through ``MLIPCalculator(compile=True)`` (energy, forces and
stress in one compiled graph); their first call, which compiles, is timed apart (``compile_s``).
``--mace-model FILE`` adds a MACE model file, timed by ``benchmarks/accuracy/mace_helper.py time`` in
MACE's own virtualenv (``--mace-python``), one subprocess per round between the rounds of the others
(the same structures, warm-up and positions moved the same way; its own thread count set to
``--threads``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ase.io  # noqa: E402
from platonic_md_step import time_steps  # noqa: E402

import mlip  # noqa: E402
from mlip.workflows.model_card import speed_structures  # noqa: E402  (the cards' structures)


MACE_HELPER = Path(__file__).resolve().parents[1] / "accuracy" / "mace_helper.py"


def time_mace(python: str, model: str, structures: dict, repeats: int, threads: int) -> dict:
    """{label: (wall, CPU) median seconds per step} of a MACE model file, in MACE's virtualenv."""
    with tempfile.TemporaryDirectory() as tmp:
        cells, out = Path(tmp) / "cells.xyz", Path(tmp) / "times.json"
        ase.io.write(cells, list(structures.values()))
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        subprocess.run([python, str(MACE_HELPER), "time", "--model", model, "--structures", str(cells),
                        "--out", str(out), "--warmup", "3", "--repeats", str(repeats)], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        rows = json.loads(out.read_text())["rows"]
    return {label: (row["s_per_step"], row["cpu_s_per_step"]) for label, row in zip(structures, rows)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help="shipped names or checkpoint paths (default: every shipped model)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    parser.add_argument("--cells", choices=["cu-au", "si-ge"], default="cu-au")
    parser.add_argument("--compile", nargs="*", default=[], metavar="MODEL",
                        help="also these models with compile=True (one compiled graph per call)")
    parser.add_argument("--mace-model", default=None, help="a MACE model file to time beside them")
    parser.add_argument("--mace-python", default="/work/venvs/mace/bin/python")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    structures = speed_structures(args.cells)
    calcs = {name: mlip.load_calculator(name, device="cpu", dtype="float32")
             for name in args.models or sorted(mlip.pretrained.TRAINED)}
    compile_s = {}
    for name in args.compile:
        calc = mlip.load_calculator(name, device="cpu", dtype="float32", compile=True)
        atoms = next(iter(structures.values())).copy()
        atoms.calc = calc
        t0, c0 = time.perf_counter(), time.process_time()
        atoms.get_forces()
        compile_s[f"{name} compiled"] = {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}
        calcs[f"{name} compiled"] = calc
    names = list(calcs)
    if args.mace_model:
        names.append("MACE")
    times = {(m, s): [] for m in names for s in structures}
    for r in range(args.rounds):
        for s, atoms in structures.items():
            for m in (names if r % 2 == 0 else names[::-1]):  # alternate the order between rounds
                if m != "MACE":
                    times[m, s].append(time_steps(calcs[m], atoms.copy(), args.repeats, cpu=True))
        if args.mace_model:
            for s, t in time_mace(args.mace_python, args.mace_model, structures, args.repeats,
                                  args.threads).items():
                times["MACE", s].append(t)
        print(f"round {r + 1}/{args.rounds} done", flush=True)

    print(f"\ntorch {torch.__version__}, {args.threads} thread(s), float32, ms per energy + forces + stress call")
    rows = []
    for s in structures:
        print(f"\n{s}")
        first_ms, first_cpu = (1e3 * float(np.median(t)) for t in zip(*times[names[0], s]))
        for m in names:
            wall, cpu = (1e3 * np.asarray(t) for t in zip(*times[m, s]))
            ms, cpu_ms = float(np.median(wall)), float(np.median(cpu))
            rows.append({"model": m, "structure": s, "ms_per_step": ms, "rounds_ms": wall.tolist(),
                         "cpu_ms": cpu_ms, "rounds_cpu_ms": cpu.tolist(), f"vs_{names[0]}": ms / first_ms,
                         f"cpu_vs_{names[0]}": cpu_ms / first_cpu})
            print(f"  {m:<40} {ms:9.1f} ms (rounds differ by {float(np.ptp(wall)):.1f}), "
                  f"CPU {cpu_ms:9.1f} ms  {ms / first_ms:6.3f}x {names[0]} (CPU {cpu_ms / first_cpu:6.3f}x)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "command": " ".join(["python"] + sys.argv), "threads": args.threads, "torch": torch.__version__,
            "load_average": list(os.getloadavg()), "rounds": args.rounds, "repeats": args.repeats,
            "compile_s": compile_s, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
