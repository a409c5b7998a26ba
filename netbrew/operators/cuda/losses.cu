// Caffe2's losses: LabelCrossEntropy, SoftmaxWithLoss, AveragedLoss (its forward is a
// ReduceMean, see losses.py), their gradients, and Accuracy.
//
// T is the data's dtype, L the labels' (int32 / int64), A the accumulation type (float, or
// double for double). Labels are checked on the host before any launch. Row kernels give a
// row of the [N, D] data one thread block (grid-stride over rows).
#include "reduce_common.cuh"

// -- LabelCrossEntropy: y[i] = -log(max(x[i, label[i]], threshold)) -----------------------------
// threshold is 1e-20 in T (0 for half). NaN passes through the max, as np.maximum's.
template <typename A>
__device__ __forceinline__ A nbr_floor_at(A v, A threshold) {
  return v < threshold ? threshold : v;
}

template <typename T, typename L>
__device__ void nbr_label_xent(const T* x, const L* label, T* y, int64_t n, int64_t d,
                               double threshold) {
  typedef typename NbrAcc<T>::type A;
  NB_GRID_STRIDE(i, n) {
    const A v = nbr_val(x[i * d + (int64_t)label[i]]);
    y[i] = nbr_to<T>(-nbr_log(nbr_floor_at(v, (A)threshold)));
  }
}

// dx[i, j] = -dy[i] / max(x[i, j], threshold) at j = label[i], else 0; dy_step is 1, or 0
// for a single dY broadcast to every row.
template <typename T, typename L>
__device__ void nbr_label_xent_grad(const T* x, const L* label, const T* dy, T* dx, int64_t n,
                                    int64_t d, int64_t dy_step, double threshold) {
  typedef typename NbrAcc<T>::type A;
  NB_GRID_STRIDE(e, n * d) {
    const int64_t i = e / d;
    A v = 0;
    if (e - i * d == (int64_t)label[i]) {
      v = -nbr_val(dy[i * dy_step]) / nbr_floor_at((A)nbr_val(x[e]), (A)threshold);
    }
    dx[e] = nbr_to<T>(v);
  }
}

// -- SoftmaxWithLoss -------------------------------------------------------------------------
// Per row: prob = exp(log_p), log_p = (x - max) - log(sum(exp(x - max))), and the row's loss
// -log_p[label] (labels) or -sum_j(target_j != 0 ? target_j * log_p_j : 0) (target, the
// label probabilities in T, when label is null).
template <typename T, typename L>
__device__ void nbr_softmax_loss_rows(const T* x, const L* label, const T* target, T* prob,
                                      typename NbrAcc<T>::type* row_loss, int64_t n,
                                      int64_t d) {
  typedef typename NbrAcc<T>::type A;
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const T* row = x + r * d;
    A m, s;
    nbr_block_max_sumexp(row, d, 1, &m, &s);
    const A ls = nbr_log(s);
    A loss = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const A log_p = (nbr_val(row[j]) - m) - ls;
      prob[r * d + j] = nbr_to<T>(nbr_exp(log_p));
      if (!label) {
        const A t = nbr_val(target[r * d + j]);
        if (t != A(0)) loss += t * log_p;
      }
    }
    if (label) {
      if (threadIdx.x == 0) row_loss[r] = -((nbr_val(row[(int64_t)label[r]]) - m) - ls);
    } else {
      loss = nbr_block_sum(loss);
      if (threadIdx.x == 0) row_loss[r] = -loss;
    }
  }
}

// One block: loss = scale * sum(w * row_loss) / sum(w), 0 when the weights sum to 0; w null
// means weights of 1.
template <typename T>
__device__ void nbr_softmax_loss_total(const typename NbrAcc<T>::type* row_loss,
                                       const typename NbrAcc<T>::type* w, T* loss, int64_t n,
                                       double scale) {
  typedef typename NbrAcc<T>::type A;
  A total = 0, weighted = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const A wi = w ? w[i] : A(1);
    total += wi;
    weighted += wi * row_loss[i];
  }
  total = nbr_block_sum(total);
  weighted = nbr_block_sum(weighted);
  if (threadIdx.x == 0) loss[0] = nbr_to<T>(total != A(0) ? (A)scale * weighted / total : A(0));
}

// One block, for the gradient: coef[0] = scale * d_loss / sum(w), coef[1] = 1 when that term
// applies (d_loss given and the weights' sum not 0), else both 0.
template <typename A>
__device__ void nbr_softmax_loss_coef(const A* w, const A* d_loss, A* coef, int64_t n,
                                      double scale) {
  A total = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) total += w ? w[i] : A(1);
  total = nbr_block_sum(total);
  if (threadIdx.x == 0) {
    const bool use = d_loss && total != A(0);
    coef[0] = use ? (A)scale * d_loss[0] / total : A(0);
    coef[1] = use ? A(1) : A(0);
  }
}

// dx = (p - target) * (w[i] * coef[0]) when coef[1], plus p * (dsm - sum(dsm * p)) when
// dsm (the softmax output's gradient) is given; p recomputed from x.
template <typename T, typename L>
__device__ void nbr_softmax_loss_grad(const T* x, const L* label, const T* target,
                                      const typename NbrAcc<T>::type* w,
                                      const typename NbrAcc<T>::type* coef, const T* dsm,
                                      T* dx, int64_t n, int64_t d) {
  typedef typename NbrAcc<T>::type A;
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const T* row = x + r * d;
    A m, s;
    nbr_block_max_sumexp(row, d, 1, &m, &s);
    const A ls = nbr_log(s);
    A dot = 0;
    if (dsm) {
      for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
        dot += nbr_val(dsm[r * d + j]) * nbr_exp((nbr_val(row[j]) - m) - ls);
      }
      dot = nbr_block_sum(dot);
    }
    const bool use = coef[1] != A(0);
    const A factor = use ? (w ? w[r] : A(1)) * coef[0] : A(0);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const A p = nbr_exp((nbr_val(row[j]) - m) - ls);
      A v = 0;
      if (use) {
        const A t = label ? A(j == (int64_t)label[r] ? 1 : 0) : (A)nbr_val(target[r * d + j]);
        v = (p - t) * factor;
      }
      if (dsm) v += p * (nbr_val(dsm[r * d + j]) - dot);
      dx[r * d + j] = nbr_to<T>(v);
    }
  }
}

// -- AveragedLossGradient: dx = dy / count everywhere ------------------------------------------
template <typename T>
__device__ void nbr_averaged_loss_grad(const typename NbrAcc<T>::type* dy, T* dx, int64_t n,
                                       double count) {
  typedef typename NbrAcc<T>::type A;
  const T v = nbr_to<T>(dy[0] / (A)count);
  NB_GRID_STRIDE(i, n) { dx[i] = v; }
}

// -- Accuracy: a row is correct when fewer than top_k classes rank before its label (a
// higher score, or an equal one at a lower class). Rows add to *correct atomically.
template <typename T, typename L>
__device__ void nbr_accuracy_rows(const T* pred, const L* label, unsigned long long* correct,
                                  int64_t n, int64_t d, int64_t top_k) {
  typedef typename NbrAcc<T>::type A;
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const T* row = pred + r * d;
    const int64_t c = (int64_t)label[r];
    const A at = nbr_val(row[c]);
    int64_t before = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const A v = nbr_val(row[j]);
      before += (v > at || (v == at && j < c)) ? 1 : 0;
    }
    before = nbr_block_sum(before);
    if (threadIdx.x == 0 && before < top_k) atomicAdd(correct, 1ULL);
  }
}

extern "C" __global__ void accuracy_finish(const unsigned long long* correct, float* out,
                                           int64_t n) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    out[0] = n ? (float)((double)correct[0] / (double)n) : __int_as_float(0x7fffffff);
  }
}

#define NBR_LOSSES_TL(ST, T, SL, L)                                                         \
  extern "C" __global__ void label_xent_##ST##_##SL(const T* x, const L* label, T* y,       \
                                                    int64_t n, int64_t d, double thr) {     \
    nbr_label_xent(x, label, y, n, d, thr);                                                 \
  }                                                                                         \
  extern "C" __global__ void label_xent_grad_##ST##_##SL(                                   \
      const T* x, const L* label, const T* dy, T* dx, int64_t n, int64_t d,                 \
      int64_t dy_step, double thr) {                                                        \
    nbr_label_xent_grad(x, label, dy, dx, n, d, dy_step, thr);                              \
  }                                                                                         \
  extern "C" __global__ void softmax_loss_rows_##ST##_##SL(                                 \
      const T* x, const L* label, const T* target, T* prob, NbrAcc<T>::type* row_loss,      \
      int64_t n, int64_t d) {                                                               \
    nbr_softmax_loss_rows(x, label, target, prob, row_loss, n, d);                          \
  }                                                                                         \
  extern "C" __global__ void softmax_loss_grad_##ST##_##SL(                                 \
      const T* x, const L* label, const T* target, const NbrAcc<T>::type* w,                \
      const NbrAcc<T>::type* coef, const T* dsm, T* dx, int64_t n, int64_t d) {             \
    nbr_softmax_loss_grad(x, label, target, w, coef, dsm, dx, n, d);                        \
  }

#define NBR_LOSSES_T(ST, T)                                                                 \
  NBR_LOSSES_TL(ST, T, i32, int32_t)                                                        \
  NBR_LOSSES_TL(ST, T, i64, int64_t)                                                        \
  extern "C" __global__ void softmax_loss_total_##ST(const NbrAcc<T>::type* row_loss,       \
                                                     const NbrAcc<T>::type* w, T* loss,     \
                                                     int64_t n, double scale) {             \
    nbr_softmax_loss_total(row_loss, w, loss, n, scale);                                    \
  }                                                                                         \
  extern "C" __global__ void averaged_loss_grad_##ST(const NbrAcc<T>::type* dy, T* dx,      \
                                                     int64_t n, double count) {             \
    nbr_averaged_loss_grad(dy, dx, n, count);                                               \
  }

NBR_LOSSES_T(f32, float)
NBR_LOSSES_T(f16, __half)
NBR_LOSSES_T(f64, double)

extern "C" __global__ void softmax_loss_coef_f32(const float* w, const float* d_loss,
                                                 float* coef, int64_t n, double scale) {
  nbr_softmax_loss_coef(w, d_loss, coef, n, scale);
}
extern "C" __global__ void softmax_loss_coef_f64(const double* w, const double* d_loss,
                                                 double* coef, int64_t n, double scale) {
  nbr_softmax_loss_coef(w, d_loss, coef, n, scale);
}

#define NBR_ACCURACY(ST, T, SL, L)                                                          \
  extern "C" __global__ void accuracy_rows_##ST##_##SL(const T* pred, const L* label,       \
                                                       unsigned long long* correct,         \
                                                       int64_t n, int64_t d,                \
                                                       int64_t top_k) {                     \
    nbr_accuracy_rows(pred, label, correct, n, d, top_k);                                   \
  }
#define NBR_ACCURACY_T(ST, T)                                                               \
  NBR_ACCURACY(ST, T, i32, int32_t)                                                         \
  NBR_ACCURACY(ST, T, i64, int64_t)

NBR_ACCURACY_T(f32, float)
NBR_ACCURACY_T(f16, __half)
NBR_ACCURACY_T(f64, double)
NBR_ACCURACY_T(i32, int32_t)
NBR_ACCURACY_T(i64, int64_t)
