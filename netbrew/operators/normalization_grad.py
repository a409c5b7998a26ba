"""Gradients of BatchNormalization, LayerNormalization and Dropout.

    BatchNormalization(X, scale, B, mean, var) -> (Y, running_mean, running_var)
        backward: BatchNormalizationGradient(X, scale, dY, mean, var) -> (dX, dscale, dB)
    LayerNormalization(X, Scale, B) -> (Y, Mean, InvStdDev)
        backward: LayerNormalizationGradient(X, Scale, dY, dMean, dInvStdDev) -> (dX, dScale)
                  SumReduceLike(dY, B) -> dB
    Dropout(data, ratio, training_mode) -> (output, mask)
        backward: DropoutGradient(dY, mask, ratio, training_mode) -> dX

Batch statistics are recomputed from X rather than saved by the forward (ONNX's forward
has no outputs for them). BatchNormalization's statistics are state, not parameters: its
input_mean and input_var get no gradient, and its running statistics outputs pass none.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.errors import SchemaError
from netbrew.netdef.net import op_def
from netbrew.operators import layernorm_jit, normalization_jit
from netbrew.operators.grad_util import copy_attrs, reduce_like
from netbrew.operators.normalization import _STASH_TYPES, _acc_dtype
from netbrew.operators.schema import gradient, kernel, schema
from netbrew.operators.sum_reduce_like import sum_to_shape


def _first_output_grad(op, g_out) -> str:
    """The gradient of output 0; the makers below pass gradients only through it."""
    if g_out[0] is None:
        name = f" {op.name!r}" if op.name else ""
        raise SchemaError(
            f"{op.type}{name}: the loss depends on output {op.output[0]!r} only through its "
            "other outputs, whose gradients are not supported; compute those values with "
            "separate ops (e.g. ReduceMean) if they must be trained through"
        )
    return g_out[0]


schema(
    "BatchNormalizationGradient",
    inputs=["X", "scale", "dY", "input_mean?", "input_var?"],
    outputs=["dX", "dscale", "dB"],
    attrs={"epsilon": 1e-5, "training_mode": 0},
    dtypes="float",
    onnx=False,
    output_mask=True,
    doc="xhat = (X - mean) / sqrt(var + epsilon) per channel (dim 1), mean/var the batch's "
    "(training_mode, recomputed from X) or input_mean/input_var: dB = sum(dY), dscale = "
    "sum(dY * xhat) over all dims but 1; dX = scale / sqrt(var + epsilon) * (dY - (dB + xhat "
    "* dscale) / count) in training, dY * scale / sqrt(var + epsilon) otherwise; "
    "defaults epsilon=1e-5, training_mode=0",
)


@gradient("BatchNormalization")
def batch_normalization_grad(op, g_out, g_in):
    """dX, dscale, dB; input_mean and input_var are constants and get no gradient."""
    if not any(g_in[:3]):
        return []
    args = copy_attrs(op)
    training = bool(args.get("training_mode", 0))
    # In training Y does not depend on the input statistics, and reading them would clash
    # with the usual in-place update of the running statistics.
    stats = ["", ""] if training else list(op.input[3:5])
    inputs = [op.input[0], op.input[1], _first_output_grad(op, g_out), *stats]
    return [
        op_def(
            "BatchNormalizationGradient",
            inputs,
            [g or "" for g in g_in[:3]],
            epsilon=args.get("epsilon"),
            training_mode=int(training),
        )
    ]


@kernel("BatchNormalizationGradient")
def batch_normalization_gradient_cpu(
    x: np.ndarray,
    scale: np.ndarray,
    dy: np.ndarray,
    input_mean: np.ndarray | None = None,
    input_var: np.ndarray | None = None,
    *,
    epsilon: float,
    training_mode: int,
    output_mask: tuple[bool, ...],
) -> tuple[np.ndarray | None, ...]:
    c = x.shape[1] if x.ndim > 1 else 1
    pshape = (c,) + (1,) * max(x.ndim - 2, 0)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    acc = _acc_dtype(x.dtype)
    xv = normalization_jit.channels_view(x)
    if xv is not None and (training_mode or (input_mean is not None and input_var is not None)):
        return _batch_normalization_gradient_jit(
            x, xv, scale, dy, input_mean, input_var, epsilon, training_mode, output_mask
        )
    xf, g = x.astype(acc, copy=False), dy.astype(acc, copy=False)
    if training_mode:
        mean, var = xf.mean(axis=axes).reshape(pshape), xf.var(axis=axes).reshape(pshape)
    elif input_mean is None or input_var is None:
        raise SchemaError(
            "BatchNormalizationGradient: with training_mode=0, inputs input_mean and input_var "
            "are required"
        )
    else:
        mean = input_mean.reshape(pshape).astype(acc)
        var = input_var.reshape(pshape).astype(acc)
    inv = 1 / np.sqrt(var + epsilon)
    xhat = (xf - mean) * inv
    gamma = scale.reshape(pshape).astype(acc)
    d_b = g.sum(axis=axes).reshape(pshape)
    d_scale = (g * xhat).sum(axis=axes).reshape(pshape)
    dx = None
    if output_mask[0]:
        if training_mode:
            dx = gamma * inv * (g - (d_b + xhat * d_scale) / (x.size // max(c, 1)))
        else:
            dx = g * (gamma * inv)
        dx = dx.astype(x.dtype, copy=False)
    d_scale, d_b = (p.reshape(scale.shape).astype(scale.dtype) for p in (d_scale, d_b))
    return dx, d_scale if output_mask[1] else None, d_b if output_mask[2] else None


def _batch_normalization_gradient_jit(
    x, xv, scale, dy, input_mean, input_var, epsilon, training_mode, output_mask
):
    """The numba path of `batch_normalization_gradient_cpu`; xv is X viewed as (N, C, S)."""
    mean, var = normalization_jit.channel_stats(xv, input_mean, input_var, bool(training_mode))
    inv = 1 / np.sqrt(var + epsilon)
    dyv = np.ascontiguousarray(dy, dtype=x.dtype).reshape(xv.shape)
    dx = np.empty(x.shape if output_mask[0] else (0,), x.dtype)
    d_scale, d_b = np.empty(xv.shape[1]), np.empty(xv.shape[1])
    gamma = scale.reshape(-1).astype(np.float64)
    dxv = dx.reshape(xv.shape if dx.size else (0, 0, 0))
    normalization_jit.batch_norm_backward(
        xv, dyv, mean, inv, gamma, bool(training_mode), dxv, d_scale, d_b
    )
    d_scale, d_b = (p.reshape(scale.shape).astype(scale.dtype) for p in (d_scale, d_b))
    return (
        dx if output_mask[0] else None,
        d_scale if output_mask[1] else None,
        d_b if output_mask[2] else None,
    )


schema(
    "LayerNormalizationGradient",
    inputs=["X", "Scale", "dY", "dMean?", "dInvStdDev?"],
    outputs=["dX", "dScale"],
    attrs={"axis": -1, "epsilon": 1e-5, "stash_type": 1},
    dtypes="float",
    onnx=False,
    output_mask=True,
    doc="over the n elements of dims [axis, rank), with xhat = (X - Mean) * InvStdDev and "
    "g = dY * Scale: dX = InvStdDev * (g - mean(g) - xhat * mean(g * xhat)) + dMean / n - "
    "dInvStdDev * InvStdDev² * xhat / n; dScale = sum(dY * xhat) to Scale's shape; "
    "defaults axis=-1, epsilon=1e-5, stash_type=1",
)


@gradient("LayerNormalization")
def layer_normalization_grad(op, g_out, g_in):
    dy = _first_output_grad(op, g_out)
    extra = [g or "" for g in g_out[1:3]]
    while extra and not extra[-1]:
        extra.pop()
    ops = []
    if g_in[0] or g_in[1]:
        ops.append(
            op_def(
                "LayerNormalizationGradient",
                [op.input[0], op.input[1], dy, *extra],
                [g_in[0] or "", g_in[1] or ""],
                **copy_attrs(op),
            )
        )
    if len(g_in) > 2 and g_in[2]:
        ops += reduce_like(dy, op.input[2], g_in[2])
    return ops


@kernel("LayerNormalizationGradient")
def layer_normalization_gradient_cpu(
    x: np.ndarray,
    scale: np.ndarray,
    dy: np.ndarray,
    d_mean: np.ndarray | None = None,
    d_inv_std: np.ndarray | None = None,
    *,
    axis: int,
    epsilon: float,
    stash_type: int,
    output_mask: tuple[bool, ...],
) -> tuple[np.ndarray | None, np.ndarray | None]:
    stash = _STASH_TYPES.get(stash_type)
    if stash is None:
        raise ValueError(f"LayerNormalizationGradient: stash_type={stash_type} is not supported")
    axis %= x.ndim
    jitted = _layer_normalization_gradient_jit(
        x, scale, dy, d_mean, d_inv_std, axis, epsilon, stash_type, output_mask
    )
    if jitted is not None:
        return jitted
    axes = tuple(range(axis, x.ndim))
    n = math.prod(x.shape[a] for a in axes)
    xs = x.astype(stash, copy=False)
    d = xs - xs.mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt((d * d).mean(axis=axes, keepdims=True) + epsilon)
    xhat = d * inv
    dx = d_scale = None
    if output_mask[0]:
        g = dy.astype(stash, copy=False) * scale.astype(stash, copy=False)
        dx = inv * (
            g - g.mean(axis=axes, keepdims=True) - xhat * (g * xhat).mean(axis=axes, keepdims=True)
        )
        if d_mean is not None:
            dx = dx + d_mean.astype(stash, copy=False) / n
        if d_inv_std is not None:
            dx = dx - d_inv_std.astype(stash, copy=False) * inv * inv * xhat / n
        dx = dx.astype(x.dtype, copy=False)
    if output_mask[1]:
        d_scale = sum_to_shape(dy.astype(stash, copy=False) * xhat, scale.shape)
        d_scale = d_scale.astype(scale.dtype, copy=False)
    return dx, d_scale


def _layer_normalization_gradient_jit(
    x, scale, dy, d_mean, d_inv_std, axis, epsilon, stash_type, output_mask
):
    """The numba path of `layer_normalization_gradient_cpu`, or None where it does not
    apply (see layernorm_jit.rows_view and row_param)."""
    xv = layernorm_jit.rows_view(x, axis, stash_type)
    scale_row = None if xv is None else layernorm_jit.row_param(scale, x, axis)
    if scale_row is None or dy.shape != x.shape:
        return None
    rows = xv.shape[0]
    dyv = np.ascontiguousarray(dy, dtype=x.dtype).reshape(xv.shape)
    stats = [
        np.empty(0) if s is None else np.ascontiguousarray(s, np.float64).reshape(rows)
        for s in (d_mean, d_inv_std)
    ]
    dx = np.empty(x.shape if output_mask[0] else (0,), x.dtype)
    parts = np.empty((min(layernorm_jit.CHUNKS, rows), xv.shape[1]))
    layernorm_jit.layer_norm_backward(
        xv, scale_row, dyv, *stats, float(epsilon), dx.reshape(xv.shape if dx.size else (0, 0)),
        parts,
    )  # fmt: skip
    d_scale = None
    if output_mask[1]:
        total = parts.sum(axis=0).reshape((1,) * axis + x.shape[axis:])
        d_scale = sum_to_shape(total, scale.shape).astype(scale.dtype, copy=False)
    return (dx if output_mask[0] else None), d_scale


schema(
    "DropoutGradient",
    inputs=["dY", "mask", "ratio?", "training_mode?"],
    outputs=["dX"],
    dtypes={0: "float", 1: "bool", 2: "float", 3: "bool"},
    onnx=False,
    doc="dX = dY * mask / (1 - ratio) when training_mode, else dY; same shape and dtype; "
    "defaults ratio=0.5, training_mode=False, as the forward",
)


# Safe in place: the gradient reads the mask output and the ratio and training_mode inputs,
# never `data`, the only input Dropout may overwrite.
@gradient("Dropout", inplace_safe=True)
def dropout_grad(op, g_out, g_in):
    if not g_in[0]:
        return []
    dy = _first_output_grad(op, g_out)
    training = op.input[2] if len(op.input) > 2 else ""
    if not training:  # no training_mode input: the forward is the identity
        return [op_def("Identity", [dy], [g_in[0]])]
    if len(op.output) < 2 or not op.output[1]:
        name = f" {op.name!r}" if op.name else ""
        raise SchemaError(
            f"Dropout{name}: its gradient needs the mask output, which the op does not name; "
            f"add a second output, e.g. Dropout({', '.join(op.input)}) -> "
            f"({op.output[0]}, {op.output[0]}_mask)"
        )
    ratio = op.input[1] if len(op.input) > 1 else ""
    return [op_def("DropoutGradient", [dy, op.output[1], ratio, training], [g_in[0]])]


@kernel("DropoutGradient")
def dropout_gradient_cpu(
    dy: np.ndarray,
    mask: np.ndarray,
    ratio: np.ndarray | None = None,
    training_mode: np.ndarray | None = None,
) -> tuple[np.ndarray]:
    p = 0.5 if ratio is None else float(np.asarray(ratio).reshape(()))
    training = training_mode is not None and bool(np.asarray(training_mode).reshape(()))
    if not training or p == 0.0:
        return (dy,)
    if mask.shape != dy.shape:
        raise ValueError(
            f"DropoutGradient: input mask has shape {list(mask.shape)}, expected dY's "
            f"{list(dy.shape)}"
        )
    return ((dy * mask * (1.0 / (1.0 - p))).astype(dy.dtype, copy=False),)
