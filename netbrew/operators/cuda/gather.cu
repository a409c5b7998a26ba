// Gather (by element size) and GatherGradient (per float dtype); see gather.py.
//
// Data is viewed as [outer, dim, inner] around the gather axis and the output as
// [outer, nq, inner]. Indices arrive checked and made non-negative (int64).
#include "common.cuh"
#include <cuda_fp16.h>

struct alignas(16) nb_g16 {
  uint64_t lo, hi;
};

template <typename T>
__device__ __forceinline__ void nb_gather(const T* __restrict__ x, const int64_t* __restrict__ idx,
                                          T* __restrict__ y, int64_t nq, int64_t dim,
                                          int64_t inner, int64_t n) {
  NB_GRID_STRIDE(i, n) {
    int64_t j = i % inner, t = i / inner;
    int64_t q = t % nq, o = t / nq;
    y[i] = x[(o * dim + idx[q]) * inner + j];
  }
}

#define NB_GATHER(BYTES, T)                                                                \
  extern "C" __global__ void gather_b##BYTES(const T* x, const int64_t* idx, T* y,         \
                                             int64_t nq, int64_t dim, int64_t inner,       \
                                             int64_t n) {                                  \
    nb_gather<T>(x, idx, y, nq, dim, inner, n);                                            \
  }

NB_GATHER(1, uint8_t)
NB_GATHER(2, uint16_t)
NB_GATHER(4, uint32_t)
NB_GATHER(8, uint64_t)
NB_GATHER(16, nb_g16)

// GatherGradient without atomics: dx row r of [outer, dim, inner] sums dy at the q listed
// in order[starts[r] : starts[r + 1]] (ascending q, as np.add.at adds them), rounding to T
// after every addition as NumPy does, so the sum is deterministic.
__device__ __forceinline__ float nb_acc(float acc, float v) { return acc + v; }
__device__ __forceinline__ double nb_acc(double acc, double v) { return acc + v; }
__device__ __forceinline__ __half nb_acc(__half acc, __half v) {
  return __float2half(__half2float(acc) + __half2float(v));
}

template <typename T>
__device__ __forceinline__ void nb_gather_grad(const T* __restrict__ dy,
                                               const int64_t* __restrict__ order,
                                               const int64_t* __restrict__ starts,
                                               T* __restrict__ dx, int64_t nq, int64_t dim,
                                               int64_t inner, int64_t n, T zero) {
  NB_GRID_STRIDE(i, n) {
    int64_t j = i % inner, t = i / inner;
    int64_t r = t % dim, o = t / dim;
    T acc = zero;
    for (int64_t k = starts[r]; k < starts[r + 1]; ++k) {
      acc = nb_acc(acc, dy[(o * nq + order[k]) * inner + j]);
    }
    dx[i] = acc;
  }
}

#define NB_GATHER_GRAD(SUFFIX, T, ZERO)                                                    \
  extern "C" __global__ void gather_grad_##SUFFIX(const T* dy, const int64_t* order,       \
                                                  const int64_t* starts, T* dx, int64_t nq, \
                                                  int64_t dim, int64_t inner, int64_t n) { \
    nb_gather_grad<T>(dy, order, starts, dx, nq, dim, inner, n, ZERO);                     \
  }

NB_GATHER_GRAD(f32, float, 0.0f)
NB_GATHER_GRAD(f16, __half, __float2half(0.0f))
NB_GATHER_GRAD(f64, double, 0.0)
