// Unary math, the activations and Clip, and their gradients (see elementwise.py).
//
// Every forward kernel is `<op>_<dtype>(const T* x, T* y, int64_t n, double a, double b)`,
// a and b its float arguments (alpha, beta, gamma) or unused; every gradient kernel is
// `<op>_grad_<dtype>(const T* u, const T* dy, T* dx, int64_t n, double a, double b)`, u
// the forward's output Y or input X as the CPU kernel reads it. __half computes in float.
#include "elementwise.cuh"

#define NB_SQRT1_2 0.70710678118654752440
#define NB_2_SQRTPI 1.12837916709551257390  // 2 / sqrt(pi)
#define NB_SQRT_2_PI 0.79788456080286535588 // sqrt(2 / pi)
#define NB_1_SQRT2PI 0.39894228040143267794 // 1 / sqrt(2 pi)
#define NB_GELU_C 0.044715

// A functor of one value x of compute type C, with a and b its arguments in C.
#define NB_OP1(NAME, EXPR)                                                        \
  template <typename C> struct NAME {                                             \
    C a, b;                                                                       \
    __device__ __forceinline__ C operator()(C x) const { return EXPR; }           \
  };
// ... and of two (u, g): the gradients.
#define NB_OP2(NAME, EXPR)                                                        \
  template <typename C> struct NAME {                                             \
    C a, b;                                                                       \
    __device__ __forceinline__ C operator()(C u, C g) const { return EXPR; }      \
  };

template <typename C> __device__ __forceinline__ C nb_abs(C x) { return x < 0 ? -x : x; }
__device__ __forceinline__ float nb_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double nb_abs(double x) { return fabs(x); }

// np.sign: -1, 0 or 1, and NaN stays NaN.
template <typename C> __device__ __forceinline__ C nb_sign(C x) {
  return x > C(0) ? C(1) : x < C(0) ? C(-1) : x == C(0) ? C(0) : x;
}

// The form that does not cancel: e = exp(-|x|) never overflows.
template <typename C> __device__ __forceinline__ C nb_sigmoid(C x) {
  C e = nb_exp(-nb_fabs(x));
  return x >= C(0) ? C(1) / (C(1) + e) : e / (C(1) + e);
}

__device__ __forceinline__ double nb_gelu(double x) {  // x * Phi(x), in double as the CPU
  return x * (0.5 * erfc(-x * NB_SQRT1_2));
}
__device__ __forceinline__ double nb_gelu_slope(double x) {  // Phi(x) + x * phi(x)
  return 0.5 * erfc(-x * NB_SQRT1_2) + x * (exp(-0.5 * x * x) * NB_1_SQRT2PI);
}

// The NumPy formulas of activations.py and arithmetic.py, in C (for __half: float).
NB_OP1(Neg, -x)
NB_OP1(Abs, nb_abs(x))
NB_OP1(Sign, nb_sign(x))
NB_OP1(Exp, nb_exp(x))
NB_OP1(Log, nb_log(x))
NB_OP1(Sqrt, nb_sqrt(x))
NB_OP1(Reciprocal, C(1) / x)
NB_OP1(Sin, nb_sin(x))
NB_OP1(Cos, nb_cos(x))
NB_OP1(Tanh, nb_tanh(x))
NB_OP1(Erf, nb_erf(x))
NB_OP1(Floor, nb_floor(x))
NB_OP1(Ceil, nb_ceil(x))
NB_OP1(Sigmoid, nb_sigmoid(x))
NB_OP1(Softplus, (x > C(0) ? x : C(0)) + nb_log1p(nb_exp(-nb_fabs(x))))
NB_OP1(LeakyRelu, x >= C(0) ? x : x * a)                        // a = alpha
NB_OP1(Elu, x > C(0) ? x : a * nb_expm1(x))                     // a = alpha
NB_OP1(Selu, b * (x > C(0) ? x : a * nb_expm1(x)))              // a = alpha, b = gamma
NB_OP1(HardSigmoid, nb_min(nb_max(x * a + b, C(0)), C(1)))      // a = alpha, b = beta
NB_OP1(HardSwish, x * nb_min(nb_max(x * C(1.0 / 6.0) + C(0.5), C(0)), C(1)))
NB_OP1(Gelu, C(nb_gelu(double(x))))
NB_OP1(GeluTanh, C(0.5) * x * (C(1) + nb_tanh(C(NB_SQRT_2_PI) *
                                             (x + C(NB_GELU_C) * x * x * x))))

// Gradients: u is Y for the ones that read the output, X for the others; g is dY.
NB_OP2(SigmoidGrad, g * u * (C(1) - u))
NB_OP2(TanhGrad, g * (C(1) - u * u))
NB_OP2(SoftplusGrad, g * -nb_expm1(-u))
NB_OP2(HardSigmoidGrad, u > C(0) && u < C(1) ? g * a : C(0))   // a = alpha
NB_OP2(SqrtGrad, g / (C(2) * u))
NB_OP2(ReciprocalGrad, -g * u * u)
NB_OP2(AbsGrad, u > C(0) ? g : u < C(0) ? -g : C(0))
NB_OP2(SinGrad, g * nb_cos(u))
NB_OP2(CosGrad, g * -nb_sin(u))
NB_OP2(ErfGrad, g * (C(NB_2_SQRTPI) * nb_exp(-u * u)))
NB_OP2(HardSwishGrad, g * (u < C(-3) ? C(0) : u > C(3) ? C(1) : u * C(1.0 / 3.0) + C(0.5)))
NB_OP2(GeluGrad, C(double(g) * nb_gelu_slope(double(u))))

template <typename C> struct GeluTanhGrad {
  C a, b;
  __device__ __forceinline__ C operator()(C x, C g) const {
    const C k = C(NB_SQRT_2_PI), c = C(NB_GELU_C);
    C t = nb_tanh(k * (x + c * x * x * x));
    C sech2 = C(1) - t * t;
    C slope = sech2 == C(0) ? C(0) : C(0.5) * x * sech2 * k * (C(1) + C(3 * NB_GELU_C) * x * x);
    return g * (C(0.5) * (C(1) + t) + slope);
  }
};

template <typename T, typename F>
__device__ __forceinline__ void nb_map1(const T* x, T* y, int64_t n, F f) {
  NB_GRID_STRIDE(i, n) { nb_st(y, i, f(nb_ld(x, i))); }
}

template <typename T, typename F>
__device__ __forceinline__ void nb_map2(const T* u, const T* g, T* dx, int64_t n, F f) {
  NB_GRID_STRIDE(i, n) { nb_st(dx, i, f(nb_ld(u, i), nb_ld(g, i))); }
}

#define NB_UNARY(SFX, T, NAME, OP)                                                     \
  extern "C" __global__ void NAME##_##SFX(const T* x, T* y, int64_t n, double a,       \
                                          double b) {                                  \
    typedef typename nb_compute<T>::type C;                                            \
    nb_map1(x, y, n, OP<C>{nb_attr<T>(a), nb_attr<T>(b)});                             \
  }
#define NB_GRAD(SFX, T, NAME, OP)                                                      \
  extern "C" __global__ void NAME##_grad_##SFX(const T* u, const T* g, T* dx,          \
                                               int64_t n, double a, double b) {        \
    typedef typename nb_compute<T>::type C;                                            \
    nb_map2(u, g, dx, n, OP<C>{nb_attr<T>(a), nb_attr<T>(b)});                         \
  }

NB_NUMERIC_TYPES(NB_UNARY, neg, Neg)
NB_NUMERIC_TYPES(NB_UNARY, abs, Abs)
NB_NUMERIC_TYPES(NB_UNARY, sign, Sign)
NB_FLOAT_TYPES(NB_UNARY, exp, Exp)
NB_FLOAT_TYPES(NB_UNARY, log, Log)
NB_FLOAT_TYPES(NB_UNARY, sqrt, Sqrt)
NB_FLOAT_TYPES(NB_UNARY, reciprocal, Reciprocal)
NB_FLOAT_TYPES(NB_UNARY, sin, Sin)
NB_FLOAT_TYPES(NB_UNARY, cos, Cos)
NB_FLOAT_TYPES(NB_UNARY, tanh, Tanh)
NB_FLOAT_TYPES(NB_UNARY, erf, Erf)
NB_FLOAT_TYPES(NB_UNARY, floor, Floor)
NB_FLOAT_TYPES(NB_UNARY, ceil, Ceil)
NB_FLOAT_TYPES(NB_UNARY, sigmoid, Sigmoid)
NB_FLOAT_TYPES(NB_UNARY, softplus, Softplus)
NB_FLOAT_TYPES(NB_UNARY, leaky_relu, LeakyRelu)
NB_FLOAT_TYPES(NB_UNARY, elu, Elu)
NB_FLOAT_TYPES(NB_UNARY, selu, Selu)
NB_FLOAT_TYPES(NB_UNARY, hard_sigmoid, HardSigmoid)
NB_FLOAT_TYPES(NB_UNARY, hard_swish, HardSwish)
NB_FLOAT_TYPES(NB_UNARY, gelu, Gelu)
NB_FLOAT_TYPES(NB_UNARY, gelu_tanh, GeluTanh)

NB_FLOAT_TYPES(NB_GRAD, sigmoid, SigmoidGrad)
NB_FLOAT_TYPES(NB_GRAD, tanh, TanhGrad)
NB_FLOAT_TYPES(NB_GRAD, softplus, SoftplusGrad)
NB_FLOAT_TYPES(NB_GRAD, hard_sigmoid, HardSigmoidGrad)
NB_FLOAT_TYPES(NB_GRAD, sqrt, SqrtGrad)
NB_FLOAT_TYPES(NB_GRAD, reciprocal, ReciprocalGrad)
NB_NUMERIC_TYPES(NB_GRAD, abs, AbsGrad)
NB_FLOAT_TYPES(NB_GRAD, sin, SinGrad)
NB_FLOAT_TYPES(NB_GRAD, cos, CosGrad)
NB_FLOAT_TYPES(NB_GRAD, erf, ErfGrad)
NB_FLOAT_TYPES(NB_GRAD, hard_swish, HardSwishGrad)
NB_FLOAT_TYPES(NB_GRAD, gelu, GeluGrad)
NB_FLOAT_TYPES(NB_GRAD, gelu_tanh, GeluTanhGrad)

// LeakyReluGradient (selu = 0) and SeluGradient / EluGradient (selu = 1, b = gamma) read
// Y, dY and, when given (x != NULL), X: where X > 0 (else Y > 0, or Y * gamma > 0).
#define NB_Y_OR_X_GRAD(SFX, T, _)                                                      \
  extern "C" __global__ void y_or_x_grad_##SFX(const T* y, const T* g, const T* x,     \
                                               T* dx, int64_t n, double a, double b,   \
                                               int selu) {                             \
    typedef typename nb_compute<T>::type C;                                            \
    const C alpha = nb_attr<T>(a), gamma = nb_attr<T>(b), ga = nb_attr<T>(b * a);      \
    NB_GRID_STRIDE(i, n) {                                                             \
      C yi = nb_ld(y, i), gi = nb_ld(g, i);                                            \
      if (selu) {                                                                      \
        bool pos = (x ? nb_ld(x, i) : yi * gamma) > C(0);                              \
        nb_st(dx, i, pos ? gi * gamma : gi * (yi + ga));                               \
      } else {                                                                         \
        bool pos = (x ? nb_ld(x, i) : yi) > C(0);                                      \
        nb_st(dx, i, pos ? gi : gi * alpha);                                           \
      }                                                                                \
    }                                                                                  \
  }
NB_FLOAT_TYPES(NB_Y_OR_X_GRAD, _)

// Clip: lo and hi point at one value each, or are NULL (no bound); np.maximum then
// np.minimum, so a NaN anywhere wins and min > max gives max.
#define NB_CLIP(SFX, T, _)                                                             \
  extern "C" __global__ void clip_##SFX(const T* x, const T* lo, const T* hi, T* y,    \
                                        int64_t n) {                                   \
    typedef typename nb_compute<T>::type C;                                            \
    NB_GRID_STRIDE(i, n) {                                                             \
      C v = nb_ld(x, i);                                                               \
      if (lo) v = nb_max(v, nb_ld(lo, 0));                                             \
      if (hi) v = nb_min(v, nb_ld(hi, 0));                                             \
      nb_st(y, i, v);                                                                  \
    }                                                                                  \
  }                                                                                    \
  extern "C" __global__ void clip_grad_##SFX(const T* x, const T* g, const T* lo,      \
                                             const T* hi, T* dx, int64_t n) {          \
    typedef typename nb_compute<T>::type C;                                            \
    NB_GRID_STRIDE(i, n) {                                                             \
      C v = nb_ld(x, i);                                                               \
      bool inside = (!lo || v >= nb_ld(lo, 0)) && (!hi || v <= nb_ld(hi, 0));          \
      nb_st(dx, i, inside ? nb_ld(g, i) : C(0));                                       \
    }                                                                                  \
  }
NB_NUMERIC_TYPES(NB_CLIP, _)
