// Cell-list pair search on the GPU (launched through CuPy, see neighbor_list.py).
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
// Any ghost closer than rc to an atom lies within ns bins along each axis, so each atom scans
// the (2 ns + 1)^2 rows (bz, by) of its stencil, each row one contiguous range of sorted ghosts.
//
// count_pairs writes how many ghosts lie closer than rc (float64, trivial self pair excluded);
// after an exclusive scan (offsets), fill_pairs writes the pairs (atom i, sorted ghost position)
// at offsets[i] .. offsets[i] + count[i]. Counting first means no pair is ever dropped and the
// output order is deterministic (atom, then bin row, then bin order).
//
// The per-atom work is a __host__ __device__ function, compiled for the CPU in the tests.

typedef long long i64;

__host__ __device__ inline i64 mlip_visit_atom(
    i64 i, const double* __restrict__ gx, const double* __restrict__ gy, const double* __restrict__ gz,
    const i64* __restrict__ bin_start, const i64* __restrict__ home, const int* __restrict__ cbin,
    const i64* __restrict__ graph, const i64* __restrict__ grid_offset, const int* __restrict__ grid_dims,
    int ns, double rc2, i64 base, i64* __restrict__ out_i, i64* __restrict__ out_p) {
    const i64 g = graph[i];
    const int nx = grid_dims[3 * g], ny = grid_dims[3 * g + 1], nz = grid_dims[3 * g + 2];
    const int bx = cbin[3 * i], by = cbin[3 * i + 1], bz = cbin[3 * i + 2];
    const i64 own = home[i];
    const double cx = gx[own], cy = gy[own], cz = gz[own];
    const int x0 = bx - ns < 0 ? 0 : bx - ns, x1 = bx + ns > nx - 1 ? nx - 1 : bx + ns;
    const int y0 = by - ns < 0 ? 0 : by - ns, y1 = by + ns > ny - 1 ? ny - 1 : by + ns;
    const int z0 = bz - ns < 0 ? 0 : bz - ns, z1 = bz + ns > nz - 1 ? nz - 1 : bz + ns;
    i64 count = 0;
    for (int z = z0; z <= z1; ++z) {
        for (int y = y0; y <= y1; ++y) {
            const i64 row = grid_offset[g] + ((i64)z * ny + y) * nx;
            const i64 p1 = bin_start[row + x1 + 1];
            for (i64 p = bin_start[row + x0]; p < p1; ++p) {
                if (p == own) continue;
                const double dx = gx[p] - cx, dy = gy[p] - cy, dz = gz[p] - cz;
                double d2 = dx * dx;
                d2 += dy * dy;
                d2 += dz * dz;
                if (d2 < rc2) {
                    if (base >= 0) {
                        out_i[base + count] = i;
                        out_p[base + count] = p;
                    }
                    ++count;
                }
            }
        }
    }
    return count;
}

extern "C" __global__ void count_pairs(
    const double* __restrict__ gx, const double* __restrict__ gy, const double* __restrict__ gz,
    const i64* __restrict__ bin_start, const i64* __restrict__ home, const int* __restrict__ cbin,
    const i64* __restrict__ graph, const i64* __restrict__ grid_offset, const int* __restrict__ grid_dims,
    int ns, double rc2, i64 n_atoms, i64* __restrict__ counts) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n_atoms; i += (i64)gridDim.x * blockDim.x)
        counts[i] = mlip_visit_atom(i, gx, gy, gz, bin_start, home, cbin, graph, grid_offset, grid_dims, ns, rc2,
                                    -1, nullptr, nullptr);
}

extern "C" __global__ void fill_pairs(
    const double* __restrict__ gx, const double* __restrict__ gy, const double* __restrict__ gz,
    const i64* __restrict__ bin_start, const i64* __restrict__ home, const int* __restrict__ cbin,
    const i64* __restrict__ graph, const i64* __restrict__ grid_offset, const int* __restrict__ grid_dims,
    int ns, double rc2, i64 n_atoms, const i64* __restrict__ offsets, i64* __restrict__ out_i,
    i64* __restrict__ out_p) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n_atoms; i += (i64)gridDim.x * blockDim.x)
        mlip_visit_atom(i, gx, gy, gz, bin_start, home, cbin, graph, grid_offset, grid_dims, ns, rc2, offsets[i],
                        out_i, out_p);
}
