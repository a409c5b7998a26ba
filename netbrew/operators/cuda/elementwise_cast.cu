// Cast between float32/16/64, int32/64 and bool, fills, and Dropout's masks (see
// elementwise_cast.py).
#include "elementwise.cuh"

// cast_<from>_<to>: C's conversions (floats to integers truncate, nonzero to bool is true,
// float64 to float16 rounds once).
#define NB_CAST(SFXO, TO, SFXI, TI)                                                      \
  extern "C" __global__ void cast_##SFXI##_##SFXO(const TI* x, TO* y, int64_t n) {       \
    NB_GRID_STRIDE(i, n) { nb_st(y, i, nb_ld(x, i)); }                                   \
  }
#define NB_CAST_FROM(SFXI, TI, _)                                                        \
  NB_NUMERIC_TYPES_2(NB_CAST, SFXI, TI) NB_CAST(b8, bool, SFXI, TI)
NB_ALL_TYPES(NB_CAST_FROM, _)

// y = v everywhere (zeros of any dtype; Dropout's all-true mask).
#define NB_FILL(SFX, T, _)                                                               \
  extern "C" __global__ void fill_##SFX(T* y, int64_t n, double v) {                     \
    NB_GRID_STRIDE(i, n) { nb_st(y, i, v); }                                             \
  }
NB_ALL_TYPES(NB_FILL, _)

// Dropout's uniform draw for element i: splitmix64 of a counter, 53 random bits in [0, 1).
__device__ __forceinline__ double nb_uniform(uint64_t seed, int64_t i) {
  uint64_t z = seed + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

// Dropout in training: mask = uniform >= p, y = x * mask * scale (scale as NumPy casts the
// Python float 1 / (1 - p) to T). DropoutGradient: dx = dy * mask * scale.
#define NB_DROPOUT(SFX, T, _)                                                            \
  extern "C" __global__ void dropout_##SFX(const T* x, T* y, bool* mask, int64_t n,      \
                                           uint64_t seed, double p, double scale) {      \
    typedef typename nb_compute<T>::type C;                                              \
    const C s = nb_attr<T>(scale);                                                       \
    NB_GRID_STRIDE(i, n) {                                                               \
      bool keep = nb_uniform(seed, i) >= p;                                              \
      mask[i] = keep;                                                                    \
      nb_st(y, i, nb_ld(x, i) * C(keep ? 1 : 0) * s);                                    \
    }                                                                                    \
  }                                                                                      \
  extern "C" __global__ void dropout_grad_##SFX(const T* dy, const bool* mask, T* dx,    \
                                                int64_t n, double scale) {               \
    typedef typename nb_compute<T>::type C;                                              \
    const C s = nb_attr<T>(scale);                                                       \
    NB_GRID_STRIDE(i, n) { nb_st(dx, i, nb_ld(dy, i) * C(mask[i] ? 1 : 0) * s); }        \
  }
NB_FLOAT_TYPES(NB_DROPOUT, _)
