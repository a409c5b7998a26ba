// Broadcasting binary ops, comparisons, logic, Where, SumReduceLike and the gradients that
// sum a broadcast gradient back to an input's shape (see elementwise_binary.py).
//
// A broadcasting kernel takes (inputs..., outputs..., const int64_t* meta, int64_t n,
// int rank): meta is launch.broadcast_meta(out_shape, input shapes...), or NULL with
// rank -1 when every input has the output's shape (nb_off then indexes directly).
#include "elementwise.cuh"

// --- arithmetic, comparisons, logic ------------------------------------------------------

struct Add { template <typename C> __device__ C operator()(C a, C b) const { return a + b; } };
struct Sub { template <typename C> __device__ C operator()(C a, C b) const { return a - b; } };
struct Mul { template <typename C> __device__ C operator()(C a, C b) const { return a * b; } };
struct Div { template <typename C> __device__ C operator()(C a, C b) const { return a / b; } };
struct Max {
  template <typename C> __device__ C operator()(C a, C b) const { return nb_max(a, b); }
};
struct Min {
  template <typename C> __device__ C operator()(C a, C b) const { return nb_min(a, b); }
};
struct Eq { template <typename C> __device__ bool operator()(C a, C b) const { return a == b; } };
struct Lt { template <typename C> __device__ bool operator()(C a, C b) const { return a < b; } };
struct Gt { template <typename C> __device__ bool operator()(C a, C b) const { return a > b; } };
struct Le { template <typename C> __device__ bool operator()(C a, C b) const { return a <= b; } };
struct Ge { template <typename C> __device__ bool operator()(C a, C b) const { return a >= b; } };
struct And { __device__ bool operator()(bool a, bool b) const { return a && b; } };
struct Or { __device__ bool operator()(bool a, bool b) const { return a || b; } };
struct Xor { __device__ bool operator()(bool a, bool b) const { return a != b; } };

template <typename TA, typename TB, typename TC, typename F>
__device__ __forceinline__ void nb_zip(const TA* a, const TB* b, TC* c, const int64_t* meta,
                                       int64_t n, int rank, F f) {
  NB_GRID_STRIDE(i, n) {
    nb_st(c, i, f(nb_ld(a, nb_off(i, rank, meta, 0)), nb_ld(b, nb_off(i, rank, meta, 1))));
  }
}

#define NB_BINARY(SFX, T, NAME, OP, TOUT)                                               \
  extern "C" __global__ void NAME##_##SFX(const T* a, const T* b, TOUT* c,              \
                                          const int64_t* meta, int64_t n, int rank) {   \
    nb_zip(a, b, c, meta, n, rank, OP());                                               \
  }
#define NB_ARITH(SFX, T, NAME, OP) NB_BINARY(SFX, T, NAME, OP, T)
#define NB_COMPARE(SFX, T, NAME, OP) NB_BINARY(SFX, T, NAME, OP, bool)

NB_NUMERIC_TYPES(NB_ARITH, add, Add)
NB_NUMERIC_TYPES(NB_ARITH, sub, Sub)
NB_NUMERIC_TYPES(NB_ARITH, mul, Mul)
NB_FLOAT_TYPES(NB_ARITH, div, Div)
NB_NUMERIC_TYPES(NB_ARITH, max, Max)
NB_NUMERIC_TYPES(NB_ARITH, min, Min)
NB_ALL_TYPES(NB_COMPARE, equal, Eq)
NB_ALL_TYPES(NB_COMPARE, less, Lt)
NB_ALL_TYPES(NB_COMPARE, greater, Gt)
NB_NUMERIC_TYPES(NB_COMPARE, less_or_equal, Le)
NB_NUMERIC_TYPES(NB_COMPARE, greater_or_equal, Ge)
NB_BINARY(b8, bool, logic_and, And, bool)
NB_BINARY(b8, bool, logic_or, Or, bool)
NB_BINARY(b8, bool, logic_xor, Xor, bool)

extern "C" __global__ void logic_not_b8(const bool* x, bool* y, int64_t n) {
  NB_GRID_STRIDE(i, n) { y[i] = !x[i]; }
}

// Integer division truncates toward zero (C's, as ONNX); a zero divisor sets *err, which
// the launch code reads back to raise the CPU kernel's error.
#define NB_INT_DIV(SFX, T, _)                                                            \
  extern "C" __global__ void div_##SFX(const T* a, const T* b, T* c, int32_t* err,       \
                                       const int64_t* meta, int64_t n, int rank) {       \
    NB_GRID_STRIDE(i, n) {                                                               \
      T d = b[nb_off(i, rank, meta, 1)];                                                 \
      if (d == 0) {                                                                      \
        *err = 1;                                                                        \
        c[i] = 0;                                                                        \
      } else {                                                                           \
        c[i] = a[nb_off(i, rank, meta, 0)] / d;                                          \
      }                                                                                  \
    }                                                                                    \
  }
NB_INT_TYPES(NB_INT_DIV, _)

// y = x / d (Mean's division by the input count; d as NumPy casts it to T).
#define NB_DIV_SCALAR(SFX, T, _)                                                         \
  extern "C" __global__ void div_scalar_##SFX(const T* x, T* y, int64_t n, double d) {   \
    typedef typename nb_compute<T>::type C;                                              \
    const C v = nb_attr<T>(d);                                                           \
    NB_GRID_STRIDE(i, n) { nb_st(y, i, nb_ld(x, i) / v); }                               \
  }
NB_FLOAT_TYPES(NB_DIV_SCALAR, _)

// --- Pow: one kernel per (base, exponent) dtype pair ---------------------------------------

// x ** y with integer wraparound; a negative y gives 0 unless |x| == 1 (as the CPU kernel).
template <typename T>
__device__ __forceinline__ T nb_ipow(T x, int64_t y) {
  if (y < 0) {
    if (x == 1) return 1;
    if (x == -1) return (y & 1) ? -1 : 1;
    return 0;
  }
  uint64_t base = (uint64_t)(int64_t)x, r = 1, e = (uint64_t)y;
  while (e) {
    if (e & 1) r *= base;
    base *= base;
    e >>= 1;
  }
  return (T)(int64_t)r;
}

template <typename TX, typename TY>
__device__ __forceinline__ TX nb_pow(TX x, TY y) {  // a float base or exponent: in double
  return (TX)pow((double)x, (double)y);
}
template <> __device__ __forceinline__ int32_t nb_pow(int32_t x, int32_t y) {
  return nb_ipow(x, y);
}
template <> __device__ __forceinline__ int32_t nb_pow(int32_t x, int64_t y) {
  return nb_ipow(x, y);
}
template <> __device__ __forceinline__ int64_t nb_pow(int64_t x, int32_t y) {
  return nb_ipow(x, y);
}
template <> __device__ __forceinline__ int64_t nb_pow(int64_t x, int64_t y) {
  return nb_ipow(x, y);
}

#define NB_POW(SFXY, TY, SFXX, TX)                                                       \
  extern "C" __global__ void pow_##SFXX##_##SFXY(const TX* x, const TY* y, TX* z,        \
                                                 const int64_t* meta, int64_t n,         \
                                                 int rank) {                             \
    typedef typename nb_compute<TX>::type CX;                                            \
    typedef typename nb_compute<TY>::type CY;                                            \
    NB_GRID_STRIDE(i, n) {                                                               \
      CX xi = nb_ld(x, nb_off(i, rank, meta, 0));                                        \
      CY yi = nb_ld(y, nb_off(i, rank, meta, 1));                                        \
      nb_st(z, i, nb_pow<CX, CY>(xi, yi));                                               \
    }                                                                                    \
  }
#define NB_POW_BASE(SFXX, TX, _) NB_NUMERIC_TYPES_2(NB_POW, SFXX, TX)
NB_NUMERIC_TYPES(NB_POW_BASE, _)

// PowGradient's broadcast terms, in double: gx = dz * y * x^(y-1) (0 where y == 0) and
// gy = dz * z * log(x) (0 where x == 0 and y >= 0); gx or gy may be NULL (not wanted).
// z and dz have the output's shape; meta broadcasts x (input 0) and y (input 1).
#define NB_POW_GRAD(SFXY, TY, SFXX, TX)                                                  \
  extern "C" __global__ void pow_grad_##SFXX##_##SFXY(                                   \
      const TX* x, const TY* y, const TX* z, const TX* dz, double* gx, double* gy,       \
      const int64_t* meta, int64_t n, int rank) {                                        \
    NB_GRID_STRIDE(i, n) {                                                               \
      double xi = (double)nb_ld(x, nb_off(i, rank, meta, 0));                            \
      double yi = (double)nb_ld(y, nb_off(i, rank, meta, 1));                            \
      double g = (double)nb_ld(dz, i);                                                   \
      if (gx) gx[i] = yi == 0 ? 0.0 : g * yi * pow(xi, yi - 1);                          \
      if (gy) gy[i] = xi == 0 && yi >= 0 ? 0.0 : g * (double)nb_ld(z, i) * log(xi);      \
    }                                                                                    \
  }
#define NB_POW_GRAD_BASE(SFXX, TX, _) NB_NUMERIC_TYPES_2(NB_POW_GRAD, SFXX, TX)
NB_FLOAT_TYPES(NB_POW_GRAD_BASE, _)

// --- Where and the gradients that select ---------------------------------------------------

// Where moves bytes: one kernel per element size. Inputs: condition (0), X (1), Y (2).
#define NB_WHERE(BYTES, U)                                                               \
  extern "C" __global__ void where_##BYTES(const bool* c, const U* x, const U* y, U* out, \
                                           const int64_t* meta, int64_t n, int rank) {   \
    NB_GRID_STRIDE(i, n) {                                                               \
      out[i] = c[nb_off(i, rank, meta, 0)] ? x[nb_off(i, rank, meta, 1)]                 \
                                           : y[nb_off(i, rank, meta, 2)];                \
    }                                                                                    \
  }
NB_WHERE(1, uint8_t)
NB_WHERE(2, uint16_t)
NB_WHERE(4, uint32_t)
NB_WHERE(8, uint64_t)

// WhereGradient's term: g = d where condition == take, else 0 (condition is input 0,
// broadcast to d's shape).
#define NB_WHERE_GRAD(SFX, T, _)                                                         \
  extern "C" __global__ void where_grad_##SFX(const bool* c, const T* d, T* g,           \
                                              const int64_t* meta, int64_t n, int rank,  \
                                              int take) {                                \
    typedef typename nb_compute<T>::type C;                                              \
    NB_GRID_STRIDE(i, n) {                                                               \
      nb_st(g, i, c[nb_off(i, rank, meta, 0)] == (take != 0) ? nb_ld(d, i) : C(0));      \
    }                                                                                    \
  }
NB_NUMERIC_TYPES(NB_WHERE_GRAD, _)

// Max/MinGradient's term for one input x (broadcast to y's shape): g = dy where x == y.
#define NB_SELECT_GRAD(SFX, T, _)                                                        \
  extern "C" __global__ void select_grad_##SFX(const T* x, const T* y, const T* dy,      \
                                               T* g, const int64_t* meta, int64_t n,     \
                                               int rank) {                               \
    typedef typename nb_compute<T>::type C;                                              \
    NB_GRID_STRIDE(i, n) {                                                               \
      bool hit = nb_ld(x, nb_off(i, rank, meta, 0)) == nb_ld(y, i);                      \
      nb_st(g, i, hit ? nb_ld(dy, i) : C(0));                                            \
    }                                                                                    \
  }
NB_NUMERIC_TYPES(NB_SELECT_GRAD, _)

// --- SumReduceLike --------------------------------------------------------------------------
//
// meta = [kept sizes (8), kept strides (8), reduced sizes (8), reduced strides (8)], strides
// in elements of A; nk, nr: how many of each. Output o (m of them) is the sum over its r
// reduced elements. Pass 1: thread t = (c, o), c < chunks, sums o's elements c, c + chunks,
// c + 2 chunks... (neighbouring threads read neighbouring elements) into part[t], in ACC
// (double for floats, int64 for integers); pass 2 adds each output's chunks.

__device__ __forceinline__ int64_t nb_coord_offset(int64_t i, int nd, const int64_t* sizes,
                                                   const int64_t* strides) {
  int64_t offset = 0;
  for (int d = nd - 1; d >= 0; --d) {
    offset += (i % sizes[d]) * strides[d];
    i /= sizes[d];
  }
  return offset;
}

#define NB_SUM_PART(SFX, T, ACC)                                                         \
  extern "C" __global__ void sum_part_##SFX(const T* a, ACC* part, const int64_t* meta,   \
                                            int64_t n, int64_t m, int64_t r,             \
                                            int64_t chunks, int nk, int nr) {            \
    NB_GRID_STRIDE(t, n) {                                                               \
      int64_t o = t % m;                                                                 \
      int64_t base = nb_coord_offset(o, nk, meta, meta + NB_MAX_RANK);                   \
      ACC acc = 0;                                                                       \
      for (int64_t j = t / m; j < r; j += chunks) {                                      \
        acc += (ACC)nb_ld(a, base + nb_coord_offset(j, nr, meta + 2 * NB_MAX_RANK,       \
                                                    meta + 3 * NB_MAX_RANK));            \
      }                                                                                  \
      part[t] = acc;                                                                     \
    }                                                                                    \
  }
NB_FLOAT_TYPES(NB_SUM_PART, double)
NB_INT_TYPES(NB_SUM_PART, int64_t)

#define NB_SUM_FINISH(SFX, T, ASFX, ACC)                                                 \
  extern "C" __global__ void sum_finish_##ASFX##_##SFX(const ACC* part, T* out,          \
                                                      int64_t n, int64_t chunks) {       \
    NB_GRID_STRIDE(o, n) {                                                               \
      ACC acc = 0;                                                                       \
      for (int64_t c = 0; c < chunks; ++c) acc += part[c * n + o];                       \
      nb_st(out, o, acc);                                                                \
    }                                                                                    \
  }
NB_FLOAT_TYPES(NB_SUM_FINISH, f64, double)
NB_INT_TYPES(NB_SUM_FINISH, i64, int64_t)
