// Shared by gemm.cu, conv.cu and pool.cu: float loads and stores of every dtype, block
// reductions, and the sliding-window geometry of convolution and pooling.
#pragma once
#include "common.cuh"
#include <cuda_fp16.h>

#define NB_REDUCE_BLOCK 256  // the block size of every block-per-row reduction

__device__ __forceinline__ float nb_load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float nb_load(const __half* p, int64_t i) {
  return __half2float(p[i]);
}
__device__ __forceinline__ void nb_store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void nb_store(__half* p, int64_t i, float v) {
  p[i] = __float2half(v);
}

// The window metadata: 8 rows of NB_MAX_RANK int64 each, one entry per spatial axis.
#define NB_W_IN 0     // the image's spatial dims (the gathered input)
#define NB_W_OUT 1    // window counts per axis
#define NB_W_KER 2    // kernel_shape
#define NB_W_STR 3    // strides
#define NB_W_DIL 4    // dilations
#define NB_W_BEGIN 5  // padding before each axis (may be negative: a crop)
#define NB_W_END 6    // padding after each axis
#define NB_W_STEP 7   // MaxPool's Indices: the flat step of each axis (row or column major)
#define NB_W(meta, row, d) ((meta)[(row) * NB_MAX_RANK + (d)])

// Where tap j (flat over kernel_shape) of window p (flat over the window counts) reads the
// image: returns whether it lies inside, and sets *offset (flat in the image, row major).
__device__ __forceinline__ bool nb_window_tap(const int64_t* meta, int nd, int64_t p, int64_t j,
                                              int64_t* offset) {
  bool inside = true;
  int64_t flat = 0, step = 1;
  for (int d = nd - 1; d >= 0; --d) {
    const int64_t o = p % NB_W(meta, NB_W_OUT, d);
    p /= NB_W(meta, NB_W_OUT, d);
    const int64_t k = j % NB_W(meta, NB_W_KER, d);
    j /= NB_W(meta, NB_W_KER, d);
    const int64_t pos = o * NB_W(meta, NB_W_STR, d) + k * NB_W(meta, NB_W_DIL, d) -
                        NB_W(meta, NB_W_BEGIN, d);
    const int64_t size = NB_W(meta, NB_W_IN, d);
    inside = inside && pos >= 0 && pos < size;
    flat += pos * step;
    step *= size;
  }
  *offset = flat;
  return inside;
}

// The adjoint view: which window p (flat over the window counts) reads image pixel q (flat
// over the image) through tap j; false when none does.
__device__ __forceinline__ bool nb_window_of(const int64_t* meta, int nd, int64_t q, int64_t j,
                                             int64_t* p) {
  int64_t flat = 0, step = 1;
  for (int d = nd - 1; d >= 0; --d) {
    const int64_t i = q % NB_W(meta, NB_W_IN, d);
    q /= NB_W(meta, NB_W_IN, d);
    const int64_t k = j % NB_W(meta, NB_W_KER, d);
    j /= NB_W(meta, NB_W_KER, d);
    const int64_t s = NB_W(meta, NB_W_STR, d);
    const int64_t v = i + NB_W(meta, NB_W_BEGIN, d) - k * NB_W(meta, NB_W_DIL, d);
    if (v < 0 || v % s != 0) return false;
    const int64_t o = v / s;
    if (o >= NB_W(meta, NB_W_OUT, d)) return false;
    flat += o * step;
    step *= NB_W(meta, NB_W_OUT, d);
  }
  *p = flat;
  return true;
}

// Sum of `v` over a block of NB_REDUCE_BLOCK threads; every thread gets the total.
__device__ __forceinline__ float nb_block_sum(float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = NB_REDUCE_BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const float total = shared[0];
  __syncthreads();  // the buffer may be written again right after
  return total;
}
