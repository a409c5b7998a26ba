"""BatchNormalization, LayerNormalization and Dropout."""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.operators import layernorm_jit, normalization_jit
from netbrew.operators.schema import kernel, schema

schema(
    "BatchNormalization",
    inputs=["X", "scale", "B", "input_mean", "input_var"],
    outputs=["Y", "running_mean?", "running_var?"],
    attrs={"epsilon": 1e-5, "momentum": 0.9, "training_mode": 0},
    inplace={3: 1, 4: 2},  # running statistics update their own blobs
    dtypes="float",
    doc="Y = scale * (X - mean) / sqrt(var + epsilon) + B; X (N, C, D1, ...), the others (C,); "
    "mean, var = input_mean, input_var, or the batch's (biased) statistics if training_mode, "
    "then running_* = input_* * momentum + batch_* * (1 - momentum); "
    "defaults epsilon=1e-5, momentum=0.9, training_mode=0",
)

schema(
    "LayerNormalization",
    inputs=["X", "Scale", "B?"],
    outputs=["Y", "Mean?", "InvStdDev?"],
    attrs={"axis": -1, "epsilon": 1e-5, "stash_type": 1},
    dtypes="float",
    doc="Y = (X - Mean) * InvStdDev * Scale + B over dims [axis, rank); Mean, InvStdDev "
    "(d0, ..., d[axis-1], 1, ..., 1) in the stash_type precision; "
    "defaults axis=-1, epsilon=1e-5, stash_type=1 (float32)",
)

schema(
    "Dropout",
    inputs=["data", "ratio?", "training_mode?"],
    outputs=["output", "mask?"],
    attrs={"seed": None},
    inplace={0: 0},
    dtypes={0: "float", 1: "float", 2: "bool"},
    rng=True,
    doc="output = data * mask / (1 - ratio), mask = uniform(data.shape) >= ratio when "
    "training_mode, else output = data and mask all True; defaults ratio=0.5, "
    "training_mode=False, seed unset (the op's random stream)",
)

# ONNX TensorProto.DataType codes (stash_type follows ONNX, not Caffe2's enum).
_STASH_TYPES = {1: np.dtype(np.float32), 10: np.dtype(np.float16), 11: np.dtype(np.float64)}


def _acc_dtype(dtype: np.dtype) -> np.dtype:
    """float32 for 16-bit floats, so statistics are not accumulated in half precision."""
    return np.dtype(np.float32) if dtype.itemsize < 4 else dtype


def check_params(x, scale, b, input_mean, input_var) -> int:
    """X's channel count; raises ShapeError when X is a scalar or a parameter does not have
    one value per channel."""
    if x.ndim == 0:
        raise ShapeError("BatchNormalization: input X is a scalar, expected (N, C, D1, ...)")
    c = x.shape[1] if x.ndim > 1 else 1
    params = {"scale": scale, "B": b, "input_mean": input_mean, "input_var": input_var}
    for name, p in params.items():
        if p.size != c:
            raise ShapeError(
                f"BatchNormalization: input {name} has shape {list(p.shape)}, expected ({c},): "
                f"one value per channel of X {list(x.shape)}"
            )
    return c


@kernel("BatchNormalization")
def batch_normalization_cpu(
    x: np.ndarray,
    scale: np.ndarray,
    b: np.ndarray,
    input_mean: np.ndarray,
    input_var: np.ndarray,
    *,
    epsilon: float,
    momentum: float,
    training_mode: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Normalizes X per channel (dim 1).

    Returns:
        (Y, running_mean, running_var). In inference the running statistics are the
        inputs unchanged (ONNX leaves those outputs undefined there).
    """
    c = check_params(x, scale, b, input_mean, input_var)
    xv = normalization_jit.channels_view(x)
    if xv is not None:
        return batch_normalization_jit(x, xv, scale, b, input_mean, input_var, epsilon,
                                        momentum, training_mode)  # fmt: skip
    acc = _acc_dtype(x.dtype)
    pshape = (c,) + (1,) * max(x.ndim - 2, 0)
    xf = x.astype(acc, copy=False)
    mean = input_mean.reshape(pshape).astype(acc)
    var = input_var.reshape(pshape).astype(acc)
    if not training_mode:
        y = _normalize_inference(xf, scale, b, mean, var, epsilon)
        return y.astype(x.dtype, copy=False), input_mean, input_var
    axes = tuple(i for i in range(x.ndim) if i != 1)
    mean = xf.mean(axis=axes).reshape(pshape)
    var = xf.var(axis=axes).reshape(pshape)  # biased, as ONNX's reference
    inv = scale.reshape(pshape).astype(acc) / np.sqrt(var + epsilon)
    y = ((xf - mean) * inv + b.reshape(pshape).astype(acc)).astype(x.dtype, copy=False)
    running_mean = input_mean * momentum + mean.reshape(input_mean.shape) * (1 - momentum)
    running_var = input_var * momentum + var.reshape(input_var.shape) * (1 - momentum)
    return (
        y,
        running_mean.astype(input_mean.dtype, copy=False),
        running_var.astype(input_var.dtype, copy=False),
    )


def batch_normalization_jit(x, xv, scale, b, input_mean, input_var, epsilon, momentum,
                            training_mode, relu: bool = False):  # fmt: skip
    """The numba path of `batch_normalization_cpu`: statistics in float64 (one pass), then
    Y = X * a + (B - mean * a) in one pass, with Relu in that pass if `relu`
    (BatchNormalizationRelu). xv is X viewed as (N, C, S)."""
    mean, var = normalization_jit.channel_stats(xv, input_mean, input_var, bool(training_mode))
    a = scale.reshape(-1).astype(np.float64) / np.sqrt(var + epsilon)
    shift = b.reshape(-1).astype(np.float64) - mean * a
    y = np.empty(x.shape, x.dtype)
    normalization_jit.scale_shift(
        xv, a.astype(x.dtype), shift.astype(x.dtype), relu, y.reshape(xv.shape)
    )
    if not training_mode:
        return y, input_mean, input_var
    running_mean = input_mean * momentum + mean.reshape(input_mean.shape) * (1 - momentum)
    running_var = input_var * momentum + var.reshape(input_var.shape) * (1 - momentum)
    return (
        y,
        running_mean.astype(input_mean.dtype, copy=False),
        running_var.astype(input_var.dtype, copy=False),
    )


def _normalize_inference(xf, scale, b, mean, var, epsilon) -> np.ndarray:
    """Y = X * a + (B - mean * a), a = scale / sqrt(var + epsilon): the per-channel affine
    map folded first, so X is read once and Y is the only full-size array allocated."""
    a = scale.reshape(mean.shape).astype(mean.dtype) / np.sqrt(var + epsilon)
    y = np.multiply(xf, a)
    y += b.reshape(mean.shape).astype(mean.dtype) - mean * a
    return y


def _check_unidirectional(name: str, p: np.ndarray, x: np.ndarray) -> None:
    try:
        ok = np.broadcast_shapes(p.shape, x.shape) == x.shape
    except ValueError:
        ok = False
    if not ok:
        raise ShapeError(
            f"LayerNormalization: input {name} has shape {list(p.shape)}, which does not "
            f"broadcast to X {list(x.shape)}"
        )


@kernel("LayerNormalization")
def layer_normalization_cpu(
    x: np.ndarray,
    scale: np.ndarray,
    b: np.ndarray | None = None,
    *,
    axis: int,
    epsilon: float,
    stash_type: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Normalizes X over its dims from `axis` on; returns (Y, Mean, InvStdDev)."""
    if not -x.ndim <= axis < x.ndim:
        raise ShapeError(
            f"LayerNormalization: axis={axis} is out of range for input X with {x.ndim} dims "
            f"(expected {-x.ndim} to {x.ndim - 1})"
        )
    if stash_type not in _STASH_TYPES:
        raise ValueError(
            f"LayerNormalization: stash_type={stash_type} is not supported; "
            f"use one of {sorted(_STASH_TYPES)} (ONNX data type codes)"
        )
    _check_unidirectional("Scale", scale, x)
    if b is not None:
        _check_unidirectional("B", b, x)
    axis %= x.ndim
    jitted = _layer_normalization_jit(x, scale, b, axis, epsilon, stash_type)
    if jitted is not None:
        return jitted
    axes = tuple(range(axis, x.ndim))
    xs = x.astype(_STASH_TYPES[stash_type], copy=False)
    mean = xs.mean(axis=axes, keepdims=True)
    d = xs - mean
    inv_std = 1 / np.sqrt((d * d).mean(axis=axes, keepdims=True) + epsilon)
    y = (d * inv_std).astype(x.dtype, copy=False) * scale
    if b is not None:
        y = y + b
    return y.astype(x.dtype, copy=False), mean, inv_std


def _layer_normalization_jit(x, scale, b, axis, epsilon, stash_type):
    """The numba path of `layer_normalization_cpu` (statistics in float64), or None where
    it does not apply (see layernorm_jit.rows_view and row_param)."""
    xv = layernorm_jit.rows_view(x, axis, stash_type)
    if xv is None:
        return None
    scale_row, b_row = (layernorm_jit.row_param(p, x, axis) for p in (scale, b))
    if scale_row is None or (b is not None and b_row is None):
        return None
    y = np.empty(x.shape, x.dtype)
    mean, inv_std = np.empty(xv.shape[0]), np.empty(xv.shape[0])
    layernorm_jit.layer_norm_forward(
        xv, scale_row, scale_row if b_row is None else b_row, b_row is not None,
        float(epsilon), y.reshape(xv.shape), mean, inv_std,
    )  # fmt: skip
    stats_shape = x.shape[:axis] + (1,) * (x.ndim - axis)
    stash = _STASH_TYPES[stash_type]
    return y, mean.astype(stash).reshape(stats_shape), inv_std.astype(stash).reshape(stats_shape)


@kernel("Dropout")
def dropout_cpu(
    data: np.ndarray,
    ratio: np.ndarray | None = None,
    training_mode: np.ndarray | None = None,
    *,
    seed: int | None,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Zeroes each element with probability `ratio` in training; identity otherwise."""
    if ratio is not None and np.size(ratio) != 1:
        raise ShapeError(
            f"Dropout: input ratio has shape {list(np.shape(ratio))}, expected a scalar"
        )
    if training_mode is not None and np.size(training_mode) != 1:
        raise ShapeError(
            f"Dropout: input training_mode has shape {list(np.shape(training_mode))}, "
            "expected a scalar"
        )
    p = 0.5 if ratio is None else float(np.asarray(ratio).reshape(()))
    training = training_mode is not None and bool(np.asarray(training_mode).reshape(()))
    if not training or p == 0.0:
        return data, np.ones(data.shape, dtype=bool)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"Dropout: input ratio is {p}, expected a value in [0, 1)")
    mask = rng.random(data.shape) >= p  # the executor seeds rng from `seed`, once
    return (data * mask * (1.0 / (1.0 - p))).astype(data.dtype, copy=False), mask
