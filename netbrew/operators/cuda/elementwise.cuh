// Device helpers of the elementwise kernels (elementwise*.cu, optim.cu): loads and stores
// that do __half arithmetic in float, scalar arguments rounded as NumPy rounds them, math
// overloads for float and double, and broadcast offsets that skip the index arithmetic
// when an input has the output's shape.
#pragma once
#include "common.cuh"
#include <cuda_fp16.h>

// The type arithmetic is done in: float for __half, the type itself otherwise.
template <typename T> struct nb_compute { typedef T type; };
template <> struct nb_compute<__half> { typedef float type; };

template <typename T>
__device__ __forceinline__ T nb_ld(const T* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float nb_ld(const __half* p, int64_t i) {
  return __half2float(p[i]);
}

__device__ __forceinline__ __half nb_to_half(float v) { return __float2half(v); }
__device__ __forceinline__ __half nb_to_half(double v) { return __double2half(v); }
template <typename V>
__device__ __forceinline__ __half nb_to_half(V v) { return __float2half((float)v); }

// C's conversion: floats to integers truncate, anything nonzero (NaN too) to bool is true.
template <typename T, typename V>
__device__ __forceinline__ void nb_st(T* p, int64_t i, V v) { p[i] = static_cast<T>(v); }
template <typename V>
__device__ __forceinline__ void nb_st(__half* p, int64_t i, V v) { p[i] = nb_to_half(v); }

// A float argument as NumPy sees it next to an array of type T (NEP 50: the Python float
// is cast to T first), in T's compute type.
template <typename T>
__device__ __forceinline__ typename nb_compute<T>::type nb_attr(double v) {
  return (typename nb_compute<T>::type)v;
}
template <>
__device__ __forceinline__ float nb_attr<__half>(double v) {
  return __half2float(__double2half(v));
}

// float32 transcendentals run in double: --use_fast_math (compile.OPTIONS) turns expf, logf,
// sinf, cosf and tanhf into approximate intrinsics (tanh.approx is good to 2^-11 only, and
// __sinf loses accuracy outside [-pi, pi]), while double functions keep their accuracy, so
// results stay within an ulp or two of NumPy's. sqrt, fabs, floor and ceil stay in float.
#define NB_MATH1(NAME, D)                                                             \
  __device__ __forceinline__ float NAME(float x) { return (float)D((double)x); }      \
  __device__ __forceinline__ double NAME(double x) { return D(x); }
#define NB_MATH1F(NAME, F, D)                                                         \
  __device__ __forceinline__ float NAME(float x) { return F(x); }                     \
  __device__ __forceinline__ double NAME(double x) { return D(x); }

NB_MATH1(nb_exp, exp)
NB_MATH1(nb_expm1, expm1)
NB_MATH1(nb_log, log)
NB_MATH1(nb_log1p, log1p)
NB_MATH1(nb_sin, sin)
NB_MATH1(nb_cos, cos)
NB_MATH1(nb_tanh, tanh)
NB_MATH1(nb_erf, erf)
NB_MATH1F(nb_sqrt, sqrtf, sqrt)
NB_MATH1F(nb_floor, floorf, floor)
NB_MATH1F(nb_ceil, ceilf, ceil)
NB_MATH1F(nb_fabs, fabsf, fabs)

// NaN tests that the integer types also take (they are never NaN).
template <typename C> __device__ __forceinline__ bool nb_isnan(C) { return false; }
__device__ __forceinline__ bool nb_isnan(float x) { return isnan(x); }
__device__ __forceinline__ bool nb_isnan(double x) { return isnan(x); }

// np.maximum / np.minimum: a NaN on either side wins.
template <typename C> __device__ __forceinline__ C nb_max(C a, C b) {
  return nb_isnan(a) ? a : nb_isnan(b) ? b : (a >= b ? a : b);
}
template <typename C> __device__ __forceinline__ C nb_min(C a, C b) {
  return nb_isnan(a) ? a : nb_isnan(b) ? b : (a <= b ? a : b);
}

// Element i's offset in input k; rank < 0 means every input has the output's shape.
__device__ __forceinline__ int64_t nb_off(int64_t i, int rank, const int64_t* meta, int k) {
  return rank < 0 ? i : nb_broadcast_offset(i, rank, meta, meta + NB_MAX_RANK * (k + 1));
}

// Instantiation lists: M(SFX, T, ...) once per dtype.
#define NB_FLOAT_TYPES(M, ...) \
  M(f32, float, __VA_ARGS__) M(f16, __half, __VA_ARGS__) M(f64, double, __VA_ARGS__)
#define NB_INT_TYPES(M, ...) M(i32, int32_t, __VA_ARGS__) M(i64, int64_t, __VA_ARGS__)
#define NB_NUMERIC_TYPES(M, ...) NB_FLOAT_TYPES(M, __VA_ARGS__) NB_INT_TYPES(M, __VA_ARGS__)
#define NB_ALL_TYPES(M, ...) NB_NUMERIC_TYPES(M, __VA_ARGS__) M(b8, bool, __VA_ARGS__)
// The same lists again, for a list expanded inside another (a macro never expands itself).
#define NB_FLOAT_TYPES_2(M, ...) \
  M(f32, float, __VA_ARGS__) M(f16, __half, __VA_ARGS__) M(f64, double, __VA_ARGS__)
#define NB_NUMERIC_TYPES_2(M, ...) \
  NB_FLOAT_TYPES_2(M, __VA_ARGS__) M(i32, int32_t, __VA_ARGS__) M(i64, int64_t, __VA_ARGS__)
