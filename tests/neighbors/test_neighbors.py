"""Tests of mlip.neighbors: both backends against ASE and against each other (float64)."""

import numpy as np
import pytest
import torch
from ase.build import bulk, fcc111
from ase.neighborlist import primitive_neighbor_list

from mlip.neighbors import batched_neighbor_list, neighbor_list
from mlip.neighbors import cell_list, edges

BACKENDS = ("vesin", "torch")


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------


def _lexsorted(i, j, S):
    """(edge_index [2, E], shifts [E, 3]) int64 tensors sorted by (i, j, S0, S1, S2) (numpy lexsort)."""
    i, j, S = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64), np.asarray(S, dtype=np.int64)
    S = S.reshape(-1, 3)
    order = np.lexsort((S[:, 2], S[:, 1], S[:, 0], j, i))
    return torch.from_numpy(np.stack([i[order], j[order]])), torch.from_numpy(S[order])


def _ase_ref(pos, cell, pbc, cutoff):
    i, j, S = primitive_neighbor_list(
        "ijS", np.asarray(pbc), np.asarray(cell, dtype=float), np.asarray(pos, dtype=float), cutoff,
        self_interaction=False,
    )
    return _lexsorted(i, j, S)


def _brute_ref(pos, cutoff):
    """All pairs of a non-periodic structure (works for structures spread over any space)."""
    pos = np.asarray(pos, dtype=float)
    d = np.linalg.norm(pos[None, :, :] - pos[:, None, :], axis=-1)
    i, j = np.nonzero((d < cutoff) & ~np.eye(len(pos), dtype=bool))
    return _lexsorted(i, j, np.zeros((len(i), 3), dtype=np.int64))


def _run(pos, cell, pbc, cutoff, backend, dtype=torch.float64):
    return neighbor_list(
        torch.as_tensor(np.asarray(pos), dtype=dtype),
        torch.as_tensor(np.asarray(cell), dtype=dtype),
        torch.as_tensor(np.asarray(pbc, dtype=bool)),
        cutoff,
        backend=backend,
    )


def _check_invariants(pos, cell, pbc, cutoff, ei, sh):
    """Lengths < cutoff, no trivial self pair, shifts only along periodic axes, (j, i, -S) present."""
    assert ei.dtype == torch.int64 and sh.dtype == torch.int64
    assert ei.shape[0] == 2 and sh.shape == (ei.shape[1], 3)
    pos_t = torch.as_tensor(np.asarray(pos), dtype=torch.float64)
    cell_t = torch.as_tensor(np.asarray(cell), dtype=torch.float64)
    pbc_t = torch.as_tensor(np.asarray(pbc, dtype=bool))
    assert bool((sh[:, ~pbc_t] == 0).all())
    cell_m = torch.where(pbc_t[:, None], cell_t, torch.zeros_like(cell_t))
    vec = pos_t[ei[1]] - pos_t[ei[0]] + sh.double() @ cell_m
    assert bool((vec.norm(dim=1) < cutoff).all())
    assert not bool(((ei[0] == ei[1]) & (sh == 0).all(1)).any())
    fwd = set(zip(ei[0].tolist(), ei[1].tolist(), map(tuple, sh.tolist())))
    rev = set(zip(ei[1].tolist(), ei[0].tolist(), map(tuple, (-sh).tolist())))
    assert fwd == rev
    assert len(fwd) == ei.shape[1]  # no duplicates


def _check_case(pos, cell, pbc, cutoff, ref=None):
    """Both backends equal the reference exactly and each other with torch.equal."""
    if ref is None:
        ref = _ase_ref(pos, cell, pbc, cutoff)
    results = {b: _run(pos, cell, pbc, cutoff, b) for b in BACKENDS}
    for b, (ei, sh) in results.items():
        assert ei.shape == ref[0].shape, (b, ei.shape, ref[0].shape)
        assert torch.equal(ei, ref[0]) and torch.equal(sh, ref[1]), b
    (e1, s1), (e2, s2) = results.values()
    assert torch.equal(e1, e2) and torch.equal(s1, s2)
    _check_invariants(pos, cell, pbc, cutoff, e1, s1)
    return e1, s1


# ----------------------------------------------------------------------------------------
# structures
# ----------------------------------------------------------------------------------------

SKEW = np.array([[4.0, 0.0, 0.0], [3.5, 3.0, 0.0], [-2.7, 1.1, 3.3]])


def _fcc(seed=0):
    at = bulk("Cu", "fcc", a=3.61, cubic=True).repeat((3, 2, 2))
    at.rattle(0.1, seed=seed)
    return at.positions, at.cell.array, [True, True, True]


def _bcc(seed=1):
    at = bulk("Fe", "bcc", a=2.87).repeat((3, 3, 2))
    at.rattle(0.1, seed=seed)
    return at.positions, at.cell.array, [True, True, True]


def _fcc_primitive():
    at = bulk("Cu", "fcc", a=3.6)  # one atom, cell much smaller than the cutoff
    return at.positions, at.cell.array, [True, True, True]


def _skewed(seed=2):
    rng = np.random.default_rng(seed)
    return rng.random((6, 3)) @ SKEW, SKEW, [True, True, True]


def _hexagonal(seed=3):
    at = bulk("Mg", "hcp", a=3.21, c=5.21).repeat((2, 2, 1))
    at.rattle(0.05, seed=seed)
    return at.positions, at.cell.array, [True, True, True]


def _slab(seed=4):
    at = fcc111("Pt", size=(2, 2, 3), vacuum=6.0)
    at.rattle(0.05, seed=seed)
    return at.positions, at.cell.array, [True, True, False]


def _slab_zero_c(seed=5):
    pos, cell, pbc = _slab(seed)
    cell = cell.copy()
    cell[2] = 0.0
    return pos, cell, pbc


def _molecule_far(seed=6):
    rng = np.random.default_rng(seed)
    pos = rng.normal(scale=1.5, size=(12, 3)) + np.array([1e4, -3e4, 5e3])
    return pos, np.zeros((3, 3)), [False, False, False]


def _wire(seed=7):
    rng = np.random.default_rng(seed)
    cell = np.array([[2.9, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    return rng.random((4, 3)) * [2.9, 3.0, 3.0], cell, [True, False, False]


CASES = {
    "fcc": (_fcc, 5.0),
    "bcc": (_bcc, 4.5),
    "fcc_primitive_small_cell": (_fcc_primitive, 6.0),
    "skewed_triclinic": (_skewed, 5.0),
    "hexagonal": (_hexagonal, 5.5),
    "slab": (_slab, 5.0),
    "slab_zero_c": (_slab_zero_c, 5.0),
    "molecule_far_zero_cell": (_molecule_far, 3.0),
    "wire": (_wire, 4.0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_against_ase(name):
    make, cutoff = CASES[name]
    pos, cell, pbc = make()
    ei, sh = _check_case(pos, cell, pbc, cutoff)
    assert ei.shape[1] > 0


def test_fcc_primitive_images():
    pos, cell, pbc = _fcc_primitive()
    ei, sh = _check_case(pos, cell, pbc, 6.0)
    # fcc shells below 6 Å for a = 3.6: 12 + 6 + 24 + 12 + 24 = 78 images of the single atom
    assert ei.shape[1] == 78
    assert bool((ei == 0).all())


def test_tiny_cell_many_images():
    rng = np.random.default_rng(8)
    cell = np.array([[0.9, 0.0, 0.0], [0.3, 1.1, 0.0], [0.2, -0.1, 0.8]])
    _check_case(rng.random((2, 3)) @ cell, cell, [True, True, True], 3.0)


def test_unwrapped_and_left_handed():
    rng = np.random.default_rng(9)
    cell = SKEW * np.array([[1.0], [1.0], [-1.0]])  # left-handed
    pos = rng.random((5, 3)) @ cell
    pos[:2] += 7 * cell[0] - 13 * cell[2] + 1e3  # far outside the cell
    _check_case(pos, cell, [True, True, True], 5.0)
    # mixed periodicity with atoms outside the cell along the periodic directions
    pos2, cell2, pbc2 = _slab(10)
    pos2 = pos2.copy()
    pos2[::3] += 3 * cell2[0] - 5 * cell2[1]
    _check_case(pos2, cell2, pbc2, 5.0)


def test_nonperiodic_vector_dependent_is_ignored():
    # the third vector is parallel to the first, but that direction is not periodic
    rng = np.random.default_rng(11)
    cell = np.array([[3.0, 0.0, 0.0], [0.0, 3.2, 0.0], [6.0, 0.0, 0.0]])
    pos = rng.random((5, 3)) * [3.0, 3.2, 8.0]
    ref_cell = cell.copy()
    ref_cell[2] = 0.0
    _check_case(pos, cell, [True, True, False], 4.0, ref=_ase_ref(pos, ref_cell, [True, True, False], 4.0))


def test_spread_out_structures():
    """Huge empty space along non-periodic directions (vesin alone is slow or crashes here)."""
    rng = np.random.default_rng(12)
    # molecule made of fragments 1e3 and 1e7 Å apart (searchsorted and gap-compaction paths)
    for far in (1e3, 1e7):
        pos = rng.random((9, 3)) * 3.0
        pos[3:6] += [far, -far, 0.5 * far]
        pos[6:] += [0.0, 0.0, 2 * far]
        _check_case(pos, np.zeros((3, 3)), [False] * 3, 3.5, ref=_brute_ref(pos, 3.5))
    # slab with two atoms moved 1e6 Å away along the non-periodic direction: reference =
    # main part + the two far atoms on their own (translated back next to the origin)
    pos, cell, pbc = _slab_zero_c(13)
    pos = pos.copy()
    pos[-2:, 2] += 1e6
    n = len(pos) - 2
    ref_main = _ase_ref(pos[:n], cell, pbc, 5.0)
    ref_far = _ase_ref(pos[n:] - [0.0, 0.0, 1e6], cell, pbc, 5.0)
    assert ref_far[0].shape[1] > 0
    ref = (torch.cat([ref_main[0], ref_far[0] + n], 1), torch.cat([ref_main[1], ref_far[1]]))
    _check_case(pos, cell, pbc, 5.0, ref=ref)


def test_wire_far_atoms():
    pos, cell, pbc = _wire(14)
    pos = pos.copy()
    pos[-1, 1:] += 5e5
    ref = _ase_ref(pos[:-1], cell, pbc, 4.0)
    # the far atom only sees its own periodic images along x (|S0| = 1 at a = 2.9 Å)
    n = len(pos) - 1
    extra = _lexsorted([n, n], [n, n], [[-1, 0, 0], [1, 0, 0]])
    ref = (torch.cat([ref[0], extra[0]], 1), torch.cat([ref[1], extra[1]]))
    _check_case(pos, cell, pbc, 4.0, ref=ref)


def test_float32_torch_matches_float64():
    rng = np.random.default_rng(15)
    cell = SKEW * 1.3
    pos = rng.random((40, 3)) @ cell
    # choose a cutoff well away from any pair distance (no float32 ties)
    ei, sh = _run(pos, cell, [True] * 3, 5.2, "torch")
    pos_t, cell_t = torch.as_tensor(pos), torch.as_tensor(cell)
    d = (pos_t[ei[1]] - pos_t[ei[0]] + sh.double() @ cell_t).norm(dim=1)
    cutoff = next(c for c in np.arange(4.8, 5.1, 1e-3) if float((d - c).abs().min()) > 2e-4)
    e64, s64 = _run(pos, cell, [True] * 3, cutoff, "torch")
    e32, s32 = _run(pos, cell, [True] * 3, cutoff, "torch", dtype=torch.float32)
    assert torch.equal(e64, e32) and torch.equal(s64, s32)
    ev, sv = _run(pos, cell, [True] * 3, cutoff, "vesin", dtype=torch.float32)
    assert torch.equal(ev, e32) and torch.equal(sv, s32)
    # slab in float32 as well
    pos2, cell2, pbc2 = _slab(16)
    e64, s64 = _run(pos2, cell2, pbc2, 4.93, "torch")
    e32, s32 = _run(pos2, cell2, pbc2, 4.93, "torch", dtype=torch.float32)
    assert torch.equal(e64, e32) and torch.equal(s64, s32)


def _batch_structures():
    structs = [CASES[name][0]() for name in CASES]
    structs.insert(3, (np.zeros((0, 3)), np.eye(3) * 4.0, [True, True, True]))  # empty structure
    structs.insert(5, (np.array([[1.0, 2.0, 3.0]]), np.zeros((3, 3)), [False] * 3))  # single atom
    structs.append((np.zeros((0, 3)), np.zeros((3, 3)), [False] * 3))  # empty at the end
    return structs


def _batch_tensors(structs):
    """(positions [N, 3] float64, cells [B, 3, 3] float64, pbc [B, 3], batch [N]) of (pos, cell, pbc) tuples."""
    pos = torch.as_tensor(np.concatenate([s[0] for s in structs]), dtype=torch.float64)
    cells = torch.as_tensor(np.stack([s[1] for s in structs]), dtype=torch.float64)
    pbcs = torch.tensor([list(s[2]) for s in structs])
    batch = torch.cat([torch.full((len(s[0]),), g, dtype=torch.long) for g, s in enumerate(structs)])
    return pos, cells, pbcs, batch


@pytest.mark.parametrize("backend", BACKENDS)
def test_batched_equals_per_structure(backend):
    cutoff = 4.7
    structs = _batch_structures()
    pos, cells, pbcs, batch = _batch_tensors(structs)
    e_all, s_all, off = [], [], 0
    for p, c, b in structs:
        ref = _ase_ref(p, c, b, cutoff) if len(p) else _lexsorted([], [], np.zeros((0, 3)))
        ei, sh = _run(p, c, b, cutoff, backend)
        assert torch.equal(ei, ref[0]) and torch.equal(sh, ref[1])
        e_all.append(ei + off)
        s_all.append(sh)
        off += len(p)
    e_ref, s_ref = torch.cat(e_all, 1), torch.cat(s_all)
    ei, sh = batched_neighbor_list(pos, cells, pbcs, batch, cutoff, backend=backend)
    assert torch.equal(ei, e_ref) and torch.equal(sh, s_ref)
    # edges grouped by structure in order
    assert bool((batch[ei[0]][1:] >= batch[ei[0]][:-1]).all())
    assert bool((batch[ei[0]] == batch[ei[1]]).all())


def test_batched_backends_agree_and_auto():
    structs = _batch_structures()
    pos, cells, pbcs, batch = _batch_tensors(structs)
    out = [batched_neighbor_list(pos, cells, pbcs, batch, 5.0, backend=b) for b in ("vesin", "torch", "auto")]
    for ei, sh in out[1:]:
        assert torch.equal(ei, out[0][0]) and torch.equal(sh, out[0][1])


def test_key_overflow_fallbacks(monkeypatch):
    """Tiny key limit: exercises gap compaction, the per-structure loop and the sort fallback."""
    structs = _batch_structures()
    pos, cells, pbcs, batch = _batch_tensors(structs)
    expected = batched_neighbor_list(pos, cells, pbcs, batch, 5.0, backend="torch")
    monkeypatch.setattr(cell_list, "KEY_LIMIT", 200_000)
    monkeypatch.setattr(edges, "KEY_LIMIT", 200_000)
    got = batched_neighbor_list(pos, cells, pbcs, batch, 5.0, backend="torch")
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
    got = batched_neighbor_list(pos, cells, pbcs, batch, 5.0, backend="vesin")
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])


def test_small_chunks(monkeypatch):
    """Tiny query blocks and candidate chunks give the same result (chunking logic)."""
    structs = _batch_structures()
    pos, cells, pbcs, batch = _batch_tensors(structs)
    expected = batched_neighbor_list(pos, cells, pbcs, batch, 5.0, backend="vesin")
    monkeypatch.setattr(cell_list, "QUERY_BLOCK", 7)
    monkeypatch.setattr(cell_list, "CANDIDATE_CHUNK", 50)
    got = batched_neighbor_list(pos, cells, pbcs, batch, 5.0, backend="torch")
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])


def test_larger_system_backends_identical():
    at = bulk("Cu", "fcc", a=3.61, cubic=True).repeat((8, 8, 8))  # 2048 atoms
    at.rattle(0.05, seed=17)
    pos, cell = torch.as_tensor(at.positions), torch.as_tensor(at.cell.array)
    ev, sv = neighbor_list(pos, cell, [True] * 3, 5.0, backend="vesin")
    et, st = neighbor_list(pos, cell, [True] * 3, 5.0, backend="torch")
    assert torch.equal(ev, et) and torch.equal(sv, st)
    ea, sa = neighbor_list(pos, cell, [True] * 3, 5.0)  # auto
    assert torch.equal(ea, ev) and torch.equal(sa, sv)


def test_isolated_and_empty_give_no_edges():
    for backend in BACKENDS:
        ei, sh = neighbor_list(torch.zeros((0, 3), dtype=torch.float64), torch.zeros(3, 3), [False] * 3, 5.0,
                               backend=backend)
        assert ei.shape == (2, 0) and sh.shape == (0, 3) and ei.dtype == torch.int64
        ei, sh = neighbor_list(torch.tensor([[5e4, 0.0, -1e4]]), torch.zeros(3, 3), [False] * 3, 5.0,
                               backend=backend)
        assert ei.shape == (2, 0) and sh.shape == (0, 3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_errors(backend):
    pos = torch.rand(4, 3, dtype=torch.float64)
    flat = torch.tensor([[3.0, 0.0, 0.0], [6.0, 0.0, 0.0], [0.0, 0.0, 4.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match="periodic cell has zero volume"):
        neighbor_list(pos, flat, [True, True, True], 3.0, backend=backend)
    with pytest.raises(ValueError, match="periodic cell has zero volume"):
        neighbor_list(pos, torch.zeros(3, 3, dtype=torch.float64), [True, False, False], 3.0, backend=backend)
    # the dependent vector is fine when its direction is not periodic
    neighbor_list(pos, flat, [True, False, True], 3.0, backend=backend)
    bad = pos.clone()
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match="positions contain NaN or inf"):
        neighbor_list(bad, torch.eye(3, dtype=torch.float64) * 5, [True] * 3, 3.0, backend=backend)
    with pytest.raises(ValueError, match="zero volume"):
        batched_neighbor_list(pos, flat[None].repeat(2, 1, 1), torch.ones(2, 3, dtype=torch.bool),
                              torch.tensor([0, 0, 1, 1]), 3.0, backend=backend)
    with pytest.raises(ValueError):
        neighbor_list(pos, torch.eye(3, dtype=torch.float64), [True] * 3, -1.0, backend=backend)


def test_unknown_backend():
    with pytest.raises(ValueError, match="backend"):
        neighbor_list(torch.rand(2, 3), torch.eye(3), [False] * 3, 3.0, backend="cuda-magic")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu():
    pos, cell, pbc = _skewed(18)
    e_cpu, s_cpu = _run(pos, cell, pbc, 5.0, "vesin")
    ei, sh = neighbor_list(torch.as_tensor(pos, device="cuda"), torch.as_tensor(cell, device="cuda"),
                           torch.tensor(pbc, device="cuda"), 5.0)
    assert ei.device.type == "cuda" and sh.device.type == "cuda"
    assert torch.equal(ei.cpu(), e_cpu) and torch.equal(sh.cpu(), s_cpu)


def test_device_filter_and_sort_equals_nonzero_then_lexsort():
    """The one-synchronisation path of finalize_edges on CUDA (filter folded into the sort key)
    picks and orders exactly the edges of the general path; run here on CPU tensors."""
    g = torch.Generator().manual_seed(3)
    n_edges, n_atoms = 5000, 70
    i = torch.randint(0, n_atoms, (n_edges,), generator=g)
    j = torch.randint(0, n_atoms, (n_edges,), generator=g)
    shifts = torch.randint(-3, 4, (n_edges, 3), generator=g)
    # distinct edges, as the backends produce
    key = ((i * n_atoms + j) * 7 + shifts[:, 0] + 3) * 49 + (shifts[:, 1] + 3) * 7 + shifts[:, 2] + 3
    first = torch.unique(key, return_inverse=True)[1]
    pick = torch.zeros(int(first.max()) + 1, dtype=torch.long).scatter_(0, first, torch.arange(n_edges))
    i, j, shifts = i[pick], j[pick], shifts[pick]
    keep = torch.rand(i.numel(), generator=g) < 0.7
    got = edges.filter_and_sort_device(i, j, shifts, keep, n_atoms)
    kept = torch.nonzero(keep).flatten()
    want = kept[edges.lexsort_edges(i[kept], j[kept], shifts[kept], n_atoms)]
    assert got is not None and torch.equal(got, want)
    # a key range that would overflow int64 is handed back to the general path
    assert edges.filter_and_sort_device(i, j, shifts * 10**5, keep, 10**6) is None
