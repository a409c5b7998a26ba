"""Gradients of RMSNormalization, InstanceNormalization, GroupNormalization, LpNormalization,
MeanVarianceNormalization and LRN.

    RMSNormalization(X, scale) -> Y
        backward: RMSNormalizationGradient(X, scale, dY) -> (dX, dscale)
    InstanceNormalization(input, scale, B) -> output
        backward: InstanceNormalizationGradient(input, scale, dY) -> (dX, dscale, dB)
    GroupNormalization(X, scale, bias) -> Y
        backward: GroupNormalizationGradient(X, scale, dY) -> (dX, dscale, dbias)
    LpNormalization(input) -> output
        backward: LpNormalizationGradient(input, dY) -> dX
    MeanVarianceNormalization(X) -> Y
        backward: MeanVarianceNormalizationGradient(X, dY) -> dX
    LRN(X) -> Y
        backward: LRNGradient(X, dY) -> dX

Statistics are recomputed from X. The cast of the normalized values back to X's dtype is
treated as the identity.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.normalization import _acc_dtype
from netbrew.operators.normalization_extra import (
    channel_params,
    channel_window_sum,
    check_broadcast,
    check_groups,
    group_stats,
    lp_norm,
    lrn_reach,
    mvn_dims,
    norm_axis,
    stash_dtype,
)
from netbrew.operators.schema import REQUIRED, gradient, kernel, schema
from netbrew.operators.sum_reduce_like import sum_to_shape

_GROUP_DX = (
    "with xhat = (X - mean) / sqrt(var + epsilon) and g = dY * scale, dX = (g - mean(g) - xhat "
    "* mean(g * xhat)) / sqrt(var + epsilon), means over each normalized group"
)

schema(
    "RMSNormalizationGradient",
    inputs=["X", "scale", "dY"],
    outputs=["dX", "dscale"],
    attrs={"axis": -1, "epsilon": 1e-5, "stash_type": 1},
    dtypes="float",
    onnx=False,
    output_mask=True,
    doc="with r = sqrt(mean(X^2 over dims [axis, rank)) + epsilon), xhat = X / r and g = dY * "
    "scale: dX = (g - xhat * mean(g * xhat)) / r; dscale = sum(dY * xhat) to scale's shape; "
    "defaults axis=-1, epsilon=1e-5, stash_type=1",
)
schema(
    "InstanceNormalizationGradient",
    inputs=["input", "scale", "dY"],
    outputs=["dX", "dscale", "dB"],
    attrs={"epsilon": 1e-5},
    dtypes="float",
    onnx=False,
    output_mask=True,
    doc=f"{_GROUP_DX} (the spatial dims of each (n, c)); dscale = sum(dY * xhat), dB = sum(dY) "
    "over all dims but 1; default epsilon=1e-5",
)
schema(
    "GroupNormalizationGradient",
    inputs=["X", "scale", "dY"],
    outputs=["dX", "dscale", "dbias"],
    attrs={"epsilon": 1e-5, "num_groups": REQUIRED, "stash_type": 1},
    dtypes="float",
    onnx=False,
    output_mask=True,
    doc=f"{_GROUP_DX} (C / num_groups channels of each n); dscale = sum(dY * xhat), dbias = "
    "sum(dY) over all dims but 1; num_groups required, defaults epsilon=1e-5, stash_type=1",
)
schema(
    "LpNormalizationGradient",
    inputs=["input", "dY"],
    outputs=["dX"],
    attrs={"axis": -1, "p": 2},
    dtypes="float",
    onnx=False,
    doc="with norm = Lp norm of input along axis and Y = input / norm: dX = (dY - sum(dY * Y) "
    "* |Y|^(p-1) * sign(Y)) / norm along axis, 0 where norm is 0; defaults axis=-1, p=2",
)
schema(
    "MeanVarianceNormalizationGradient",
    inputs=["X", "dY"],
    outputs=["dX"],
    attrs={"axes": [0, 2, 3]},
    dtypes="float",
    onnx=False,
    doc="with d = X - mean(X), std = sqrt(mean(d^2)) and s = std + 1e-9, means over axes: dX = "
    "(dY - mean(dY)) / s - d * mean(dY * d) / (s^2 * std), the last term 0 where std is 0; "
    "default axes=[0, 2, 3]",
)
schema(
    "LRNGradient",
    inputs=["X", "dY"],
    outputs=["dX"],
    attrs={"alpha": 1e-4, "beta": 0.75, "bias": 1.0, "size": REQUIRED},
    dtypes="float",
    onnx=False,
    doc="with S = bias + alpha / size * square_sum as LRN's: dX[c] = dY[c] * S[c]^-beta - 2 * "
    "alpha * beta / size * X[c] * sum of dY[k] * X[k] * S[k]^(-beta-1) over the channels k "
    "whose window holds c; size required, defaults alpha=1e-4, beta=0.75, bias=1",
)


def _maker(grad_type: str, n_params: int):
    """dX and the parameter gradients from one gradient op reading X, scale and dY."""

    def maker(op, g_out, g_in):
        wanted = [g or "" for g in g_in[: 1 + n_params]]
        if not any(wanted):
            return []
        ins = [op.input[0], op.input[1], g_out[0]] if n_params else [op.input[0], g_out[0]]
        return [op_def(grad_type, ins, wanted, **copy_attrs(op))]

    maker.__name__ = maker.__qualname__ = f"{grad_type.removesuffix('Gradient').lower()}_grad"
    return maker


gradient("RMSNormalization")(_maker("RMSNormalizationGradient", 1))
gradient("InstanceNormalization")(_maker("InstanceNormalizationGradient", 2))
gradient("GroupNormalization")(_maker("GroupNormalizationGradient", 2))
gradient("LpNormalization")(_maker("LpNormalizationGradient", 0))
gradient("MeanVarianceNormalization")(_maker("MeanVarianceNormalizationGradient", 0))
gradient("LRN")(_maker("LRNGradient", 0))


@kernel("RMSNormalizationGradient")
def rms_normalization_gradient_cpu(
    x: np.ndarray,
    scale: np.ndarray,
    dy: np.ndarray,
    *,
    axis: int,
    epsilon: float,
    stash_type: int,
    output_mask: tuple[bool, ...],
) -> tuple[np.ndarray | None, np.ndarray | None]:
    op = "RMSNormalizationGradient"
    axes = tuple(range(norm_axis(op, axis, x.ndim), x.ndim))
    stash = stash_dtype(op, stash_type)
    check_broadcast(op, "scale", scale, x)
    xs, g_y = x.astype(stash, copy=False), dy.astype(stash, copy=False)
    r = np.sqrt((xs * xs).mean(axis=axes, keepdims=True) + np.asarray(epsilon, stash))
    xhat = xs / r
    dx = d_scale = None
    if output_mask[0]:
        g = g_y * scale.astype(stash, copy=False)
        dx = ((g - xhat * (g * xhat).mean(axis=axes, keepdims=True)) / r).astype(x.dtype)
    if output_mask[1]:
        d_scale = sum_to_shape(g_y * xhat, scale.shape).astype(scale.dtype, copy=False)
    return dx, d_scale


def _group_gradient(x, scale, dy, groups, epsilon, dtype, output_mask):
    """(dX, dscale, dbias) of y = scale[c] * xhat + bias[c], xhat normalized per group."""
    (s,) = channel_params("GroupNormalizationGradient", x, scale=scale)
    xg, mean, inv = group_stats(x, groups, epsilon, dtype)
    xhat = ((xg - mean) * inv).reshape(x.shape)
    gy = dy.astype(dtype, copy=False)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    dx = d_scale = d_bias = None
    if output_mask[0]:
        g = (gy * s.astype(dtype, copy=False)).reshape(xg.shape)
        xh = xhat.reshape(xg.shape)
        dg = g - g.mean(axis=2, keepdims=True) - xh * (g * xh).mean(axis=2, keepdims=True)
        dx = (dg * inv).reshape(x.shape).astype(x.dtype, copy=False)
    if len(output_mask) > 1 and output_mask[1]:
        d_scale = (gy * xhat).sum(axis=axes).reshape(scale.shape).astype(scale.dtype)
    if len(output_mask) > 2 and output_mask[2]:
        d_bias = gy.sum(axis=axes).reshape(scale.shape).astype(scale.dtype)
    return dx, d_scale, d_bias


@kernel("InstanceNormalizationGradient")
def instance_normalization_gradient_cpu(
    x: np.ndarray,
    scale: np.ndarray,
    dy: np.ndarray,
    *,
    epsilon: float,
    output_mask: tuple[bool, ...],
) -> tuple[np.ndarray | None, ...]:
    return _group_gradient(x, scale, dy, x.shape[1], epsilon, _acc_dtype(x.dtype), output_mask)


@kernel("GroupNormalizationGradient")
def group_normalization_gradient_cpu(
    x: np.ndarray,
    scale: np.ndarray,
    dy: np.ndarray,
    *,
    epsilon: float,
    num_groups: int,
    stash_type: int,
    output_mask: tuple[bool, ...],
) -> tuple[np.ndarray | None, ...]:
    op = "GroupNormalizationGradient"
    check_groups(op, x, num_groups)
    return _group_gradient(
        x, scale, dy, num_groups, epsilon, stash_dtype(op, stash_type), output_mask
    )


@kernel("LpNormalizationGradient")
def lp_normalization_gradient_cpu(
    x: np.ndarray, dy: np.ndarray, *, axis: int, p: int
) -> tuple[np.ndarray]:
    dim = norm_axis("LpNormalizationGradient", axis, x.ndim)
    acc = _acc_dtype(x.dtype)
    xf, g = x.astype(acc, copy=False), dy.astype(acc, copy=False)
    norm = lp_norm(xf, dim, p)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(norm == 0, 0, xf / norm)
        direction = y if p == 2 else np.sign(y)
        dx = np.where(norm == 0, 0, (g - (g * y).sum(axis=dim, keepdims=True) * direction) / norm)
    return (dx.astype(dy.dtype, copy=False),)


def _check_dy(op: str, x: np.ndarray, dy: np.ndarray) -> None:
    if dy.shape != x.shape:
        raise ShapeError(f"{op}: input dY has shape {list(dy.shape)}, expected X's {list(x.shape)}")


@kernel("MeanVarianceNormalizationGradient")
def mean_variance_normalization_gradient_cpu(
    x: np.ndarray, dy: np.ndarray, *, axes: list[int]
) -> tuple[np.ndarray]:
    dims = mvn_dims("MeanVarianceNormalizationGradient", axes, x.ndim)
    _check_dy("MeanVarianceNormalizationGradient", x, dy)
    acc = _acc_dtype(x.dtype)
    xf, g = x.astype(acc, copy=False), dy.astype(acc, copy=False)
    d = xf - xf.mean(axis=dims, keepdims=True)
    std = np.sqrt((d * d).mean(axis=dims, keepdims=True))
    s = std + np.asarray(1e-9, acc)
    centered = (g - g.mean(axis=dims, keepdims=True)) / s
    # Through std: d std / dX = d / (n * std), which a constant group (std = 0, d = 0) lacks.
    with np.errstate(divide="ignore", invalid="ignore"):
        through_std = np.where(std > 0, (g * d).mean(axis=dims, keepdims=True) / (s * s * std), 0)
    return ((centered - d * through_std).astype(dy.dtype, copy=False),)


@kernel("LRNGradient")
def lrn_gradient_cpu(
    x: np.ndarray, dy: np.ndarray, *, alpha: float, beta: float, bias: float, size: int
) -> tuple[np.ndarray]:
    lo, hi = lrn_reach("LRNGradient", x, size)
    _check_dy("LRNGradient", x, dy)
    acc = _acc_dtype(x.dtype)
    xf, g = x.astype(acc, copy=False), dy.astype(acc, copy=False)
    s = bias + (alpha / size) * channel_window_sum(xf * xf, lo, hi)
    scaled = s**-beta
    # Channel k's window holds channel c when c - hi <= k <= c + lo: the window reversed.
    through_s = channel_window_sum(g * xf * scaled / s, hi, lo)
    dx = g * scaled - (2 * alpha * beta / size) * xf * through_s
    return (dx.astype(dy.dtype, copy=False),)
