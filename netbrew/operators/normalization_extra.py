"""RMSNormalization, InstanceNormalization, GroupNormalization, LpNormalization,
MeanVarianceNormalization and LRN.

Statistics are computed in float32 for 16-bit inputs (or in the stash_type precision where the
op has one) and the normalized values cast back to X's dtype before the scale and bias.
Gradients are in normalization_extra_grad.py.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators import lrn_jit
from netbrew.operators.normalization import _STASH_TYPES, _acc_dtype
from netbrew.operators.schema import REQUIRED, kernel, schema

schema(
    "RMSNormalization",
    inputs=["X", "scale"],
    outputs=["Y"],
    attrs={"axis": -1, "epsilon": 1e-5, "stash_type": 1},
    dtypes="float",
    doc="Y = X / sqrt(mean(X^2 over dims [axis, rank)) + epsilon) * scale; the first stage in "
    "the stash_type precision and cast back to X's dtype; scale broadcasts to X "
    "(unidirectional); Y has X's shape and scale's dtype; "
    "defaults axis=-1, epsilon=1e-5, stash_type=1 (float32)",
)
schema(
    "InstanceNormalization",
    inputs=["input", "scale", "B"],
    outputs=["output"],
    attrs={"epsilon": 1e-5},
    dtypes="float",
    doc="output = scale * (input - mean) / sqrt(var + epsilon) + B, mean and (biased) var over "
    "the spatial dims D1.. of each (n, c); input (N, C, D1, ...), scale and B (C,); "
    "default epsilon=1e-5",
)
schema(
    "GroupNormalization",
    inputs=["X", "scale", "bias"],
    outputs=["Y"],
    attrs={"epsilon": 1e-5, "num_groups": REQUIRED, "stash_type": 1},
    dtypes="float",
    doc="Y = scale * (X - mean) / sqrt(var + epsilon) + bias, mean and (biased) var over each "
    "group of C / num_groups channels (and all spatial dims) of each n, computed in the "
    "stash_type precision; X (N, C, D1, ...), scale and bias (C,); num_groups required "
    "(divides C), defaults epsilon=1e-5, stash_type=1 (float32)",
)
schema(
    "LpNormalization",
    inputs=["input"],
    outputs=["output"],
    attrs={"axis": -1, "p": 2},
    dtypes="float",
    doc="output = input / (sum(|input|^p along axis))^(1/p), 0 where that norm is 0; "
    "p is 1 or 2; defaults axis=-1, p=2",
)
schema(
    "MeanVarianceNormalization",
    attrs={"axes": [0, 2, 3]},
    dtypes="float",
    doc="Y = (X - mean(X)) / (sqrt(mean((X - mean(X))^2)) + 1e-9), means over `axes`; "
    "default axes=[0, 2, 3]",
)
schema(
    "LRN",
    attrs={"alpha": 1e-4, "beta": 0.75, "bias": 1.0, "size": REQUIRED},
    dtypes="float",
    doc="Y = X / (bias + alpha / size * square_sum)^beta, square_sum[n, c, ...] = sum of X[n, "
    "i, ...]^2 over channels c - floor((size-1)/2) <= i <= c + ceil((size-1)/2) (clipped to "
    "[0, C)); X (N, C, D1, ...); size required, defaults alpha=1e-4, beta=0.75, bias=1",
)


def norm_axis(op: str, axis: int, ndim: int, what: str = "argument axis") -> int:
    """`axis` in [0, ndim); raises ShapeError naming the op when out of range."""
    if not -ndim <= axis < ndim:
        raise ShapeError(
            f"{op}: {what}={axis} is out of range for input X with {ndim} dims "
            f"(expected {-ndim} to {ndim - 1})"
        )
    return axis % ndim


def stash_dtype(op: str, stash_type: int) -> np.dtype:
    if stash_type not in _STASH_TYPES:
        raise SchemaError(
            f"{op}: stash_type={stash_type} is not supported; use one of "
            f"{sorted(_STASH_TYPES)} (ONNX data type codes)"
        )
    return _STASH_TYPES[stash_type]


def check_broadcast(op: str, name: str, p: np.ndarray, x: np.ndarray) -> None:
    """Raises ShapeError unless `p` broadcasts to X's shape without growing it."""
    try:
        ok = np.broadcast_shapes(p.shape, x.shape) == x.shape
    except ValueError:
        ok = False
    if not ok:
        raise ShapeError(
            f"{op}: input {name} has shape {list(p.shape)}, which does not broadcast to X "
            f"{list(x.shape)}"
        )


def channel_params(op: str, x: np.ndarray, **params: np.ndarray) -> list[np.ndarray]:
    """The per-channel inputs reshaped to (C, 1, ..., 1), after checking X and their sizes."""
    if x.ndim < 2:
        raise ShapeError(f"{op}: input X has shape {list(x.shape)}, expected (N, C, D1, ...)")
    c = x.shape[1]
    out = []
    for name, p in params.items():
        if p.size != c:
            raise ShapeError(
                f"{op}: input {name} has shape {list(p.shape)}, expected ({c},) (one value per "
                f"channel of X {list(x.shape)})"
            )
        out.append(p.reshape((c,) + (1,) * (x.ndim - 2)))
    return out


def group_stats(
    x: np.ndarray, groups: int, epsilon: float, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X in `dtype` as (N, groups, -1), mean, 1/sqrt(var + epsilon)), stats keepdims."""
    xg = x.astype(dtype, copy=False).reshape(x.shape[0], groups, -1)
    mean = xg.mean(axis=2, keepdims=True)
    d = xg - mean
    inv = 1 / np.sqrt((d * d).mean(axis=2, keepdims=True) + np.asarray(epsilon, dtype))
    return xg, mean, inv


def check_groups(op: str, x: np.ndarray, num_groups: int) -> None:
    c = x.shape[1]
    if num_groups <= 0 or c % num_groups:
        raise SchemaError(
            f"{op}: num_groups={num_groups} must be positive and divide the {c} channels of "
            f"input X {list(x.shape)}"
        )


@kernel("RMSNormalization")
def rms_normalization_cpu(
    x: np.ndarray, scale: np.ndarray, *, axis: int, epsilon: float, stash_type: int
) -> tuple[np.ndarray]:
    axes = tuple(range(norm_axis("RMSNormalization", axis, x.ndim), x.ndim))
    stash = stash_dtype("RMSNormalization", stash_type)
    check_broadcast("RMSNormalization", "scale", scale, x)
    xs = x.astype(stash, copy=False)
    rms = np.sqrt((xs * xs).mean(axis=axes, keepdims=True) + np.asarray(epsilon, stash))
    normalized = (xs / rms).astype(x.dtype, copy=False)
    return ((normalized * scale).astype(scale.dtype, copy=False),)


@kernel("InstanceNormalization")
def instance_normalization_cpu(
    x: np.ndarray, scale: np.ndarray, b: np.ndarray, *, epsilon: float
) -> tuple[np.ndarray]:
    s, bias = channel_params("InstanceNormalization", x, scale=scale, B=b)
    xg, mean, inv = group_stats(x, x.shape[1], epsilon, _acc_dtype(x.dtype))
    y = ((xg - mean) * inv).reshape(x.shape) * s + bias
    return (y.astype(x.dtype, copy=False),)


@kernel("GroupNormalization")
def group_normalization_cpu(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray,
    *,
    epsilon: float,
    num_groups: int,
    stash_type: int,
) -> tuple[np.ndarray]:
    s, b = channel_params("GroupNormalization", x, scale=scale, bias=bias)
    check_groups("GroupNormalization", x, num_groups)
    stash = stash_dtype("GroupNormalization", stash_type)
    xg, mean, inv = group_stats(x, num_groups, epsilon, stash)
    normalized = ((xg - mean) * inv).reshape(x.shape).astype(x.dtype, copy=False)
    return ((normalized * s + b).astype(x.dtype, copy=False),)


def lp_norm(x: np.ndarray, axis: int, p: int) -> np.ndarray:
    """The Lp norm of x along axis (keepdims), p in {1, 2}."""
    if p == 1:
        return np.abs(x).sum(axis=axis, keepdims=True)
    if p == 2:
        return np.sqrt((x * x).sum(axis=axis, keepdims=True))
    raise SchemaError(f"LpNormalization: argument p={p} is not supported; ONNX allows 1 or 2")


@kernel("LpNormalization")
def lp_normalization_cpu(x: np.ndarray, *, axis: int, p: int) -> tuple[np.ndarray]:
    dim = norm_axis("LpNormalization", axis, x.ndim)
    xf = x.astype(_acc_dtype(x.dtype), copy=False)
    norm = lp_norm(xf, dim, p)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(norm == 0, 0, xf / norm)
    return (y.astype(x.dtype, copy=False),)


def mvn_dims(op: str, axes: list[int], ndim: int) -> tuple[int, ...]:
    """MeanVarianceNormalization's axes, non-negative; raises for out-of-range or repeats."""
    dims = tuple(norm_axis(op, a, ndim, "argument axes entry") for a in axes)
    if len(set(dims)) != len(dims):
        raise SchemaError(f"{op}: argument axes={list(axes)} repeats a dim")
    return dims


@kernel("MeanVarianceNormalization")
def mean_variance_normalization_cpu(x: np.ndarray, *, axes: list[int]) -> tuple[np.ndarray]:
    dims = mvn_dims("MeanVarianceNormalization", axes, x.ndim)
    xf = x.astype(_acc_dtype(x.dtype), copy=False)
    d = xf - xf.mean(axis=dims, keepdims=True)
    std = np.sqrt((d * d).mean(axis=dims, keepdims=True))
    return ((d / (std + np.asarray(1e-9, xf.dtype))).astype(x.dtype, copy=False),)


def lrn_reach(op: str, x: np.ndarray, size: int) -> tuple[int, int]:
    """(channels before, channels after) each channel's LRN window reaches, after checking X
    and size: floor((size - 1) / 2) and ceil((size - 1) / 2)."""
    if x.ndim < 2:
        raise ShapeError(f"{op}: input X has shape {list(x.shape)}, expected (N, C, D1, ...)")
    if size < 1:
        raise SchemaError(f"{op}: argument size={size} must be >= 1")
    return (size - 1) // 2, math.ceil((size - 1) / 2)


def channel_window_sum(a: np.ndarray, before: int, after: int) -> np.ndarray:
    """out[:, c] = sum of a[:, i] over channels c - before <= i <= c + after inside [0, C)."""
    c = a.shape[1]
    out = np.zeros_like(a)
    for shift in range(-min(before, c - 1), min(after, c - 1) + 1):  # c gathers c + shift
        dst = slice(max(0, -shift), min(c, c - shift))
        src = slice(max(0, shift), min(c, c + shift))
        out[:, dst] += a[:, src]
    return out


@kernel("LRN")
def lrn_cpu(
    x: np.ndarray, *, alpha: float, beta: float, bias: float, size: int
) -> tuple[np.ndarray]:
    lo, hi = lrn_reach("LRN", x, size)
    y = lrn_jit.lrn_075(x, lo, hi, alpha / size, bias) if beta == 0.75 else None
    if y is not None:
        return (y,)
    xf = x.astype(_acc_dtype(x.dtype), copy=False)
    square_sum = channel_window_sum(xf * xf, lo, hi)
    y = xf / (bias + (alpha / size) * square_sum) ** beta
    return (y.astype(x.dtype, copy=False),)
