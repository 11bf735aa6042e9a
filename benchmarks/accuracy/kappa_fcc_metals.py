"""κ validation: thermal conductivity of seven fcc metals, EMT as the reference, κ_SRME per model.

The Matbench Discovery κ protocol (symmetry-preserving relaxation, phono3py with 0.03 Å
displacements, Wigner transport in the RTA with isotope scattering, 300 K) on fcc Al, Cu, Ni, Ag,
Au, Pd and Pt, conventional cell × 2 (32 atoms) for fc2 and fc3 and a 19³ q-mesh (the benchmark's
mesh for space group 225). ASE's EMT supplies the reference forces; every model given with
``--model`` (default: the trained models shipped with the package) is scored against it with
κ_SRME, κ_SRE and κ_SRD per material and on average. The campaign is resumable: rerunning with the
same ``--out-dir`` recomputes nothing. A table is printed and a bar plot saved.

    python benchmarks/accuracy/kappa_fcc_metals.py [--model NAME_OR_CHECKPOINT ...] [--mesh 19] [--out-dir kappa-fcc]

Phonons only: the electronic part of a metal's conductivity, which dominates in reality, is not
in any interatomic potential; the numbers compare force fields, not experiments.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import numpy as np
from ase.build import bulk

METALS = {"Al": 4.05, "Cu": 3.61, "Ni": 3.52, "Ag": 4.09, "Au": 4.08, "Pd": 3.89, "Pt": 3.92}
EMT = "ase.calculators.emt:EMT"


def structures_file(path: Path, mesh: int) -> Path:
    import ase.io

    frames = []
    for symbol, a in METALS.items():
        atoms = bulk(symbol, "fcc", a=a, cubic=True)
        atoms.info.update(material_id=f"fcc-{symbol}", fc2_supercell=np.diag([2, 2, 2]),
                          fc3_supercell=np.diag([2, 2, 2]), q_point_mesh=np.array([mesh] * 3))
        frames.append(atoms)
    path.parent.mkdir(parents=True, exist_ok=True)
    ase.io.write(path, frames)
    return path


def default_models():
    from mlip import pretrained

    return sorted(getattr(pretrained, "TRAINED", {}))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", default=None,
                        help="model to score (repeatable): shipped name, checkpoint or module:Class "
                             "(default: every trained model shipped with the package)")
    parser.add_argument("--mesh", type=int, default=19, help="q-mesh n×n×n (default: %(default)s)")
    parser.add_argument("--out-dir", default="kappa-fcc", help="campaign folder (default: %(default)s)")
    parser.add_argument("--plot", default=None, help="bar plot path (default: OUT_DIR/kappa_fcc_metals.png)")
    args = parser.parse_args(argv)

    from mlip.workflows.phonons.kappa_batch import load_kappa_table, run_kappa_batch, score_kappa_batch

    out = Path(args.out_dir)
    source = structures_file(out / "structures.extxyz", args.mesh)
    models = args.model if args.model is not None else default_models()
    if not models:
        print("no trained model ships with this version yet: computing the EMT reference only "
              "(pass --model to score a checkpoint or another calculator)")
    labels = {EMT: "EMT (reference)"}
    runs = {}
    for spec in [EMT] + list(models):
        tag = hashlib.sha1(str(spec).encode()).hexdigest()[:8]
        folder = out / ("emt" if spec == EMT else f"{Path(spec).name.replace(':', '_')}-{tag}")
        t0 = time.perf_counter()
        counts = run_kappa_batch(source, spec, folder, progress=True)
        runs[spec] = dict(folder=folder, merged=counts["merged"], seconds=time.perf_counter() - t0,
                          computed=counts["computed"])
        print(f"{labels.get(spec, spec)}: {counts['computed']} computed, {counts['skipped']} reused, "
              f"{runs[spec]['seconds']:.0f} s", flush=True)

    reference = load_kappa_table(runs[EMT]["merged"])
    kappas = {spec: load_kappa_table(r["merged"]) for spec, r in runs.items()}
    scores = {spec: score_kappa_batch(runs[spec]["merged"], runs[EMT]["merged"]) for spec in models}

    def kappa_avg(record):
        k = record.get("kappa")
        if k is None or record.get("failed"):
            return float("nan")
        return float(np.mean(np.asarray(k, dtype=float)[0][:3]))

    header = f"{'metal':>6} {'κ EMT':>8}" + "".join(f" {'κ ' + Path(m).name[:14]:>17} {'SRME':>6}" for m in models)
    print(f"\nκ(300 K), W/(m·K), trace/3; q-mesh {args.mesh}³, conventional cell × 2")
    print(header)
    ids = list(reference)
    for mid in ids:
        line = f"{mid.split('-')[1]:>6} {kappa_avg(reference[mid]):>8.2f}"
        for m in models:
            rec = kappas[m].get(mid, {})
            line += f" {kappa_avg(rec) if rec else float('nan'):>17.2f} {scores[m]['per_material'][mid]['srme']:>6.3f}"
        print(line)
    for m in models:
        s = scores[m]
        print(f"{m}: mean κ_SRME {s['srme']:.3f}, κ_SRE {s['sre']:.3f}, κ_SRD {s['srd']:+.3f} "
              f"({s['n_failed']} of {s['n_materials']} failed or unstable)")
    summary = {"mesh": args.mesh, "reference": {mid: kappa_avg(reference[mid]) for mid in ids},
               "models": {m: {"kappa": {mid: kappa_avg(kappas[m].get(mid, {})) for mid in ids},
                              "srme": scores[m]["srme"], "sre": scores[m]["sre"], "srd": scores[m]["srd"],
                              "per_material_srme": {mid: scores[m]["per_material"][mid]["srme"] for mid in ids}}
                          for m in models},
               "seconds": {m: runs[m]["seconds"] for m in runs}}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plot)")
        return
    fig, axes = plt.subplots(1, 2 if models else 1, figsize=(11 if models else 6, 4), squeeze=False)
    ax = axes[0, 0]
    x = np.arange(len(ids))
    series = [("EMT", [summary["reference"][i] for i in ids])]
    series += [(Path(m).name, [summary["models"][m]["kappa"][i] for i in ids]) for m in models]
    width = 0.8 / len(series)
    for k, (name, values) in enumerate(series):
        ax.bar(x + (k - (len(series) - 1) / 2) * width, values, width, label=name)
    ax.set_xticks(x, [i.split("-")[1] for i in ids])
    ax.set_ylabel("κ(300 K), W/(m·K) (phonons)")
    ax.set_title("lattice thermal conductivity, fcc metals")
    ax.legend(fontsize=8)
    if models:
        ax = axes[0, 1]
        width = 0.8 / len(models)
        for k, m in enumerate(models):
            ax.bar(x + (k - (len(models) - 1) / 2) * width, [summary["models"][m]["per_material_srme"][i] for i in ids],
                   width, label=f"{Path(m).name} (mean {summary['models'][m]['srme']:.3f})")
        ax.set_xticks(x, [i.split("-")[1] for i in ids])
        ax.set_ylabel("κ_SRME vs EMT (0 best, 2 worst)")
        ax.set_ylim(0, 2)
        ax.legend(fontsize=8)
    fig.tight_layout()
    plot = Path(args.plot) if args.plot else out / "kappa_fcc_metals.png"
    fig.savefig(plot, dpi=150)
    print(f"plot: {plot}")


if __name__ == "__main__":
    main()
