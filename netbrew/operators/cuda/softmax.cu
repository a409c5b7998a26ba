// Softmax, LogSoftmax and their gradients along one axis (see softmax.py).
//
// x is viewed as (outer, n, inner): row r = (r / inner, r % inner) holds the n elements at
// base(r) + k * inner. "block" kernels give a row a thread block, "thread" kernels a thread
// (short rows, or inner > 1 where neighbouring threads read neighbouring elements).
// Float and half compute in float, double in double.
#include "reduce_common.cuh"

__device__ __forceinline__ int64_t nbr_row_base(int64_t r, int64_t n, int64_t inner) {
  return (r / inner) * n * inner + r % inner;
}

// The forward: y = exp(x - max) / sum, or (x - max) - log(sum) for LOG; x - max is NaN
// where both are infinite of one sign, as the NumPy kernel's.
template <int LOG, typename T>
__device__ void nbr_softmax_block(const T* x, T* y, int64_t rows, int64_t n, int64_t inner) {
  typedef typename NbrAcc<T>::type A;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = nbr_row_base(r, n, inner);
    A m, s;
    nbr_block_max_sumexp(x + base, n, inner, &m, &s);
    const A ls = nbr_log(s);
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
      const A d = nbr_val(x[base + k * inner]) - m;
      y[base + k * inner] = nbr_to<T>(LOG ? d - ls : nbr_exp(d) / s);
    }
  }
}

template <int LOG, typename T>
__device__ void nbr_softmax_thread(const T* x, T* y, int64_t rows, int64_t n, int64_t inner) {
  typedef typename NbrAcc<T>::type A;
  NB_GRID_STRIDE(r, rows) {
    const int64_t base = nbr_row_base(r, n, inner);
    A m = nbr_lowest(A());
    for (int64_t k = 0; k < n; ++k) m = NbrMax()(m, nbr_val(x[base + k * inner]));
    A s = 0;
    for (int64_t k = 0; k < n; ++k) s += nbr_exp(nbr_val(x[base + k * inner]) - m);
    const A ls = nbr_log(s);
    for (int64_t k = 0; k < n; ++k) {
      const A d = nbr_val(x[base + k * inner]) - m;
      y[base + k * inner] = nbr_to<T>(LOG ? d - ls : nbr_exp(d) / s);
    }
  }
}

// The gradients: dx = y * (dy - sum(dy * y)) for Softmax, dy - exp(y) * sum(dy) for
// LogSoftmax (y the forward's output).
template <int LOG, typename T>
__device__ __forceinline__ typename NbrAcc<T>::type nbr_softmax_grad_term(T y, T dy) {
  return LOG ? nbr_val(dy) : nbr_val(dy) * nbr_val(y);
}
template <int LOG, typename A>
__device__ __forceinline__ A nbr_softmax_grad_out(A y, A dy, A s) {
  return LOG ? dy - nbr_exp(y) * s : y * (dy - s);
}

template <int LOG, typename T>
__device__ void nbr_softmax_grad_block(const T* y, const T* dy, T* dx, int64_t rows, int64_t n,
                                      int64_t inner) {
  typedef typename NbrAcc<T>::type A;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = nbr_row_base(r, n, inner);
    A s = 0;
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
      s += nbr_softmax_grad_term<LOG>(y[base + k * inner], dy[base + k * inner]);
    }
    s = nbr_block_sum(s);
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
      const int64_t i = base + k * inner;
      dx[i] = nbr_to<T>(nbr_softmax_grad_out<LOG>(nbr_val(y[i]), nbr_val(dy[i]), s));
    }
  }
}

template <int LOG, typename T>
__device__ void nbr_softmax_grad_thread(const T* y, const T* dy, T* dx, int64_t rows,
                                       int64_t n, int64_t inner) {
  typedef typename NbrAcc<T>::type A;
  NB_GRID_STRIDE(r, rows) {
    const int64_t base = nbr_row_base(r, n, inner);
    A s = 0;
    for (int64_t k = 0; k < n; ++k) {
      s += nbr_softmax_grad_term<LOG>(y[base + k * inner], dy[base + k * inner]);
    }
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = base + k * inner;
      dx[i] = nbr_to<T>(nbr_softmax_grad_out<LOG>(nbr_val(y[i]), nbr_val(dy[i]), s));
    }
  }
}

#define NB_SOFTMAX(NAME, LOG, SUFFIX, T)                                                    \
  extern "C" __global__ void NAME##_block_##SUFFIX(const T* x, T* y, int64_t rows,          \
                                                   int64_t n, int64_t inner) {              \
    nbr_softmax_block<LOG>(x, y, rows, n, inner);                                            \
  }                                                                                         \
  extern "C" __global__ void NAME##_thread_##SUFFIX(const T* x, T* y, int64_t rows,         \
                                                    int64_t n, int64_t inner) {             \
    nbr_softmax_thread<LOG>(x, y, rows, n, inner);                                           \
  }                                                                                         \
  extern "C" __global__ void NAME##_grad_block_##SUFFIX(                                    \
      const T* y, const T* dy, T* dx, int64_t rows, int64_t n, int64_t inner) {             \
    nbr_softmax_grad_block<LOG>(y, dy, dx, rows, n, inner);                                  \
  }                                                                                         \
  extern "C" __global__ void NAME##_grad_thread_##SUFFIX(                                   \
      const T* y, const T* dy, T* dx, int64_t rows, int64_t n, int64_t inner) {             \
    nbr_softmax_grad_thread<LOG>(y, dy, dx, rows, n, inner);                                 \
  }

#define NB_SOFTMAX_TYPES(NAME, LOG)                                                         \
  NB_SOFTMAX(NAME, LOG, f32, float)                                                         \
  NB_SOFTMAX(NAME, LOG, f16, __half)                                                        \
  NB_SOFTMAX(NAME, LOG, f64, double)

NB_SOFTMAX_TYPES(softmax, 0)
NB_SOFTMAX_TYPES(log_softmax, 1)
