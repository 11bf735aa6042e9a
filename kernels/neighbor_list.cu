// Neighbour search on the GPU (launched through CuPy, see neighbor_list.py): two algorithms, each
// a count kernel, an exclusive scan on the host side, and a fill kernel.
//
// Both end with the exact filter of mlip.neighbors.cell_list.finalize_edges, evaluated here: the
// edge vector (pos[j] - pos[i]) + ((S0 c0 + S1 c1) + S2 c2) and d^2 = (v0^2 + v1^2) + v2^2 in the
// input dtype T, every operation rounded separately (no fused multiply-add), and d^2 < cutoff^2
// with cutoff^2 (float64) rounded to T, exactly as PyTorch evaluates it: only correctly rounded
// operations, so every device gives the same bits. Each atom's edges are written sorted by
// (j, S0, S1, S2), so the output is the sorted edge set of the other backends without a global sort.
// Counting first means no pair is ever dropped.
//
// The per-atom work is a __host__ __device__ function, compiled for the CPU in the tests.

typedef long long i64;

#ifdef __CUDA_ARCH__
__device__ __forceinline__ float mlip_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double mlip_add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float mlip_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double mlip_sub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float mlip_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mlip_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double mlip_floor(double a) { return floor(a); }
__device__ __forceinline__ double mlip_ceil(double a) { return ceil(a); }
#else  // host build of the tests (compiled with -ffp-contract=off)
inline float mlip_add(float a, float b) { return a + b; }
inline double mlip_add(double a, double b) { return a + b; }
inline float mlip_sub(float a, float b) { return a - b; }
inline double mlip_sub(double a, double b) { return a - b; }
inline float mlip_mul(float a, float b) { return a * b; }
inline double mlip_mul(double a, double b) { return a * b; }
inline double mlip_floor(double a) { return __builtin_floor(a); }
inline double mlip_ceil(double a) { return __builtin_ceil(a); }
#endif

// d^2 of the edge (i -> j, S) as finalize_edges computes it: v = pos[j] - pos[i] in T, c the cell
// (non-periodic rows zeroed) in T, row-major.
template <typename T>
__host__ __device__ __forceinline__ T mlip_exact_d2(const T v[3], i64 s0, i64 s1, i64 s2, const T c[9]) {
    const T t0 = (T)s0, t1 = (T)s1, t2 = (T)s2;
    T d2 = T(0);
    for (int k = 0; k < 3; ++k) {
        T sc = mlip_mul(t0, c[k]);
        sc = mlip_add(sc, mlip_mul(t1, c[3 + k]));
        sc = mlip_add(sc, mlip_mul(t2, c[6 + k]));
        T vk = mlip_add(v[k], sc);
        vk = mlip_mul(vk, vk);
        d2 = k == 0 ? vk : mlip_add(d2, vk);
    }
    return d2;
}

// Insertion sort of n edges by (j, S0, S1, S2): jj [n] neighbour indices, ss [n, 3] shifts (one atom's
// neighbours, a few dozen: in the output, i64, or in a per-thread buffer, int).
template <typename I>
__host__ __device__ inline void mlip_sort_edges(I* __restrict__ jj, I* __restrict__ ss, i64 n) {
    for (i64 k = 1; k < n; ++k) {
        const I j = jj[k], a = ss[3 * k], b = ss[3 * k + 1], c = ss[3 * k + 2];
        i64 m = k;
        while (m > 0) {
            const I pj = jj[m - 1], pa = ss[3 * m - 3], pb = ss[3 * m - 2], pc = ss[3 * m - 1];
            const bool greater = pj != j ? pj > j : pa != a ? pa > a : pb != b ? pb > b : pc > c;
            if (!greater) break;
            jj[m] = pj;
            ss[3 * m] = pa;
            ss[3 * m + 1] = pb;
            ss[3 * m + 2] = pc;
            --m;
        }
        jj[m] = j;
        ss[3 * m] = a;
        ss[3 * m + 1] = b;
        ss[3 * m + 2] = c;
    }
}

// Write edge q (i -> j, S) into edge_index [2, n_edges] and shifts [n_edges, 3].
__host__ __device__ __forceinline__ void mlip_write_edge(i64* __restrict__ edge_index, i64* __restrict__ shifts,
                                                         i64 n_edges, i64 q, i64 i, i64 j, i64 s0, i64 s1, i64 s2) {
    edge_index[q] = i;
    edge_index[n_edges + q] = j;
    shifts[3 * q] = s0;
    shifts[3 * q + 1] = s1;
    shifts[3 * q + 2] = s2;
}

// Per-thread buffer of the cell-list fill (int j and shifts: 16 bytes an edge).
#define MLIP_LOCAL_EDGES 128

__host__ __device__ __forceinline__ bool mlip_fits_int(i64 x) { return x >= -0x7fffffffLL && x <= 0x7fffffffLL; }

// ------------------------------------------------------------------------------------------------
// Cell list (any structure size).
//
// The host side (neighbor_list.py, PyTorch on the device) wraps atoms into their cells, makes
// the periodic ghost images, bins the ghosts per structure into a grid of bins at least
// rc / ns wide along every axis, and sorts them by bin. Inputs of the kernels:
//   gx, gy, gz  [n_ghost] float64   ghost coordinates in bin order
//   bin_start   [n_bins + 1] int64  ghosts of global bin b are bin_start[b] .. bin_start[b + 1]
//   home        [n_atoms] int64     position (in bin order) of each atom's own (T = 0) ghost
//   cbin        [n_atoms, 3] int32  bin coordinates (bx, by, bz) of that ghost
//   graph       [n_atoms] int64     structure of each atom
//   grid_offset [n_graphs] int64    first global bin of each structure
//   grid_dims   [n_graphs, 3] int32 bins (nx, ny, nz) of each structure, bin id = (bz ny + by) nx + bx
//   order       [n_ghost] int64     ghost at each bin-order position
//   gatom       [n_ghost] int64, gshift [n_ghost, 3] int64: atom and lattice translation of each ghost
//   s0          [n_atoms, 3] int64  translation that wrapped each atom into its cell
//   pos         [n_atoms, 3] T      input positions
//   cells       [n_graphs, 9] float64  cells with non-periodic rows zeroed (the exact filter's)
// Any ghost closer than rc to an atom lies within ns bins along each axis, so each atom scans
// the (2 ns + 1)^2 rows (bz, by) of its stencil, each row one contiguous range of sorted ghosts.
// Ghosts closer than rc (float64, the trivial self pair excluded) are the candidates: edge
// (i, j, S) with j = gatom[g], S = gshift[g] - s0[j] + s0[i], kept when the exact filter passes.
template <typename T>
__host__ __device__ inline i64 mlip_visit_atom(
    i64 i, const double* __restrict__ gx, const double* __restrict__ gy, const double* __restrict__ gz,
    const i64* __restrict__ bin_start, const i64* __restrict__ home, const int* __restrict__ cbin,
    const i64* __restrict__ graph, const i64* __restrict__ grid_offset, const int* __restrict__ grid_dims,
    int ns, double rc2, const i64* __restrict__ order, const i64* __restrict__ gatom,
    const i64* __restrict__ gshift, const i64* __restrict__ s0, const T* __restrict__ pos,
    const double* __restrict__ cells, T cutoff2, i64 base, i64 n_edges, i64* __restrict__ edge_index,
    i64* __restrict__ shifts) {
    const i64 g = graph[i];
    const int nx = grid_dims[3 * g], ny = grid_dims[3 * g + 1], nz = grid_dims[3 * g + 2];
    const int bx = cbin[3 * i], by = cbin[3 * i + 1], bz = cbin[3 * i + 2];
    const i64 own = home[i];
    const double cx = gx[own], cy = gy[own], cz = gz[own];
    T c[9];
    for (int q = 0; q < 9; ++q) c[q] = (T)cells[9 * g + q];
    const T xi = pos[3 * i], yi = pos[3 * i + 1], zi = pos[3 * i + 2];
    const i64 si0 = s0[3 * i], si1 = s0[3 * i + 1], si2 = s0[3 * i + 2];
    const int x0 = bx - ns < 0 ? 0 : bx - ns, x1 = bx + ns > nx - 1 ? nx - 1 : bx + ns;
    const int y0 = by - ns < 0 ? 0 : by - ns, y1 = by + ns > ny - 1 ? ny - 1 : by + ns;
    const int z0 = bz - ns < 0 ? 0 : bz - ns, z1 = bz + ns > nz - 1 ? nz - 1 : bz + ns;
    i64 count = 0;
    // fill: the first MLIP_LOCAL_EDGES edges are kept in a per-thread buffer and sorted there; an
    // atom with more (or with an index or shift beyond int) is written out and sorted in place
    int lj[MLIP_LOCAL_EDGES], ls[3 * MLIP_LOCAL_EDGES];
    bool local = true;
    for (int z = z0; z <= z1; ++z) {
        for (int y = y0; y <= y1; ++y) {
            const i64 row = grid_offset[g] + ((i64)z * ny + y) * nx;
            const i64 p1 = bin_start[row + x1 + 1];
            for (i64 p = bin_start[row + x0]; p < p1; ++p) {
                if (p == own) continue;
                const double dx = gx[p] - cx, dy = gy[p] - cy, dz = gz[p] - cz;
                double r2 = dx * dx;
                r2 += dy * dy;
                r2 += dz * dz;
                if (!(r2 < rc2)) continue;
                const i64 gh = order[p];
                const i64 j = gatom[gh];
                const i64 t0 = gshift[3 * gh] - s0[3 * j] + si0;
                const i64 t1 = gshift[3 * gh + 1] - s0[3 * j + 1] + si1;
                const i64 t2 = gshift[3 * gh + 2] - s0[3 * j + 2] + si2;
                const T v[3] = {mlip_sub(pos[3 * j], xi), mlip_sub(pos[3 * j + 1], yi),
                                mlip_sub(pos[3 * j + 2], zi)};
                if (mlip_exact_d2<T>(v, t0, t1, t2, c) < cutoff2) {
                    if (base >= 0) {
                        const bool fits = j <= 0x7fffffffLL && mlip_fits_int(t0) && mlip_fits_int(t1) && mlip_fits_int(t2);
                        if (local && (count >= MLIP_LOCAL_EDGES || !fits)) {  // spill to the output
                            for (int k = 0; k < count; ++k) {
                                mlip_write_edge(edge_index, shifts, n_edges, base + k, i, lj[k], ls[3 * k], ls[3 * k + 1],
                                                ls[3 * k + 2]);
                            }
                            local = false;
                        }
                        if (local) {
                            lj[count] = (int)j;
                            ls[3 * count] = (int)t0;
                            ls[3 * count + 1] = (int)t1;
                            ls[3 * count + 2] = (int)t2;
                        } else {
                            mlip_write_edge(edge_index, shifts, n_edges, base + count, i, j, t0, t1, t2);
                        }
                    }
                    ++count;
                }
            }
        }
    }
    if (base >= 0) {
        if (local) {  // sort the per-thread buffer (local memory, interleaved across the warp), write once
            mlip_sort_edges<int>(lj, ls, count);
            for (int k = 0; k < (int)count; ++k) {
                mlip_write_edge(edge_index, shifts, n_edges, base + k, i, lj[k], ls[3 * k], ls[3 * k + 1], ls[3 * k + 2]);
            }
        } else {
            mlip_sort_edges<i64>(edge_index + n_edges + base, shifts + 3 * base, count);
        }
    }
    return count;
}

// The arguments both cell-list kernels begin with: grid, ghosts, positions, cells, cutoff², atom count.
#define MLIP_CELL_PARAMS(T)                                                                                 \
    const double* __restrict__ gx, const double* __restrict__ gy, const double* __restrict__ gz,              \
    const i64* __restrict__ bin_start, const i64* __restrict__ home, const int* __restrict__ cbin,            \
    const i64* __restrict__ graph, const i64* __restrict__ grid_offset, const int* __restrict__ grid_dims,    \
    int ns, double rc2, const i64* __restrict__ order, const i64* __restrict__ gatom,                        \
    const i64* __restrict__ gshift, const i64* __restrict__ s0, const T* __restrict__ pos,                   \
    const double* __restrict__ cells, T cutoff2, i64 n_atoms

#define MLIP_CELL_KERNELS(T, SUF)                                                                           \
extern "C" __global__ void count_pairs_##SUF(                                                               \
    MLIP_CELL_PARAMS(T), i64* __restrict__ counts) {                                                        \
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n_atoms; i += (i64)gridDim.x * blockDim.x) \
        counts[i] = mlip_visit_atom<T>(i, gx, gy, gz, bin_start, home, cbin, graph, grid_offset, grid_dims, ns,  \
                                       rc2, order, gatom, gshift, s0, pos, cells, cutoff2, -1, 0, nullptr,     \
                                       nullptr);                                                            \
}                                                                                                           \
extern "C" __global__ void fill_pairs_##SUF(                                                                \
    MLIP_CELL_PARAMS(T), const i64* __restrict__ offsets, i64 n_edges, i64* __restrict__ edge_index,        \
    i64* __restrict__ shifts) {                                                                              \
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n_atoms; i += (i64)gridDim.x * blockDim.x) \
        mlip_visit_atom<T>(i, gx, gy, gz, bin_start, home, cbin, graph, grid_offset, grid_dims, ns, rc2, order,  \
                           gatom, gshift, s0, pos, cells, cutoff2, offsets[i], n_edges, edge_index, shifts);    \
}

MLIP_CELL_KERNELS(float, f32)
MLIP_CELL_KERNELS(double, f64)

// ------------------------------------------------------------------------------------------------
// All pairs of small structures (batched relaxations: many cells of a few dozen atoms).
//
// For structures of at most a few hundred atoms the grid and the ghosts cost more launches than
// the search itself, so each atom i (one thread) visits every atom j of its own structure and
// every lattice translation S that can bring j within the search radius, and applies the exact
// filter. Pairs are visited in (j, S0, S1, S2) order, so no sort is needed.
//   pos    [n_atoms, 3] T       input positions (unwrapped as given)
//   batch  [n_atoms] int64      structure of each atom (sorted); start [n_graphs + 1] its atom ranges
//   tables [n_graphs, 21] float64: inverse of the completed cell (9, row-major), fractional reach
//          of the search radius per axis (3; negative along non-periodic axes, where S = 0), and
//          the cell with non-periodic rows zeroed (9, the cell of the exact filter)
// The translations along axis a are those with |f_i - f_j - S_a| <= reach_a (fractional
// coordinates f = pos . inverse, float64): a superset of the pairs closer than the search radius.

#define MLIP_SMALL_TABLE 21

// Neighbours of atom i: returns their number and, when base >= 0, writes them at base, base + 1, ...
// of edge_index [2, n_edges] (i in row 0, j in row 1) and shifts [n_edges, 3].
template <typename T>
__host__ __device__ inline i64 mlip_small_visit(
    i64 i, const T* __restrict__ pos, const i64* __restrict__ batch, const i64* __restrict__ start,
    const double* __restrict__ tables, T cutoff2, i64 base, i64 n_edges, i64* __restrict__ edge_index,
    i64* __restrict__ shifts) {
    const i64 g = batch[i];
    const double* inv = tables + MLIP_SMALL_TABLE * g;
    const double* reach = inv + 9;
    const double* cd = inv + 12;
    T c[9];
    for (int q = 0; q < 9; ++q) c[q] = (T)cd[q];
    const T xi = pos[3 * i], yi = pos[3 * i + 1], zi = pos[3 * i + 2];
    double fi[3];
    for (int a = 0; a < 3; ++a) fi[a] = (double)xi * inv[a] + (double)yi * inv[3 + a] + (double)zi * inv[6 + a];
    i64 count = 0;
    const i64 j1 = start[g + 1];
    for (i64 j = start[g]; j < j1; ++j) {
        const T xj = pos[3 * j], yj = pos[3 * j + 1], zj = pos[3 * j + 2];
        i64 lo[3], hi[3];
        for (int a = 0; a < 3; ++a) {
            if (reach[a] < 0.0) {
                lo[a] = 0;
                hi[a] = 0;
            } else {
                const double fj = (double)xj * inv[a] + (double)yj * inv[3 + a] + (double)zj * inv[6 + a];
                lo[a] = (i64)mlip_ceil(fi[a] - fj - reach[a]);
                hi[a] = (i64)mlip_floor(fi[a] - fj + reach[a]);
            }
        }
        const T v[3] = {mlip_sub(xj, xi), mlip_sub(yj, yi), mlip_sub(zj, zi)};
        for (i64 s0 = lo[0]; s0 <= hi[0]; ++s0) {
            for (i64 s1 = lo[1]; s1 <= hi[1]; ++s1) {
                for (i64 s2 = lo[2]; s2 <= hi[2]; ++s2) {
                    if (j == i && s0 == 0 && s1 == 0 && s2 == 0) continue;
                    if (mlip_exact_d2<T>(v, s0, s1, s2, c) < cutoff2) {
                        if (base >= 0) mlip_write_edge(edge_index, shifts, n_edges, base + count, i, j, s0, s1, s2);
                        ++count;
                    }
                }
            }
        }
    }
    return count;
}

#define MLIP_SMALL_KERNELS(T, SUF)                                                                          \
extern "C" __global__ void count_small_##SUF(const T* __restrict__ pos, const i64* __restrict__ batch,       \
                                             const i64* __restrict__ start, const double* __restrict__ tables, \
                                             T cutoff2, i64 n_atoms, i64* __restrict__ counts) {             \
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n_atoms; i += (i64)gridDim.x * blockDim.x) \
        counts[i] = mlip_small_visit<T>(i, pos, batch, start, tables, cutoff2, -1, 0, nullptr, nullptr);       \
}                                                                                                           \
extern "C" __global__ void fill_small_##SUF(const T* __restrict__ pos, const i64* __restrict__ batch,        \
                                            const i64* __restrict__ start, const double* __restrict__ tables,  \
                                            T cutoff2, i64 n_atoms, const i64* __restrict__ offsets,          \
                                            i64 n_edges, i64* __restrict__ edge_index,                       \
                                            i64* __restrict__ shifts) {                                      \
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n_atoms; i += (i64)gridDim.x * blockDim.x) \
        mlip_small_visit<T>(i, pos, batch, start, tables, cutoff2, offsets[i], n_edges, edge_index, shifts);   \
}

MLIP_SMALL_KERNELS(float, f32)
MLIP_SMALL_KERNELS(double, f64)
