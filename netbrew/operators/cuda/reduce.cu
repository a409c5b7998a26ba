// ReduceSum / ReduceMean / ReduceMax / ReduceMin, ArgMax / ArgMin, the reduce gradients, and
// the fill and cast helpers the other reduction families use (see reduce.py).
//
// A reduction is described by reduce_common.cuh's metadata: output o reduces `count`
// elements. "block" kernels give each output one thread block (grid-stride over outputs);
// "thread" kernels give each output one thread, which suits many short reductions or kept
// inner dims (neighbouring threads then read neighbouring elements).
#include "reduce_common.cuh"

template <typename T, typename A>
__device__ __forceinline__ T nbr_finish_mean(A total, int64_t count) {
  return nbr_to<T>(count ? total / (A)count : nbr_nan(A()));
}
// Integer means: the sum wraps in T (as NumPy's sum with dtype=T), then a float64 division
// truncated back to T.
template <>
__device__ __forceinline__ int32_t nbr_finish_mean<int32_t, int64_t>(int64_t total,
                                                                     int64_t count) {
  return (int32_t)((double)(int32_t)total / (double)count);
}
template <>
__device__ __forceinline__ int64_t nbr_finish_mean<int64_t, int64_t>(int64_t total,
                                                                     int64_t count) {
  return (int64_t)((double)total / (double)count);
}

template <typename T, int MEAN, typename A>
__device__ __forceinline__ T nbr_finish(A total, int64_t count) {
  if (MEAN) return nbr_finish_mean<T, A>(total, count);
  return nbr_to<T>(total);
}

template <typename T, int MEAN, typename Op>
__device__ void nbr_reduce_block(const T* x, T* y, const int64_t* meta, int kr, int rr,
                                int64_t outputs, int64_t count,
                                typename NbrAcc<T>::type identity, Op op) {
  typedef typename NbrAcc<T>::type A;
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    const int64_t base = nbr_kept_offset(o, kr, meta);
    A acc = identity;
    for (int64_t r = threadIdx.x; r < count; r += blockDim.x) {
      acc = op(acc, (A)nbr_val(x[base + nbr_reduced_offset(r, rr, meta)]));
    }
    acc = nbr_block_reduce(acc, op, identity);
    if (threadIdx.x == 0) y[o] = nbr_finish<T, MEAN>(acc, count);
  }
}

template <typename T, int MEAN, typename Op>
__device__ void nbr_reduce_thread(const T* x, T* y, const int64_t* meta, int kr, int rr,
                                 int64_t outputs, int64_t count,
                                 typename NbrAcc<T>::type identity, Op op) {
  typedef typename NbrAcc<T>::type A;
  NB_GRID_STRIDE(o, outputs) {
    const int64_t base = nbr_kept_offset(o, kr, meta);
    A acc = identity;
    for (int64_t r = 0; r < count; ++r) {
      acc = op(acc, (A)nbr_val(x[base + nbr_reduced_offset(r, rr, meta)]));
    }
    y[o] = nbr_finish<T, MEAN>(acc, count);
  }
}

#define NB_REDUCE_OP(NAME, SUFFIX, T, MEAN, OP, IDENTITY)                                   \
  extern "C" __global__ void reduce_##NAME##_block_##SUFFIX(                                \
      const T* x, T* y, const int64_t* meta, int kr, int rr, int64_t outputs,               \
      int64_t count) {                                                                      \
    nbr_reduce_block<T, MEAN>(x, y, meta, kr, rr, outputs, count, IDENTITY, OP());           \
  }                                                                                         \
  extern "C" __global__ void reduce_##NAME##_thread_##SUFFIX(                               \
      const T* x, T* y, const int64_t* meta, int kr, int rr, int64_t outputs,               \
      int64_t count) {                                                                      \
    nbr_reduce_thread<T, MEAN>(x, y, meta, kr, rr, outputs, count, IDENTITY, OP());          \
  }

#define NB_REDUCE_ALL(SUFFIX, T)                                                            \
  NB_REDUCE_OP(sum, SUFFIX, T, 0, NbrSum, (typename NbrAcc<T>::type)0)                        \
  NB_REDUCE_OP(mean, SUFFIX, T, 1, NbrSum, (typename NbrAcc<T>::type)0)                       \
  NB_REDUCE_OP(max, SUFFIX, T, 0, NbrMax, nbr_type_lowest<T>())                               \
  NB_REDUCE_OP(min, SUFFIX, T, 0, NbrMin, nbr_type_highest<T>())

NB_REDUCE_ALL(f32, float)
NB_REDUCE_ALL(f16, __half)
NB_REDUCE_ALL(f64, double)
NB_REDUCE_ALL(i32, int32_t)
NB_REDUCE_ALL(i64, int64_t)

// -- ArgMax / ArgMin over one axis: x viewed as (outer, n, inner), output o = (outer, inner).
template <bool MAX, typename T>
__device__ void nbr_arg_block(const T* x, int64_t* y, int64_t outputs, int64_t n,
                             int64_t inner, int last) {
  typedef typename NbrAcc<T>::type A;
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    const int64_t base = (o / inner) * n * inner + o % inner;
    NbrArg<A> best;
    best.v = A(0);
    best.i = -1;
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
      NbrArg<A> cand;
      cand.v = (A)nbr_val(x[base + k * inner]);
      cand.i = k;
      best = nbr_arg_pick<MAX>(best, cand, last);
    }
    best = nbr_block_arg_reduce<MAX>(best, last);
    if (threadIdx.x == 0) y[o] = best.i;
  }
}

template <bool MAX, typename T>
__device__ void nbr_arg_thread(const T* x, int64_t* y, int64_t outputs, int64_t n,
                              int64_t inner, int last) {
  typedef typename NbrAcc<T>::type A;
  NB_GRID_STRIDE(o, outputs) {
    const int64_t base = (o / inner) * n * inner + o % inner;
    NbrArg<A> best;
    best.v = A(0);
    best.i = -1;
    for (int64_t k = 0; k < n; ++k) {
      NbrArg<A> cand;
      cand.v = (A)nbr_val(x[base + k * inner]);
      cand.i = k;
      best = nbr_arg_pick<MAX>(best, cand, last);
    }
    y[o] = best.i;
  }
}

#define NB_ARG(SUFFIX, T)                                                                   \
  extern "C" __global__ void argmax_block_##SUFFIX(const T* x, int64_t* y, int64_t outputs, \
                                                   int64_t n, int64_t inner, int last) {    \
    nbr_arg_block<true>(x, y, outputs, n, inner, last);                                      \
  }                                                                                         \
  extern "C" __global__ void argmax_thread_##SUFFIX(const T* x, int64_t* y,                 \
                                                    int64_t outputs, int64_t n,             \
                                                    int64_t inner, int last) {              \
    nbr_arg_thread<true>(x, y, outputs, n, inner, last);                                     \
  }                                                                                         \
  extern "C" __global__ void argmin_block_##SUFFIX(const T* x, int64_t* y, int64_t outputs, \
                                                   int64_t n, int64_t inner, int last) {    \
    nbr_arg_block<false>(x, y, outputs, n, inner, last);                                     \
  }                                                                                         \
  extern "C" __global__ void argmin_thread_##SUFFIX(const T* x, int64_t* y,                 \
                                                    int64_t outputs, int64_t n,             \
                                                    int64_t inner, int last) {              \
    nbr_arg_thread<false>(x, y, outputs, n, inner, last);                                    \
  }

NB_ARG(f32, float)
NB_ARG(f16, __half)
NB_ARG(f64, double)
NB_ARG(i32, int32_t)
NB_ARG(i64, int64_t)

// -- gradients ---------------------------------------------------------------------------------
// ReduceSumGradient / ReduceMeanGradient: dx[i] = dy[offset(i)] / divisor, dy broadcast to
// dx's shape by launch.broadcast_meta (shape row, then dy's strides).
#define NB_REDUCE_BCAST(SUFFIX, T)                                                          \
  extern "C" __global__ void reduce_bcast_##SUFFIX(const T* dy, T* dx, const int64_t* meta, \
                                                   int rank, int64_t n, double divisor) {   \
    typedef NbrAcc<T>::type A;                                                               \
    const A d = (A)divisor;                                                                 \
    NB_GRID_STRIDE(i, n) {                                                                  \
      const int64_t j = nb_broadcast_offset(i, rank, meta, meta + NB_MAX_RANK);             \
      dx[i] = nbr_to<T>(nbr_val(dy[j]) / d);                                                  \
    }                                                                                       \
  }

NB_REDUCE_BCAST(f32, float)
NB_REDUCE_BCAST(f16, __half)
NB_REDUCE_BCAST(f64, double)

// ReduceMaxGradient, step 1: how many elements of each reduced set equal its reduced value.
template <typename T>
__device__ void nbr_ties_block(const T* x, const T* reduced, int64_t* ties, const int64_t* meta,
                              int kr, int rr, int64_t outputs, int64_t count) {
  typedef typename NbrAcc<T>::type A;
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    const int64_t base = nbr_kept_offset(o, kr, meta);
    const A target = nbr_val(reduced[o]);
    int64_t hits = 0;
    for (int64_t r = threadIdx.x; r < count; r += blockDim.x) {
      hits += (A)nbr_val(x[base + nbr_reduced_offset(r, rr, meta)]) == target;
    }
    hits = nbr_block_sum(hits);
    if (threadIdx.x == 0) ties[o] = hits;
  }
}

template <typename T>
__device__ void nbr_ties_thread(const T* x, const T* reduced, int64_t* ties,
                               const int64_t* meta, int kr, int rr, int64_t outputs,
                               int64_t count) {
  typedef typename NbrAcc<T>::type A;
  NB_GRID_STRIDE(o, outputs) {
    const int64_t base = nbr_kept_offset(o, kr, meta);
    const A target = nbr_val(reduced[o]);
    int64_t hits = 0;
    for (int64_t r = 0; r < count; ++r) {
      hits += (A)nbr_val(x[base + nbr_reduced_offset(r, rr, meta)]) == target;
    }
    ties[o] = hits;
  }
}

#define NB_TIES(SUFFIX, T)                                                                  \
  extern "C" __global__ void reduce_ties_block_##SUFFIX(                                    \
      const T* x, const T* reduced, int64_t* ties, const int64_t* meta, int kr, int rr,     \
      int64_t outputs, int64_t count) {                                                     \
    nbr_ties_block(x, reduced, ties, meta, kr, rr, outputs, count);                          \
  }                                                                                         \
  extern "C" __global__ void reduce_ties_thread_##SUFFIX(                                   \
      const T* x, const T* reduced, int64_t* ties, const int64_t* meta, int kr, int rr,     \
      int64_t outputs, int64_t count) {                                                     \
    nbr_ties_thread(x, reduced, ties, meta, kr, rr, outputs, count);                         \
  }

NB_TIES(f32, float)
NB_TIES(f16, __half)
NB_TIES(f64, double)
NB_TIES(i32, int32_t)
NB_TIES(i64, int64_t)

// Step 2: dx[i] = x[i] == reduced ? dy / max(ties, 1) : 0, the division in float64 as the
// NumPy kernel's (an int64 array divides dy there). dy, reduced and ties share the kept
// shape, broadcast to x's by launch.broadcast_meta.
#define NB_MAX_GRAD(SG, TG, SX, TX)                                                         \
  extern "C" __global__ void reduce_max_grad_##SG##_##SX(                                   \
      const TG* dy, const TX* x, const TX* reduced, const int64_t* ties, TG* dx,            \
      const int64_t* meta, int rank, int64_t n) {                                           \
    NB_GRID_STRIDE(i, n) {                                                                  \
      const int64_t j = nb_broadcast_offset(i, rank, meta, meta + NB_MAX_RANK);             \
      const bool hit = nbr_val(x[i]) == nbr_val(reduced[j]);                                  \
      const int64_t t = ties[j] > 1 ? ties[j] : 1;                                          \
      dx[i] = nbr_to<TG>(hit ? (double)nbr_val(dy[j]) / (double)t : 0.0);                     \
    }                                                                                       \
  }

#define NB_MAX_GRAD_X(SG, TG)                                                               \
  NB_MAX_GRAD(SG, TG, f32, float)                                                           \
  NB_MAX_GRAD(SG, TG, f16, __half)                                                          \
  NB_MAX_GRAD(SG, TG, f64, double)                                                          \
  NB_MAX_GRAD(SG, TG, i32, int32_t)                                                         \
  NB_MAX_GRAD(SG, TG, i64, int64_t)

NB_MAX_GRAD_X(f32, float)
NB_MAX_GRAD_X(f16, __half)
NB_MAX_GRAD_X(f64, double)

// -- helpers for the other families ------------------------------------------------------------
#define NB_FILL(SUFFIX, T)                                                                  \
  extern "C" __global__ void fill_##SUFFIX(T* y, int64_t n, double value) {                 \
    const T v = nbr_to<T>(value);                                                            \
    NB_GRID_STRIDE(i, n) { y[i] = v; }                                                      \
  }

NB_FILL(f32, float)
NB_FILL(f16, __half)
NB_FILL(f64, double)
NB_FILL(i32, int32_t)
NB_FILL(i64, int64_t)

#define NB_CAST(SS, TS, SD, TD)                                                             \
  extern "C" __global__ void cast_##SS##_##SD(const TS* x, TD* y, int64_t n) {              \
    NB_GRID_STRIDE(i, n) { y[i] = nbr_to<TD>(nbr_val(x[i])); }                                \
  }
#define NB_CAST_TO(SD, TD)                                                                  \
  NB_CAST(f32, float, SD, TD)                                                               \
  NB_CAST(f16, __half, SD, TD)                                                              \
  NB_CAST(f64, double, SD, TD)                                                              \
  NB_CAST(i32, int32_t, SD, TD)                                                             \
  NB_CAST(i64, int64_t, SD, TD)

NB_CAST_TO(f32, float)
NB_CAST_TO(f16, __half)
NB_CAST_TO(f64, double)
