// BatchNormalization, LayerNormalization, GroupNormalization and InstanceNormalization, and
// the gradients of BatchNormalization and LayerNormalization (see normalization.py).
//
// T is X's dtype, P its accumulation type (float, double for double): the per-channel
// parameters arrive converted to P. A is where statistics are computed (float, or double
// for a float64 stash_type / X). "Team" kernels handle a row (or channel) per thread block
// (BLOCK) or per thread, with one body.
#include "reduce_common.cuh"

template <bool BLOCK>
__device__ __forceinline__ int64_t nbr_team_first() {
  return BLOCK ? (int64_t)blockIdx.x : blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
}
template <bool BLOCK>
__device__ __forceinline__ int64_t nbr_team_count() {
  return BLOCK ? (int64_t)gridDim.x : (int64_t)blockDim.x * gridDim.x;
}
template <bool BLOCK>
__device__ __forceinline__ int64_t nbr_lane_first() {
  return BLOCK ? (int64_t)threadIdx.x : 0;
}
template <bool BLOCK>
__device__ __forceinline__ int64_t nbr_lane_count() {
  return BLOCK ? (int64_t)blockDim.x : 1;
}
template <bool BLOCK, typename A>
__device__ __forceinline__ A nbr_team_sum(A v) {
  return BLOCK ? nbr_block_sum(v) : v;
}
template <bool BLOCK>
__device__ __forceinline__ bool nbr_team_leader() {
  return !BLOCK || threadIdx.x == 0;
}

// Element k (of outer * inner) of channel c, x laid out as (outer, channels, inner).
__device__ __forceinline__ int64_t nbr_channel_at(int64_t k, int64_t c, int64_t channels,
                                                  int64_t inner) {
  const int64_t o = k / inner;
  return (o * channels + c) * inner + (k - o * inner);
}

// -- statistics: mean, biased var and 1 / sqrt(var + eps) per channel, two passes -----------
template <bool BLOCK, typename T, typename A>
__device__ void nbr_stats(const T* x, A* mean, A* var, A* inv, int64_t outer, int64_t channels,
                          int64_t inner, double eps) {
  const int64_t count = outer * inner;
  for (int64_t c = nbr_team_first<BLOCK>(); c < channels; c += nbr_team_count<BLOCK>()) {
    A s = 0;
    for (int64_t k = nbr_lane_first<BLOCK>(); k < count; k += nbr_lane_count<BLOCK>()) {
      s += (A)nbr_val(x[nbr_channel_at(k, c, channels, inner)]);
    }
    s = nbr_team_sum<BLOCK>(s);
    const A m = count ? s / (A)count : nbr_nan(A());
    A q = 0;
    for (int64_t k = nbr_lane_first<BLOCK>(); k < count; k += nbr_lane_count<BLOCK>()) {
      const A d = (A)nbr_val(x[nbr_channel_at(k, c, channels, inner)]) - m;
      q += d * d;
    }
    q = nbr_team_sum<BLOCK>(q);
    if (nbr_team_leader<BLOCK>()) {
      const A v = count ? q / (A)count : nbr_nan(A());
      mean[c] = m;
      var[c] = v;
      inv[c] = A(1) / nbr_sqrt(v + (A)eps);
    }
  }
}

// -- LayerNormalization ------------------------------------------------------------------------
// Rows of L elements; scale and bias broadcast to X: at the position in the row (*_row) or
// through launch.broadcast_meta's rows [shape, scale strides, bias strides].
__device__ __forceinline__ int64_t nbr_param_at(int64_t i, int64_t j, int row, int which,
                                                const int64_t* meta, int rank) {
  return row ? j : nb_broadcast_offset(i, rank, meta, meta + which * NB_MAX_RANK);
}

// y = (x - mean) * inv, rounded to T (the NumPy kernel's astype), * scale + bias.
template <typename T, typename A>
__device__ void nbr_layer_norm(const T* x, const A* mean, const A* inv,
                               const typename NbrAcc<T>::type* scale,
                               const typename NbrAcc<T>::type* bias, T* y, int64_t n,
                               int64_t L, const int64_t* meta, int rank, int scale_row,
                               int bias_row) {
  typedef typename NbrAcc<T>::type P;
  NB_GRID_STRIDE(i, n) {
    const int64_t r = i / L, j = i - r * L;
    const P v = nbr_val(nbr_to<T>(((A)nbr_val(x[i]) - mean[r]) * inv[r]));
    P out = v * scale[nbr_param_at(i, j, scale_row, 1, meta, rank)];
    if (bias) out = out + bias[nbr_param_at(i, j, bias_row, 2, meta, rank)];
    y[i] = nbr_to<T>(out);
  }
}

// The gradient, a row per team: g = dy * scale (scale in A), xhat = (x - mean) * inv,
// dx = inv * (g - mean(g) - xhat * mean(g * xhat)) + dmean / L - dinv * inv^2 * xhat / L;
// dy_xhat (for dScale, summed on the host side's reduction) = dy * xhat. dx, dmean, dinv and
// dy_xhat may be null; dmean / dinv hold a value per row (step 1) or one (step 0).
template <bool BLOCK, typename T, typename A>
__device__ void nbr_layer_norm_grad(const T* x, const T* dy, const A* scale, const A* mean,
                                    const A* inv, const A* dmean, const A* dinv, int64_t step,
                                    T* dx, A* dy_xhat, int64_t rows, int64_t L,
                                    const int64_t* meta, int rank, int scale_row) {
  for (int64_t r = nbr_team_first<BLOCK>(); r < rows; r += nbr_team_count<BLOCK>()) {
    const A m = mean[r], iv = inv[r];
    A sg = 0, sgx = 0;
    for (int64_t j = nbr_lane_first<BLOCK>(); j < L; j += nbr_lane_count<BLOCK>()) {
      const int64_t i = r * L + j;
      const A g = (A)nbr_val(dy[i]) * scale[nbr_param_at(i, j, scale_row, 1, meta, rank)];
      sg += g;
      sgx += g * (((A)nbr_val(x[i]) - m) * iv);
    }
    sg = nbr_team_sum<BLOCK>(sg);
    sgx = nbr_team_sum<BLOCK>(sgx);
    const A mg = sg / (A)L, mgx = sgx / (A)L;
    for (int64_t j = nbr_lane_first<BLOCK>(); j < L; j += nbr_lane_count<BLOCK>()) {
      const int64_t i = r * L + j;
      const A xh = ((A)nbr_val(x[i]) - m) * iv;
      if (dx) {
        const A g = (A)nbr_val(dy[i]) * scale[nbr_param_at(i, j, scale_row, 1, meta, rank)];
        A v = iv * (g - mg - xh * mgx);
        if (dmean) v = v + dmean[r * step] / (A)L;
        if (dinv) v = v - dinv[r * step] * iv * iv * xh / (A)L;
        dx[i] = nbr_to<T>(v);
      }
      if (dy_xhat) dy_xhat[i] = (A)nbr_val(dy[i]) * xh;
    }
  }
}

// -- GroupNormalization / InstanceNormalization ------------------------------------------------
// Rows (n, group) of L = (C / groups) * S contiguous elements; channel c = (i / S) % C.
// GroupNormalization rounds the normalized value to T before the affine map (round=1).
template <typename T, typename A>
__device__ void nbr_group_norm(const T* x, const A* mean, const A* inv,
                               const typename NbrAcc<T>::type* scale,
                               const typename NbrAcc<T>::type* bias, T* y, int64_t n,
                               int64_t L, int64_t C, int64_t S, int round) {
  typedef typename NbrAcc<T>::type P;
  NB_GRID_STRIDE(i, n) {
    const int64_t r = i / L, c = (i / S) % C;
    const A a = ((A)nbr_val(x[i]) - mean[r]) * inv[r];
    const P v = round ? (P)nbr_val(nbr_to<T>(a)) : (P)a;
    y[i] = nbr_to<T>(v * scale[c] + bias[c]);
  }
}

// -- BatchNormalization ------------------------------------------------------------------------
// X as (N, C, inner); parameters and statistics per channel, in P. Inference folds the map
// as the NumPy kernel: y = x * a + (bias - mean * a); training: (x - mean) * a + bias; with
// a = scale / sqrt(var + eps) in both.
template <typename T>
__device__ void nbr_batch_norm(const T* x, const typename NbrAcc<T>::type* scale,
                               const typename NbrAcc<T>::type* bias,
                               const typename NbrAcc<T>::type* mean,
                               const typename NbrAcc<T>::type* var, T* y, int64_t n,
                               int64_t C, int64_t inner, double eps, int training) {
  typedef typename NbrAcc<T>::type P;
  NB_GRID_STRIDE(i, n) {
    const int64_t c = (i / inner) % C;
    const P a = scale[c] / nbr_sqrt(var[c] + (P)eps);
    const P v = nbr_val(x[i]);
    y[i] = nbr_to<T>(training ? (v - mean[c]) * a + bias[c] : v * a + (bias[c] - mean[c] * a));
  }
}

// Per channel: db = sum(dy), dscale = sum(dy * (x - mean) * inv).
template <bool BLOCK, typename T>
__device__ void nbr_batch_norm_grad_sums(const T* x, const T* dy,
                                         const typename NbrAcc<T>::type* mean,
                                         const typename NbrAcc<T>::type* inv,
                                         typename NbrAcc<T>::type* db,
                                         typename NbrAcc<T>::type* dscale, int64_t outer,
                                         int64_t C, int64_t inner) {
  typedef typename NbrAcc<T>::type P;
  const int64_t count = outer * inner;
  for (int64_t c = nbr_team_first<BLOCK>(); c < C; c += nbr_team_count<BLOCK>()) {
    P sb = 0, ss = 0;
    for (int64_t k = nbr_lane_first<BLOCK>(); k < count; k += nbr_lane_count<BLOCK>()) {
      const int64_t i = nbr_channel_at(k, c, C, inner);
      const P g = nbr_val(dy[i]);
      sb += g;
      ss += g * ((nbr_val(x[i]) - mean[c]) * inv[c]);
    }
    sb = nbr_team_sum<BLOCK>(sb);
    ss = nbr_team_sum<BLOCK>(ss);
    if (nbr_team_leader<BLOCK>()) {
      db[c] = sb;
      dscale[c] = ss;
    }
  }
}

// dx = scale * inv * (dy - (db + xhat * dscale) / count) in training, dy * (scale * inv)
// otherwise.
template <typename T>
__device__ void nbr_batch_norm_grad_dx(const T* x, const T* dy,
                                       const typename NbrAcc<T>::type* scale,
                                       const typename NbrAcc<T>::type* mean,
                                       const typename NbrAcc<T>::type* inv,
                                       const typename NbrAcc<T>::type* db,
                                       const typename NbrAcc<T>::type* dscale, T* dx,
                                       int64_t n, int64_t C, int64_t inner, int64_t count,
                                       int training) {
  typedef typename NbrAcc<T>::type P;
  NB_GRID_STRIDE(i, n) {
    const int64_t c = (i / inner) % C;
    const P g = nbr_val(dy[i]);
    P v;
    if (training) {
      const P xhat = (nbr_val(x[i]) - mean[c]) * inv[c];
      v = scale[c] * inv[c] * (g - (db[c] + xhat * dscale[c]) / (P)count);
    } else {
      v = g * (scale[c] * inv[c]);
    }
    dx[i] = nbr_to<T>(v);
  }
}

// -- instantiations ------------------------------------------------------------------------------
#define NBR_NORM_TA(ST, T, SA, A)                                                           \
  extern "C" __global__ void norm_stats_block_##ST##_##SA(                                  \
      const T* x, A* mean, A* var, A* inv, int64_t outer, int64_t channels, int64_t inner,  \
      double eps) {                                                                         \
    nbr_stats<true>(x, mean, var, inv, outer, channels, inner, eps);                        \
  }                                                                                         \
  extern "C" __global__ void norm_stats_thread_##ST##_##SA(                                 \
      const T* x, A* mean, A* var, A* inv, int64_t outer, int64_t channels, int64_t inner,  \
      double eps) {                                                                         \
    nbr_stats<false>(x, mean, var, inv, outer, channels, inner, eps);                       \
  }                                                                                         \
  extern "C" __global__ void layer_norm_##ST##_##SA(                                        \
      const T* x, const A* mean, const A* inv, const NbrAcc<T>::type* scale,                \
      const NbrAcc<T>::type* bias, T* y, int64_t n, int64_t L, const int64_t* meta,         \
      int rank, int scale_row, int bias_row) {                                              \
    nbr_layer_norm(x, mean, inv, scale, bias, y, n, L, meta, rank, scale_row, bias_row);    \
  }                                                                                         \
  extern "C" __global__ void layer_norm_grad_block_##ST##_##SA(                             \
      const T* x, const T* dy, const A* scale, const A* mean, const A* inv,                 \
      const A* dmean, const A* dinv, int64_t step, T* dx, A* dy_xhat, int64_t rows,         \
      int64_t L, const int64_t* meta, int rank, int scale_row) {                            \
    nbr_layer_norm_grad<true>(x, dy, scale, mean, inv, dmean, dinv, step, dx, dy_xhat,      \
                              rows, L, meta, rank, scale_row);                              \
  }                                                                                         \
  extern "C" __global__ void layer_norm_grad_thread_##ST##_##SA(                            \
      const T* x, const T* dy, const A* scale, const A* mean, const A* inv,                 \
      const A* dmean, const A* dinv, int64_t step, T* dx, A* dy_xhat, int64_t rows,         \
      int64_t L, const int64_t* meta, int rank, int scale_row) {                            \
    nbr_layer_norm_grad<false>(x, dy, scale, mean, inv, dmean, dinv, step, dx, dy_xhat,     \
                               rows, L, meta, rank, scale_row);                             \
  }                                                                                         \
  extern "C" __global__ void group_norm_##ST##_##SA(                                        \
      const T* x, const A* mean, const A* inv, const NbrAcc<T>::type* scale,                \
      const NbrAcc<T>::type* bias, T* y, int64_t n, int64_t L, int64_t C, int64_t S,        \
      int round) {                                                                          \
    nbr_group_norm(x, mean, inv, scale, bias, y, n, L, C, S, round);                        \
  }

#define NBR_NORM_T(ST, T)                                                                   \
  NBR_NORM_TA(ST, T, f32, float)                                                            \
  NBR_NORM_TA(ST, T, f64, double)                                                           \
  extern "C" __global__ void batch_norm_##ST(                                               \
      const T* x, const NbrAcc<T>::type* scale, const NbrAcc<T>::type* bias,                \
      const NbrAcc<T>::type* mean, const NbrAcc<T>::type* var, T* y, int64_t n, int64_t C,  \
      int64_t inner, double eps, int training) {                                            \
    nbr_batch_norm(x, scale, bias, mean, var, y, n, C, inner, eps, training);               \
  }                                                                                         \
  extern "C" __global__ void batch_norm_grad_sums_block_##ST(                               \
      const T* x, const T* dy, const NbrAcc<T>::type* mean, const NbrAcc<T>::type* inv,     \
      NbrAcc<T>::type* db, NbrAcc<T>::type* dscale, int64_t outer, int64_t C,               \
      int64_t inner) {                                                                      \
    nbr_batch_norm_grad_sums<true>(x, dy, mean, inv, db, dscale, outer, C, inner);          \
  }                                                                                         \
  extern "C" __global__ void batch_norm_grad_sums_thread_##ST(                              \
      const T* x, const T* dy, const NbrAcc<T>::type* mean, const NbrAcc<T>::type* inv,     \
      NbrAcc<T>::type* db, NbrAcc<T>::type* dscale, int64_t outer, int64_t C,               \
      int64_t inner) {                                                                      \
    nbr_batch_norm_grad_sums<false>(x, dy, mean, inv, db, dscale, outer, C, inner);         \
  }                                                                                         \
  extern "C" __global__ void batch_norm_grad_dx_##ST(                                       \
      const T* x, const T* dy, const NbrAcc<T>::type* scale, const NbrAcc<T>::type* mean,   \
      const NbrAcc<T>::type* inv, const NbrAcc<T>::type* db,                                \
      const NbrAcc<T>::type* dscale, T* dx, int64_t n, int64_t C, int64_t inner,            \
      int64_t count, int training) {                                                        \
    nbr_batch_norm_grad_dx(x, dy, scale, mean, inv, db, dscale, dx, n, C, inner, count,     \
                           training);                                                       \
  }

NBR_NORM_T(f32, float)
NBR_NORM_T(f16, __half)
NBR_NORM_T(f64, double)

// Per-channel helpers: inv = 1 / sqrt(var + eps); running = input * m1 + batch * m2.
#define NBR_CHANNEL(SA, A)                                                                  \
  extern "C" __global__ void inv_std_##SA(const A* var, A* inv, int64_t n, double eps) {    \
    NB_GRID_STRIDE(i, n) { inv[i] = A(1) / nbr_sqrt(var[i] + (A)eps); }                     \
  }                                                                                         \
  extern "C" __global__ void running_stat_##SA(const A* input, const A* batch, A* out,      \
                                               int64_t n, double m1, double m2) {           \
    NB_GRID_STRIDE(i, n) { out[i] = input[i] * (A)m1 + batch[i] * (A)m2; }                  \
  }

NBR_CHANNEL(f32, float)
NBR_CHANNEL(f64, double)
