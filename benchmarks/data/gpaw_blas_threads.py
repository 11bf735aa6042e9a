"""GPAW's BLAS threads: one calculation with OpenBLAS's default threads, with one, and through the package.

    python benchmarks/data/gpaw_blas_threads.py [--ranks 1] [--repeat 1] [--json OUT.json]

GPAW parallelises over MPI ranks. Run as ``mpiexec -n N gpaw python`` (not ``gpaw -P N python``, which sets
``OMP_NUM_THREADS=1``), each rank's OpenBLAS starts a thread per core, and the threads of all ranks and
of other jobs share the cores. This runs the same small plane-wave calculation (a rattled 4-atom Ge
cell, the package's GPAW settings on a 6×6×3 mesh; a minute of one core) in fresh processes, side by
side in one run, in three arms: ``default`` (bare GPAW, ``OMP_NUM_THREADS`` unset), ``one thread``
(``OMP_NUM_THREADS=1``) and ``package`` (``OMP_NUM_THREADS`` unset, the calculator made by
:func:`mlip.workflows.labelling.gpaw_calculator`, which limits BLAS itself). It prints the wall and CPU
seconds of each (CPU over all ranks: the threads' spinning shows there) and the ratios to ``one thread``.
Needs GPAW (``pip install '.[dft]'``, docs/data.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Dict, List

CALCULATION = r"""
import json, resource, sys, time
from ase.build import bulk
atoms = bulk("Ge", "diamond", a=5.77) * (1, 1, 2)
atoms.rattle(0.05, seed=1)
from mlip.workflows.labelling import GPAW_PBE_SETTINGS as S, gpaw_calculator
if sys.argv[1] == "package":
    calc = gpaw_calculator(atoms, S, mesh=(6, 6, 3))
else:  # the same physics, made by GPAW directly
    from gpaw import GPAW, PW, FermiDirac
    calc = GPAW(mode=PW(S["ecut_eV"]), xc=S["xc"], kpts={"size": (6, 6, 3), "gamma": S["gamma_centred"]},
                occupations=FermiDirac(S["smearing_width_eV"]), txt=None,
                convergence={"energy": S["convergence_energy_eV_per_electron"],
                             "forces": S["convergence_forces_eV_per_A"]})
atoms.calc = calc
start = time.perf_counter()
energy = atoms.get_potential_energy()
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_SELF)
from gpaw.mpi import world
cpu = world.sum_scalar(usage.ru_utime + usage.ru_stime)
if world.rank == 0:
    print(json.dumps({"energy_eV": energy, "wall_s": wall, "cpu_s": cpu}))
"""

ARMS = ("default", "one thread", "package")


def run_arm(arm: str, ranks: int) -> Dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    if arm == "one thread":
        env["OMP_NUM_THREADS"] = "1"
    command = ["mpiexec", "--bind-to", "none", "-n", str(ranks), "gpaw", "python", "-c", CALCULATION,
               "package" if arm == "package" else "bare"]
    out = subprocess.run(command, env=env, capture_output=True, text=True)
    if out.returncode:
        errors = [line for line in out.stderr.splitlines() if "Error" in line]
        raise SystemExit(f"{arm}: GPAW failed: {errors[-1] if errors else f'exit status {out.returncode}'}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1, help="MPI ranks per calculation (default 1)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of the three arms (default 1)")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    rows = []
    for round_ in range(args.repeat):
        for arm in ARMS:
            row = {"arm": arm, "round": round_, "ranks": args.ranks, **run_arm(arm, args.ranks)}
            rows.append(row)
            print(f"round {round_} {arm:10s}: wall {row['wall_s']:7.1f} s, CPU {row['cpu_s']:7.1f} s", flush=True)
    base = {r["round"]: r for r in rows if r["arm"] == "one thread"}
    for row in rows:
        row["cpu_over_one_thread"] = row["cpu_s"] / base[row["round"]]["cpu_s"]
        row["wall_over_one_thread"] = row["wall_s"] / base[row["round"]]["wall_s"]
    for arm in ARMS:
        mine = [r for r in rows if r["arm"] == arm]
        print(f"{arm:10s}: CPU ×{sum(r['cpu_over_one_thread'] for r in mine) / len(mine):.2f}, "
              f"wall ×{sum(r['wall_over_one_thread'] for r in mine) / len(mine):.2f} of one thread")
    if args.json:
        from datetime import date

        from mlip.io import write_json

        write_json(args.json, {"date": date.today().isoformat(), "nproc": os.cpu_count(), "rows": rows,
                               "note": "measured beside whatever else ran on the machine; see docs/data.md"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
