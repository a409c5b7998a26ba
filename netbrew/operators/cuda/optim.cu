// WeightedSum, MomentumSGDUpdate and Adam (see optim.py and netbrew/operators/train.py).
// WeightedSum's weights and MomentumSGDUpdate's lr are one-element arrays of T read on the
// device; Adam's scalars come from the host as doubles already rounded to T as the CPU
// kernel rounds them; __half computes in float.
#include "elementwise.cuh"

// One pair of WeightedSum: y = w[0] * x (first pair) or y + w[0] * x. The weight is read
// on the device (a one-element array of T), so no launch waits for a read-back.
#define NB_WEIGHTED_SUM(SFX, T, _)                                                       \
  extern "C" __global__ void weighted_sum_##SFX(const T* x, const T* w, T* y, int64_t n, \
                                                int first) {                             \
    typedef typename nb_compute<T>::type C;                                              \
    const C wc = nb_ld(w, 0);                                                            \
    NB_GRID_STRIDE(i, n) {                                                               \
      C term = wc * nb_ld(x, i);                                                         \
      nb_st(y, i, first ? term : nb_ld(y, i) + term);                                    \
    }                                                                                    \
  }
NB_FLOAT_TYPES(NB_WEIGHTED_SUM, _)

// m = momentum * moment + lr[0] * grad; step = m, or (1 + momentum) * m - momentum * moment
// with nesterov; param_out = param - step. lr is read on the device, as WeightedSum's w.
template <typename T, typename C>
__device__ __forceinline__ void nb_momentum_sgd(int64_t i, const T* grad, const T* moment,
                                                const T* param, T* step_out, T* moment_out,
                                                T* param_out, C rate, C mom, C one_mom,
                                                int nesterov) {
  C v = nb_ld(moment, i);
  C m = mom * v + rate * nb_ld(grad, i);
  C step = nesterov ? one_mom * m - mom * v : m;
  nb_st(step_out, i, step);
  nb_st(moment_out, i, m);
  nb_st(param_out, i, nb_ld(param, i) - step);
}

#define NB_MOMENTUM_SGD(SFX, T, _)                                                       \
  extern "C" __global__ void momentum_sgd_##SFX(                                         \
      const T* grad, const T* moment, const T* param, const T* lr, T* step_out,          \
      T* moment_out, T* param_out, int64_t n, double momentum, int nesterov) {           \
    typedef typename nb_compute<T>::type C;                                              \
    const C rate = nb_ld(lr, 0), mom = nb_attr<T>(momentum);                             \
    const C one_mom = nb_attr<T>((double)(C(1) + mom));                                  \
    NB_GRID_STRIDE(i, n) {                                                               \
      nb_momentum_sgd(i, grad, moment, param, step_out, moment_out, param_out, rate, mom,  \
                      one_mom, nesterov);                                                \
    }                                                                                    \
  }
NB_FLOAT_TYPES(NB_MOMENTUM_SGD, _)

// m1 = beta1 * moment_1 + (1 - beta1) * grad; m2 = beta2 * moment_2 + (1 - beta2) * grad^2;
// param_out = param + rate * m1 / (sqrt(m2) + epsilon), rate = lr * bias correction.
#define NB_ADAM(SFX, T, _)                                                               \
  extern "C" __global__ void adam_##SFX(                                                 \
      const T* param, const T* moment_1, const T* moment_2, const T* grad, T* param_out, \
      T* m1_out, T* m2_out, int64_t n, double beta1, double one_beta1, double beta2,     \
      double one_beta2, double rate, double epsilon) {                                   \
    typedef typename nb_compute<T>::type C;                                              \
    const C b1 = nb_attr<T>(beta1), c1 = nb_attr<T>(one_beta1);                          \
    const C b2 = nb_attr<T>(beta2), c2 = nb_attr<T>(one_beta2);                          \
    const C r = nb_attr<T>(rate), eps = nb_attr<T>(epsilon);                             \
    NB_GRID_STRIDE(i, n) {                                                               \
      C g = nb_ld(grad, i);                                                              \
      C m1 = b1 * nb_ld(moment_1, i) + c1 * g;                                           \
      C m2 = b2 * nb_ld(moment_2, i) + c2 * g * g;                                       \
      nb_st(m1_out, i, m1);                                                              \
      nb_st(m2_out, i, m2);                                                              \
      nb_st(param_out, i, nb_ld(param, i) + r * m1 / (nb_sqrt(m2) + eps));               \
    }                                                                                    \
  }
NB_FLOAT_TYPES(NB_ADAM, _)

// Batched forms (optim.py's batched kernels, netbrew/executor/batching.py): one launch
// updates up to NB_MULTI tensors. Their pointers, sizes and first blocks come by value in
// one table of 64-bit words, as PyTorch's multi_tensor_apply passes them, so that nothing
// is uploaded per launch. Block b serves chunk b - start[t] of the tensor t whose blocks
// hold it.
#define NB_MULTI 32
#define NB_MULTI_CHUNK 1024

// The tensor of this block: the last t < count with start[t] <= blockIdx.x.
__device__ __forceinline__ int nb_multi_tensor(const long long* start, int count) {
  const long long b = blockIdx.x;
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (start[mid] <= b) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// Words: grad, moment, param, lr, step_out, moment_out, param_out (NB_MULTI pointers
// each), then n, then start (NB_MULTI + 1).
struct nb_sgd_table { long long v[9 * NB_MULTI + 1]; };

#define NB_MOMENTUM_SGD_MULTI(SFX, T, _)                                                  \
  extern "C" __global__ void momentum_sgd_multi_##SFX(nb_sgd_table table, int count,      \
                                                      double momentum, int nesterov) {    \
    typedef typename nb_compute<T>::type C;                                               \
    const long long* v = table.v;                                                         \
    const int t = nb_multi_tensor(v + 8 * NB_MULTI, count);                               \
    const T* grad = (const T*)v[t];                                                       \
    const T* moment = (const T*)v[NB_MULTI + t];                                          \
    const T* param = (const T*)v[2 * NB_MULTI + t];                                       \
    const T* lr = (const T*)v[3 * NB_MULTI + t];                                          \
    T* step_out = (T*)v[4 * NB_MULTI + t];                                                \
    T* moment_out = (T*)v[5 * NB_MULTI + t];                                              \
    T* param_out = (T*)v[6 * NB_MULTI + t];                                               \
    const int64_t n = v[7 * NB_MULTI + t];                                                \
    const int64_t begin = (blockIdx.x - v[8 * NB_MULTI + t]) * (int64_t)NB_MULTI_CHUNK;   \
    const int64_t end = begin + NB_MULTI_CHUNK < n ? begin + NB_MULTI_CHUNK : n;          \
    const C rate = nb_ld(lr, 0), mom = nb_attr<T>(momentum);                              \
    const C one_mom = nb_attr<T>((double)(C(1) + mom));                                   \
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {                     \
      nb_momentum_sgd(i, grad, moment, param, step_out, moment_out, param_out, rate, mom,   \
                      one_mom, nesterov);                                                 \
    }                                                                                     \
  }
NB_FLOAT_TYPES(NB_MOMENTUM_SGD_MULTI, _)

// Words: x (NB_MULTI_PAIRS rows of NB_MULTI pointers, pair p's at p * NB_MULTI), the
// weights likewise, y, n, start. y = w0 * x0 + w1 * x1 + ..., summed in order.
#define NB_MULTI_PAIRS 4
struct nb_wsum_table { long long v[(2 * NB_MULTI_PAIRS + 3) * NB_MULTI + 1]; };

#define NB_WEIGHTED_SUM_MULTI(SFX, T, _)                                                  \
  extern "C" __global__ void weighted_sum_multi_##SFX(nb_wsum_table table, int count,     \
                                                      int pairs) {                        \
    typedef typename nb_compute<T>::type C;                                               \
    const long long* v = table.v;                                                         \
    const int ws = NB_MULTI_PAIRS * NB_MULTI, ys = 2 * ws;                                \
    const int t = nb_multi_tensor(v + ys + 2 * NB_MULTI, count);                          \
    T* y = (T*)v[ys + t];                                                                 \
    const int64_t n = v[ys + NB_MULTI + t];                                               \
    const int64_t begin = (blockIdx.x - v[ys + 2 * NB_MULTI + t]) * (int64_t)NB_MULTI_CHUNK; \
    const int64_t end = begin + NB_MULTI_CHUNK < n ? begin + NB_MULTI_CHUNK : n;          \
    C w[NB_MULTI_PAIRS];                                                                  \
    const T* x[NB_MULTI_PAIRS];                                                           \
    _Pragma("unroll") for (int p = 0; p < NB_MULTI_PAIRS; ++p) {                          \
      x[p] = p < pairs ? (const T*)v[p * NB_MULTI + t] : nullptr;                         \
      w[p] = p < pairs ? (C)nb_ld((const T*)v[ws + p * NB_MULTI + t], 0) : C(0);          \
    }                                                                                     \
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {                     \
      C acc = w[0] * nb_ld(x[0], i);                                                      \
      _Pragma("unroll") for (int p = 1; p < NB_MULTI_PAIRS; ++p) {                        \
        if (p < pairs) acc = acc + w[p] * nb_ld(x[p], i);                                 \
      }                                                                                   \
      nb_st(y, i, acc);                                                                   \
    }                                                                                     \
  }
NB_FLOAT_TYPES(NB_WEIGHTED_SUM_MULTI, _)
