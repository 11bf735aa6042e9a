"""What issue 55's first-principles work has cost so far, per stage, from the times its results record.

    python examples/datasets/sige-pbe/v2/spend.py [--json benchmarks/results/sige-v2-dft-spend.json]

Every GPAW result of the issue records the wall time of its calculation (``wall_time_s`` of a labelling
result, ``seconds`` of a validation result or of an unfinished calculation's checkpoint). A result reused
from another stage (``label_details.from``: a v2 label taken from the k-point study) is counted once, where
it was computed. The sum of wall times is an upper bound on the machine time spent: a job beside others
ran slower, so its hours overlap theirs (two one-rank jobs side by side for an hour add two hours of one
hour of the machine); only a two-rank job alone counts its hour exactly. Results made since 2026-12-07
also record the CPU time of the rank that wrote them (``cpu_time_s``; a checkpoint's ``cpu_seconds``),
which does not depend on what else ran; times the ranks that computed them (``label_details.mpi_ranks``;
1 where a result does not say: every CPU-recording label before it was recorded ran one rank), that is the
core time they took. The machine hours are estimated from both: core hours / 2 where the CPU time is
recorded, the wall time (the upper bound) elsewhere. The issue's budget is about 40 hours of the 2-core
machine.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Dict

HERE = Path(__file__).resolve().parent
SET = HERE.parent

#: stage → (its run folders: each keeps its results in ``results/``; the folders of its unfinished
#: calculations' checkpoints), patterns relative to the set
STAGES = {
    "k-point study (item 1)": ("kpoint-study", "kpoint-study/checkpoints"),
    "v2 labels (item 2)": ("v2/run", "v2/run/checkpoints"),
    "active-learning labels (v2 rule)": ("v2/learn/run/iter-*/labels", "v2/learn/run/iter-*/labels/checkpoints"),
    "validation checks of the mesh (item 3)": ("dft-validation/kpoint-checks/cache/*", None),
    "converged validation (item 3)": ("dft-validation/cache/gpaw-e62970e9655c", "dft-validation/checkpoints/*"),
}

KEYS = ("results", "hours", "with_cpu", "cpu_hours", "machine_hours", "unfinished", "unfinished_hours")
#: cores of the machine the budget is counted on
CORES = 2


def stage_hours(root: Path, runs: str, checkpoints: str | None) -> Dict[str, float]:
    """One stage: ``results`` counted and their wall ``hours``; ``with_cpu`` of them recorded their CPU
    time, ``cpu_hours`` in all (every rank's); ``machine_hours`` estimated (``cpu_hours`` / :data:`CORES`
    where recorded, the wall hours elsewhere); ``unfinished`` calculations and their wall
    ``unfinished_hours`` so far."""
    from mlip.workflows.sharding import load_results

    row = dict.fromkeys(KEYS, 0)
    for run in sorted(root.glob(runs)):
        for record in load_results(run).values():
            details = record.get("label_details")
            if isinstance(details, dict) and details.get("from"):
                continue  # computed by another stage, counted there
            wall = record.get("wall_time_s", record.get("seconds"))
            if wall is None:
                continue  # a failed calculation records no time
            row["results"] += 1
            row["hours"] += float(wall) / 3600
            if "cpu_time_s" in record:
                ranks = int(details.get("mpi_ranks", 1)) if isinstance(details, dict) else 1
                cpu_hours = float(record["cpu_time_s"]) * ranks / 3600
                row["with_cpu"] += 1
                row["cpu_hours"] += cpu_hours
                row["machine_hours"] += cpu_hours / CORES
            else:
                row["machine_hours"] += float(wall) / 3600
    for path in sorted(root.glob(f"{checkpoints}/*.gpw.json")) if checkpoints else []:
        row["unfinished"] += 1
        row["unfinished_hours"] += float(json.loads(path.read_text()).get("seconds", 0.0)) / 3600
    return row


def spend(root: Path = SET, stages: Dict[str, tuple] = STAGES) -> Dict[str, Dict[str, float]]:
    """:func:`stage_hours` per stage, and a ``total`` row."""
    out = {name: stage_hours(root, runs, checkpoints) for name, (runs, checkpoints) in stages.items()}
    out["total"] = {key: sum(row[key] for row in out.values()) for key in KEYS}
    return out


def table(rows: Dict[str, Dict[str, float]]) -> str:
    lines = ["| stage | results | wall hours | CPU hours (results recording it) | machine hours (estimate) | "
             "unfinished (wall hours so far) |",
             "|---|---|---|---|---|---|"]
    for name, row in rows.items():
        bold = "**" if name == "total" else ""
        lines.append(f"| {bold}{name}{bold} | {row['results']} | {bold}{row['hours']:.1f}{bold} | "
                     f"{row['cpu_hours']:.2f} ({row['with_cpu']}) | {bold}{row['machine_hours']:.1f}{bold} | "
                     f"{row['unfinished']} ({row['unfinished_hours']:.1f}) |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the table as JSON here")
    args = parser.parse_args(argv)
    rows = spend()
    print(table(rows))
    if args.json:
        from datetime import date

        from mlip.io import write_json

        write_json(args.json, {"date": date.today().isoformat(), "budget_hours": 40.0,
                               "note": "hours: sums of recorded wall times, an upper bound on machine hours; "
                                       "machine_hours: CPU hours / 2 where recorded, wall hours elsewhere",
                               "stages": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
