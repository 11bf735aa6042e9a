"""Test helper: the CUDA kernels' per-thread code compiled for the CPU with nvcc, called by ctypes.

Each kernel of ``kernels/*.cu`` delegates its per-task (eSCN) or per-atom (neighbour list) work to a
``__host__ __device__`` function. Here a small wrapper includes the sources and loops over all tasks
(with 3 emulated lanes) or atoms on the host, so
the tests run the very code the GPU runs (minus the launch) against the PyTorch references.
Also provides :func:`compile_ptx`, the nvcc compile check of what NVRTC will see.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import torch

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
ARCH = "sm_90"  # H200 (Hopper)

_WRAPPER = r'''
#include "escn_rotation.cu"
#include "neighbor_list.cu"

// Lanes per row on the host: 3, so that channel counts are not multiples of it (the GPU uses 32).
#define EMU_LANES 3

#define EMU_ESCN(T, SUF)                                                                              \
extern "C" void emu_gather_rotate_##SUF(const T* x, const T* W, const i64* index, T* out, i64 E, int K,  \
                                        int KM, int S, int C, int L, int M) {                         \
    for (unsigned t = 0; t < (unsigned)(E * S * (L + 1)); ++t)                                         \
        for (int lane = 0; lane < EMU_LANES; ++lane)                                                  \
            gather_rotate_task<T>(t, lane, EMU_LANES, x, W, index, out, E, K, KM, S, C, L, M);         \
}                                                                                                     \
extern "C" void emu_rotate_scatter_##SUF(const T* W, const T* msg, const i64* perm, const i64* rowptr,  \
                                         T* out, i64 N, i64 E, int K, int KM, int S, int C, int L, int M) { \
    for (unsigned t = 0; t < (unsigned)(N * (L + 1)); ++t)                                             \
        for (int lane = 0; lane < EMU_LANES; ++lane)                                                  \
            rotate_scatter_task<T>(t, lane, EMU_LANES, W, msg, perm, rowptr, out, E, K, KM, S, C, L, M); \
}                                                                                                     \
extern "C" void emu_edge_outer_##SUF(const T* A, const T* B, const i64* index, T* out, i64 E, int K,     \
                                     int KM, int S, int C, int L, int M) {                            \
    T acc[MLIP_MAX_ORDER], part[MLIP_MAX_ORDER];                                                       \
    for (unsigned t = 0; t < (unsigned)(E * (L + 1)); ++t) {                                           \
        const int l = (int)(t % (unsigned)(L + 1));                                                   \
        const i64 e = (i64)(t / (unsigned)(L + 1));                                                   \
        for (int j = 0; j < mlip_degree_rows(l, M); ++j) {                                            \
            const int r = mlip_degree_row(l, j, L);                                                   \
            for (int q = 0; q < MLIP_MAX_ORDER; ++q) acc[q] = T(0);                                   \
            for (int lane = 0; lane < EMU_LANES; ++lane) { /* the warp's lanes, then their reduction */ \
                edge_outer_partial<T>(e, r, l, lane, EMU_LANES, A, B, index, part, E, K, KM, S, C);   \
                for (int q = 0; q < MLIP_MAX_ORDER; ++q) acc[q] += part[q];                           \
            }                                                                                         \
            for (int k = 0; k < K; ++k) out[(e * KM + r) * K + k] = edge_outer_value<T>(k, l, acc);   \
        }                                                                                             \
    }                                                                                                 \
}
EMU_ESCN(float, float)
EMU_ESCN(double, double)

#define EMU_SMALL(T, SUF)                                                                             \
extern "C" void emu_count_small_##SUF(const T* pos, const i64* batch, const i64* start, const double* tables, \
                                      double cutoff2, i64 n_atoms, i64* counts) {                      \
    for (i64 i = 0; i < n_atoms; ++i) /* cutoff^2 rounded to T, as on the GPU */      \
        counts[i] = mlip_small_visit<T>(i, pos, batch, start, tables, (T)cutoff2, -1, 0, nullptr, nullptr); \
}                                                                                                     \
extern "C" void emu_fill_small_##SUF(const T* pos, const i64* batch, const i64* start, const double* tables, \
                                     double cutoff2, i64 n_atoms, const i64* offsets, i64 n_edges,     \
                                     i64* edge_index, i64* shifts) {                                  \
    for (i64 i = 0; i < n_atoms; ++i)                                                                 \
        mlip_small_visit<T>(i, pos, batch, start, tables, (T)cutoff2, offsets[i], n_edges, edge_index, shifts); \
}
EMU_SMALL(float, f32)
EMU_SMALL(double, f64)

#define EMU_CELLS(T, SUF)                                                                             \
extern "C" void emu_count_pairs_##SUF(const double* gx, const double* gy, const double* gz, const i64* bin_start, \
                                      const i64* home, const int* cbin, const i64* graph, const i64* grid_offset, \
                                      const int* grid_dims, int ns, double rc2, const i64* order, const i64* gatom, \
                                      const i64* gshift, const i64* s0, const T* pos, const double* cells,       \
                                      double cutoff2, i64 n_atoms, i64* counts) {                     \
    for (i64 i = 0; i < n_atoms; ++i) /* cutoff^2 rounded to T, as on the GPU */                      \
        counts[i] = mlip_visit_atom<T>(i, gx, gy, gz, bin_start, home, cbin, graph, grid_offset, grid_dims, ns, rc2, \
                                       order, gatom, gshift, s0, pos, cells, (T)cutoff2, -1, 0, nullptr, nullptr); \
}                                                                                                     \
extern "C" void emu_fill_pairs_##SUF(const double* gx, const double* gy, const double* gz, const i64* bin_start, \
                                     const i64* home, const int* cbin, const i64* graph, const i64* grid_offset, \
                                     const int* grid_dims, int ns, double rc2, const i64* order, const i64* gatom, \
                                     const i64* gshift, const i64* s0, const T* pos, const double* cells,       \
                                     double cutoff2, i64 n_atoms, const i64* offsets, i64 n_edges,    \
                                     i64* edge_index, i64* shifts) {                                  \
    for (i64 i = 0; i < n_atoms; ++i)                                                                 \
        mlip_visit_atom<T>(i, gx, gy, gz, bin_start, home, cbin, graph, grid_offset, grid_dims, ns, rc2, order, \
                           gatom, gshift, s0, pos, cells, (T)cutoff2, offsets[i], n_edges, edge_index, shifts); \
}
EMU_CELLS(float, f32)
EMU_CELLS(double, f64)
'''


def nvcc() -> str | None:
    return shutil.which("nvcc")


def compile_ptx(cu: Path, name_expressions, out_dir: Path) -> str:
    """``nvcc --ptx`` of ``cu`` for sm_90 with every template named in ``name_expressions``
    instantiated (as NVRTC instantiates them for CuPy), warnings as errors; returns the PTX."""
    wrapper = out_dir / f"check_{cu.stem}.cu"
    lines = [f'#include "{cu}"']
    if name_expressions:
        lines.append("void* mlip_instantiated[] = {" + ", ".join(f"(void*)&{n}" for n in name_expressions) + "};")
    wrapper.write_text("\n".join(lines) + "\n")
    ptx = out_dir / f"{cu.stem}.ptx"
    subprocess.run([nvcc(), "--ptx", f"-arch={ARCH}", "-std=c++17", "-Werror", "all-warnings", str(wrapper),
                    "-o", str(ptx)], check=True, capture_output=True, text=True)
    return ptx.read_text()


def build_host_library(out_dir: Path) -> ctypes.CDLL:
    """Compile the kernels' element functions for the host (nvcc + the system C++ compiler)."""
    src = out_dir / "host_kernels.cu"
    src.write_text(_WRAPPER)
    lib = out_dir / "libmlip_host_kernels.so"
    # no fused multiply-add on the host: the all-pairs filter must round like PyTorch's separate operations
    subprocess.run([nvcc(), "-shared", "-Xcompiler", "-fPIC,-ffp-contract=off", "-std=c++17", "-O2", f"-I{KERNELS}", str(src),
                    "-o", str(lib)], check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(lib))


def _p(t: torch.Tensor):
    assert t.is_contiguous() and t.device.type == "cpu"
    return ctypes.c_void_p(t.data_ptr())


class HostKernels:
    """Drop-in replacements of the launchers in :mod:`mlip.kernels` that run the host build."""

    def __init__(self, lib: ctypes.CDLL):
        self.lib = lib

    def _suffix(self, t):
        return {torch.float32: "float", torch.float64: "double"}[t.dtype]

    def gather_rotate(self, x, wigner, index):
        from mlip.kernels.escn_reference import layout_from_shape

        n, k, c = x.shape
        lmax, mmax = layout_from_shape(wigner)
        s, e = index.shape
        x, wigner, index = x.contiguous(), wigner.contiguous(), index.contiguous().long()
        out = torch.empty((e, wigner.shape[1], s * c), dtype=x.dtype)
        getattr(self.lib, f"emu_gather_rotate_{self._suffix(x)}")(
            _p(x), _p(wigner), _p(index), _p(out), ctypes.c_longlong(e), ctypes.c_int(k),
            ctypes.c_int(wigner.shape[1]), ctypes.c_int(s), ctypes.c_int(c), ctypes.c_int(lmax), ctypes.c_int(mmax))
        return out

    def rotate_scatter(self, wigner, msg, index, num_nodes):
        from mlip.kernels.escn_reference import layout_from_shape
        from mlip.kernels.escn_rotation import node_csr

        lmax, mmax = layout_from_shape(wigner)
        s, e = index.shape
        c = msg.shape[2] // s
        k = wigner.shape[2]
        wigner, msg, index = wigner.contiguous(), msg.contiguous(), index.contiguous().long()
        perm, rowptr = node_csr(index, num_nodes)
        out = torch.empty((num_nodes, k, c), dtype=msg.dtype)
        getattr(self.lib, f"emu_rotate_scatter_{self._suffix(msg)}")(
            _p(wigner), _p(msg), _p(perm), _p(rowptr), _p(out), ctypes.c_longlong(num_nodes), ctypes.c_longlong(e),
            ctypes.c_int(k), ctypes.c_int(wigner.shape[1]), ctypes.c_int(s), ctypes.c_int(c), ctypes.c_int(lmax),
            ctypes.c_int(mmax))
        return out

    def edge_outer(self, a, b, index):
        from mlip.kernels.escn_reference import layout_from_shape

        k_m, k = a.shape[1], b.shape[1]
        lmax, mmax = layout_from_shape(a.new_empty((0, k_m, k)))
        s, e = index.shape
        c = b.shape[2]
        a, b, index = a.contiguous(), b.contiguous(), index.contiguous().long()
        out = torch.empty((e, k_m, k), dtype=a.dtype)
        getattr(self.lib, f"emu_edge_outer_{self._suffix(a)}")(
            _p(a), _p(b), _p(index), _p(out), ctypes.c_longlong(e), ctypes.c_int(k), ctypes.c_int(k_m),
            ctypes.c_int(s), ctypes.c_int(c), ctypes.c_int(lmax), ctypes.c_int(mmax))
        return out

    def search(self, plan):
        """The cell-list search (count, scan, fill) of ``neighbor_list.cu`` on the host."""
        suffix = {torch.float32: "f32", torch.float64: "f64"}[plan.pos.dtype]
        n = plan.home.numel()
        common = [_p(plan.gx), _p(plan.gy), _p(plan.gz), _p(plan.bin_start), _p(plan.home), _p(plan.cbin),
                  _p(plan.graph), _p(plan.grid_offset), _p(plan.grid_dims), ctypes.c_int(plan.ns),
                  ctypes.c_double(plan.rc * plan.rc), _p(plan.order), _p(plan.gatom), _p(plan.gshift), _p(plan.s0),
                  _p(plan.pos), _p(plan.cells), ctypes.c_double(plan.cutoff ** 2), ctypes.c_longlong(n)]
        counts = torch.empty(n, dtype=torch.long)
        getattr(self.lib, f"emu_count_pairs_{suffix}")(*common, _p(counts))
        ends = torch.cumsum(counts, 0)
        offsets = (ends - counts).contiguous()
        total = int(ends[-1]) if n else 0
        edge_index = torch.empty((2, total), dtype=torch.long)
        shifts = torch.empty((total, 3), dtype=torch.long)
        getattr(self.lib, f"emu_fill_pairs_{suffix}")(*common, _p(offsets), ctypes.c_longlong(total),
                                                       _p(edge_index), _p(shifts))
        return edge_index, shifts

    def small_search(self, pos, batch, start, tables, cutoff):
        """The all-pairs neighbour search (count, scan, fill) of ``neighbor_list.cu`` on the host."""
        suffix = {torch.float32: "f32", torch.float64: "f64"}[pos.dtype]
        n = pos.shape[0]
        common = [_p(pos), _p(batch), _p(start), _p(tables), ctypes.c_double(float(cutoff) ** 2), ctypes.c_longlong(n)]
        counts = torch.empty(n, dtype=torch.long)
        getattr(self.lib, f"emu_count_small_{suffix}")(*common, _p(counts))
        ends = torch.cumsum(counts, 0)
        total = int(ends[-1]) if n else 0
        offsets = (ends - counts).contiguous()
        edge_index = torch.empty((2, total), dtype=torch.long)
        shifts = torch.empty((total, 3), dtype=torch.long)
        getattr(self.lib, f"emu_fill_small_{suffix}")(*common, _p(offsets), ctypes.c_longlong(total),
                                                       _p(edge_index), _p(shifts))
        return edge_index, shifts
