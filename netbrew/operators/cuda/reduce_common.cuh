// Shared by reduce.cu, softmax.cu, losses.cu and normalization.cu: dtype conversions, the
// reduction functors and the warp / block reductions.
//
// Block reductions need blockDim.x to be a multiple of 32 (at most 1024) and must be called
// by every thread of the block (they hold __syncthreads); the result reaches every thread.
// Calls may follow each other: the closing __syncthreads of one call comes after warp 0 has
// read `partial`, and every thread reads `result` before it reaches the next call's second
// __syncthreads, after which `result` is written again.
#pragma once
#include <cuda_fp16.h>

#include "common.cuh"

#define NBR_FULL_MASK 0xffffffffu

// -- dtypes ----------------------------------------------------------------------------------
// Values are read into an accumulation type: float for __half and float, double for double,
// int64_t for the integers.
template <typename T>
struct NbrAcc {
  typedef T type;
};
template <>
struct NbrAcc<__half> {
  typedef float type;
};
template <>
struct NbrAcc<int32_t> {
  typedef int64_t type;
};

__device__ __forceinline__ float nbr_val(__half v) { return __half2float(v); }
__device__ __forceinline__ float nbr_val(float v) { return v; }
__device__ __forceinline__ double nbr_val(double v) { return v; }
__device__ __forceinline__ int64_t nbr_val(int32_t v) { return v; }
__device__ __forceinline__ int64_t nbr_val(int64_t v) { return v; }

// nbr_to<T>(v): v (float, double or int64_t) stored as T, rounding to nearest.
template <typename T>
struct NbrTo {
  template <typename A>
  static __device__ __forceinline__ T to(A v) {
    return static_cast<T>(v);
  }
};
template <>
struct NbrTo<__half> {
  static __device__ __forceinline__ __half to(float v) { return __float2half(v); }
  static __device__ __forceinline__ __half to(double v) { return __double2half(v); }
  static __device__ __forceinline__ __half to(int64_t v) { return __float2half((float)v); }
};
template <typename T, typename A>
__device__ __forceinline__ T nbr_to(A v) {
  return NbrTo<T>::to(v);
}

// v rounded to T's precision and read back (a cast to T and back, as NumPy's astype).
template <typename T, typename A>
__device__ __forceinline__ A nbr_round(A v) {
  return (A)nbr_val(nbr_to<T>(v));
}

__device__ __forceinline__ float nbr_nan(float) { return __int_as_float(0x7fffffff); }
__device__ __forceinline__ double nbr_nan(double) {
  return __longlong_as_double(0x7ff8000000000000LL);
}

// Lowest and highest values of an accumulation type (-inf / +inf for floats).
__device__ __forceinline__ float nbr_lowest(float) { return __int_as_float(0xff800000); }
__device__ __forceinline__ float nbr_highest(float) { return __int_as_float(0x7f800000); }
__device__ __forceinline__ double nbr_lowest(double) {
  return __longlong_as_double(0xfff0000000000000LL);
}
__device__ __forceinline__ double nbr_highest(double) {
  return __longlong_as_double(0x7ff0000000000000LL);
}
__device__ __forceinline__ int64_t nbr_lowest(int64_t) { return INT64_MIN; }
__device__ __forceinline__ int64_t nbr_highest(int64_t) { return INT64_MAX; }

// The lowest / highest value of the *storage* type T, in T's accumulation type (an integer
// max over an empty set is T's minimum, as NumPy's `initial`).
template <typename T>
__device__ __forceinline__ typename NbrAcc<T>::type nbr_type_lowest() {
  return nbr_lowest(typename NbrAcc<T>::type());
}
template <>
__device__ __forceinline__ int64_t nbr_type_lowest<int32_t>() {
  return INT32_MIN;
}
template <typename T>
__device__ __forceinline__ typename NbrAcc<T>::type nbr_type_highest() {
  return nbr_highest(typename NbrAcc<T>::type());
}
template <>
__device__ __forceinline__ int64_t nbr_type_highest<int32_t>() {
  return INT32_MAX;
}

__device__ __forceinline__ float nbr_exp(float v) { return expf(v); }
__device__ __forceinline__ double nbr_exp(double v) { return exp(v); }
__device__ __forceinline__ float nbr_log(float v) { return logf(v); }
__device__ __forceinline__ double nbr_log(double v) { return log(v); }
__device__ __forceinline__ float nbr_sqrt(float v) { return sqrtf(v); }
__device__ __forceinline__ double nbr_sqrt(double v) { return sqrt(v); }

// -- reduction functors ----------------------------------------------------------------------
struct NbrSum {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    return a + b;
  }
};
// Max / min that propagate NaN, as NumPy's max and min.
struct NbrMax {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    return (b > a || b != b) ? b : a;
  }
};
struct NbrMin {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    return (b < a || b != b) ? b : a;
  }
};

// -- warp and block reductions ---------------------------------------------------------------
template <typename A, typename Op>
__device__ __forceinline__ A nbr_warp_reduce(A v, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = op(v, __shfl_down_sync(NBR_FULL_MASK, v, offset));
  }
  return v;  // complete in lane 0
}

template <typename A, typename Op>
__device__ A nbr_block_reduce(A v, Op op, A identity) {
  __shared__ A partial[32];
  __shared__ A result;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = nbr_warp_reduce(v, op);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x >> 5;
    v = lane < warps ? partial[lane] : identity;
    v = nbr_warp_reduce(v, op);
    if (lane == 0) result = v;
  }
  __syncthreads();
  return result;
}

template <typename A>
__device__ __forceinline__ A nbr_block_sum(A v) {
  return nbr_block_reduce(v, NbrSum(), A(0));
}

// -- (value, index) reductions for ArgMax / ArgMin -------------------------------------------
// index < 0 marks an empty slot. NaN beats every number (NumPy's argmax and argmin both
// return the first NaN); ties go to the lower index, or the higher one when `last`.
template <typename A>
struct NbrArg {
  A v;
  int64_t i;
};

template <bool MAX, typename A>
__device__ __forceinline__ NbrArg<A> nbr_arg_pick(NbrArg<A> a, NbrArg<A> b, int last) {
  if (a.i < 0) return b;
  if (b.i < 0) return a;
  const bool a_nan = a.v != a.v, b_nan = b.v != b.v;
  bool b_wins;
  if (a_nan || b_nan) {
    b_wins = (a_nan && b_nan) ? (last ? b.i > a.i : b.i < a.i) : b_nan;
  } else if (MAX ? b.v > a.v : b.v < a.v) {
    b_wins = true;
  } else if (MAX ? a.v > b.v : a.v < b.v) {
    b_wins = false;
  } else {
    b_wins = last ? b.i > a.i : b.i < a.i;
  }
  return b_wins ? b : a;
}

template <bool MAX, typename A>
__device__ NbrArg<A> nbr_block_arg_reduce(NbrArg<A> v, int last) {
  __shared__ NbrArg<A> partial[32];
  __shared__ NbrArg<A> result;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    NbrArg<A> other;
    other.v = __shfl_down_sync(NBR_FULL_MASK, v.v, offset);
    other.i = __shfl_down_sync(NBR_FULL_MASK, v.i, offset);
    v = nbr_arg_pick<MAX>(v, other, last);
  }
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x >> 5;
    if (lane < warps) {
      v = partial[lane];
    } else {
      v.i = -1;
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      NbrArg<A> other;
      other.v = __shfl_down_sync(NBR_FULL_MASK, v.v, offset);
      other.i = __shfl_down_sync(NBR_FULL_MASK, v.i, offset);
      v = nbr_arg_pick<MAX>(v, other, last);
    }
    if (lane == 0) result = v;
  }
  __syncthreads();
  return result;
}

// The block-wide max m of a row of n elements `stride` apart, and the sum s of
// exp(x - m) over it: the start of every log-sum-exp (softmax, its losses). Every thread of
// the block calls it and gets both.
template <typename T>
__device__ void nbr_block_max_sumexp(const T* row, int64_t n, int64_t stride,
                                     typename NbrAcc<T>::type* max_out,
                                     typename NbrAcc<T>::type* sum_out) {
  typedef typename NbrAcc<T>::type A;
  A m = nbr_lowest(A());
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
    m = NbrMax()(m, nbr_val(row[k * stride]));
  }
  m = nbr_block_reduce(m, NbrMax(), nbr_lowest(A()));
  A s = 0;
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) s += nbr_exp(nbr_val(row[k * stride]) - m);
  *max_out = m;
  *sum_out = nbr_block_sum(s);
}

// -- strided views ---------------------------------------------------------------------------
// A reduction's metadata (int64, 4 * NB_MAX_RANK): kept shape, kept strides, reduced shape,
// reduced strides, strides in elements of the input. Output o (row-major over the kept dims)
// reduces the elements at kept_offset(o) + reduced_offset(r) for r < count.
__device__ __forceinline__ int64_t nbr_reduced_offset(int64_t r, int rr, const int64_t* meta) {
  return rr == 1 ? r * meta[3 * NB_MAX_RANK]
                 : nb_broadcast_offset(r, rr, meta + 2 * NB_MAX_RANK, meta + 3 * NB_MAX_RANK);
}
__device__ __forceinline__ int64_t nbr_kept_offset(int64_t o, int kr, const int64_t* meta) {
  return nb_broadcast_offset(o, kr, meta, meta + NB_MAX_RANK);
}
