"""CUDA kernels of the normalizations (normalization.cu), checked against the NumPy kernels:
BatchNormalization (inference, and training with batch statistics and running statistics)
and its gradient op, LayerNormalization (any stash_type), GroupNormalization and
InstanceNormalization, and their gradient ops (one row kernel for all three).

X is float32/16/64; the per-channel parameters may have other float dtypes and are converted
on the device to X's accumulation dtype (float32, float64 for float64). Statistics are
computed per row or channel (a thread block each, or a thread for short ones) in two passes,
in float32, or float64 for a float64 X or stash_type; a float16 stash_type computes in
float32 and rounds Mean and InvStdDev to float16 (the NumPy kernel computes in float16).
Gradient inputs (dY, dMean, dInvStdDev) of another dtype than X are converted first.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.cuda.elementwise_binary import sum_to_shape
from netbrew.operators.cuda.gemm import relu_
from netbrew.operators.cuda.launch import broadcast_meta, empty, grid, suffix
from netbrew.operators.cuda.reduce import (
    FLOATS,
    acc_dtype,
    block_launch,
    cast,
    fn,
    reduce_values,
)
from netbrew.operators.normalization import _STASH_TYPES, _check_unidirectional, check_params
from netbrew.operators.normalization_extra import channel_params, check_groups, stash_dtype
from netbrew.operators.schema import kernel as register

FAMILY = "normalization"
NULL = np.uintp(0)  # a null pointer argument


def _k(name: str):
    return fn(name, FAMILY)


def _or_null(a):
    return NULL if a is None else a


def _team(rows: int, n: int) -> tuple[str, dict]:
    """A thread per row for short rows (n <= 32), else a block per row."""
    if n <= 32:
        return "thread", grid(rows)
    return "block", block_launch(rows, n)


def _stand_in(a) -> np.ndarray:
    """A zero-strided NumPy array with a's shape and dtype, for the CPU kernels' checks."""
    return np.broadcast_to(np.zeros((), a.dtype), tuple(a.shape))


def stats(op: str, x, outer: int, channels: int, inner: int, eps: float, acc, shape=None):
    """(mean, biased var, 1 / sqrt(var + eps)) of each channel of x seen as (outer, channels,
    inner), in `acc`, shaped `shape` (default (channels,)); NaN for empty channels."""
    shape = (channels,) if shape is None else tuple(shape)
    out = [empty(shape, acc) for _ in range(3)]
    if channels:
        mode, launch = _team(channels, outer * inner)
        tag = f"{suffix(x.dtype, op, FLOATS)}_{suffix(acc, op, FLOATS)}"
        _k(f"norm_stats_{mode}_{tag}")(
            x, *out, np.int64(outer), np.int64(channels), np.int64(inner), np.float64(eps),
            **launch,
        )  # fmt: skip
    return out


def _same_dtype(a, x, op: str):
    """a (dY...) in x's dtype, converted on the device when it differs."""
    return a if a.dtype == x.dtype else cast(a, x.dtype, op)


def _row_param(shape, x_shape, axis: int) -> int:
    """1 when a parameter of `shape` broadcasts to X exactly along the normalized dims
    [axis, rank) (so its offset is the position in the row), else 0."""
    padded = (1,) * (len(x_shape) - len(shape)) + tuple(shape)
    return int(all(d == 1 for d in padded[:axis]) and padded[axis:] == tuple(x_shape[axis:]))


# -- LayerNormalization ------------------------------------------------------------------------


def _stash_acc(stash: np.dtype) -> np.dtype:
    return np.dtype(np.float64) if stash == np.float64 else np.dtype(np.float32)


@register("LayerNormalization", device="cuda")
def layer_normalization_cuda(x, scale, b=None, *, axis, epsilon, stash_type):
    op = "LayerNormalization"
    shape, nd = tuple(x.shape), len(x.shape)
    if not -nd <= axis < nd:
        raise ShapeError(
            f"{op}: axis={axis} is out of range for input X with {nd} dims "
            f"(expected {-nd} to {nd - 1})"
        )
    if stash_type not in _STASH_TYPES:
        raise ValueError(
            f"{op}: stash_type={stash_type} is not supported; "
            f"use one of {sorted(_STASH_TYPES)} (ONNX data type codes)"
        )
    _check_unidirectional("Scale", scale, x)
    if b is not None:
        _check_unidirectional("B", b, x)
    tag = suffix(x.dtype, op, FLOATS)
    a = axis % nd
    rows, length = math.prod(shape[:a]), math.prod(shape[a:])
    stash = _STASH_TYPES[stash_type]
    acc = _stash_acc(stash)
    stat_shape = shape[:a] + (1,) * (nd - a)
    mean, _, inv = stats(op, x, 1, rows, length, epsilon, acc, stat_shape)
    y = empty(shape, x.dtype)
    if y.size:
        p = acc_dtype(x.dtype)
        s, bias = cast(scale, p, op), None if b is None else cast(b, p, op)
        meta = broadcast_meta(shape, *[tuple(t.shape) for t in (scale, b) if t is not None])
        b_row = 0 if b is None else _row_param(b.shape, shape, a)
        _k(f"layer_norm_{tag}_{suffix(acc, op, FLOATS)}")(
            x, mean, inv, s, _or_null(bias), y, np.int64(y.size), np.int64(length), meta,
            np.int32(nd), np.int32(_row_param(scale.shape, shape, a)), np.int32(b_row),
            **grid(y.size),
        )  # fmt: skip
    return y, cast(mean, stash, op), cast(inv, stash, op)


@register("LayerNormalizationGradient", device="cuda")
def layer_normalization_gradient_cuda(
    x, scale, dy, d_mean=None, d_inv_std=None, *, axis, epsilon, stash_type, output_mask
):
    op = "LayerNormalizationGradient"
    stash = _STASH_TYPES.get(stash_type)
    if stash is None:
        raise ValueError(f"{op}: stash_type={stash_type} is not supported")
    tag = suffix(x.dtype, op, FLOATS)
    shape, nd = tuple(x.shape), len(x.shape)
    a = axis % nd
    rows, length = math.prod(shape[:a]), math.prod(shape[a:])
    acc = _stash_acc(stash)
    if tuple(dy.shape) != shape:
        raise ValueError(f"{op}: input dY has shape {list(dy.shape)}, expected X's {list(shape)}")
    extras, step = [], 1
    for name, t in (("dMean", d_mean), ("dInvStdDev", d_inv_std)):
        if t is not None and t.size not in (rows, 1):
            raise ValueError(
                f"{op}: input {name} has {t.size} values, expected {rows} (one per row)"
            )
        if t is not None:
            step = 1 if t.size == rows else 0
        extras.append(None if t is None else cast(t, acc, op))
    if d_mean is not None and d_inv_std is not None and d_mean.size != d_inv_std.size:
        raise ValueError(f"{op}: inputs dMean and dInvStdDev have {d_mean.size} and "
                         f"{d_inv_std.size} values, expected {rows} each")  # fmt: skip
    mean, _, inv = stats(op, x, 1, rows, length, epsilon, acc)
    dx = empty(shape, x.dtype) if output_mask[0] else None
    dy_xhat = empty(shape, acc) if output_mask[1] else None
    if x.size and (dx is not None or dy_xhat is not None):
        mode, launch = _team(rows, length)
        meta = broadcast_meta(shape, tuple(scale.shape))
        _k(f"layer_norm_grad_{mode}_{tag}_{suffix(acc, op, FLOATS)}")(
            x, _same_dtype(dy, x, op), cast(scale, acc, op), mean, inv, _or_null(extras[0]),
            _or_null(extras[1]), np.int64(step), _or_null(dx), _or_null(dy_xhat),
            np.int64(rows), np.int64(length), meta, np.int32(nd),
            np.int32(_row_param(scale.shape, shape, a)), **launch,
        )  # fmt: skip
    d_scale = None
    if output_mask[1]:
        d_scale = cast(
            sum_to_shape(dy_xhat, scale.shape, fresh=False), scale.dtype, op, scale.shape
        )
    return dx, d_scale


# -- GroupNormalization, InstanceNormalization -------------------------------------------------


def _group_norm(op, x, scale, bias, groups, epsilon, acc, round_normalized):
    shape = tuple(x.shape)
    tag = suffix(x.dtype, op, FLOATS)
    n, c = shape[0], shape[1]
    spatial = math.prod(shape[2:])
    length = (c // groups) * spatial if groups else 0
    mean, _, inv = stats(op, x, 1, n * groups, length, epsilon, acc)
    y = empty(shape, x.dtype)
    if y.size:
        p = acc_dtype(x.dtype)
        _k(f"group_norm_{tag}_{suffix(acc, op, FLOATS)}")(
            x, mean, inv, cast(scale, p, op), cast(bias, p, op), y, np.int64(y.size),
            np.int64(length), np.int64(c), np.int64(spatial), np.int32(round_normalized),
            **grid(y.size),
        )  # fmt: skip
    return (y,)


@register("GroupNormalization", device="cuda")
def group_normalization_cuda(x, scale, bias, *, epsilon, num_groups, stash_type):
    op = "GroupNormalization"
    channel_params(op, _stand_in(x), scale=_stand_in(scale), bias=_stand_in(bias))
    check_groups(op, _stand_in(x), num_groups)
    acc = _stash_acc(stash_dtype(op, stash_type))
    return _group_norm(op, x, scale, bias, num_groups, epsilon, acc, 1)


@register("InstanceNormalization", device="cuda")
def instance_normalization_cuda(x, scale, b, *, epsilon):
    op = "InstanceNormalization"
    channel_params(op, _stand_in(x), scale=_stand_in(scale), B=_stand_in(b))
    return _group_norm(op, x, scale, b, x.shape[1], epsilon, acc_dtype(x.dtype), 0)


def _group_gradient(op, x, scale, dy, groups, epsilon, acc, output_mask):
    """normalization_extra_grad._group_gradient: LayerNormalizationGradient's row kernel over
    the (n, group) rows, scale broadcast per channel; dscale and dbias summed over all dims
    but 1."""
    channel_params("GroupNormalizationGradient", _stand_in(x), scale=_stand_in(scale))
    tag = suffix(x.dtype, op, FLOATS)
    shape, nd = tuple(x.shape), len(x.shape)
    if tuple(dy.shape) != shape:
        raise ValueError(f"{op}: input dY has shape {list(dy.shape)}, expected X's {list(shape)}")
    n, c, spatial = shape[0], shape[1], math.prod(shape[2:])
    rows, length = n * groups, (c // groups) * spatial
    mean, _, inv = stats(op, x, 1, rows, length, epsilon, acc)
    want = list(output_mask) + [False] * (3 - len(output_mask))
    dx = empty(shape, x.dtype) if want[0] else None
    dy_xhat = empty(shape, acc) if want[1] else None
    if x.size and (dx is not None or dy_xhat is not None):
        mode, launch = _team(rows, length)
        meta = broadcast_meta(shape, (c,) + (1,) * (nd - 2))
        _k(f"layer_norm_grad_{mode}_{tag}_{suffix(acc, op, FLOATS)}")(
            x, _same_dtype(dy, x, op), cast(scale, acc, op), mean, inv, NULL, NULL, np.int64(1),
            _or_null(dx), _or_null(dy_xhat), np.int64(rows), np.int64(length), meta,
            np.int32(nd), np.int32(0), **launch,
        )  # fmt: skip
    axes = (0,) + tuple(range(2, nd))
    d_scale = d_bias = None
    if want[1]:
        d_scale = reduce_values(dy_xhat, axes, "sum", 0, op)
        d_scale = cast(d_scale, scale.dtype, op, scale.shape)
    if want[2]:
        d_bias = reduce_values(cast(dy, acc, op), axes, "sum", 0, op)
        d_bias = cast(d_bias, scale.dtype, op, scale.shape)
    return dx, d_scale, d_bias


@register("GroupNormalizationGradient", device="cuda")
def group_normalization_gradient_cuda(x, scale, dy, *, epsilon, num_groups, stash_type,
                                      output_mask):  # fmt: skip
    op = "GroupNormalizationGradient"
    check_groups(op, _stand_in(x), num_groups)
    acc = _stash_acc(stash_dtype(op, stash_type))
    return _group_gradient(op, x, scale, dy, num_groups, epsilon, acc, output_mask)


@register("InstanceNormalizationGradient", device="cuda")
def instance_normalization_gradient_cuda(x, scale, dy, *, epsilon, output_mask):
    op = "InstanceNormalizationGradient"
    groups = x.shape[1]  # an IndexError for a 1-D X, as the NumPy kernel's
    return _group_gradient(op, x, scale, dy, groups, epsilon, acc_dtype(x.dtype), output_mask)


# -- BatchNormalization ------------------------------------------------------------------------


def _channels(x) -> tuple[int, int, int]:
    """(N, C, inner) of X (N, C, D1, ...); a 1-D X is (N,) with one channel."""
    shape = tuple(x.shape)
    return shape[0], (shape[1] if len(shape) > 1 else 1), math.prod(shape[2:])


@register("BatchNormalization", device="cuda")
def batch_normalization_cuda(x, scale, b, input_mean, input_var, *, epsilon, momentum,
                             training_mode):  # fmt: skip
    op = "BatchNormalization"
    check_params(x, scale, b, input_mean, input_var)
    n, c, inner = _channels(x)
    tag = suffix(x.dtype, op, FLOATS)
    acc = acc_dtype(x.dtype)
    if training_mode:
        mean, var, _ = stats(op, x, n, c, inner, epsilon, acc)
    else:
        mean, var = cast(input_mean, acc, op), cast(input_var, acc, op)
    y = empty(x.shape, x.dtype)
    if y.size:
        _k(f"batch_norm_{tag}")(
            x, cast(scale, acc, op), cast(b, acc, op), mean, var, y, np.int64(y.size),
            np.int64(c), np.int64(inner), np.float64(epsilon), np.int32(bool(training_mode)),
            **grid(y.size),
        )  # fmt: skip
    if not training_mode:
        return y, input_mean, input_var  # unchanged, as the NumPy kernel
    return y, _running(op, input_mean, mean, momentum), _running(op, input_var, var, momentum)


def _running(op: str, stat, batch, momentum: float):
    """stat * momentum + batch * (1 - momentum), in stat's dtype and shape."""
    work = np.dtype(np.float64) if np.float64 in (stat.dtype, batch.dtype) else batch.dtype
    out = empty((stat.size,), work)
    if stat.size:
        _k(f"running_stat_{suffix(work, op, FLOATS)}")(
            cast(stat, work, op, (stat.size,)), cast(batch, work, op), out, np.int64(stat.size),
            np.float64(momentum), np.float64(1 - momentum), **grid(stat.size),
        )  # fmt: skip
    return cast(out, stat.dtype, op, stat.shape)


@register("BatchNormalizationRelu", device="cuda")
def batch_normalization_relu_cuda(*arrays, **attrs):
    """BatchNormalization, then Relu on its output in place (as ConvRelu on the GPU)."""
    out = batch_normalization_cuda(*arrays, **attrs)
    return (relu_(out[0]), *out[1:])


@register("BatchNormalizationGradient", device="cuda")
def batch_normalization_gradient_cuda(x, scale, dy, input_mean=None, input_var=None, *,
                                      epsilon, training_mode, output_mask):  # fmt: skip
    op = "BatchNormalizationGradient"
    if not x.shape:
        raise ShapeError(f"{op}: input X is a scalar, expected (N, C, D1, ...)")
    n, c, inner = _channels(x)
    if scale.size != c:
        raise ShapeError(f"{op}: input scale has shape {list(scale.shape)}, expected ({c},)")
    if tuple(dy.shape) != tuple(x.shape):
        raise ValueError(f"{op}: input dY has shape {list(dy.shape)}, expected X's")
    tag = suffix(x.dtype, op, FLOATS)
    acc = acc_dtype(x.dtype)
    if training_mode:
        mean, _, inv = stats(op, x, n, c, inner, epsilon, acc)
    elif input_mean is None or input_var is None:
        raise SchemaError(
            f"{op}: with training_mode=0, inputs input_mean and input_var are required"
        )
    else:
        mean, var = cast(input_mean, acc, op, (c,)), cast(input_var, acc, op, (c,))
        inv = empty((c,), acc)
        if c:
            _k(f"inv_std_{suffix(acc, op, FLOATS)}")(
                var, inv, np.int64(c), np.float64(epsilon), **grid(c)
            )
    g = _same_dtype(dy, x, op)
    d_b, d_scale = empty((c,), acc), empty((c,), acc)
    if c:
        mode, launch = _team(c, n * inner)
        _k(f"batch_norm_grad_sums_{mode}_{tag}")(
            x, g, mean, inv, d_b, d_scale, np.int64(n), np.int64(c), np.int64(inner), **launch
        )
    dx = None
    if output_mask[0]:
        dx = empty(x.shape, x.dtype)
        if dx.size:
            _k(f"batch_norm_grad_dx_{tag}")(
                x, g, cast(scale, acc, op), mean, inv, d_b, d_scale, dx, np.int64(dx.size),
                np.int64(c), np.int64(inner), np.int64(x.size // max(c, 1)),
                np.int32(bool(training_mode)), **grid(dx.size),
            )  # fmt: skip
    d_scale = cast(d_scale, scale.dtype, op, scale.shape) if output_mask[1] else None
    d_b = cast(d_b, scale.dtype, op, scale.shape) if output_mask[2] else None
    return dx, d_scale, d_b
