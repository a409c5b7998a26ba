// Data movement (see shape_ops.py): one strided copy per element size moves the data of
// Transpose, Slice, Expand, Tile, Concat, Split, Copy and the gradients of Slice and Split;
// TileGradient sums the repeats back per float dtype.
//
// Each layout struct is passed by value as the kernel's first parameter (shape_ops.py packs
// it as int64 words), so that every later parameter stays 8-byte aligned.
#include "common.cuh"
#include <cuda_fp16.h>

#define NB_COPY_RANK 16

// Element i of `shape` (row-major) is read at src[src_offset + sum(c_k * src[k])] and
// written to dst[dst_offset + sum(c_k * dst[k])]; strides in elements (0 broadcasts,
// negative walks backwards). Only the first `rank` entries are read.
struct NbCopyLayout {
  int64_t shape[NB_COPY_RANK];
  int64_t src[NB_COPY_RANK];
  int64_t dst[NB_COPY_RANK];
};

struct alignas(16) nb_b16 {
  uint64_t lo, hi;
};

// I is the index type: int32_t when every index and offset fits (shape_ops.py checks).
template <typename T, typename I>
__device__ __forceinline__ void nb_copy(const NbCopyLayout& lay, const T* __restrict__ src,
                                        T* __restrict__ dst, int64_t src_offset,
                                        int64_t dst_offset, int64_t n, int64_t rank) {
  NB_GRID_STRIDE(i, n) {
    I rest = (I)i, s = (I)src_offset, d = (I)dst_offset;
#pragma unroll
    for (int k = NB_COPY_RANK - 1; k >= 0; --k) {
      if (k < rank) {  // unrolled: the layout is indexed statically, read from param space
        I dim = (I)lay.shape[k];
        I c = rest % dim;
        rest /= dim;
        s += c * (I)lay.src[k];
        d += c * (I)lay.dst[k];
      }
    }
    dst[d] = src[s];
  }
}

#define NB_COPY(BYTES, T)                                                                  \
  extern "C" __global__ void copy_b##BYTES(NbCopyLayout lay, const T* src, T* dst,         \
                                           int64_t src_offset, int64_t dst_offset,         \
                                           int64_t n, int64_t rank) {                      \
    nb_copy<T, int64_t>(lay, src, dst, src_offset, dst_offset, n, rank);                   \
  }                                                                                        \
  extern "C" __global__ void copy32_b##BYTES(NbCopyLayout lay, const T* src, T* dst,       \
                                             int64_t src_offset, int64_t dst_offset,       \
                                             int64_t n, int64_t rank) {                    \
    nb_copy<T, int32_t>(lay, src, dst, src_offset, dst_offset, n, rank);                   \
  }

NB_COPY(1, uint8_t)
NB_COPY(2, uint16_t)
NB_COPY(4, uint32_t)
NB_COPY(8, uint64_t)
NB_COPY(16, nb_b16)

// TileGradient: dx (row-major over dims[:rank]) sums dy over every combination of repeats;
// dy is read at sum(c_k * dstride[k]) + sum(r_k * rstride[k]).
struct NbTileLayout {
  int64_t dims[NB_COPY_RANK];
  int64_t reps[NB_COPY_RANK];
  int64_t dstride[NB_COPY_RANK];
  int64_t rstride[NB_COPY_RANK];
};

__device__ __forceinline__ float nb_load(const __half v) { return __half2float(v); }
__device__ __forceinline__ float nb_load(const float v) { return v; }
__device__ __forceinline__ double nb_load(const double v) { return v; }
template <typename T, typename A>
__device__ __forceinline__ T nb_store(A v) { return (T)v; }
template <>
__device__ __forceinline__ __half nb_store<__half, float>(float v) { return __float2half(v); }

template <typename T, typename A>
__device__ __forceinline__ void nb_tile_grad(const NbTileLayout& lay, const T* __restrict__ dy,
                                             T* __restrict__ dx, int64_t n, int64_t rank,
                                             int64_t repeats) {
  NB_GRID_STRIDE(i, n) {
    int64_t rest = i, base = 0;
#pragma unroll
    for (int k = NB_COPY_RANK - 1; k >= 0; --k) {
      if (k < rank) {
        base += (rest % lay.dims[k]) * lay.dstride[k];
        rest /= lay.dims[k];
      }
    }
    A acc = 0;
    for (int64_t m = 0; m < repeats; ++m) {
      int64_t r = m, off = base;
#pragma unroll
      for (int k = NB_COPY_RANK - 1; k >= 0; --k) {
        if (k < rank) {
          off += (r % lay.reps[k]) * lay.rstride[k];
          r /= lay.reps[k];
        }
      }
      acc += nb_load(dy[off]);
    }
    dx[i] = nb_store<T, A>(acc);
  }
}

#define NB_TILE_GRAD(SUFFIX, T, A)                                                         \
  extern "C" __global__ void tile_grad_##SUFFIX(NbTileLayout lay, const T* dy, T* dx,      \
                                                int64_t n, int64_t rank, int64_t repeats) { \
    nb_tile_grad<T, A>(lay, dy, dx, n, rank, repeats);                                     \
  }

NB_TILE_GRAD(f32, float, float)
NB_TILE_GRAD(f16, __half, float)
NB_TILE_GRAD(f64, double, double)
