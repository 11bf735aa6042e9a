// Fused eSCN edge-frame rotations of EquiformerV3 (launched through CuPy, see escn_rotation.py).
//
// Layouts (all row-major, contiguous):
//   x     [N, K, C]        node coefficients, e3nn order, K = (L + 1)^2
//   W     [E, KM, K]       m-truncated Wigner matrices, rows in m-primary order
//                          [m=0: l=0..L | +1: l=1..L | -1: l=1..L | +2: l=2..L | -2: ... ],
//                          block diagonal by degree: row r of degree l is non-zero only in the
//                          columns l^2 .. l^2 + 2l (the kernels read nothing else)
//   index [S, E] int64     node of each (source slot s, edge e)
//   msg   [E, KM, S * C]   edge-frame messages, channel block s belongs to index[s]
//
// gather_rotate:  msg[e, r, s C + c] = sum_k W[e, r, k] x[index[s, e], k, c]
// rotate_scatter: out[n, k, c] = sum_{(s, e): index[s, e] = n} sum_r W[e, r, k] msg[e, r, s C + c]
//                 (the (s, e) slots of node n are listed by a CSR table: perm[rowptr[n] ..
//                 rowptr[n + 1]) holds s * E + e in increasing order, so the sum order is fixed
//                 and the result deterministic, no atomics)
// edge_outer:     gW[e, r, k] = sum_s sum_c A[e, r, s C + c] B[index[s, e], k, c] on the degree
//                 blocks, 0 elsewhere (the Wigner gradient of both operations above)
//
// Work split: one warp per "task", a degree l of one edge-source (e, s) in gather_rotate, of one
// node n in rotate_scatter and of one edge e in edge_outer; the 32 lanes of the warp stride over
// the channels (coalesced loads and stores; Wigner entries are the same for all lanes). A task
// handles every row of degree l (one for m = 0, two per 0 < m <= min(l, M)), so the 2l + 1 input
// coefficients of that degree are fetched from global memory once per task and re-read from L1
// by the other rows, and in rotate_scatter each message element is read exactly once (one
// accumulator per output column of the degree). Blocks are (32, TASKS) threads, threadIdx.y picks
// the task; tasks are decoded with 32-bit arithmetic (the Python side checks that they fit).
// edge_outer reduces over the channels inside the warp (shuffles).
//
// The per-task work is a __host__ __device__ function (lane, n_lanes) so that the same code is
// compiled for the CPU in the tests (tests/test_kernels.py builds it with nvcc into a shared
// library, runs it with 3 emulated lanes and compares it with the PyTorch reference). Templates
// are instantiated for float and double by NVRTC through CuPy's name_expressions.

typedef long long i64;

// Largest 2l + 1 handled (per-lane accumulators live in registers): l <= 8.
#define MLIP_MAX_ORDER 17

// First row of the +m block in the m-primary layout (the -m block follows after L + 1 - m rows).
__host__ __device__ __forceinline__ int mlip_block_start(int m, int L) {
    if (m == 0) return 0;
    int start = L + 1;
    for (int q = 1; q < m; ++q) start += 2 * (L + 1 - q);
    return start;
}

// Row j of degree l in the m-primary layout: j = 0 is m = 0, j = 2m - 1 is +m, j = 2m is -m.
__host__ __device__ __forceinline__ int mlip_degree_row(int l, int j, int L) {
    if (j == 0) return l;
    const int m = (j + 1) / 2;
    const int rp = mlip_block_start(m, L) + (l - m);
    return (j & 1) ? rp : rp + (L + 1 - m);
}

// Number of rows of degree l: 1 + 2 min(l, M).
__host__ __device__ __forceinline__ int mlip_degree_rows(int l, int M) { return 1 + 2 * (l < M ? l : M); }

// gather_rotate, task = (e * S + s) * (L + 1) + l: msg[e, r, s C + c] for the rows r of degree l
// and c = lane, lane + n_lanes, ...
template <typename T>
__host__ __device__ __forceinline__ void gather_rotate_task(
    unsigned task, int lane, int n_lanes, const T* __restrict__ x, const T* __restrict__ W,
    const i64* __restrict__ index, T* __restrict__ out, i64 E, int K, int KM, int S, int C, int L, int M) {
    const int l = (int)(task % (unsigned)(L + 1));
    const unsigned es = task / (unsigned)(L + 1);
    const unsigned s = es % (unsigned)S;
    const i64 e = (i64)(es / (unsigned)S);
    const int nq = 2 * l + 1;
    const T* xp = x + (index[(i64)s * E + e] * K + l * l) * C;
    const int rows = mlip_degree_rows(l, M);
    for (int j = 0; j < rows; ++j) {
        const int r = mlip_degree_row(l, j, L);
        const T* w = W + (e * KM + r) * K + l * l;
        T* o = out + (e * KM + r) * ((i64)S * C) + (i64)s * C;
        for (int c = lane; c < C; c += n_lanes) {
            T acc = T(0);
            for (int q = 0; q < nq; ++q) acc += w[q] * xp[(i64)q * C + c];
            o[c] = acc;
        }
    }
}

// rotate_scatter, task = n * (L + 1) + l: out[n, l^2 + q, c] for q < 2l + 1 and
// c = lane, lane + n_lanes, ...; every message element of degree l is read once.
template <typename T>
__host__ __device__ __forceinline__ void rotate_scatter_task(
    unsigned task, int lane, int n_lanes, const T* __restrict__ W, const T* __restrict__ msg,
    const i64* __restrict__ perm, const i64* __restrict__ rowptr, T* __restrict__ out, i64 E, int K, int KM,
    int S, int C, int L, int M) {
    const int l = (int)(task % (unsigned)(L + 1));
    const i64 n = (i64)(task / (unsigned)(L + 1));
    const int nq = 2 * l + 1;
    const int rows = mlip_degree_rows(l, M);
    const i64 p0 = rowptr[n], p1 = rowptr[n + 1];
    const i64 SC = (i64)S * C;
    for (int c = lane; c < C; c += n_lanes) {
        T acc[MLIP_MAX_ORDER];
#pragma unroll
        for (int q = 0; q < MLIP_MAX_ORDER; ++q) acc[q] = T(0);
        for (i64 p = p0; p < p1; ++p) {
            const unsigned slot = (unsigned)perm[p];
            const unsigned s = slot / (unsigned)E;
            const i64 e = (i64)(slot - s * (unsigned)E);
            for (int j = 0; j < rows; ++j) {
                const int r = mlip_degree_row(l, j, L);
                const T mv = msg[(e * KM + r) * SC + (i64)s * C + c];
                const T* w = W + (e * KM + r) * K + l * l;
#pragma unroll
                for (int q = 0; q < MLIP_MAX_ORDER; ++q)
                    if (q < nq) acc[q] += w[q] * mv;
            }
        }
        T* o = out + (n * K + l * l) * C + c;
#pragma unroll
        for (int q = 0; q < MLIP_MAX_ORDER; ++q)
            if (q < nq) o[(i64)q * C] = acc[q];
    }
}

// edge_outer, for row r (degree l) of edge e: this lane's partial sums acc[q] = sum over its
// channels (and all sources) of A[e, r, s C + c] B[index[s, e], l^2 + q, c], q < 2l + 1.
template <typename T>
__host__ __device__ __forceinline__ void edge_outer_partial(
    i64 e, int r, int l, int lane, int n_lanes, const T* __restrict__ A, const T* __restrict__ B,
    const i64* __restrict__ index, T acc[MLIP_MAX_ORDER], i64 E, int K, int KM, int S, int C) {
    const int nq = 2 * l + 1;
#pragma unroll
    for (int q = 0; q < MLIP_MAX_ORDER; ++q) acc[q] = T(0);
    const T* a = A + (e * KM + r) * ((i64)S * C);
    for (int s = 0; s < S; ++s) {
        const T* b = B + (index[(i64)s * E + e] * K + l * l) * C;
        const T* as = a + (i64)s * C;
        for (int c = lane; c < C; c += n_lanes) {
            const T av = as[c];
#pragma unroll
            for (int q = 0; q < MLIP_MAX_ORDER; ++q)
                if (q < nq) acc[q] += av * b[(i64)q * C + c];
        }
    }
}

// edge_outer output of row (e, r) of degree l, column k, from the reduced sums (0 off the block).
template <typename T>
__host__ __device__ __forceinline__ T edge_outer_value(int k, int l, const T acc[MLIP_MAX_ORDER]) {
    T v = T(0);
#pragma unroll
    for (int q = 0; q < MLIP_MAX_ORDER; ++q)
        if (q == k - l * l) v = acc[q];
    return v;
}

template <typename T>
__global__ void gather_rotate(const T* __restrict__ x, const T* __restrict__ W, const i64* __restrict__ index,
                              T* __restrict__ out, i64 E, int K, int KM, int S, int C, int L, int M) {
    const unsigned tasks = (unsigned)(E * S * (L + 1));
    for (unsigned t = blockIdx.x * blockDim.y + threadIdx.y; t < tasks; t += gridDim.x * blockDim.y)
        gather_rotate_task<T>(t, threadIdx.x, blockDim.x, x, W, index, out, E, K, KM, S, C, L, M);
}

template <typename T>
__global__ void rotate_scatter(const T* __restrict__ W, const T* __restrict__ msg, const i64* __restrict__ perm,
                               const i64* __restrict__ rowptr, T* __restrict__ out, i64 N, i64 E, int K, int KM,
                               int S, int C, int L, int M) {
    const unsigned tasks = (unsigned)(N * (L + 1));
    for (unsigned t = blockIdx.x * blockDim.y + threadIdx.y; t < tasks; t += gridDim.x * blockDim.y)
        rotate_scatter_task<T>(t, threadIdx.x, blockDim.x, W, msg, perm, rowptr, out, E, K, KM, S, C, L, M);
}

// edge_outer, task = e * (L + 1) + l: the rows of degree l of edge e (blockDim.x must be 32).
template <typename T>
__global__ void edge_outer(const T* __restrict__ A, const T* __restrict__ B, const i64* __restrict__ index,
                           T* __restrict__ out, i64 E, int K, int KM, int S, int C, int L, int M) {
    const unsigned tasks = (unsigned)(E * (L + 1));
    T acc[MLIP_MAX_ORDER];
    // uniform trip counts inside a warp (the task depends on threadIdx.y only): shuffles are safe
    for (unsigned t = blockIdx.x * blockDim.y + threadIdx.y; t < tasks; t += gridDim.x * blockDim.y) {
        const int l = (int)(t % (unsigned)(L + 1));
        const i64 e = (i64)(t / (unsigned)(L + 1));
        const int rows = mlip_degree_rows(l, M);
        for (int j = 0; j < rows; ++j) {
            const int r = mlip_degree_row(l, j, L);
            edge_outer_partial<T>(e, r, l, threadIdx.x, 32, A, B, index, acc, E, K, KM, S, C);
#pragma unroll
            for (int q = 0; q < MLIP_MAX_ORDER; ++q) {
                if (q < 2 * l + 1) {
#pragma unroll
                    for (int off = 16; off > 0; off >>= 1) acc[q] += __shfl_xor_sync(0xffffffffu, acc[q], off);
                }
            }
            T* o = out + (e * KM + r) * K;
            for (int k = threadIdx.x; k < K; k += 32) o[k] = edge_outer_value<T>(k, l, acc);
        }
    }
}
