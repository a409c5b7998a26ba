// Convolution kernels (see conv.py): im2col and col2im around cuBLAS's GEMMs, a direct
// depthwise convolution, and the bias add. float32 only: conv.py widens float16 first, as
// the CPU kernels compute in float32. Window geometry as in window.cuh.
#include "window.cuh"

// cols (B, C, K, P) = the windows of x (B, C, *in): cols[b, c, j, p] = x[b, c, tap j of
// window p], 0 in the padding. n = B * C * K * P.
extern "C" __global__ void im2col_f32(const float* x, float* cols, const int64_t* meta, int nd,
                                      int64_t P, int64_t K, int64_t pixels, int64_t n) {
  NB_GRID_STRIDE(i, n) {
    const int64_t p = i % P;
    const int64_t t = i / P;
    const int64_t j = t % K;
    const int64_t plane = t / K;  // b * C + c
    int64_t offset;
    const bool inside = nb_window_tap(meta, nd, p, j, &offset);
    cols[i] = inside ? x[plane * pixels + offset] : 0.0f;
  }
}

// The adjoint: x (B, C, *in) = the sum, over the taps j and windows p that read pixel q, of
// cols[b, c, j, p]; pixels no window reads get 0. n = B * C * pixels.
extern "C" __global__ void col2im_f32(const float* cols, float* x, const int64_t* meta, int nd,
                                      int64_t P, int64_t K, int64_t pixels, int64_t n) {
  NB_GRID_STRIDE(i, n) {
    const int64_t q = i % pixels;
    const int64_t plane = i / pixels;
    const float* base = cols + plane * K * P;
    float acc = 0.0f;
    for (int64_t j = 0; j < K; ++j) {
      int64_t p;
      if (nb_window_of(meta, nd, q, j, &p)) acc += base[j * P + p];
    }
    x[i] = acc;
  }
}

// Depthwise (one input channel per group): y[b, m, p] = bias[m] + sum_j w[m, j] *
// x[b, m / (M / C), tap j of window p]. w is (M, 1, *kernel); bias may be null.
extern "C" __global__ void depthwise_f32(const float* x, const float* w, const float* bias,
                                         float* y, const int64_t* meta, int nd, int64_t C,
                                         int64_t M, int64_t P, int64_t K, int64_t pixels,
                                         int64_t n) {
  const int64_t mult = M / C;
  NB_GRID_STRIDE(i, n) {
    const int64_t p = i % P;
    const int64_t t = i / P;
    const int64_t m = t % M;
    const int64_t b = t / M;
    const float* plane = x + (b * C + m / mult) * pixels;
    const float* taps = w + m * K;
    float acc = 0.0f;
    for (int64_t j = 0; j < K; ++j) {
      int64_t offset;
      if (nb_window_tap(meta, nd, p, j, &offset)) acc += taps[j] * plane[offset];
    }
    y[i] = bias ? acc + bias[m] : acc;
  }
}

// y (B, M, inner) += bias[m]. n = B * M * inner.
extern "C" __global__ void add_bias_f32(float* y, const float* bias, int64_t M, int64_t inner,
                                        int64_t n) {
  NB_GRID_STRIDE(i, n) { y[i] += bias[(i / inner) % M]; }
}
