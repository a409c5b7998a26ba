// Relu and its gradient: the template every family follows (see activations.py).
#include "common.cuh"
#include <cuda_fp16.h>

#define NB_RELU(SUFFIX, T, ZERO)                                                     \
  extern "C" __global__ void relu_##SUFFIX(const T* x, T* y, int64_t n) {            \
    NB_GRID_STRIDE(i, n) { y[i] = x[i] > ZERO ? x[i] : ZERO; }                       \
  }                                                                                  \
  extern "C" __global__ void relu_grad_##SUFFIX(const T* y, const T* dy, T* dx,      \
                                                int64_t n) {                         \
    NB_GRID_STRIDE(i, n) { dx[i] = y[i] > ZERO ? dy[i] : ZERO; }                     \
  }

NB_RELU(f32, float, 0.0f)
NB_RELU(f16, __half, __float2half(0.0f))
