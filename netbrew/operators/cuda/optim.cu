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
#define NB_MOMENTUM_SGD(SFX, T, _)                                                       \
  extern "C" __global__ void momentum_sgd_##SFX(                                         \
      const T* grad, const T* moment, const T* param, const T* lr, T* step_out,          \
      T* moment_out, T* param_out, int64_t n, double momentum, int nesterov) {           \
    typedef typename nb_compute<T>::type C;                                              \
    const C rate = nb_ld(lr, 0), mom = nb_attr<T>(momentum);                             \
    const C one_mom = nb_attr<T>((double)(C(1) + mom));                                  \
    NB_GRID_STRIDE(i, n) {                                                               \
      C v = nb_ld(moment, i);                                                            \
      C m = mom * v + rate * nb_ld(grad, i);                                             \
      C step = nesterov ? one_mom * m - mom * v : m;                                     \
      nb_st(step_out, i, step);                                                          \
      nb_st(moment_out, i, m);                                                           \
      nb_st(param_out, i, nb_ld(param, i) - step);                                       \
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
