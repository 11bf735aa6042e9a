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
// Every thread computes one output element; the per-element work is a __host__ __device__
// function so that the same code is compiled for the CPU in the tests (tests/test_kernels.py
// builds it with nvcc into a shared library and compares it with the PyTorch reference).
// Templates are instantiated for float and double by NVRTC through CuPy's name_expressions.

typedef long long i64;

// Degree of row r of the m-primary layout (lmax L, mmax M).
__host__ __device__ inline int mlip_row_degree(int r, int L, int M) {
    if (r <= L) return r;
    r -= L + 1;
    for (int m = 1; m <= M; ++m) {
        const int n = L + 1 - m;
        if (r < 2 * n) return m + (r % n);
        r -= 2 * n;
    }
    return -1;
}

// Degree of column k of the e3nn layout: l^2 <= k < (l + 1)^2.
__host__ __device__ inline int mlip_col_degree(int k) {
    int l = 0;
    while ((l + 1) * (l + 1) <= k) ++l;
    return l;
}

// First row of the +m block in the m-primary layout (the -m block follows after L + 1 - m rows).
__host__ __device__ inline int mlip_block_start(int m, int L) {
    if (m == 0) return 0;
    int start = L + 1;
    for (int q = 1; q < m; ++q) start += 2 * (L + 1 - q);
    return start;
}

template <typename T>
__host__ __device__ inline void gather_rotate_point(
    i64 t, const T* __restrict__ x, const T* __restrict__ W, const i64* __restrict__ index,
    T* __restrict__ out, i64 E, int K, int KM, int S, int C, int L, int M) {
    const int c = (int)(t % C);
    i64 rest = t / C;
    const int s = (int)(rest % S);
    rest /= S;
    const int r = (int)(rest % KM);
    const i64 e = rest / KM;
    const int l = mlip_row_degree(r, L, M);
    const T* w = W + (e * KM + r) * K + l * l;
    const T* xp = x + (index[(i64)s * E + e] * K + l * l) * C + c;
    T acc = T(0);
    for (int q = 0; q < 2 * l + 1; ++q) acc += w[q] * xp[(i64)q * C];
    out[(e * KM + r) * ((i64)S * C) + (i64)s * C + c] = acc;
}

template <typename T>
__host__ __device__ inline void rotate_scatter_point(
    i64 t, const T* __restrict__ W, const T* __restrict__ msg, const i64* __restrict__ perm,
    const i64* __restrict__ rowptr, T* __restrict__ out, i64 E, int K, int KM, int S, int C, int L, int M) {
    const int c = (int)(t % C);
    i64 rest = t / C;
    const int k = (int)(rest % K);
    const i64 n = rest / K;
    const int l = mlip_col_degree(k);
    const int mtop = l < M ? l : M;
    T acc = T(0);
    for (i64 p = rowptr[n]; p < rowptr[n + 1]; ++p) {
        const i64 slot = perm[p];
        const i64 s = slot / E;
        const i64 e = slot - s * E;
        const T* w = W + e * KM * K + k;
        const T* mp = msg + e * KM * ((i64)S * C) + s * C + c;
        // the rows of degree l: one in the m = 0 block, one in each +m and -m block (m <= l)
        acc += w[(i64)l * K] * mp[(i64)l * S * C];
        for (int m = 1; m <= mtop; ++m) {
            const int rp = mlip_block_start(m, L) + (l - m);
            const int rm = rp + (L + 1 - m);
            acc += w[(i64)rp * K] * mp[(i64)rp * S * C];
            acc += w[(i64)rm * K] * mp[(i64)rm * S * C];
        }
    }
    out[(n * K + k) * C + c] = acc;
}

template <typename T>
__host__ __device__ inline void edge_outer_point(
    i64 t, const T* __restrict__ A, const T* __restrict__ B, const i64* __restrict__ index,
    T* __restrict__ out, i64 E, int K, int KM, int S, int C, int L, int M) {
    const int k = (int)(t % K);
    i64 rest = t / K;
    const int r = (int)(rest % KM);
    const i64 e = rest / KM;
    const int l = mlip_row_degree(r, L, M);
    T acc = T(0);
    if (k >= l * l && k < (l + 1) * (l + 1)) {
        const T* a = A + (e * KM + r) * ((i64)S * C);
        for (int s = 0; s < S; ++s) {
            const T* b = B + (index[(i64)s * E + e] * K + k) * C;
            const T* as = a + (i64)s * C;
            for (int c = 0; c < C; ++c) acc += as[c] * b[c];
        }
    }
    out[t] = acc;
}

template <typename T>
__global__ void gather_rotate(const T* __restrict__ x, const T* __restrict__ W, const i64* __restrict__ index,
                              T* __restrict__ out, i64 E, int K, int KM, int S, int C, int L, int M) {
    const i64 total = E * KM * S * C;
    for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (i64)gridDim.x * blockDim.x)
        gather_rotate_point<T>(t, x, W, index, out, E, K, KM, S, C, L, M);
}

template <typename T>
__global__ void rotate_scatter(const T* __restrict__ W, const T* __restrict__ msg, const i64* __restrict__ perm,
                               const i64* __restrict__ rowptr, T* __restrict__ out, i64 N, i64 E, int K, int KM,
                               int S, int C, int L, int M) {
    const i64 total = N * K * C;
    for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (i64)gridDim.x * blockDim.x)
        rotate_scatter_point<T>(t, W, msg, perm, rowptr, out, E, K, KM, S, C, L, M);
}

template <typename T>
__global__ void edge_outer(const T* __restrict__ A, const T* __restrict__ B, const i64* __restrict__ index,
                           T* __restrict__ out, i64 E, int K, int KM, int S, int C, int L, int M) {
    const i64 total = E * KM * K;
    for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (i64)gridDim.x * blockDim.x)
        edge_outer_point<T>(t, A, B, index, out, E, K, KM, S, C, L, M);
}
