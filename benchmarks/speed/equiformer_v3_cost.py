"""EquiformerV3 cost: an MD step next to the Platonic Transformer, and one layer as lmax grows.

Part A, same structures and same run: energy + forces + stress of EquiformerV3 at the size of the
eSEN-sm baseline of the Platonic Transformer paper (lmax 2, mmax 2, 128 channels, 4 layers, cutoff
6 Å) and of the default Platonic Transformer (at its default cutoff 5 Å and at 6 Å), float32, on
rattled fcc Cu supercells; µs/atom/step and the ratios.

Part B: one EquiformerV3 block (attention + feed-forward, forward and backward) at fixed width
(128 channels, the MP model's other widths, mmax 2) for lmax = 2, 3, 4, 6 on the edges of a
32-atom Cu cell at 6 Å (78 neighbours per atom), with the attention and the feed-forward network
timed separately; and the product of two degree-L features projected back to degree L computed on
the S² grid (as in SwiGLU-S²) next to the same product with Clebsch–Gordan coefficients (e3nn,
all Gaunt paths l1 ⊗ l2 → l3 ≤ L, if e3nn is installed). Each curve is fitted with a power of L;
a log-log plot is saved.

    python benchmarks/speed/equiformer_v3_cost.py [--sizes 108 500] [--lmax 2 3 4 6] [--plot lmax.png] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
import torch
from ase.build import bulk

import mlip
from mlip.models import create_model

CELLS = {32: 2, 108: 3, 500: 5, 864: 6}


def median_time(fn, repeats: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def md_step_cost(calc, atoms, repeats: int) -> float:
    """Seconds per energy + forces + stress call, atoms moved before each call (new neighbour list)."""
    atoms.calc = calc
    rng = np.random.default_rng(0)

    def step():
        atoms.positions += rng.normal(scale=1e-3, size=atoms.positions.shape)
        atoms.get_potential_energy()
        atoms.get_forces()
        atoms.get_stress()

    return median_time(step, repeats, warmup=2)


def part_a(sizes, repeats):
    models = {
        "EquiformerV3 L2 M2 C128 ×4, 6 Å": (create_model(
            "equiformer_v3", species=["Cu"], cutoff=6.0, seed=0, lmax=2, mmax=2, channels=128, num_layers=4,
            num_heads=8, alpha_channels=64, value_channels=16, attn_hidden_channels=32, ffn_hidden_channels=512,
            edge_channels=128), 6.0),
        "Platonic default, 5 Å": (create_model("platonic", species=["Cu"], cutoff=5.0, seed=0), 5.0),
        "Platonic default, 6 Å": (create_model("platonic", species=["Cu"], cutoff=6.0, seed=0), 6.0),
    }
    rows = []
    print(f"{'model':>32} {'params':>9} {'atoms':>6} {'edges/atom':>10} {'ms/step':>10} {'µs/atom/step':>13}")
    for n in sizes:
        k = CELLS[n]
        atoms = bulk("Cu", "fcc", a=3.61, cubic=True) * (k, k, k)
        atoms.rattle(0.05, seed=1)
        for name, (potential, cutoff) in models.items():
            calc = mlip.MLIPCalculator(potential, device="cpu", dtype="float32")
            edges = mlip.AtomicGraph.from_atoms(atoms, cutoff).n_edges / n
            sec = md_step_cost(calc, atoms.copy(), repeats)
            row = dict(model=name, params=potential.num_parameters(), atoms=n, edges_per_atom=edges,
                       ms_per_step=sec * 1e3, us_per_atom_step=sec / n * 1e6)
            rows.append(row)
            print(f"{name:>32} {row['params']:>9,} {n:>6} {edges:>10.1f} {sec * 1e3:>10.1f} "
                  f"{row['us_per_atom_step']:>13.1f}", flush=True)
    print("\nratios (same structures, same run): EquiformerV3 / Platonic")
    for n in sizes:
        get = {r["model"]: r["us_per_atom_step"] for r in rows if r["atoms"] == n}
        eq = get["EquiformerV3 L2 M2 C128 ×4, 6 Å"]
        print(f"  {n:>5} atoms: vs Platonic 5 Å {eq / get['Platonic default, 5 Å']:.1f}×, "
              f"vs Platonic 6 Å {eq / get['Platonic default, 6 Å']:.1f}×")
    return rows


def part_b(lmax_values, repeats, channels=128, mmax=2):
    from mlip.models.equiformer_v3.model import EquiformerV3

    atoms = bulk("Cu", "fcc", a=3.61, cubic=True) * (2, 2, 2)
    atoms.rattle(0.05, seed=1)
    graph = mlip.AtomicGraph.from_atoms(atoms, 6.0)
    n = len(atoms)
    vectors = mlip.graph.edge_vectors(graph.positions.float(), graph.cell.float(), graph.batch, graph.edge_index,
                                      graph.shifts)
    species = torch.zeros(n, dtype=torch.long)
    rows = []
    print(f"\none block, {channels} channels, mmax {mmax}, {n} atoms, {graph.n_edges} edges, forward + backward")
    print(f"{'lmax':>4} {'K':>4} {'K_M':>4} {'block ms':>9} {'attention ms':>13} {'feed-forward ms':>16}")
    for lmax in lmax_values:
        model = EquiformerV3(1, 6.0, lmax=lmax, mmax=min(mmax, lmax), channels=channels, num_layers=1,
                             num_heads=8, alpha_channels=64, value_channels=16, attn_hidden_channels=32,
                             ffn_hidden_channels=4 * channels, edge_channels=128).float()
        block = model.blocks[0]
        with torch.no_grad():
            rbf, envelope, wigner = model.edge_features(vectors)
        k = (lmax + 1) ** 2
        x0 = torch.randn(n, k, channels, generator=torch.Generator().manual_seed(0))

        def run(part):
            x = x0.clone().requires_grad_(True)
            if part == "block":
                y = block(x, graph.edge_index, species, rbf, envelope, wigner)
            elif part == "attention":
                y = block.attention(x, graph.edge_index, species, rbf, envelope, wigner)
            else:
                y = block.feed_forward(x)
            y.pow(2).sum().backward()

        times = {part: median_time(lambda: run(part), repeats) for part in ("block", "attention", "ffn")}
        row = dict(lmax=lmax, mmax=min(mmax, lmax), K=k, K_M=wigner.shape[1],
                   **{f"{p}_ms": t * 1e3 for p, t in times.items()})
        rows.append(row)
        print(f"{lmax:>4} {k:>4} {wigner.shape[1]:>4} {row['block_ms']:>9.1f} {row['attention_ms']:>13.1f} "
              f"{row['ffn_ms']:>16.1f}", flush=True)
    return rows


def part_c(lmax_values, repeats, nodes=1000, channels=32):
    """Channel-wise product of two degree-≤L features, projected to degree ≤ L: grid vs CG."""
    from mlip.so3 import S2Grid

    try:
        import warnings

        warnings.filterwarnings("ignore", message="The TorchScript type system")
        from e3nn import o3
    except ImportError:
        o3 = None
        print("\n(e3nn not installed: no Clebsch–Gordan comparison)")
    rows = []
    print(f"\nproduct of two degree-≤L features → degree ≤ L, {nodes} × {channels} channels, forward + backward")
    print(f"{'lmax':>4} {'grid points':>11} {'S² grid ms':>11} {'grid MAC':>9} {'CG paths':>9} {'CG (e3nn) ms':>13} "
          f"{'CG MAC':>9}")
    for lmax in lmax_values:
        grid = S2Grid(lmax)
        k = (lmax + 1) ** 2
        gen = torch.Generator().manual_seed(0)
        a0 = torch.randn(nodes, k, channels, generator=gen)
        b0 = torch.randn(nodes, k, channels, generator=gen)

        def grid_product():
            a, b = a0.clone().requires_grad_(True), b0.clone().requires_grad_(True)
            grid.from_grid(grid.to_grid(a) * grid.to_grid(b)).pow(2).sum().backward()

        # Multiply-adds per channel: two projections to the grid, the product, one projection back.
        row = dict(lmax=lmax, grid_points=grid.num_points, grid_ms=median_time(grid_product, repeats) * 1e3,
                   grid_macs=3 * grid.num_points * k + grid.num_points)
        if o3 is not None:
            irreps = o3.Irreps([(channels, (l, (-1) ** l)) for l in range(lmax + 1)])
            paths = [(i, j, o, "uuu", False) for i, (_, a) in enumerate(irreps) for j, (_, b) in enumerate(irreps)
                     for o, (_, c) in enumerate(irreps) if c in a * b]
            tp = o3.TensorProduct(irreps, irreps, irreps, paths)
            # e3nn's layout is [nodes, Σ_l channels·(2l+1)] (channel-major within each l).
            flat = [torch.cat([t[:, l * l:(l + 1) ** 2, :].transpose(1, 2).reshape(nodes, -1)
                               for l in range(lmax + 1)], dim=1) for t in (a0, b0)]

            def cg_product():
                a, b = flat[0].clone().requires_grad_(True), flat[1].clone().requires_grad_(True)
                tp(a, b).pow(2).sum().backward()

            # Multiply-adds per channel with the non-zero real Clebsch–Gordan coefficients of every path.
            nonzero = sum(int((o3.wigner_3j(a.l, b.l, c.l).abs() > 1e-10).sum())
                          for (_, a), (_, b), (_, c) in ((irreps[i], irreps[j], irreps[o]) for i, j, o, *_ in paths))
            row.update(cg_paths=len(paths), cg_ms=median_time(cg_product, repeats) * 1e3, cg_macs=nonzero)
        rows.append(row)
        cg = (f"{row['cg_paths']:>9} {row['cg_ms']:>13.1f} {row['cg_macs']:>9}" if "cg_ms" in row
              else f"{'-':>9} {'-':>13} {'-':>9}")
        print(f"{lmax:>4} {grid.num_points:>11} {row['grid_ms']:>11.2f} {row['grid_macs']:>9} {cg}", flush=True)
    return rows


def power_fit(ls, ts):
    """Exponent p of t ∝ L^p (least squares in log-log) and the local exponent between the last two L."""
    ls, ts = np.asarray(ls, float), np.asarray(ts, float)
    p = np.polyfit(np.log(ls), np.log(ts), 1)[0]
    local = math.log(ts[-1] / ts[-2]) / math.log(ls[-1] / ls[-2])
    return float(p), float(local)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[108, 500], choices=sorted(CELLS))
    parser.add_argument("--lmax", type=int, nargs="+", default=[2, 3, 4, 6])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--skip-md", action="store_true", help="only the lmax scaling (parts B and C)")
    parser.add_argument("--plot", default="equiformer_v3_lmax_scaling.png")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, float32")
    result = {"threads": args.threads, "torch": torch.__version__}
    if not args.skip_md:
        result["md_step"] = part_a(args.sizes, args.repeats)
    lmax = sorted(args.lmax)
    result["block"] = part_b(lmax, args.repeats)
    result["product"] = part_c(lmax, args.repeats)

    print("\npower-law fits t ∝ L^p over lmax", lmax, "(p: least squares; local: between the two largest L)")
    curves = {
        "block (attention + FFN)": [r["block_ms"] for r in result["block"]],
        "attention (SO(2), mmax 2)": [r["attention_ms"] for r in result["block"]],
        "feed-forward (S² grid)": [r["ffn_ms"] for r in result["block"]],
        "grid product": [r["grid_ms"] for r in result["product"]],
    }
    if all("cg_ms" in r for r in result["product"]):
        curves["CG product (e3nn)"] = [r["cg_ms"] for r in result["product"]]
    counts = {"grid product MACs": [r["grid_macs"] for r in result["product"]]}
    if all("cg_macs" in r for r in result["product"]):
        counts["CG product MACs"] = [r["cg_macs"] for r in result["product"]]
    fits = {}
    for name, ts in curves.items():
        p, local = power_fit(lmax, ts)
        fits[name] = dict(p=p, local=local)
        print(f"  {name:>26}: p = {p:.2f}, local {local:.2f}")
    print("operation counts per channel over the same lmax (asymptotically L^4 for the grid, L^5 for sparse CG):")
    for name, ts in counts.items():
        p, local = power_fit(lmax, ts)
        fits[name] = dict(p=p, local=local)
        print(f"  {name:>26}: p = {p:.2f}, local {local:.2f}")
    result["fits"] = fits

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plot)")
    else:
        fig, ax = plt.subplots(figsize=(6, 4.5))
        for name, ts in curves.items():
            ax.loglog(lmax, ts, "o-", label=f"{name}  (∝ L^{fits[name]['p']:.1f})")
        ref = np.array(lmax, float)
        for power, style in ((4, ":"), (6, "--")):
            anchor = curves["grid product"][0] if power == 4 else curves.get("CG product (e3nn)", [1])[0]
            ax.loglog(ref, anchor * (ref / ref[0]) ** power, "k" + style, lw=0.8, label=f"L^{power}")
        ax.set_xlabel("lmax L")
        ax.set_ylabel("forward + backward time (ms)")
        ax.set_xticks(lmax, [str(v) for v in lmax])
        ax.set_title("EquiformerV3 cost vs lmax (CPU, float32)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=150)
        print(f"plot: {args.plot}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
