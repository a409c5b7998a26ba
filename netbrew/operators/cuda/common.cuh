// Shared by the op families' kernels: grid-stride loops and broadcast indexing.
#pragma once
#include <cstdint>

#define NB_MAX_RANK 8

// Element i of an output, laid out row-major over `shape`, read from an input whose
// strides (in elements, 0 on broadcast axes) are `strides`.
__device__ __forceinline__ int64_t nb_broadcast_offset(
    int64_t i, int rank, const int64_t* shape, const int64_t* strides) {
  int64_t offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    int64_t coord = i % shape[d];
    i /= shape[d];
    offset += coord * strides[d];
  }
  return offset;
}

#define NB_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); \
       i += (int64_t)blockDim.x * gridDim.x)
