"""MatMulBias and SkipLayerNormalization: the transformer layer's fused ops.

Made for inference by netbrew.netdef.passes.transformer:

- MatMulBias(A, B, C) = activation(A @ B + C): a MatMul, its bias Add and, with
  activation="Gelu", the exact GELU after them (fuse_matmul_bias). BLAS writes the product,
  then one numba pass adds the bias row and applies the GELU in place, where the unfused
  ops make two to five more full-size passes (Add, then Div, Erf, Add, Mul, Mul or one
  Gelu). At BERT-base's FFN (128 x 3072) the pass measured 0.18 ms against 0.26 ms for an
  in-place NumPy add then the Gelu kernel in place, and about 1.2 ms for the written-out
  GELU as the net ran it (FusedElementwise, Erf, FusedElementwise).
- SkipLayerNormalization(X, Skip, Scale, B) = LayerNormalization(X + Skip, Scale, B): the
  residual Add before a LayerNormalization (fuse_skip_layer_norm), as onnxruntime's
  SkipLayerNormalization; one numba pass per row writes the sum into Y, takes its
  statistics and normalizes it in place.

The numba paths cover float32 and float64, contiguous operands and a bias (Scale, B) that
varies only along the last dims; elsewhere, and with the JIT off, the unfused ops' kernels
run in turn (the tests' oracle). Gradients: netbrew.operators.fused_transformer_grad;
ONNX export writes the unfused nodes back (netbrew.converters.onnx.fused_to_onnx).
"""

from __future__ import annotations

import math

import numpy as np

from netbrew import jit
from netbrew.errors import SchemaError
from netbrew.operators import activations, arithmetic, matmul, normalization  # noqa: F401
from netbrew.operators.erf_jit import erf_float32
from netbrew.operators.layernorm_jit import REASSOC, row_param, row_stats, rows_view
from netbrew.operators.schema import get_kernel, kernel, schema

ACTIVATIONS = ("", "Gelu")
"""MatMulBias's `activation` values: none, or the exact (erf) GELU."""
_INV_SQRT2 = 1.0 / math.sqrt(2.0)

schema(
    "MatMulBias",
    inputs=["A", "B", "C"],
    outputs=["Y"],
    attrs={"activation": ""},
    dtypes={0: "float", 1: "float", 2: "float"},
    onnx=False,
    doc="Y = activation(MatMul(A, B) + C): A, B as MatMul's; C added as Add does "
    "(broadcast); activation '' (none) or 'Gelu' (exact, Y / 2 * (1 + erf(Y / sqrt 2))); "
    "Y shaped as Add(MatMul(A, B), C); default activation=''",
)

schema(
    "SkipLayerNormalization",
    inputs=["X", "Skip", "Scale", "B?"],
    outputs=["Y"],
    attrs={"axis": -1, "epsilon": 1e-5, "stash_type": 1},
    dtypes={0: "float", 1: "float", 2: "float", 3: "float"},
    onnx=False,
    doc="Y = LayerNormalization(X + Skip, Scale, B) over dims [axis, rank); X + Skip as Add "
    "does (broadcast); Y shaped as X + Skip; defaults axis=-1, epsilon=1e-5, "
    "stash_type=1 (float32)",
)


@jit.kernel
def bias_activation(y, bias, gelu, single):
    """y[r] = act(y[r] + bias) in place, per row r of y (R, N); act the exact GELU when
    `gelu`, else none. `single` (float32) takes erf_jit's rational erf, float64 libm's
    erfc."""
    rows, n = y.shape
    for r in jit.prange(rows):
        for j in range(n):
            v = y[r, j] + bias[j]
            if gelu:
                if single:
                    e = erf_float32(v * np.float32(_INV_SQRT2))
                    if v != v:  # NaN stays NaN (the clamp would turn it into a number)
                        e = v
                    v = np.float32(0.5) * v * (np.float32(1.0) + e)
                else:
                    v = 0.5 * v * math.erfc(-v * _INV_SQRT2)
            y[r, j] = v


@jit.kernel(fastmath=REASSOC)
def skip_layer_norm(x, skip, scale, bias, has_bias, epsilon, y):
    """Per row r of x, skip and y (R, D): y[r] = x[r] + skip[r], then y[r] normalized in
    place as layernorm_jit.layer_norm_forward does (float64 statistics)."""
    rows, d = x.shape
    for r in jit.prange(rows):
        for j in range(d):
            y[r, j] = x[r, j] + skip[r, j]
        m, inv = row_stats(y[r], epsilon)
        for j in range(d):
            v = (np.float64(y[r, j]) - m) * inv * scale[j]
            if has_bias:
                v += bias[j]
            y[r, j] = v


def _bias_row(c: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """C as a contiguous (N,) row when adding it to Y (..., N) is adding that row to every
    row of Y and keeps Y's shape and dtype; else None."""
    if c.dtype != y.dtype or c.ndim > y.ndim or c.shape[-1:] != y.shape[-1:]:
        return None
    if any(s != 1 for s in c.shape[:-1]):
        return None
    return np.ascontiguousarray(c.reshape(-1))


@kernel("MatMulBias")
def matmul_bias_cpu(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, *, activation: str = ""
) -> tuple[np.ndarray]:
    """MatMul, then + C and the activation: one numba pass over BLAS's output in place
    where the JIT is on, Y is float32 or float64 and C is a row of Y's dtype; else the
    Add and Gelu kernels in turn."""
    if activation not in ACTIVATIONS:
        raise SchemaError(
            f"MatMulBias: argument activation={activation!r} is not one of "
            f"{', '.join(map(repr, ACTIVATIONS))}"
        )
    (y,) = matmul.matmul_cpu(a, b)
    row = _bias_row(c, y) if jit.enabled() and y.dtype in jit.FLOATS else None
    if row is not None and y.ndim >= 1 and y.flags.c_contiguous and y.flags.writeable:
        flat = y.reshape(-1, y.shape[-1])
        bias_activation(flat, row, activation == "Gelu", y.dtype == np.float32)
        return (y,)
    (y,) = get_kernel("Add")(y, c)
    if activation == "Gelu":
        (y,) = get_kernel("Gelu")(y, approximate="none")
    return (y,)


@kernel("SkipLayerNormalization")
def skip_layer_normalization_cpu(
    x: np.ndarray,
    skip: np.ndarray,
    scale: np.ndarray,
    b: np.ndarray | None = None,
    *,
    axis: int = -1,
    epsilon: float = 1e-5,
    stash_type: int = 1,
) -> tuple[np.ndarray]:
    """X + Skip normalized: one numba pass per row where the JIT is on, X and Skip have one
    shape and dtype (float32 or float64), are contiguous, and Scale and B vary only along
    the normalized dims; else the Add and LayerNormalization kernels in turn."""
    y = _skip_layer_norm_jit(x, skip, scale, b, axis, epsilon, stash_type)
    if y is not None:
        return (y,)
    (total,) = get_kernel("Add")(x, skip)
    y = normalization.layer_normalization_cpu(
        total, scale, b, axis=axis, epsilon=epsilon, stash_type=stash_type
    )[0]
    return (y,)


def _broadcasts_to(p: np.ndarray, shape: tuple[int, ...]) -> bool:
    try:
        return np.broadcast_shapes(p.shape, shape) == shape
    except ValueError:
        return False


def _skip_layer_norm_jit(x, skip, scale, b, axis, epsilon, stash_type) -> np.ndarray | None:
    """The numba path of skip_layer_normalization_cpu, or None where it does not apply
    (the fallback then checks the operands and raises as Add and LayerNormalization do)."""
    if skip.shape != x.shape or skip.dtype != x.dtype or not -x.ndim <= axis < x.ndim:
        return None
    axis %= x.ndim
    rows = rows_view(x, axis, stash_type)  # None: JIT off, other dtypes, not contiguous
    if rows is None or not skip.flags.c_contiguous:
        return None
    if any(p is not None and not _broadcasts_to(p, x.shape) for p in (scale, b)):
        return None
    scale_row, b_row = (row_param(p, x, axis) for p in (scale, b))
    if scale_row is None or (b is not None and b_row is None):
        return None
    y = np.empty(x.shape, x.dtype)
    skip_layer_norm(
        rows, skip.reshape(rows.shape), scale_row,
        scale_row if b_row is None else b_row, b_row is not None, float(epsilon),
        y.reshape(rows.shape),
    )  # fmt: skip
    return y
