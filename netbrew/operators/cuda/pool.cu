// Pooling kernels (see pool.py): MaxPool (with Indices), AveragePool, the global pools and
// their gradients. The forward kernels read float32 or float16 and compute in float; the
// windowed gradients are float32 (pool.py widens float16). Window geometry as in window.cuh.
#include "window.cuh"
#include <math_constants.h>

// One window per thread: i over (planes, P). Padding reads as -inf and never beats a value;
// the first strict max wins (Indices), and a NaN spreads to Y as numpy.maximum does.
// idx (int64, may be null): plane * pixels + sum_d pos_d * step_d of the winning tap.
template <typename T>
__device__ void nb_max_pool(const T* x, T* y, int64_t* idx, const int64_t* meta, int nd,
                            int64_t P, int64_t K, int64_t pixels, int64_t n) {
  NB_GRID_STRIDE(i, n) {
    const int64_t p = i % P;
    const int64_t plane = i / P;
    float best = -CUDART_INF_F;
    int64_t arg = 0;
    for (int64_t j = 0; j < K; ++j) {
      int64_t offset;
      const float v = nb_window_tap(meta, nd, p, j, &offset) ? nb_load(x, plane * pixels + offset)
                                                              : -CUDART_INF_F;
      if (j == 0) {
        best = v;
      } else if (v > best) {
        best = v;
        arg = j;
      } else if (v != v) {
        best = v;
      }
    }
    nb_store(y, i, best);
    if (idx) {
      int64_t flat = plane * pixels, q = p, j = arg;
      for (int d = nd - 1; d >= 0; --d) {
        const int64_t o = q % NB_W(meta, NB_W_OUT, d);
        q /= NB_W(meta, NB_W_OUT, d);
        const int64_t k = j % NB_W(meta, NB_W_KER, d);
        j /= NB_W(meta, NB_W_KER, d);
        const int64_t pos = o * NB_W(meta, NB_W_STR, d) + k * NB_W(meta, NB_W_DIL, d) -
                            NB_W(meta, NB_W_BEGIN, d);
        flat += pos * NB_W(meta, NB_W_STEP, d);
      }
      idx[i] = flat;
    }
  }
}

// Sum of the window's pixels inside X (padding adds 0) divided by counts[p] (pool.py gives
// the forward's divisor per window: count_include_pad and ceil_mode are in it).
template <typename T>
__device__ void nb_average_pool(const T* x, T* y, const float* counts, const int64_t* meta,
                                int nd, int64_t P, int64_t K, int64_t pixels, int64_t n) {
  NB_GRID_STRIDE(i, n) {
    const int64_t p = i % P;
    const int64_t plane = i / P;
    float acc = 0.0f;
    for (int64_t j = 0; j < K; ++j) {
      int64_t offset;
      if (nb_window_tap(meta, nd, p, j, &offset)) acc += nb_load(x, plane * pixels + offset);
    }
    nb_store(y, i, acc / counts[p]);
  }
}

__device__ __forceinline__ float nb_max_nan(float a, float b) {
  return (a != a || b != b) ? CUDART_NAN_F : fmaxf(a, b);
}

// y[r] = max of row r of x (rows, S), NaN if any is: one block per row.
template <typename T>
__device__ void nb_global_max(const T* x, T* y, int64_t S, int64_t rows) {
  __shared__ float part[NB_REDUCE_BLOCK];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float best = -CUDART_INF_F;
    for (int64_t s = threadIdx.x; s < S; s += blockDim.x) best = nb_max_nan(best, nb_load(x, r * S + s));
    part[threadIdx.x] = best;
    __syncthreads();
    for (int h = NB_REDUCE_BLOCK / 2; h > 0; h >>= 1) {
      if (threadIdx.x < h) part[threadIdx.x] = nb_max_nan(part[threadIdx.x], part[threadIdx.x + h]);
      __syncthreads();
    }
    if (threadIdx.x == 0) nb_store(y, r, part[0]);
    __syncthreads();
  }
}

// Whether (va, ia) comes before (vb, ib) as numpy.argmax ranks: NaN first, then the larger
// value, then the smaller index.
__device__ __forceinline__ bool nb_argmax_before(float va, int64_t ia, float vb, int64_t ib) {
  const bool na = va != va, nb = vb != vb;
  if (na || nb) return na && (!nb || ia < ib);
  return va > vb || (va == vb && ia < ib);
}

// dx (rows, S), zeroed: dx[r, argmax of x[r]] = dy[r]. One block per row.
template <typename T>
__device__ void nb_global_max_grad(const T* x, const T* dy, T* dx, int64_t S, int64_t rows) {
  __shared__ float val[NB_REDUCE_BLOCK];
  __shared__ int64_t pos[NB_REDUCE_BLOCK];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float best = -CUDART_INF_F;
    int64_t at = S;  // past the end: loses to any element
    for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
      const float v = nb_load(x, r * S + s);
      if (at == S || nb_argmax_before(v, s, best, at)) {
        best = v;
        at = s;
      }
    }
    val[threadIdx.x] = best;
    pos[threadIdx.x] = at;
    __syncthreads();
    for (int h = NB_REDUCE_BLOCK / 2; h > 0; h >>= 1) {
      if (threadIdx.x < h) {
        const int64_t other = pos[threadIdx.x + h];
        if (other < S && (pos[threadIdx.x] == S ||
                          nb_argmax_before(val[threadIdx.x + h], other, val[threadIdx.x],
                                           pos[threadIdx.x]))) {
          val[threadIdx.x] = val[threadIdx.x + h];
          pos[threadIdx.x] = other;
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0 && pos[0] < S) dx[r * S + pos[0]] = dy[r];
    __syncthreads();
  }
}

#define NB_POOL_FAMILY(SUFFIX, T)                                                              \
  extern "C" __global__ void max_pool_##SUFFIX(const T* x, T* y, int64_t* idx,                 \
                                               const int64_t* meta, int nd, int64_t P,         \
                                               int64_t K, int64_t pixels, int64_t n) {         \
    nb_max_pool<T>(x, y, idx, meta, nd, P, K, pixels, n);                                      \
  }                                                                                            \
  extern "C" __global__ void average_pool_##SUFFIX(const T* x, T* y, const float* counts,      \
                                                   const int64_t* meta, int nd, int64_t P,     \
                                                   int64_t K, int64_t pixels, int64_t n) {     \
    nb_average_pool<T>(x, y, counts, meta, nd, P, K, pixels, n);                               \
  }                                                                                            \
  extern "C" __global__ void global_max_##SUFFIX(const T* x, T* y, int64_t S, int64_t rows) {  \
    nb_global_max<T>(x, y, S, rows);                                                           \
  }                                                                                            \
  extern "C" __global__ void global_max_grad_##SUFFIX(const T* x, const T* dy, T* dx,          \
                                                      int64_t S, int64_t rows) {               \
    nb_global_max_grad<T>(x, dy, dx, S, rows);                                                 \
  }                                                                                            \
  extern "C" __global__ void global_average_grad_##SUFFIX(const T* dy, T* dx, int64_t S,       \
                                                          int64_t n) {                         \
    NB_GRID_STRIDE(i, n) { nb_store(dx, i, nb_load(dy, i / S) / (float)S); }                   \
  }

NB_POOL_FAMILY(f32, float)
NB_POOL_FAMILY(f16, __half)

// MaxPool's gradient, one window per thread over (planes, P): dY goes to the first tap whose
// value (padding: -inf) equals Y, or is NaN where Y is; with none, to tap 0 if
// first_default (the CPU kernel's rule off the tiled path), else nowhere. Taps in the
// padding drop it. dx zeroed first.
extern "C" __global__ void max_pool_grad_f32(const float* x, const float* y, const float* dy,
                                             float* dx, const int64_t* meta, int nd, int64_t P,
                                             int64_t K, int64_t pixels, int first_default,
                                             int64_t n) {
  NB_GRID_STRIDE(i, n) {
    const int64_t p = i % P;
    const int64_t plane = i / P;
    const float target = y[i];
    int64_t hit = -1, hit_offset = 0;
    bool hit_inside = false;
    for (int64_t j = 0; j < K; ++j) {
      int64_t offset;
      const bool inside = nb_window_tap(meta, nd, p, j, &offset);
      const float v = inside ? x[plane * pixels + offset] : -CUDART_INF_F;
      if (v == target || (v != v && target != target)) {
        hit = j;
        hit_offset = offset;
        hit_inside = inside;
        break;
      }
    }
    if (hit < 0 && first_default) hit_inside = nb_window_tap(meta, nd, p, 0, &hit_offset);
    if ((hit >= 0 || first_default) && hit_inside) {
      atomicAdd(dx + plane * pixels + hit_offset, dy[i]);
    }
  }
}

// AveragePool's gradient, one input pixel per thread over (planes, pixels): the sum of
// dY[p] / counts[p] over the windows p that read it.
extern "C" __global__ void average_pool_grad_f32(const float* dy, float* dx, const float* counts,
                                                 const int64_t* meta, int nd, int64_t P,
                                                 int64_t K, int64_t pixels, int64_t n) {
  NB_GRID_STRIDE(i, n) {
    const int64_t q = i % pixels;
    const int64_t plane = i / pixels;
    float acc = 0.0f;
    for (int64_t j = 0; j < K; ++j) {
      int64_t p;
      if (nb_window_of(meta, nd, q, j, &p)) acc += dy[plane * P + p] / counts[p];
    }
    dx[i] = acc;
  }
}
