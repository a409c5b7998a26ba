"""Relu, LeakyRelu, PRelu, Sigmoid, Tanh, Elu, Selu, Softplus, HardSigmoid and Gelu.

All are elementwise, keep the input's shape and dtype, and may run in place. Gelu's exact form
needs erf, which NumPy lacks: `normal_cdf` evaluates it with W. J. Cody's rational Chebyshev
approximations (Math. Comp. 1969), accurate to about 1e-16 in float64.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators import erf_jit
from netbrew.operators.schema import kernel, schema
from netbrew.operators.zeros import relu

SELU_ALPHA = 1.67326319217681884765625  # ONNX's float32 defaults
SELU_GAMMA = 1.05070102214813232421875

# Cody's coefficients: erf on |z| <= 0.46875, erfc on (0.46875, 4] and on (4, inf).
_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
      3.20937758913846947e03, 1.85777706184603153e-1)  # fmt: skip
_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03,
      2.84423683343917062e03)  # fmt: skip
_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
      2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03,
      2.05107837782607147e03, 1.23033935479799725e03, 2.15311535474403846e-8)  # fmt: skip
_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
      1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
      3.43936767414372164e03, 1.23033935480374942e03)  # fmt: skip
_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
      1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2)  # fmt: skip
_Q = (2.56852019228982242e00, 1.87295284992346047e00, 5.27905102951428412e-1,
      6.05183413124413191e-2, 2.33520497626869185e-3)  # fmt: skip


def _ratio(num: tuple, den: tuple, t: np.ndarray) -> np.ndarray:
    """Cody's nested form: num[-1] leads the numerator, the denominator is monic."""
    n, d = num[-1] * t, t.copy()
    for a, b in zip(num[:-2], den[:-1], strict=True):
        n += a
        n *= t
        d += b
        d *= t
    n += num[-2]
    d += den[-1]
    return np.divide(n, d, out=n)


def _erfc_large(y: np.ndarray) -> np.ndarray:
    """erfc(y) for y > 0.46875, with exp(-y^2) split for accuracy in the tail."""
    y = np.minimum(y, 30.0)  # erfc(30) underflows to 0; keeps inf out of the arithmetic
    mid = y <= 4.0
    r = np.empty_like(y)
    r[mid] = _ratio(_C, _D, y[mid])
    t = 1.0 / np.square(y[~mid])
    r[~mid] = (1.0 / math.sqrt(math.pi) - t * _ratio(_P, _Q, t)) / y[~mid]
    head = np.trunc(y * 16.0) / 16.0
    r *= np.exp(-head * head) * np.exp((head - y) * (y + head))
    return r


def normal_cdf(x: np.ndarray) -> np.ndarray:
    """Phi(x) = (1 + erf(x / sqrt(2))) / 2 in float64, accurate in both tails."""
    z = np.asarray(x, dtype=np.float64) / math.sqrt(2.0)
    y = np.abs(z)
    out = np.empty_like(z)
    small = y <= 0.46875
    zs = z[small]
    out[small] = 0.5 + 0.5 * zs * _ratio(_A, _B, zs * zs)
    big = ~small  # NaN lands here and stays NaN
    half_erfc = 0.5 * _erfc_large(y[big])
    out[big] = np.where(z[big] > 0, 1.0 - half_erfc, half_erfc)
    return out


def _elementwise(name: str, formula: str, attrs: dict | None = None, dtypes: str = "float"):
    schema(
        name,
        attrs=attrs,
        inplace={0: 0},
        dtypes=dtypes,
        doc=f"Y = {formula}, elementwise; X and Y same shape and dtype",
    )
    return kernel(name)


@_elementwise("Relu", "max(X, 0)", dtypes="numeric")
def relu_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    return (relu(x).astype(x.dtype, copy=False),)


@_elementwise("LeakyRelu", "X if X >= 0 else alpha * X (alpha=0.01)", {"alpha": 0.01})
def leaky_relu_cpu(x: np.ndarray, alpha: float) -> tuple[np.ndarray]:
    return (np.where(x >= 0, x, x * alpha),)


schema(
    "PRelu",
    inputs=["X", "slope"],
    inplace={0: 0},
    dtypes="numeric",
    doc="Y = X if X >= 0 else slope * X; slope broadcasts to X's shape (unidirectional), "
    "e.g. [C, 1, 1] for NCHW; Y same shape and dtype as X",
)


@kernel("PRelu")
def prelu_cpu(x: np.ndarray, slope: np.ndarray) -> tuple[np.ndarray]:
    return (np.where(x < 0, x * align_slope(x, slope), x),)


def align_slope(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """PRelu's slope as an array that broadcasts to X.

    ONNX asks for unidirectional broadcasting; like onnxruntime and onnx's reference, a
    1-D slope of X.shape[1] elements is also taken as per-channel ([C] -> [C, 1, ...]),
    the form PyTorch exports.
    """
    if slope.dtype != x.dtype:
        raise SchemaError(f"input 'slope' has dtype {slope.dtype}, expected {x.dtype} like 'X'")
    try:
        if np.broadcast_shapes(x.shape, slope.shape) == x.shape:
            return slope
    except ValueError:
        pass
    if slope.ndim == 1 and x.ndim >= 2 and slope.size == x.shape[1]:
        return slope.reshape(-1, *([1] * (x.ndim - 2)))
    raise ShapeError(
        f"input 'slope' has shape {list(slope.shape)}, which does not broadcast to X's "
        f"shape {list(x.shape)} (unidirectional: align trailing dims, or one value per "
        "channel)"
    )


@_elementwise("Sigmoid", "1 / (1 + exp(-X))")
def sigmoid_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    e = np.exp(-np.abs(x))  # never overflows; pick the form that does not cancel
    return (np.where(x >= 0, 1 / (1 + e), e / (1 + e)),)


@_elementwise("Tanh", "tanh(X)")
def tanh_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    return (np.tanh(x),)


@_elementwise("Elu", "X if X > 0 else alpha * (exp(X) - 1) (alpha=1.0)", {"alpha": 1.0})
def elu_cpu(x: np.ndarray, alpha: float) -> tuple[np.ndarray]:
    return (np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))).astype(x.dtype, copy=False),)


@_elementwise(
    "Selu",
    f"gamma * (X if X > 0 else alpha * (exp(X) - 1)) (alpha={SELU_ALPHA:.6f}, "
    f"gamma={SELU_GAMMA:.6f})",
    {"alpha": SELU_ALPHA, "gamma": SELU_GAMMA},
)
def selu_cpu(x: np.ndarray, alpha: float, gamma: float) -> tuple[np.ndarray]:
    return (gamma * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))),)


@_elementwise("Softplus", "log(1 + exp(X))")
def softplus_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    return (np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x))),)


@_elementwise(
    "HardSigmoid", "max(0, min(1, alpha * X + beta)) (alpha=0.2, beta=0.5)",
    {"alpha": 0.2, "beta": 0.5},
)  # fmt: skip
def hard_sigmoid_cpu(x: np.ndarray, alpha: float, beta: float) -> tuple[np.ndarray]:
    return (np.clip(x * alpha + beta, 0, 1),)


@_elementwise(
    "Gelu",
    "X / 2 * (1 + erf(X / sqrt(2))) (approximate='none'), or with approximate='tanh' "
    "X / 2 * (1 + tanh(sqrt(2 / pi) * (X + 0.044715 * X^3)))",
    {"approximate": "none"},
)
def gelu_cpu(x: np.ndarray, approximate: str) -> tuple[np.ndarray]:
    if approximate == "none":
        fast = erf_jit.gelu(x)  # numba for float32 and float64, see erf_jit
        return ((x * normal_cdf(x)).astype(x.dtype, copy=False) if fast is None else fast,)
    if approximate == "tanh":
        with np.errstate(over="ignore"):  # X^3 overflows to inf, and tanh(inf) = 1 is right
            inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
            return (0.5 * x * (1 + np.tanh(inner)),)
    raise ValueError(f"argument 'approximate' is {approximate!r}, expected 'none' or 'tanh'")
