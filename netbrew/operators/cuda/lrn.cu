// LRN across channels (netbrew/operators/normalization_extra.py's lrn_cpu):
// y = x / (bias + alpha / size * sum of x^2 over the channel window)^beta, X (N, C, S).
#include "common.cuh"
#include <cuda_fp16.h>

template <typename T>
__device__ void nb_lrn(const T* x, T* y, int64_t n, int64_t channels, int64_t spatial,
                       int before, int after, float alpha_over_size, float beta, float bias) {
  NB_GRID_STRIDE(i, n) {
    const int64_t s = i % spatial;
    const int64_t c = (i / spatial) % channels;
    const int64_t base = i - (c * spatial + s);  // (n, 0, 0)
    const int64_t lo = c - before < 0 ? 0 : c - before;
    const int64_t hi = c + after >= channels ? channels - 1 : c + after;
    float square_sum = 0.f;
    for (int64_t k = lo; k <= hi; ++k) {
      const float v = static_cast<float>(x[base + k * spatial + s]);
      square_sum += v * v;
    }
    const float xv = static_cast<float>(x[i]);
    y[i] = static_cast<T>(xv / powf(bias + alpha_over_size * square_sum, beta));
  }
}

#define NB_LRN(SUFFIX, T)                                                                \
  extern "C" __global__ void lrn_##SUFFIX(const T* x, T* y, int64_t n, int64_t channels, \
                                          int64_t spatial, int before, int after,       \
                                          float alpha_over_size, float beta, float bias) { \
    nb_lrn<T>(x, y, n, channels, spatial, before, after, alpha_over_size, beta, bias);  \
  }

NB_LRN(f32, float)
NB_LRN(f16, __half)
