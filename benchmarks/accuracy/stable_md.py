"""Stable simulation as a criterion: long NVT of 216-atom silicon in the crystal (300 K) and the liquid
(1,800 K), then NVE, and the liquid's structure against published first-principles and diffraction data.

    python benchmarks/accuracy/stable_md.py --model equiformer_v3-sige --out work/stable-md [--ps 50] [--threads 2]
    python benchmarks/accuracy/stable_md.py --model equiformer_v3-sige --out work/stable-md --report \\
        --json benchmarks/results/stable-md-equiformer_v3-sige.json --plot docs/stable-md-equiformer_v3-sige.png

Protocol (issue 57, item 5), for each temperature T:

- the cell: the 3×3×3 conventional diamond cell (216 atoms) at a = 5.43 Å for the crystal; for the
  liquid the same cell compressed to the density of liquid silicon at its melting point, 2.57 g/cm³
  (about 10 % denser than the crystal's 2.33), melted for :data:`MELT_PS` ps at :data:`MELT_K` K first;
- NVT (Langevin, friction 0.01 fs⁻¹, time step 2 fs) for ``--ps`` ps, in segments of ``--segment-ps``
  ps, each segment's numbers kept and the last segment's final frame (positions and momenta), so a run
  stopped at any point goes on from the last finished segment (rerun the same command) and the folder
  stays small enough to commit between sessions;
- every logged frame (every 10 steps): the closest pair of atoms. The run is stable when no pair ever
  comes closer than :data:`MIN_DISTANCE` Å (the closest Si–Si distance in any of the set's structures at
  ambient pressure is about 2.2 Å; a pair at 1.9 Å means the model let atoms fall into each other);
- NVE for ``--nve-ps`` ps with a 1 fs step from the last NVT frame: the drift of the total energy
  (meV/atom/ps) must be bounded (:data:`MAX_DRIFT`);
- the liquid's pair-distribution function g(r), averaged over the second half of its NVT frames, its
  first peak, first minimum and the coordination number (4πρ ∫ r² g(r) dr up to the first minimum),
  beside the published values of :data:`LITERATURE`.

MD on one CPU thread costs about 0.3 s of CPU per step for a 216-atom EquiformerV3 of the Si–Ge recipe
(float32; measured 2026-12-06, nearly all of it the model's matrix products); 50 ps at 2 fs is 25,000
steps per temperature: about two hours of one core, more beside other work. The segments make it
resumable across sessions.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

#: Å: no pair of atoms closer than this in a stable run
MIN_DISTANCE = 1.9
#: meV/atom/ps: the largest |drift| of the NVE total energy accepted
MAX_DRIFT = 1.0
#: the melt before the liquid's run
MELT_K, MELT_PS = 3000.0, 3.0
#: g/cm³: liquid silicon at the melting point (1,687 K)
LIQUID_DENSITY = 2.57
#: published liquid silicon near its melting point: (first peak of g(r) Å, coordination number)
LITERATURE = {
    "Štich, Car & Parrinello, Phys. Rev. Lett. 63, 2240 (1989), first-principles MD (LDA), 1,800 K":
        {"coordination": 6.5},
    "Waseda & Suzuki, Z. Phys. B 20, 339 (1975), X-ray diffraction, 1,733 K":
        {"coordination": 6.4},
}
#: Å: the histogram of pair distances
R_MAX, DR = 7.0, 0.02
TIMESTEP_FS, NVE_TIMESTEP_FS, FRICTION, LOG_INTERVAL = 2.0, 1.0, 0.01, 10


def silicon_cell(liquid: bool):
    """216-atom diamond silicon; compressed isotropically to :data:`LIQUID_DENSITY` for the liquid."""
    from ase.build import bulk

    atoms = bulk("Si", "diamond", a=5.43, cubic=True).repeat((3, 3, 3))
    if liquid:
        mass_g = atoms.get_masses().sum() * 1.66053906660e-24
        volume = mass_g / LIQUID_DENSITY * 1e24  # Å³
        atoms.set_cell(atoms.cell * (volume / atoms.get_volume()) ** (1 / 3), scale_atoms=True)
    return atoms


def pair_distances(atoms, cutoff: float = R_MAX) -> np.ndarray:
    """Every distance up to ``cutoff`` between two atoms, images included, each pair twice (Å)."""
    from ase.neighborlist import neighbor_list

    return neighbor_list("d", atoms, cutoff)


def closest_pair(distances: np.ndarray) -> float:
    """The shortest of :func:`pair_distances` (Å; 3 Å when none is closer than that)."""
    return float(min(distances.min(), 3.0)) if len(distances) else 3.0


def pair_histogram(distances: np.ndarray) -> np.ndarray:
    """Counts of :func:`pair_distances` in bins of :data:`DR` up to :data:`R_MAX`."""
    return np.histogram(distances, bins=int(round(R_MAX / DR)), range=(0.0, R_MAX))[0].astype(float)


def rdf(histogram: np.ndarray, frames: int, n_atoms: int, volume: float):
    """(r, g(r)) from summed :func:`pair_histogram` counts of ``frames`` frames."""
    edges = np.linspace(0.0, R_MAX, len(histogram) + 1)
    r = 0.5 * (edges[1:] + edges[:-1])
    shell = 4.0 / 3.0 * np.pi * (edges[1:] ** 3 - edges[:-1] ** 3)
    rho = n_atoms / volume
    return r, histogram / (frames * n_atoms * rho * shell)


def liquid_structure(r: np.ndarray, g: np.ndarray, rho: float) -> Dict[str, float]:
    """First peak (the highest point of the first stretch where g(r) > 1), the first minimum within 1.5 Å
    after it (located on g smoothed over 5 bins) and the coordination number up to that minimum."""
    above = np.flatnonzero(g > 1.0)
    start = int(above[0]) if len(above) else 0
    below = np.flatnonzero(g[start:] < 1.0)
    stop = start + (int(below[0]) if len(below) else len(g) - start)
    peak = start + int(np.argmax(g[start:stop]))
    smooth = np.convolve(g, np.ones(5) / 5, mode="same")
    after = peak + int(np.argmin(smooth[peak:peak + int(1.5 / DR)]))
    shell = 4.0 / 3.0 * np.pi * ((r + DR / 2) ** 3 - (r - DR / 2) ** 3)  # the bins' volumes (Å³)
    coordination = float(rho * np.sum(shell[:after + 1] * g[:after + 1]))
    return {"first_peak_A": float(r[peak]), "first_peak_height": float(g[peak]),
            "first_minimum_A": float(r[after]), "coordination": coordination}


def _segment_paths(folder: Path, k: int):
    return folder / f"segment-{k:03d}.extxyz", folder / f"segment-{k:03d}.json"


def run_temperature(calc, folder: Path, temperature: float, liquid: bool, ps: float, segment_ps: float,
                    nve_ps: float, seed: int, progress: bool, melt_ps: float = MELT_PS) -> None:
    """Melt (liquid), NVT in resumable segments, then NVE; every segment's last frame and numbers kept."""
    from ase.io import read, write

    from mlip.workflows.md import run_md

    folder.mkdir(parents=True, exist_ok=True)
    stages = []
    if liquid:
        stages.append(("melt", MELT_K, melt_ps))
    stages += [("nvt", temperature, ps), ("nve", temperature, nve_ps)]
    k, atoms = 0, silicon_cell(liquid)
    for stage, t_stage, length in stages:
        step_fs = NVE_TIMESTEP_FS if stage == "nve" else TIMESTEP_FS
        n_segments = max(1, int(math.ceil(length / segment_ps - 1e-9)))
        steps = int(round(length * 1000 / step_fs / n_segments))
        for _ in range(n_segments):
            frame_path, record_path = _segment_paths(folder, k)
            if record_path.is_file():
                if not _segment_paths(folder, k + 1)[1].is_file():  # the last finished one: start there
                    atoms = read(frame_path)
                k += 1
                continue
            trajectory = folder / f"segment-{k:03d}.traj"
            fresh = k == 0
            result = run_md(atoms, calc, ensemble="nve" if stage == "nve" else "nvt", temperature=t_stage,
                            timestep=step_fs, steps=steps, friction=FRICTION, seed=seed + k,
                            trajectory=str(trajectory), log_interval=LOG_INTERVAL, progress=progress,
                            initialize_velocities=fresh)
            frames = read(trajectory, ":")
            histogram = stage == "nvt" and liquid  # the liquid's g(r): every distance up to R_MAX
            distances = [pair_distances(f, R_MAX if histogram else 3.0) for f in frames]
            record = {"stage": stage, "temperature_K": t_stage, "steps": steps, "timestep_fs": step_fs,
                      "closest_pair_A": min(closest_pair(d) for d in distances),
                      "mean_temperature_K": float(np.mean(result.temperatures)),
                      "times_ps": result.times.tolist(), "total_energies": result.total_energies.tolist(),
                      "n_frames": len(frames)}
            if histogram:
                record["pair_histogram"] = sum(pair_histogram(d) for d in distances).tolist()
            atoms = result.atoms
            atoms.calc = None
            write(frame_path, atoms, format="extxyz")  # positions and momenta: where the next segment starts
            record_path.write_text(json.dumps(record))
            trajectory.unlink()
            if k > 0:  # only the last frame is needed to go on: the folder stays small enough to commit
                _segment_paths(folder, k - 1)[0].unlink(missing_ok=True)
            print(f"T={temperature:g} K {stage} segment {k}: closest pair {record['closest_pair_A']:.3f} Å, "
                  f"mean T {record['mean_temperature_K']:.0f} K", flush=True)
            k += 1


def report(out: Path, temperatures: List[float], ps: float) -> Dict:
    """The numbers of every temperature's finished segments."""
    summary: Dict = {"min_distance_A": MIN_DISTANCE, "max_drift_meV_per_atom_per_ps": MAX_DRIFT,
                     "literature": LITERATURE, "temperatures": {}}
    for temperature in temperatures:
        folder = out / f"T{temperature:g}"
        records = [json.loads(p.read_text()) for p in sorted(folder.glob("segment-*.json"))]
        nvt = [r for r in records if r["stage"] == "nvt"]
        nve = [r for r in records if r["stage"] == "nve"]
        elapsed, segments = 0.0, []  # each segment's closest pair, at the simulated time it ends (ps)
        for r in records:
            elapsed += r["steps"] * r["timestep_fs"] / 1000
            segments.append({"stage": r["stage"], "end_ps": elapsed, "closest_pair_A": r["closest_pair_A"]})
        row = {"segments": segments,
               "nvt_ps": sum(r["steps"] * r["timestep_fs"] for r in nvt) / 1000, "nvt_ps_asked": ps,
               "closest_pair_A": min((r["closest_pair_A"] for r in nvt + nve), default=None),
               "mean_temperature_K": float(np.mean([r["mean_temperature_K"] for r in nvt])) if nvt else None}
        if nve:
            from mlip.workflows.md import energy_drift

            t = np.concatenate([np.asarray(r["times_ps"]) + sum(q["steps"] * q["timestep_fs"] / 1000
                                                                  for q in nve[:j]) for j, r in enumerate(nve)])
            e = np.concatenate([r["total_energies"] for r in nve])
            drift, deviation = energy_drift(t, e, len(silicon_cell(False)))
            row.update({"nve_ps": float(t[-1]) if len(t) else 0.0, "nve_drift_meV_per_atom_per_ps": drift,
                        "nve_max_deviation_meV_per_atom": deviation})
        row["stable"] = bool(row["closest_pair_A"] is not None and row["closest_pair_A"] > MIN_DISTANCE
                             and nve and abs(row["nve_drift_meV_per_atom_per_ps"]) <= MAX_DRIFT
                             and row["nvt_ps"] >= ps - 1e-9)
        liquid = [r for r in nvt if "pair_histogram" in r]
        if liquid:
            half = liquid[len(liquid) // 2:]
            histogram = np.sum([r["pair_histogram"] for r in half], axis=0)
            atoms = silicon_cell(True)
            r, g = rdf(histogram, sum(q["n_frames"] for q in half), len(atoms), atoms.get_volume())
            row["liquid"] = {**liquid_structure(r, g, len(atoms) / atoms.get_volume()), "r": r.tolist(),
                             "g": g.tolist(), "averaged_ps": sum(q["steps"] * q["timestep_fs"] for q in half) / 1000}
        summary["temperatures"][f"{temperature:g}"] = row
    return summary


def plot(summary: Dict, path: str, model: str) -> None:
    """Left: the liquid's g(r) beside the published coordination numbers; right: the closest pair of every
    segment against simulated time, each temperature, with the :data:`MIN_DISTANCE` line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = f"{Path(model).parent.name}/{Path(model).stem}" if Path(model).suffix else model
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
    for t, row in summary["temperatures"].items():
        if "liquid" in row:
            liq = row["liquid"]
            ax.plot(liq["r"], liq["g"], label=f"{name}, {t} K ({liq['averaged_ps']:.0f} ps): coordination "
                                              f"{liq['coordination']:.2f}")
            ax.axvline(liq["first_minimum_A"], color="grey", lw=0.8, ls=":")
        segments = row.get("segments", [])
        if segments:
            bx.plot([q["end_ps"] for q in segments], [q["closest_pair_A"] for q in segments], ".-", lw=0.8,
                    label=f"{t} K ({', '.join(dict.fromkeys(q['stage'] for q in segments))})")
    for label, values in LITERATURE.items():
        ax.plot([], [], " ", label=f"{label.split(',')[0]}: coordination {values['coordination']}")
    ax.set_xlabel("r (Å)")
    ax.set_ylabel("g(r)")
    ax.set_xlim(1.5, R_MAX)
    ax.legend(fontsize=7)
    ax.set_title("liquid silicon, 216 atoms, NVT")
    bx.axhline(MIN_DISTANCE, color="red", lw=0.8, ls="--", label=f"{MIN_DISTANCE} Å")
    bx.set_xlabel("simulated time (ps)")
    bx.set_ylabel("closest pair in the segment (Å)")
    bx.legend(fontsize=7)
    bx.set_title(f"{name}: closest pair per segment")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a shipped model or a checkpoint")
    parser.add_argument("--out", required=True, help="folder of the segments (resumable)")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[300.0, 1800.0])
    parser.add_argument("--ps", type=float, default=50.0, help="NVT length per temperature (ps)")
    parser.add_argument("--segment-ps", type=float, default=1.0)
    parser.add_argument("--nve-ps", type=float, default=5.0)
    parser.add_argument("--melt-ps", type=float, default=MELT_PS, help="the liquid's melt at MELT_K (ps)")
    parser.add_argument("--liquid-above", type=float, default=1500.0,
                        help="temperatures above this (K) start from the melted liquid")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--report", action="store_true", help="only summarise the finished segments")
    parser.add_argument("--json", default=None)
    parser.add_argument("--plot", default=None)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if not args.report:
        import torch

        import mlip

        if args.threads:
            torch.set_num_threads(args.threads)
        calc = mlip.load_calculator(args.model, device="cpu", dtype="float32")
        for temperature in args.temperatures:
            run_temperature(calc, out / f"T{temperature:g}", temperature, temperature > args.liquid_above,
                            args.ps, args.segment_ps, args.nve_ps, args.seed, not args.no_progress,
                            melt_ps=args.melt_ps)
    summary = {"model": args.model, "nvt_ps": args.ps, **report(out, args.temperatures, args.ps)}
    for t, row in summary["temperatures"].items():
        liquid = row.get("liquid")
        print(f"{t} K: NVT {row['nvt_ps']:.1f}/{args.ps:g} ps, closest pair {row['closest_pair_A']} Å, "
              f"NVE drift {row.get('nve_drift_meV_per_atom_per_ps')} meV/atom/ps, stable {row['stable']}"
              + (f"; liquid: first peak {liquid['first_peak_A']:.2f} Å, minimum {liquid['first_minimum_A']:.2f} "
                 f"Å, coordination {liquid['coordination']:.2f}" if liquid else ""))
    if args.json:
        from mlip.io import write_json

        write_json(args.json, summary)
    if args.plot:
        plot(summary, args.plot, args.model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
