"""CUDA kernels (mlip.kernels): compile checks, the kernels' own code run on the CPU, the PyTorch
references they must match, dispatch, and (when CUDA and CuPy are present) the GPU itself.

CPU coverage: every ``.cu`` is compiled by nvcc for sm_90 (templates instantiated as NVRTC does);
the per-element device code of every kernel is compiled for the host (tests/kernels/kernel_host_build.py)
and compared with the PyTorch references, through the same autograd functions and neighbour-list
driver the GPU uses. Only the launch configuration, CuPy/DLPack plumbing and the GPU arithmetic
itself are left to the GPU tests at the end (skipped here with the reason).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernel_host_build as hb  # noqa: E402

import mlip.kernels as mk  # noqa: E402
from mlip.kernels import escn_reference as ref  # noqa: E402
from mlip.kernels import escn_rotation as er  # noqa: E402
from mlip.neighbors import cuda_backend as knl  # noqa: E402
from mlip.neighbors import batched_neighbor_list, neighbor_list  # noqa: E402
from mlip.neighbors.backends import resolve_backend  # noqa: E402
from mlip.neighbors.inputs import complete_cells  # noqa: E402
from mlip.so3 import edge_rotation, m_primary_order, num_truncated_coefficients, wigner_D  # noqa: E402

NO_NVCC = "nvcc not found on PATH: the .cu sources cannot be compiled here"
GPU_REASON = "needs a CUDA device and CuPy (pip install mlip-torch[cuda]); none here"
HAS_GPU = torch.cuda.is_available() and mk.cuda_kernels_available()


# ------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def host(tmp_path_factory):
    if hb.nvcc() is None:
        pytest.skip(NO_NVCC)
    return hb.HostKernels(hb.build_host_library(tmp_path_factory.mktemp("host_kernels")))


@pytest.fixture
def host_kernels(monkeypatch, host):
    """Route the kernel dispatch to the host build: CPU tensors take the kernel path."""
    monkeypatch.setattr(er, "launch_gather_rotate", host.gather_rotate)
    monkeypatch.setattr(er, "launch_rotate_scatter", host.rotate_scatter)
    monkeypatch.setattr(er, "launch_edge_outer", host.edge_outer)
    monkeypatch.setattr(er, "should_use_kernels", lambda use_kernels, *t, **kw: use_kernels is not False)
    return host


def random_problem(lmax, mmax, n_nodes, n_edges, channels, sources, dtype, seed=0):
    """x [N, K, C], genuine m-truncated Wigner matrices W [E, K_M, K], index [S, E], msg [E, K_M, S·C]."""
    g = torch.Generator().manual_seed(seed)
    vec = torch.randn(n_edges, 3, generator=g, dtype=torch.float64)
    vec[0] = torch.tensor([0.0, 1.0, 0.0])  # a pole (axis-aligned) edge as well
    w = wigner_D(edge_rotation(vec), lmax, rows=m_primary_order(lmax, mmax)).to(dtype)
    k = (lmax + 1) ** 2
    x = torch.randn(n_nodes, k, channels, generator=g, dtype=torch.float64).to(dtype)
    index = torch.randint(0, n_nodes, (sources, n_edges), generator=g)
    index[:, -1] = 0  # node 0 gets several messages; some nodes may get none
    msg = torch.randn(n_edges, w.shape[1], sources * channels, generator=g, dtype=torch.float64).to(dtype)
    return x, w, index, msg


def rel_err(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


# ------------------------------------------------------------------------------------ compile checks
@pytest.mark.skipif(hb.nvcc() is None, reason=NO_NVCC)
@pytest.mark.parametrize("cu", sorted(p.name for p in hb.KERNELS.glob("*.cu")))
def test_cu_sources_compile_with_nvcc(cu, tmp_path):
    """nvcc --ptx for sm_90, warnings as errors, each template instantiated as CuPy asks NVRTC to."""
    names = {"escn_rotation.cu": er._NAMES, "neighbor_list.cu": ()}[cu]
    ptx = hb.compile_ptx(hb.KERNELS / cu, names, tmp_path)
    entries = {"escn_rotation.cu": ["gather_rotate", "rotate_scatter", "edge_outer"],
               "neighbor_list.cu": ["count_pairs", "fill_pairs", "count_small", "fill_small"]}[cu]
    for name in entries:  # float and double instantiations (templates, or _f32 / _f64 entries)
        assert sum(name in line for line in ptx.splitlines() if line.startswith(".visible .entry")) == 2


def test_every_cu_source_is_compile_checked():
    """A new .cu file must be added to the compile check above (and is shipped: tests/packaging/test_packaging.py)."""
    assert sorted(p.name for p in hb.KERNELS.glob("*.cu")) == ["escn_rotation.cu", "neighbor_list.cu"]


# ------------------------------------------------------------------------------------ references
def test_gather_rotate_reference_is_the_model_formula_bit_for_bit():
    """The attention layer's former inline code: gather [x_j ‖ x_i] row by row, then one bmm."""
    x, w, index, _ = random_problem(4, 2, 9, 40, 6, 2, torch.float64)
    j, i = index
    n, k, c = x.shape
    rows = torch.stack([j, i], dim=1)[:, None, :] * k + torch.arange(k)[None, :, None]
    pair = x.reshape(n * k, c).index_select(0, rows.reshape(-1)).view(40, k, 2 * c)
    assert torch.equal(ref.gather_rotate_reference(x, w, index), torch.bmm(w, pair))


def test_rotate_scatter_reference_is_the_model_formula_and_sums_sources():
    from mlip.nn import scatter_sum

    x, w, index, msg = random_problem(3, 2, 7, 30, 5, 2, torch.float64)
    one = msg[:, :, :5]
    assert torch.equal(ref.rotate_scatter_reference(w, one, index[:1], 7),
                       scatter_sum(torch.bmm(w.transpose(1, 2), one), index[0], 7))
    both = ref.rotate_scatter_reference(w, msg, index, 7)
    split = ref.rotate_scatter_reference(w, msg[:, :, :5], index[:1], 7) + ref.rotate_scatter_reference(
        w, msg[:, :, 5:].contiguous(), index[1:], 7)
    assert (both - split).abs().max() < 1e-13


def test_the_two_steps_are_adjoint_and_edge_outer_is_their_wigner_gradient():
    """<gather_rotate(x), m> = <x, rotate_scatter(m)>, and ∂/∂W of both is edge_outer (on the blocks)."""
    x, w, index, msg = random_problem(4, 2, 8, 25, 3, 2, torch.float64, seed=1)
    lhs = (ref.gather_rotate_reference(x, w, index) * msg).sum()
    rhs = (x * ref.rotate_scatter_reference(w, msg, index, 8)).sum()
    assert abs(float(lhs - rhs)) < 1e-11 * float(lhs.abs())
    mask = ref.block_mask(4, 2, torch.float64, "cpu")
    wg = w.clone().requires_grad_()
    (ref.gather_rotate_reference(x, wg, index) * msg).sum().backward()
    assert (wg.grad * mask - ref.edge_outer_reference(msg, x, index)).abs().max() < 1e-12
    wg.grad = None
    y = torch.randn(8, 25, 3, dtype=torch.float64)
    (ref.rotate_scatter_reference(wg, msg, index, 8) * y).sum().backward()
    assert (wg.grad * mask - ref.edge_outer_reference(msg, y, index)).abs().max() < 1e-12
    # the Wigner matrices really are block diagonal (what the kernels rely on)
    assert float((w * (1 - mask)).abs().max()) == 0.0


def test_layout_from_shape():
    for lmax in range(7):
        for mmax in range(lmax + 1):
            w = torch.zeros(0, num_truncated_coefficients(lmax, mmax), (lmax + 1) ** 2)
            assert ref.layout_from_shape(w) == (lmax, mmax)
    with pytest.raises(ValueError):
        ref.layout_from_shape(torch.zeros(1, 3, 10))


# ------------------------------------------------------------------------------------ kernel code on the host
CASES = [(4, 2, 2, 7), (2, 1, 1, 5), (6, 2, 2, 3), (3, 3, 1, 4), (1, 0, 3, 2)]


@pytest.mark.parametrize("lmax, mmax, sources, channels", CASES)
@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 2e-6)])
def test_host_built_kernels_match_the_references(host, lmax, mmax, sources, channels, dtype, tol):
    """Same numbers up to summation order (tolerance: a few ulps of the dtype relative to the largest output)."""
    x, w, index, msg = random_problem(lmax, mmax, 11, 60, channels, sources, dtype, seed=lmax)
    assert rel_err(host.gather_rotate(x, w, index), ref.gather_rotate_reference(x, w, index)) < tol
    assert rel_err(host.rotate_scatter(w, msg, index, 11), ref.rotate_scatter_reference(w, msg, index, 11)) < tol
    assert rel_err(host.edge_outer(msg, x, index), ref.edge_outer_reference(msg, x, index)) < tol


def test_host_built_kernels_ignore_off_block_entries(host):
    x, w, index, msg = random_problem(3, 2, 6, 20, 4, 2, torch.float64)
    noise = torch.randn_like(w) * (1 - ref.block_mask(3, 2, torch.float64, "cpu"))
    assert torch.equal(host.gather_rotate(x, w + noise, index), host.gather_rotate(x, w, index))
    assert torch.equal(host.rotate_scatter(w + noise, msg, index, 6), host.rotate_scatter(w, msg, index, 6))


def test_host_built_rotate_scatter_is_deterministic_and_handles_empty_nodes(host):
    x, w, index, msg = random_problem(2, 2, 50, 10, 3, 1, torch.float64)
    out = host.rotate_scatter(w, msg, index, 50)
    assert torch.equal(out, host.rotate_scatter(w, msg, index, 50))
    lonely = torch.tensor(sorted(set(range(50)) - set(index[0].tolist())))
    assert lonely.numel() > 0 and float(out[lonely].abs().max()) == 0.0


@pytest.mark.parametrize("lmax, mmax, sources", [(2, 1, 2), (3, 2, 1)])
def test_autograd_functions_gradcheck_and_double_backward(host_kernels, lmax, mmax, sources):
    """First derivatives through the kernel backward; second derivatives through the PyTorch fallback."""
    x, w, index, msg = random_problem(lmax, mmax, 5, 12, 2, sources, torch.float64, seed=3)
    mask = ref.block_mask(lmax, mmax, torch.float64, "cpu")
    x.requires_grad_()
    msg.requires_grad_()
    wv = (w * mask).clone().requires_grad_()

    def gr(x, wv):  # masking inside makes the off-block entries of W truly unused, as in wigner_D
        return er.gather_rotate(x, wv * mask, index)

    def rs(wv, m):
        return er.rotate_scatter(wv * mask, m, index, 5)

    assert torch.autograd.gradcheck(gr, (x, wv))
    assert torch.autograd.gradcheck(rs, (wv, msg))
    assert torch.autograd.gradgradcheck(gr, (x, wv))
    assert torch.autograd.gradgradcheck(rs, (wv, msg))


def _tiny_equiformer(dtype):
    from mlip.models import create_model

    torch.manual_seed(0)
    return create_model("equiformer_v3", species=["Cu", "Au"], cutoff=4.0, lmax=3, mmax=2, channels=8,
                        num_layers=2).to(dtype)


def _eval(potential, atoms, dtype, device="cpu", backend="auto"):
    import mlip

    calc = mlip.MLIPCalculator(potential, device=device, dtype=dtype, neighbor_backend=backend)
    atoms = atoms.copy()
    atoms.calc = calc
    return atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()


def _alloy():
    from ase.build import bulk

    atoms = bulk("Cu", "fcc", a=3.7, cubic=True) * (2, 1, 1)
    atoms.symbols[[1, 4]] = "Au"
    atoms.rattle(0.05, seed=2)
    atoms.cell[0, 1] += 0.3
    return atoms


def test_equiformer_with_host_built_kernels_equals_the_pytorch_path(monkeypatch, host):
    """Energy, forces and stress (float64) through the kernel code equal the PyTorch path to 1e-10."""
    potential = _tiny_equiformer(torch.float64)
    atoms = _alloy()
    e0, f0, s0 = _eval(potential, atoms, "float64")
    calls = []
    monkeypatch.setattr(er, "launch_gather_rotate", lambda *a: calls.append("g") or host.gather_rotate(*a))
    monkeypatch.setattr(er, "launch_rotate_scatter", lambda *a: calls.append("s") or host.rotate_scatter(*a))
    monkeypatch.setattr(er, "launch_edge_outer", lambda *a: calls.append("o") or host.edge_outer(*a))
    monkeypatch.setattr(er, "should_use_kernels", lambda use_kernels, *t, **kw: True)
    e1, f1, s1 = _eval(potential, atoms, "float64")
    assert set(calls) == {"g", "s", "o"}
    assert abs(e1 - e0) <= 1e-10 * abs(e0)
    assert np.abs(f1 - f0).max() <= 1e-10 * np.abs(f0).max()
    assert np.abs(s1 - s0).max() <= 1e-10 * np.abs(s0).max()
    assert np.abs(f0).max() > 1e-3


# ------------------------------------------------------------------------------------ neighbour lists
def _structures():
    from ase.build import bulk, molecule

    rng = np.random.default_rng(0)
    cu = bulk("Cu", "fcc", a=3.6) * (3, 3, 3)
    cu.rattle(0.1, seed=1)
    tri = np.array([[2.0, 0, 0], [0.7, 1.9, 0], [0.3, 0.4, 2.1]])
    out = [
        ("bulk", cu.positions, cu.cell.array, (1, 1, 1), 5.0),
        # ~180 neighbours an atom: more than the cell-list fill buffers (MLIP_LOCAL_EDGES = 128)
        ("bulk_long_cutoff", cu.positions, cu.cell.array, (1, 1, 1), 8.0),
        ("slab", cu.positions, cu.cell.array, (1, 0, 1), 5.0),
        ("cluster", cu.positions, cu.cell.array, (0, 0, 0), 5.0),
        ("tiny_triclinic", rng.random((3, 3)) @ tri, tri, (1, 1, 1), 5.0),
        ("wire_unwrapped", rng.random((4, 3)) @ tri * 3 - 40, tri, (0, 0, 1), 4.0),
        ("molecule", molecule("C6H6").positions, np.zeros((3, 3)), (0, 0, 0), 3.0),
        ("spread_out", np.array([[0, 0, 0], [1e5, 0, 0], [1e5 + 1, 0, 0], [0, 3e4, 0.5]]), np.zeros((3, 3)),
         (0, 0, 0), 2.0),
        ("one_atom_in_small_cell", np.zeros((1, 3)), np.eye(3) * 1.5, (1, 1, 1), 3.2),
        ("isolated_atom", np.zeros((1, 3)), np.zeros((3, 3)), (0, 0, 0), 3.0),
    ]
    return out


def _search_kwargs(request, search):
    """Keyword arguments of the kernel backends that run one of their searches on the CPU: the
    cell list (PyTorch emulation or host build; all-pairs switched off) or the all-pairs kernels."""
    if search == "torch_emulation":
        return dict(search=knl.search_torch, small_max_atoms=0)
    host = request.getfixturevalue("host")
    if search == "host_build":
        return dict(search=host.search, small_max_atoms=0)
    return dict(small_search=host.small_search, small_max_atoms=10**9)


@pytest.mark.parametrize("name, pos, cell, pbc, cutoff", _structures(), ids=[s[0] for s in _structures()])
@pytest.mark.parametrize("search", ["torch_emulation", "host_build", "all_pairs_host_build"])
def test_kernel_neighbor_search_equals_the_torch_backend(request, name, pos, cell, pbc, cutoff, search):
    kwargs = _search_kwargs(request, search)
    for dtype in (torch.float64, torch.float32):
        args = (torch.tensor(pos, dtype=dtype), torch.tensor(cell, dtype=dtype), torch.tensor(pbc, dtype=torch.bool))
        e_ref, s_ref = neighbor_list(*args, cutoff, backend="torch")
        e, s = knl.neighbor_list_cuda(*args, cutoff, **kwargs)
        assert torch.equal(e, e_ref) and torch.equal(s, s_ref), name


def _cutoffs_at_pair_distances(dtype):
    """A small slab-like cell and cutoffs whose square lands on a squared pair distance (as the
    filter computes it, in ``dtype``) or next to it: (positions, cell, pbc), [60 cutoffs]."""
    from ase.build import bulk

    a = bulk("Cu", "fcc", a=3.6) * (2, 1, 1)
    a.cell[2, 0] += 0.4
    a.rattle(0.2, seed=5)
    args = (torch.tensor(a.positions, dtype=dtype), torch.tensor(a.cell.array, dtype=dtype),
            torch.tensor([True, True, False]))
    e, s = neighbor_list(*args, 6.0, backend="torch")
    v = args[0][e[1]] - args[0][e[0]] + s.to(dtype) @ args[1]
    d2 = (v * v).sum(1)  # close to the filter's values (the neighbouring cutoffs cover the rest)
    cutoffs = []
    for x in d2[torch.randperm(d2.numel(), generator=torch.Generator().manual_seed(0))[:12]]:
        for k in (-2, -1, 0, 1, 2):  # squares 2 units in the last place (of dtype) either side
            xk = x
            for _ in range(abs(k)):
                xk = torch.nextafter(xk, xk + k)
            cutoffs.append(float(xk) ** 0.5)
    return args, cutoffs


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("search", ["host_build", "all_pairs_host_build"])
def test_kernel_filter_rounds_like_pytorch_at_the_cutoff(request, search, dtype):
    """The kernels apply the exact filter themselves, so they must round as PyTorch does: with
    cutoff² on squared pair distances (strict <: that pair is out) and next to them, the edge sets
    still equal the torch backend's."""
    kwargs = _search_kwargs(request, search)
    args, cutoffs = _cutoffs_at_pair_distances(dtype)
    for cutoff in cutoffs:
        ref = neighbor_list(*args, cutoff, backend="torch")
        out = knl.neighbor_list_cuda(*args, cutoff, **kwargs)
        assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1]), cutoff
    counts = [neighbor_list(*args, c, backend="torch")[0].shape[1] for c in cutoffs]
    crossed = sum(counts[k] < counts[k + 4] for k in range(0, len(counts), 5))
    assert crossed >= 10, counts  # the cutoffs do sit on the filter's boundary


def test_all_pairs_is_chosen_by_structure_size(monkeypatch, host):
    """Structures of at most SMALL_MAX_ATOMS atoms (float32/64) take the all-pairs kernels, others the cell list."""
    calls = []
    small = lambda *a: calls.append("small") or host.small_search(*a)  # noqa: E731
    cells = lambda plan: calls.append("cells") or host.search(plan)  # noqa: E731
    pos = torch.rand(8, 3, dtype=torch.float64) * 4
    knl.neighbor_list_cuda(pos, torch.eye(3) * 4, [True] * 3, 3.0, search=cells, small_search=small)
    knl.neighbor_list_cuda(pos, torch.eye(3) * 4, [True] * 3, 3.0, search=cells, small_search=small,
                           small_max_atoms=7)
    batch = torch.tensor([0, 0, 0, 1, 1, 1, 1, 1])
    knl.batched_neighbor_list_cuda(pos, torch.eye(3).expand(2, 3, 3) * 4, [True] * 3, batch, 3.0, search=cells,
                                   small_search=small, small_max_atoms=5)
    knl.batched_neighbor_list_cuda(pos, torch.eye(3).expand(2, 3, 3) * 4, [True] * 3, batch, 3.0, search=cells,
                                   small_search=small, small_max_atoms=4)
    assert calls == ["small", "cells", "small", "cells"]
    assert knl.SMALL_MAX_ATOMS == 256


def test_kernel_neighbor_search_batched_many_small_cells(host):
    """A batch of 40 random small cells (mixed periodicity) equals the torch backend exactly, by the
    cell list and by the all-pairs kernels."""
    from ase.build import bulk

    rng = np.random.default_rng(3)
    pos, cells, pbcs, counts = [], [], [], []
    for g in range(40):
        a = bulk(["Cu", "Al", "Au"][g % 3], cubic=bool(g % 2)) * (1 + g % 2, 1, 2)
        a.rattle(0.05, seed=g)
        a.cell[1, 0] += rng.random()
        pos.append(a.positions)
        cells.append(a.cell.array)
        pbcs.append([g % 4 != 0, True, g % 5 != 1])
        counts.append(len(a))
    batch = torch.repeat_interleave(torch.arange(40), torch.tensor(counts))
    args = (torch.tensor(np.concatenate(pos)), torch.tensor(np.stack(cells)), torch.tensor(pbcs), batch, 4.5)
    e_ref, s_ref = batched_neighbor_list(*args, backend="torch")
    assert e_ref.shape[1] > 1000
    e, s = knl.batched_neighbor_list_cuda(*args, search=host.search, small_max_atoms=0)
    assert torch.equal(e, e_ref) and torch.equal(s, s_ref)
    e, s = knl.batched_neighbor_list_cuda(*args, small_search=host.small_search)
    assert torch.equal(e, e_ref) and torch.equal(s, s_ref)
    args = (args[0].float(), args[1].float()) + args[2:]
    e_ref, s_ref = batched_neighbor_list(*args, backend="torch")
    e, s = knl.batched_neighbor_list_cuda(*args, small_search=host.small_search)
    assert torch.equal(e, e_ref) and torch.equal(s, s_ref)


def test_plan_bins_are_wide_enough_and_bounded():
    """Bins ≥ rc / ns along every axis (so the stencil cannot miss a pair) and ≤ 4·ghosts + 27 per structure."""
    pos = torch.tensor([[0.0, 0, 0], [1e6, 0, 0], [0, 2e6, 0], [3.0, 3.0, 3.0]], dtype=torch.float64)
    full, masked = complete_cells(torch.zeros(1, 3, 3, dtype=torch.float64), torch.zeros(1, 3, dtype=torch.bool))
    plan = knl.build_plan(pos, torch.zeros(4, dtype=torch.long), 1, full, masked, torch.zeros(1, 3, dtype=torch.bool),
                          5.0)
    assert int(plan.grid_dims.long().prod()) <= 4 * 4 + 27
    assert plan.bin_start[-1] == 4 and torch.equal(torch.sort(plan.order).values, torch.arange(4))


# ------------------------------------------------------------------------------------ dispatch (CPU)
def test_env_variable_and_context_manager_disable_kernels(monkeypatch):
    monkeypatch.setattr(mk, "_cupy_has_cuda", lambda: True)  # pretend CuPy + CUDA are there
    assert mk.cuda_kernels_available()
    monkeypatch.setenv("MLIP_DISABLE_KERNELS", "1")
    assert not mk.cuda_kernels_available() and mk.kernels_disabled()
    monkeypatch.setenv("MLIP_DISABLE_KERNELS", "0")
    assert mk.cuda_kernels_available()
    with mk.disable_kernels():
        assert not mk.cuda_kernels_available()
    assert mk.cuda_kernels_available()


def test_cpu_tensors_never_reach_cupy(monkeypatch):
    """Even with CuPy + CUDA reported available, CPU tensors take the PyTorch path, bit for bit."""
    import mlip.kernels.cupy_module as cm

    monkeypatch.setattr(mk, "_cupy_has_cuda", lambda: True)

    def boom(*a, **k):
        raise AssertionError("CuPy touched for CPU tensors")

    monkeypatch.setattr(cm, "module", boom)
    monkeypatch.setattr(cm, "launch", boom)
    monkeypatch.setitem(sys.modules, "cupy", None)  # any `import cupy` would fail
    x, w, index, msg = random_problem(2, 1, 5, 9, 3, 2, torch.float64)
    assert torch.equal(er.gather_rotate(x, w, index), ref.gather_rotate_reference(x, w, index))
    assert torch.equal(er.rotate_scatter(w, msg, index, 5), ref.rotate_scatter_reference(w, msg, index, 5))
    assert not er.should_use_kernels(None, x, w, index)
    assert not er.should_use_kernels(False, x, w, index)
    with pytest.raises(ValueError, match="CUDA tensors"):
        er.should_use_kernels(True, x, w, index)
    pos = torch.rand(5, 3, dtype=torch.float64) * 3
    assert resolve_backend("auto", pos.device) == "vesin"
    e, s = neighbor_list(pos, torch.eye(3) * 3, [True] * 3, 2.0)
    assert e.shape[1] > 0


def test_auto_backend_on_cuda_devices(monkeypatch):
    monkeypatch.setattr(mk, "_cupy_has_cuda", lambda: True)
    assert resolve_backend("auto", torch.device("cuda")) == "cuda"
    assert resolve_backend("torch", torch.device("cuda")) == "torch"
    monkeypatch.setenv("MLIP_DISABLE_KERNELS", "1")
    assert resolve_backend("auto", torch.device("cuda")) == "torch"
    monkeypatch.setattr(mk, "_cupy_has_cuda", lambda: False)
    monkeypatch.delenv("MLIP_DISABLE_KERNELS")
    assert resolve_backend("auto", torch.device("cuda")) == "torch"


def test_cuda_backend_refuses_cpu_tensors():
    with pytest.raises(ValueError, match="backend='cuda'"):
        neighbor_list(torch.rand(3, 3), torch.eye(3) * 4, [True] * 3, 2.0, backend="cuda")


# ------------------------------------------------------------------------------------ GPU
gpu = pytest.mark.skipif(not HAS_GPU, reason=GPU_REASON)


@gpu
@pytest.mark.parametrize("name, pos, cell, pbc, cutoff", _structures(), ids=[s[0] for s in _structures()])
def test_gpu_neighbor_list_equals_cpu(name, pos, cell, pbc, cutoff):
    for dtype in (torch.float64, torch.float32):
        args = [torch.tensor(pos, dtype=dtype), torch.tensor(cell, dtype=dtype), torch.tensor(pbc, dtype=torch.bool)]
        e_ref, s_ref = neighbor_list(*args, cutoff, backend="torch")
        e, s = neighbor_list(*(a.cuda() for a in args), cutoff, backend="cuda")
        assert e.is_cuda and torch.equal(e.cpu(), e_ref) and torch.equal(s.cpu(), s_ref), name
        e2, _ = neighbor_list(*(a.cuda() for a in args), cutoff)  # auto picks the kernel
        assert torch.equal(e2.cpu(), e_ref)
        # these structures are small enough for the all-pairs kernels: the cell-list kernels too
        e3, s3 = knl.neighbor_list_cuda(*(a.cuda() for a in args), cutoff, small_max_atoms=0)
        assert torch.equal(e3.cpu(), e_ref) and torch.equal(s3.cpu(), s_ref), name


@gpu
def test_gpu_neighbor_list_large_and_batched():
    from ase.build import bulk

    a = bulk("Cu", "fcc", a=3.6, cubic=True) * (12, 12, 12)
    a.rattle(0.05, seed=0)
    args = (torch.tensor(a.positions), torch.tensor(a.cell.array), torch.tensor([True] * 3))
    e_ref, s_ref = neighbor_list(*args, 6.0, backend="vesin")
    e, s = neighbor_list(*(t.cuda() for t in args), 6.0, backend="cuda")
    assert torch.equal(e.cpu(), e_ref) and torch.equal(s.cpu(), s_ref)
    pos = torch.rand(512 * 16, 3, dtype=torch.float64) * 5
    cells = torch.eye(3, dtype=torch.float64).expand(512, 3, 3) * 5
    batch = torch.arange(512).repeat_interleave(16)
    pbc = torch.ones(512, 3, dtype=torch.bool)
    e_ref, s_ref = batched_neighbor_list(pos, cells, pbc, batch, 4.0, backend="vesin")
    e, s = batched_neighbor_list(pos.cuda(), cells.cuda(), pbc.cuda(), batch.cuda(), 4.0, backend="cuda")
    assert torch.equal(e.cpu(), e_ref) and torch.equal(s.cpu(), s_ref)  # all-pairs kernels
    e, s = knl.batched_neighbor_list_cuda(pos.cuda(), cells.cuda(), pbc.cuda(), batch.cuda(), 4.0,
                                          small_max_atoms=0)
    assert torch.equal(e.cpu(), e_ref) and torch.equal(s.cpu(), s_ref)  # cell-list kernels
    e_ref, s_ref = batched_neighbor_list(pos.float(), cells.float(), pbc, batch, 4.0, backend="torch")
    e, s = batched_neighbor_list(pos.float().cuda(), cells.float().cuda(), pbc.cuda(), batch.cuda(), 4.0,
                                 backend="cuda")
    assert torch.equal(e.cpu(), e_ref) and torch.equal(s.cpu(), s_ref)


@gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("small_max_atoms", [0, knl.SMALL_MAX_ATOMS])
def test_gpu_kernel_filter_rounds_like_pytorch_at_the_cutoff(dtype, small_max_atoms):
    args, cutoffs = _cutoffs_at_pair_distances(dtype)
    for cutoff in cutoffs:
        e_ref, s_ref = neighbor_list(*args, cutoff, backend="torch")
        e, s = knl.neighbor_list_cuda(*(a.cuda() for a in args), cutoff, small_max_atoms=small_max_atoms)
        assert torch.equal(e.cpu(), e_ref) and torch.equal(s.cpu(), s_ref), cutoff
        e2, s2 = neighbor_list(*(a.cuda() for a in args), cutoff, backend="torch")  # PyTorch on the GPU
        assert torch.equal(e2.cpu(), e_ref) and torch.equal(s2.cpu(), s_ref), cutoff


@gpu
@pytest.mark.parametrize("lmax, mmax, sources, channels", [(4, 2, 2, 64), (6, 2, 1, 32), (2, 1, 2, 16)])
@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
def test_gpu_escn_kernels_forward_and_gradients(lmax, mmax, sources, channels, dtype, tol):
    x, w, index, msg = random_problem(lmax, mmax, 300, 5000, channels, sources, torch.float64, seed=7)
    mask = ref.block_mask(lmax, mmax, torch.float64, "cpu")
    gout = torch.randn(5000, w.shape[1], sources * channels, dtype=torch.float64)
    gnode = torch.randn(300, (lmax + 1) ** 2, channels, dtype=torch.float64)

    def run(device, kernels):
        # fresh leaves every run (.to() may return the input itself, which must not be mutated)
        xs, ws = x.to(device, dtype).detach().clone().requires_grad_(), w.to(device, dtype).detach().clone().requires_grad_()
        ms = msg.to(device, dtype).detach().clone().requires_grad_()
        idx = index.to(device)
        a = er.gather_rotate(xs, ws, idx, use_kernels=kernels)
        b = er.rotate_scatter(ws, ms, idx, 300, use_kernels=kernels)
        ((a * gout.to(device, dtype)).sum() + (b * gnode.to(device, dtype)).sum()).backward()
        return [t.detach().double().cpu() for t in (a, b, xs.grad, ws.grad * mask.to(device, dtype), ms.grad)]

    ref_out = run("cpu", False) if dtype == torch.float64 else run("cuda", False)
    for got, want in zip(run("cuda", True), ref_out):
        assert rel_err(got, want) <= tol


@gpu
def test_gpu_double_backward_falls_back_correctly():
    # small problem: gradgradcheck differentiates numerically column by column. The double
    # backward is the PyTorch fallback, whose scatter (index_add_) uses atomics on CUDA: repeated
    # backward passes agree to rounding, not bit for bit, hence nondet_tol
    x, w, index, _ = random_problem(2, 1, 6, 16, 2, 2, torch.float64, seed=2)
    mask = ref.block_mask(2, 1, torch.float64, "cpu").cuda()
    xs, ws = x.cuda().requires_grad_(), (w.cuda() * mask).requires_grad_()
    idx = index.cuda()
    assert torch.autograd.gradgradcheck(lambda a, b: er.gather_rotate(a, b * mask, idx, use_kernels=True), (xs, ws),
                                        nondet_tol=1e-12)
    assert torch.autograd.gradgradcheck(
        lambda a, b: er.rotate_scatter(b * mask, er.gather_rotate(a, b * mask, idx), idx, 6, use_kernels=True),
        (xs, ws), nondet_tol=1e-12)


@gpu
@pytest.mark.parametrize("arch", ["equiformer_v3", "platonic"])
def test_gpu_calculator_equals_cpu(arch):
    from mlip.models import create_model

    torch.manual_seed(0)
    if arch == "equiformer_v3":
        potential = _tiny_equiformer(torch.float64)
    else:
        potential = create_model("platonic", species=["Cu", "Au"], cutoff=4.0).double()
    atoms = _alloy()
    e0, f0, s0 = _eval(potential, atoms, "float64", "cpu")
    e1, f1, s1 = _eval(potential, atoms, "float64", "cuda", backend="cuda")
    assert abs(e1 - e0) <= 1e-10 * abs(e0)
    assert np.abs(f1 - f0).max() <= 1e-10 * np.abs(f0).max()
    assert np.abs(s1 - s0).max() <= 1e-10 * np.abs(s0).max()
    e2, f2, s2 = _eval(potential, atoms, "float32", "cuda", backend="cuda")
    assert abs(e2 - e0) <= 1e-5 * abs(e0)
    assert np.abs(f2 - f0).max() <= 1e-4 * np.abs(f0).max()


def test_kernels_fit_counts_tasks_per_degree():
    """The index-range check counts what the kernels decode with 32-bit arithmetic: tasks per
    (edge, source, degree), per (node, degree) and the slots s·E + e; and lmax <= 8. Shapes only
    matter, so the tensors are expanded views (no memory)."""
    def problem(lmax, mmax, n_edges, n_sources=2):
        k = (lmax + 1) ** 2
        k_m = sum(2 * (lmax + 1 - m) for m in range(1, mmax + 1)) + lmax + 1
        return torch.zeros(1, 1, 1).expand(n_edges, k_m, k), torch.zeros(1, 1, dtype=torch.long).expand(n_sources, n_edges)

    limit = (1 << 31) - 1
    w, index = problem(2, 1, limit // 6)  # 2 sources × 3 degrees per edge: exactly at the limit
    assert er.kernels_fit(w, index, num_nodes=1000)
    w, index = problem(2, 1, limit // 6 + 1)
    assert not er.kernels_fit(w, index, num_nodes=1000)
    w, index = problem(2, 1, 1000)
    assert er.kernels_fit(w, index, num_nodes=limit // 3)
    assert not er.kernels_fit(w, index, num_nodes=limit // 3 + 1)
    assert er.kernels_fit(*problem(8, 2, 10), num_nodes=10)
    assert not er.kernels_fit(*problem(9, 2, 10), num_nodes=10)
