// GEMM helpers (see gemm.py): the tiled GEMM that stands in for cuBLAS where the library is
// missing, and the broadcast, reduction and cast kernels that MatMul, Gemm, FC, their
// gradients, Conv and the pools share. Row major throughout; float accumulation.
#include "window.cuh"

#define NB_TILE 16

// C[z] = alpha * op(A[z]) op(B[z]) + beta * C[z] for z < batch, op = transpose if ta / tb.
// A is (M, K) (stored (K, M) if ta), B is (K, N) (stored (N, K) if tb), C is (M, N); lda, ldb,
// ldc are the stored row lengths, sa, sb, sc the strides between batches (0: shared).
// C is not read when beta == 0. Block (NB_TILE, NB_TILE); grid (tiles of N, tiles of M, z).
template <typename T>
__device__ void nb_gemm_tiled(const T* A, const T* B, T* C, int64_t M, int64_t N, int64_t K,
                              int64_t lda, int64_t ldb, int64_t ldc, int64_t sa, int64_t sb,
                              int64_t sc, int64_t batch, int ta, int tb, float alpha,
                              float beta) {
  __shared__ float As[NB_TILE][NB_TILE + 1];
  __shared__ float Bs[NB_TILE][NB_TILE + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col = blockIdx.x * (int64_t)NB_TILE + tx;
  for (int64_t z = blockIdx.z; z < batch; z += gridDim.z) {  // uniform across the block
    const T* a = A + z * sa;
    const T* b = B + z * sb;
    T* c = C + z * sc;
    for (int64_t r0 = blockIdx.y * (int64_t)NB_TILE; r0 < M; r0 += (int64_t)gridDim.y * NB_TILE) {
      const int64_t row = r0 + ty;
      float acc = 0.0f;
      for (int64_t k0 = 0; k0 < K; k0 += NB_TILE) {
        const int64_t ka = k0 + tx, kb = k0 + ty;
        const int64_t ar = r0 + ty;  // the A row this thread loads
        As[ty][tx] = (ar < M && ka < K) ? nb_load(a, ta ? ka * lda + ar : ar * lda + ka) : 0.0f;
        Bs[ty][tx] =
            (kb < K && col < N) ? nb_load(b, tb ? col * ldb + kb : kb * ldb + col) : 0.0f;
        __syncthreads();
#pragma unroll
        for (int t = 0; t < NB_TILE; ++t) acc += As[ty][t] * Bs[t][tx];
        __syncthreads();
      }
      if (row < M && col < N) {
        float v = alpha * acc;
        if (beta != 0.0f) v += beta * nb_load(c, row * ldc + col);
        nb_store(c, row * ldc + col, v);
      }
    }
  }
}

// y (n elements, row major over the output shape) = x broadcast; meta as launch.broadcast_meta.
template <typename T>
__device__ void nb_broadcast_copy(const T* x, T* y, const int64_t* meta, int rank, int64_t n) {
  NB_GRID_STRIDE(i, n) {
    y[i] = x[nb_broadcast_offset(i, rank, meta, meta + NB_MAX_RANK)];
  }
}

// y[o] = scale * sum_r x[offset(o) + offset(r)]: meta holds three rows of NB_MAX_RANK, the
// kept shape (1 on reduced axes), the reduced shape (1 on kept axes) and x's strides.
// One block of NB_REDUCE_BLOCK threads per output element.
template <typename T>
__device__ void nb_sum_reduce(const T* x, T* y, const int64_t* meta, int rank, int64_t n_out,
                              int64_t n_red, float scale) {
  __shared__ float part[NB_REDUCE_BLOCK];
  const int64_t* keep = meta;
  const int64_t* red = meta + NB_MAX_RANK;
  const int64_t* strides = meta + 2 * NB_MAX_RANK;
  for (int64_t o = blockIdx.x; o < n_out; o += gridDim.x) {
    const int64_t base = nb_broadcast_offset(o, rank, keep, strides);
    float acc = 0.0f;
    for (int64_t r = threadIdx.x; r < n_red; r += blockDim.x) {
      acc += nb_load(x, base + nb_broadcast_offset(r, rank, red, strides));
    }
    const float total = nb_block_sum(acc, part);
    if (threadIdx.x == 0) nb_store(y, o, scale * total);
  }
}

// The same with one thread per output element, for short reductions.
template <typename T>
__device__ void nb_sum_reduce_small(const T* x, T* y, const int64_t* meta, int rank,
                                    int64_t n_out, int64_t n_red, float scale) {
  const int64_t* keep = meta;
  const int64_t* red = meta + NB_MAX_RANK;
  const int64_t* strides = meta + 2 * NB_MAX_RANK;
  NB_GRID_STRIDE(o, n_out) {
    const int64_t base = nb_broadcast_offset(o, rank, keep, strides);
    float acc = 0.0f;
    for (int64_t r = 0; r < n_red; ++r) {
      acc += nb_load(x, base + nb_broadcast_offset(r, rank, red, strides));
    }
    nb_store(y, o, scale * acc);
  }
}

#define NB_GEMM_FAMILY(SUFFIX, T)                                                               \
  extern "C" __global__ void gemm_tiled_##SUFFIX(                                               \
      const T* A, const T* B, T* C, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,  \
      int64_t ldc, int64_t sa, int64_t sb, int64_t sc, int64_t batch, int ta, int tb,           \
      float alpha, float beta) {                                                                \
    nb_gemm_tiled<T>(A, B, C, M, N, K, lda, ldb, ldc, sa, sb, sc, batch, ta, tb, alpha, beta); \
  }                                                                                             \
  extern "C" __global__ void broadcast_copy_##SUFFIX(const T* x, T* y, const int64_t* meta,     \
                                                     int rank, int64_t n) {                     \
    nb_broadcast_copy<T>(x, y, meta, rank, n);                                                  \
  }                                                                                             \
  extern "C" __global__ void sum_reduce_##SUFFIX(const T* x, T* y, const int64_t* meta,         \
                                                 int rank, int64_t n_out, int64_t n_red,        \
                                                 float scale) {                                 \
    nb_sum_reduce<T>(x, y, meta, rank, n_out, n_red, scale);                                    \
  }                                                                                             \
  extern "C" __global__ void sum_reduce_small_##SUFFIX(const T* x, T* y, const int64_t* meta,   \
                                                       int rank, int64_t n_out, int64_t n_red,  \
                                                       float scale) {                           \
    nb_sum_reduce_small<T>(x, y, meta, rank, n_out, n_red, scale);                              \
  }                                                                                             \
  extern "C" __global__ void relu_inplace_##SUFFIX(T* y, int64_t n) {                           \
    NB_GRID_STRIDE(i, n) {                                                                      \
      if (nb_load(y, i) < 0.0f) nb_store(y, i, 0.0f); /* NaN stays */                                   \
    }                                                                                           \
  }

NB_GEMM_FAMILY(f32, float)
NB_GEMM_FAMILY(f16, __half)

extern "C" __global__ void cast_f16_f32(const __half* x, float* y, int64_t n) {
  NB_GRID_STRIDE(i, n) { y[i] = __half2float(x[i]); }
}

extern "C" __global__ void cast_f32_f16(const float* x, __half* y, int64_t n) {
  NB_GRID_STRIDE(i, n) { y[i] = __float2half(x[i]); }
}
