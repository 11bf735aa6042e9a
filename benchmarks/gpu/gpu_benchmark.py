"""GPU benchmark of the CUDA kernels (mlip.kernels), written to one JSON file.

    python benchmarks/gpu/gpu_benchmark.py [--out gpu_check.json] [--budget 420] [--device cuda]
    python benchmarks/gpu/gpu_benchmark.py --device cpu --tiny     # checks the script itself on a CPU

Sections (float32 unless stated; every time is a median over repeats, CUDA-synchronised):

1. neighbour lists of rattled fcc Cu (cutoff 5 Å) at 1k, 10k, 100k and 1M atoms, and a batch of
   512 × 64-atom cells: the CUDA kernel (backend "cuda"), the PyTorch cell list on the same device
   ("torch") and vesin on the CPU (tensors moved to the CPU and back, if vesin imports);
2. one EquiformerV3 block (MP model widths: L4, M2, C128; attention + feed-forward, forward +
   backward to the features and the Wigner matrices, as in a force evaluation) on the edges of
   1k and 10k Cu atoms at 6 Å, with and without the fused kernels;
3. calculator energy + forces + stress per MD step for the two shipped models (platonic-emt,
   equiformer_v3-emt) and the EquiformerV3 MP configuration at 1k, 10k and 100k atoms, as atom·steps/s.

A hard time budget (``--budget`` seconds) bounds the whole run: before each measurement its cost is
predicted from the previous size (linear in atoms) and the measurement is skipped, with the reason
in the JSON, when it would not fit; out-of-memory errors are recorded, not fatal. The targets of
issue 6 are evaluated at the end (``targets``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_bootstrap  # noqa: E402,F401

import numpy as np  # noqa: E402
import torch  # noqa: E402
from ase.build import bulk  # noqa: E402

import mlip  # noqa: E402
import mlip.kernels as mk  # noqa: E402
from mlip.neighbors import batched_neighbor_list, neighbor_list  # noqa: E402

FULL = dict(nl=[1000, 10_000, 100_000, 1_000_000], batch=(512, 64), layer=[1000, 10_000], calc=[1000, 10_000, 100_000])
# One EquiformerV3 block with forces needs ~140 kB per edge (float32, L4 C128): at 6 Å, 10k Cu atoms
# (856k edges) did not fit in the H200's 139 GB; at 5 Å (the shipped models' cutoff) it does.
LAYER_CUTOFF = 5.0
TINY = dict(nl=[200, 2000], batch=(16, 64), layer=[100], calc=[100, 400])


class Budget:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device, repeats, budget, warmup=1, max_seconds=4.0):
    """Median seconds of fn() (after warm-up), stopping early when the budget runs out or the
    repeats of this measurement have taken max_seconds."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
        if budget.left() < 5 * times[-1] or sum(times) > max_seconds:
            break
    return float(np.median(times))


def sync_latency(device):
    """Host-device round trips on this machine (µs): an empty synchronize, reading back a scalar
    after a tiny kernel, and launching a tiny kernel (asynchronous)."""
    x = torch.zeros(16, device=device)
    out = {}
    for name, fn in [("synchronize_us", lambda: torch.cuda.synchronize(device)),
                     ("scalar_readback_us", lambda: float(x.sum())),
                     ("tiny_kernel_launch_us", lambda: x.add_(1.0))]:
        for _ in range(20):
            fn()
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        for _ in range(200):
            fn()
        out[name] = (time.perf_counter() - t0) / 200 * 1e6
        torch.cuda.synchronize(device)
    return out


def count_syncs(fn):
    """Number of synchronising CUDA operations PyTorch sees in one call of fn(), and where
    (torch.cuda.set_sync_debug_mode; CuPy's own calls are not seen)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    hits = [w for w in caught if "synchroniz" in str(w.message)]
    where = {}
    for w in hits:
        loc = f"{Path(w.filename).name}:{w.lineno}"
        where[loc] = where.get(loc, 0) + 1
    return {"count": len(hits), "where": where}


def cu_supercell(n_atoms, seed=0):
    """Rattled fcc Cu (cubic cells of 4 atoms) with about n_atoms atoms."""
    reps = max(1, round((n_atoms / 4) ** (1 / 3)))
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True) * (reps, reps, reps)
    atoms.rattle(0.05, seed=seed)
    return atoms


def guarded(record, fn):
    """Run fn(), recording OOM and other errors in record instead of stopping the run."""
    try:
        fn()
    except torch.cuda.OutOfMemoryError:
        record["error"] = "out of memory"
    except Exception as err:  # keep measuring the rest
        record["error"] = f"{type(err).__name__}: {err}"
        record["traceback"] = traceback.format_exc(limit=3)
    finally:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def predicted_ok(prev, n, budget, factor=6.0, share=0.5):
    """prev = (atoms, seconds) of the last measurement of the series; fits in `share` of the budget?"""
    if prev is None:
        return True
    return prev[1] * (n / prev[0]) * factor < share * budget.left()


# ------------------------------------------------------------------------------------------ 1
def compare_edges(rec, edges, ref, ref_name):
    """Record the edge count of ``edges`` = (edge_index, shifts) in ``rec`` and whether they equal
    ``ref`` (the first backend's, on the CPU) exactly; returns the reference (``edges`` when ref is None)."""
    e, s = edges
    rec["edges"] = int(e.shape[1])
    if ref is None:
        return e.cpu(), s.cpu()
    rec["identical_to_" + ref_name] = bool(torch.equal(e.cpu(), ref[0]) and torch.equal(s.cpu(), ref[1]))
    return ref


def bench_neighbors(sizes, batch_shape, device, budget, kernels, vesin_max_atoms=200_000):
    rows = []
    backends = (["cuda"] if kernels else []) + ["torch", "vesin"]
    try:
        import vesin  # noqa: F401
    except ImportError:
        backends.remove("vesin")
    prev = {b: None for b in backends}
    for n in sizes:
        atoms = cu_supercell(n)
        pos = torch.tensor(atoms.positions, device=device)
        cell = torch.tensor(atoms.cell.array, device=device)
        pbc = torch.tensor([True] * 3, device=device)
        ref_edges = None
        for be in backends:
            rec = dict(case=f"{len(atoms)} atoms", atoms=len(atoms), backend=be)
            if be == "vesin" and len(atoms) > vesin_max_atoms:
                rec["skipped"] = f"CPU baseline measured up to {vesin_max_atoms} atoms in this run"
                rows.append(rec)
                continue
            if not predicted_ok(prev[be], len(atoms), budget):
                rec["skipped"] = "predicted time exceeds the remaining budget"
                rows.append(rec)
                continue

            def run(be=be):
                if be == "vesin":
                    e, s = neighbor_list(pos.cpu(), cell.cpu(), pbc.cpu(), 5.0, backend="vesin")
                    return e.to(device), s.to(device)
                return neighbor_list(pos, cell, pbc, 5.0, backend=be)

            def go(rec=rec, run=run, be=be):
                nonlocal ref_edges
                ref_edges = compare_edges(rec, run(), ref_edges, backends[0])
                rec["seconds"] = timed(run, device, 5, budget)
                prev[be] = (len(atoms), rec["seconds"])
                if device.type == "cuda" and be != "vesin" and 5000 < len(atoms) < 50_000:
                    rec["syncs"] = count_syncs(run)
                if device.type == "cuda" and be != "vesin" and len(atoms) < 5000:
                    rec["profile_cpu"] = profile_table(run, True, rows=25, sort_by="self_cpu_time_total")
                if device.type == "cuda" and be == "cuda" and 50_000 < len(atoms) < 200_000:
                    rec["profile"] = profile_table(run, True, rows=15)

            guarded(rec, go)
            rows.append(rec)
    # batch of many small cells
    g, per = batch_shape
    assert per == 64
    structs = []
    for k in range(g):  # 64-atom cells: 2 × 2 × 4 cubic fcc cells
        a = bulk("Cu", "fcc", a=3.61, cubic=True) * (2, 2, 4)
        a.rattle(0.05, seed=k)
        structs.append(a)
    pos = torch.tensor(np.concatenate([a.positions for a in structs]), device=device)
    cells = torch.tensor(np.stack([a.cell.array for a in structs]), device=device)
    pbc = torch.ones(g, 3, dtype=torch.bool, device=device)
    batch = torch.arange(g, device=device).repeat_interleave(len(structs[0]))
    # "cuda" takes the all-pairs kernels here (64 <= SMALL_MAX_ATOMS); "cuda-cells" forces the cell list
    batch_backends = backends[:1] + (["cuda-cells"] if kernels else []) + backends[1:]
    ref_edges = None
    for be in batch_backends:
        rec = dict(case=f"batch {g} x {len(structs[0])} atoms", atoms=int(pos.shape[0]), backend=be)

        def run(be=be):
            if be == "vesin":
                return batched_neighbor_list(pos.cpu(), cells.cpu(), pbc.cpu(), batch.cpu(), 5.0, backend="vesin")
            if be == "cuda-cells":
                from mlip.neighbors.cuda_backend import batched_neighbor_list_cuda

                return batched_neighbor_list_cuda(pos, cells, pbc, batch, 5.0, small_max_atoms=0)
            return batched_neighbor_list(pos, cells, pbc, batch, 5.0, backend=be)

        def go(rec=rec, run=run, be=be):
            nonlocal ref_edges
            ref_edges = compare_edges(rec, run(), ref_edges, batch_backends[0])
            rec["seconds"] = timed(run, device, 20, budget, warmup=3)
            if device.type == "cuda" and be != "vesin":
                rec["syncs"] = count_syncs(run)
            if device.type == "cuda" and be == "cuda":
                rec["profile_cpu"] = profile_table(run, True, rows=20, sort_by="self_cpu_time_total")

        guarded(rec, go)
        rows.append(rec)
    return rows


# ------------------------------------------------------------------------------------------ 2
def bench_layer(sizes, device, budget, kernels, tiny):
    from mlip.graph import batch_atoms, edge_vectors
    from mlip.models import create_model

    rows = []
    width = dict(lmax=4, mmax=2, channels=128) if not tiny else dict(lmax=2, mmax=2, channels=16)
    torch.manual_seed(0)
    model = create_model("equiformer_v3", species=["Cu"], cutoff=LAYER_CUTOFF, num_layers=1, **width).model
    model = model.to(device=device, dtype=torch.float32)
    block = model.blocks[0]
    prev = None
    for n in sizes:
        atoms = cu_supercell(n)
        rec = dict(atoms=len(atoms), lmax=width["lmax"], mmax=width["mmax"], channels=width["channels"],
                   cutoff=LAYER_CUTOFF)
        if not predicted_ok(prev, len(atoms), budget, factor=12):
            rec["skipped"] = "predicted time exceeds the remaining budget"
            rows.append(rec)
            continue

        def go(rec=rec, atoms=atoms):
            nonlocal prev
            graph = batch_atoms([atoms], LAYER_CUTOFF, dtype=torch.float32, device=device)
            vec = edge_vectors(graph.positions, graph.cell, graph.batch, graph.edge_index, graph.shifts)
            rbf, env, wigner = model.edge_features(vec)
            species = torch.zeros(len(atoms), dtype=torch.long, device=device)
            x0 = torch.randn(len(atoms), (width["lmax"] + 1) ** 2, width["channels"], device=device)
            rec["edges"] = int(graph.edge_index.shape[1])
            wig = wigner.detach().requires_grad_()

            def step():
                x = x0.clone().requires_grad_()
                y = block(x, graph.edge_index, species, rbf.detach(), env.detach(), wig)
                torch.autograd.grad(y.square().sum(), (x, wig))

            modes = [("pytorch", False)] + ([("kernels", True)] if kernels else [])
            for name, on in modes:
                if on:
                    rec[f"{name}_seconds"] = timed(step, device, 5, budget)
                else:
                    with mk.disable_kernels():
                        rec[f"{name}_seconds"] = timed(step, device, 5, budget)
            if kernels:
                rec["speedup"] = rec["pytorch_seconds"] / rec["kernels_seconds"]
            # the rotation steps alone (what the kernels replace): gather-rotate + rotate-scatter,
            # forward and backward to the features and the Wigner matrices
            from mlip.kernels import escn_rotation as er

            src = graph.edge_index.flip(0).contiguous()  # [2, E]: sources j, i
            msg0 = torch.randn(src.shape[1], wig.shape[1], 2 * width["channels"], device=device)

            def rotations(on):
                x = x0.clone().requires_grad_()
                w = wig.detach().requires_grad_()
                m = msg0.clone().requires_grad_()
                a = er.gather_rotate(x, w, src, use_kernels=on)
                b = er.rotate_scatter(w, m, src, len(atoms), use_kernels=on)
                torch.autograd.grad(a.square().sum() + b.square().sum(), (x, w, m))

            if kernels:  # each kernel alone against its PyTorch formula (no autograd)
                from mlip.kernels import escn_reference as ref

                xd, wd, md = x0.detach(), wig.detach(), msg0
                pairs = {"gather_rotate": (lambda: er.launch_gather_rotate(xd, wd, src),
                                           lambda: ref.gather_rotate_reference(xd, wd, src)),
                         "rotate_scatter": (lambda: er.launch_rotate_scatter(wd, md, src, len(atoms)),
                                            lambda: ref.rotate_scatter_reference(wd, md, src, len(atoms))),
                         "edge_outer": (lambda: er.launch_edge_outer(md, xd, src),
                                        lambda: ref.edge_outer_reference(md, xd, src))}
                rec["per_kernel_ms"] = {k: {"kernel": 1e3 * timed(a, device, 10, budget),
                                            "pytorch": 1e3 * timed(b, device, 10, budget)}
                                        for k, (a, b) in pairs.items()}
                rec["message_tensor_GB"] = msg0.numel() * msg0.element_size() / 1e9
            rec["rotations_pytorch_seconds"] = timed(lambda: rotations(False), device, 5, budget)
            if kernels:
                rec["rotations_kernels_seconds"] = timed(lambda: rotations(True), device, 5, budget)
                rec["rotations_speedup"] = rec["rotations_pytorch_seconds"] / rec["rotations_kernels_seconds"]
            if device.type == "cuda" and n == sizes[-1]:  # where the time goes (one step per mode)
                for name, on in modes:
                    rec[f"{name}_profile"] = profile_table(step, on)
            prev = (len(atoms), sum(v for k, v in rec.items() if k.endswith("_seconds")))

        guarded(rec, go)
        rows.append(rec)
    return rows


def profile_table(step, kernels_on, rows=12, sort_by="cuda_time_total"):
    """The `rows` most expensive operations of one step (torch.profiler), as text."""
    from torch.profiler import ProfilerActivity, profile

    ctx = contextlib.nullcontext() if kernels_on else mk.disable_kernels()
    with ctx:
        step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
    return prof.key_averages().table(sort_by=sort_by, row_limit=rows, max_name_column_width=60)


# ------------------------------------------------------------------------------------------ 3
def bench_calculator(sizes, device, budget, kernels, tiny):
    import warnings

    from mlip.models import config_path, create_model, create_model_from_config
    from mlip.pretrained import load

    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models = {"platonic-emt (shipped)": load("platonic-emt"),
                  "equiformer_v3-emt (shipped default)": load("equiformer_v3-emt")}
    if tiny:
        models["equiformer_v3 (tiny)"] = create_model("equiformer_v3", species=["Cu"], cutoff=6.0, lmax=2,
                                                      channels=16, num_layers=1)
    else:
        models["equiformer_v3 (MP configuration)"] = create_model_from_config(config_path("equiformer_v3_mp"))
    backend = "cuda" if kernels else ("torch" if device.type == "cuda" else "auto")
    for name, potential in models.items():
        prev = None
        calc = mlip.MLIPCalculator(potential, device=device, dtype="float32", neighbor_backend=backend)
        for n in sizes:
            atoms = cu_supercell(n)
            rec = dict(model=name, atoms=len(atoms), neighbor_backend=backend, dtype="float32")
            if not predicted_ok(prev, len(atoms), budget, factor=8, share=0.4):
                rec["skipped"] = "predicted time exceeds the remaining budget"
                rows.append(rec)
                continue

            def go(rec=rec, atoms=atoms):
                nonlocal prev
                atoms.calc = calc
                rng = np.random.default_rng(0)

                def step():
                    atoms.positions += rng.normal(scale=1e-3, size=atoms.positions.shape)
                    atoms.get_potential_energy()
                    atoms.get_forces()
                    atoms.get_stress()

                rec["seconds_per_step"] = timed(step, device, 3, budget)
                rec["atom_steps_per_s"] = len(atoms) / rec["seconds_per_step"]
                prev = (len(atoms), rec["seconds_per_step"])
                if device.type == "cuda" and name.startswith("platonic") and len(atoms) > 5000:
                    rec["syncs"] = count_syncs(step)
                    rec["profile"] = profile_table(step, kernels, rows=15)
                    rec["profile_cpu"] = profile_table(step, kernels, rows=15, sort_by="self_cpu_time_total")

            guarded(rec, go)
            rows.append(rec)
    return rows


def targets(result):
    """Issue 6 targets, evaluated from the measurements (None when not measured)."""
    def nl(case, be):
        return next((r.get("seconds") for r in result["neighbor_list"] if r["case"].startswith(case)
                     and r["backend"] == be and "seconds" in r), None)

    nl100k = [r for r in result["neighbor_list"] if r.get("atoms", 0) > 90_000 and r["atoms"] < 200_000]
    t_k = next((r.get("seconds") for r in nl100k if r["backend"] == "cuda"), None)
    t_t = next((r.get("seconds") for r in nl100k if r["backend"] == "torch"), None)
    t_b = nl("batch", "cuda")
    layer10k = next((r for r in result["equiformer_layer"] if r["atoms"] > 9000 and "speedup" in r), None)
    plat = next((r for r in result["calculator"] if r["model"].startswith("platonic") and r["atoms"] > 90_000
                 and "atom_steps_per_s" in r), None)
    return {
        "neighbor_list_100k_speedup_vs_torch (>= 2)": None if not (t_k and t_t) else t_t / t_k,
        "neighbor_list_batch_512x64_ms (< 1)": None if t_b is None else 1e3 * t_b,
        "equiformer_layer_10k_speedup (>= 1.5)": None if layer10k is None else layer10k["speedup"],
        "platonic_100k_atom_steps_per_s (>= 1e6)": None if plat is None else plat["atom_steps_per_s"],
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="small sizes (checks the script on a CPU)")
    parser.add_argument("--budget", type=float, default=420.0, help="seconds for all measurements")
    parser.add_argument("--out", default=None, help="JSON path (default $OUT/gpu_check.json or ./gpu_check.json)")
    parser.add_argument("--tests", default=None, help="JSON of the pytest run to embed (from gpu_check.sh)")
    parser.add_argument("--sections", nargs="+", default=["neighbor_list", "equiformer_layer", "calculator"],
                        help="which sections to run (default: all three)")
    args = parser.parse_args(argv)
    out = Path(args.out or Path(os.environ.get("OUT", ".")) / "gpu_check.json")
    device = torch.device(args.device)
    budget = Budget(args.budget)
    sizes = TINY if args.tiny else FULL
    if device.type == "cuda" and not torch.cuda.is_available():
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(dict(error="no CUDA device visible to torch", torch=torch.__version__), indent=1))
        print("no CUDA device visible to torch; use --device cpu --tiny to check the script on a CPU")
        return 2
    kernels = device.type == "cuda" and mk.cuda_kernels_available()
    result = dict(
        device=torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        torch=torch.__version__, python=platform.python_version(), kernels=kernels, tiny=args.tiny,
        budget_s=args.budget,
    )
    try:
        import cupy

        result["cupy"] = cupy.__version__
    except ImportError:
        result["cupy"] = None
    if args.tests and Path(args.tests).exists():
        result["tests"] = json.loads(Path(args.tests).read_text())
    if device.type == "cuda":
        result["sync_latency"] = sync_latency(device)
        print("sync latency:", result["sync_latency"], flush=True)
    t0 = time.monotonic()
    sections = [("neighbor_list", lambda: bench_neighbors(sizes["nl"], sizes["batch"], device, budget, kernels)),
                ("equiformer_layer", lambda: bench_layer(sizes["layer"], device, budget, kernels, args.tiny)),
                ("calculator", lambda: bench_calculator(sizes["calc"], device, budget, kernels, args.tiny))]
    for name, fn in sections:
        if name not in args.sections:
            continue
        t = time.monotonic()
        try:
            result[name] = fn()
        except Exception as err:
            result[name] = [dict(error=f"{type(err).__name__}: {err}", traceback=traceback.format_exc(limit=4))]
        result[f"{name}_elapsed_s"] = time.monotonic() - t
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1))  # partial results survive a kill
        print(f"[{name}] done in {time.monotonic() - t:.1f} s", flush=True)
    for name in ("neighbor_list", "equiformer_layer", "calculator"):
        result.setdefault(name, [])
    result["targets"] = targets(result)
    result["elapsed_s"] = time.monotonic() - t0
    out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result["targets"], indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
