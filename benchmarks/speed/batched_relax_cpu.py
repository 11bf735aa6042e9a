"""The miniature Matbench Discovery benchmark relaxed one at a time and in torch-sim batches, in one run.

    python benchmarks/speed/batched_relax_cpu.py --model default -n 300 --batch-size 32 --out-dir bench-relax
    # needs Python >= 3.12 with pip install -e '.[torchsim,discovery]'

Both paths relax the same candidates of the same benchmark (``mlip discovery emt-benchmark``) with the
same model and protocol, each into its own folder, one after the other in this process; then each is
joined and scored. The record (``--json``, merged under ``--label``) holds each path's relaxation wall
time, F1, MAE and RMSE, the ratio, and the machine facts (torch, threads, load average before and after).
Issue 39's target: the batched path ≥ 3× faster on 2 cores at the same F1.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import time
from pathlib import Path

import torch

from mlip.cli import main as mlip_main
from mlip.io import read_json, write_json

DATE = "2000-01-01"


def run(argv) -> None:
    status = mlip_main([str(a) for a in argv])
    if status != 0:
        raise SystemExit(f"mlip {' '.join(map(str, argv))} exited with {status}")


def relax_and_score(bench: Path, out: Path, model: str, batch_size: int, no_progress: bool) -> dict:
    """Relax every candidate of ``bench`` with ``batch_size`` (1: the ASE path), join and score."""
    run_dir, submission = out / f"relax-b{batch_size}", out / f"submission-b{batch_size}"
    if run_dir.exists():
        raise SystemExit(f"{run_dir} exists: a resumed relaxation cannot be timed; remove it to measure again")
    extra = ["--no-progress"] if no_progress else []
    t0 = time.perf_counter()
    run(["discovery", "relax", bench / "initial-structures.json.gz", "--model", model, "--out-dir", run_dir,
         *(["--batch-size", batch_size] if batch_size > 1 else []), *extra])
    wall = time.perf_counter() - t0
    run(["discovery", "join", run_dir, "--elemental-refs", bench / "elemental-references.json",
         "--out-dir", submission, "--date", DATE])
    run(["discovery", "metrics", submission / f"{DATE}-discovery.csv.gz", "--reference", bench / "summary.csv.gz",
         "--no-plot", *extra])
    metrics = read_json(submission / "metrics.json")["full_test_set"]
    return {"batch_size": batch_size, "relax_wall_s": wall,
            **{k: metrics.get(k) for k in ("F1", "Precision", "Recall", "MAE", "RMSE")}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="default")
    p.add_argument("-n", type=int, default=300, help="candidates (default 300, the miniature benchmark)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--out-dir", default="bench-relax", help="work folder (reused: finished relaxations resume)")
    p.add_argument("--json",
                   default=str(Path(__file__).resolve().parents[1] / "results" / "batched_relax_cpu.json"))
    p.add_argument("--label", default="run")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args()

    out = Path(args.out_dir)
    bench = out / f"benchmark-seed{args.seed}-n{args.n}"
    load_before = os.getloadavg()
    if not (bench / "summary.csv.gz").exists():
        run(["discovery", "emt-benchmark", bench, "--seed", args.seed, "-n", args.n,
             *(["--no-progress"] if args.no_progress else [])])
    rows = [relax_and_score(bench, out, args.model, b, args.no_progress) for b in (1, args.batch_size)]
    one, batched = rows
    ratio = one["relax_wall_s"] / batched["relax_wall_s"]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    record = {"model": args.model, "candidates": args.n, "seed": args.seed, "rows": rows,
              "speedup_batched_over_one_at_a_time": ratio,
              "machine": {"python": platform.python_version(), "torch": torch.__version__,
                          "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
                          "load_average_before": load_before, "load_average_after": os.getloadavg(),
                          "commit": commit}}
    for row in rows:
        print(f"batch size {row['batch_size']:>3}: relax {row['relax_wall_s']:8.1f} s   F1 {row['F1']:.3f}   "
              f"MAE {row['MAE']:.4f} eV/atom   RMSE {row['RMSE']:.4f}")
    print(f"batched / one at a time: {ratio:.2f}× faster")
    path = Path(args.json)
    records = read_json(path) if path.exists() else {}
    records[args.label] = record
    write_json(path, records)
    print(f"wrote {path} [{args.label}]")


if __name__ == "__main__":
    main()
