"""Conv and ConvGradient: N-d convolution with groups, dilations, strides, pads and auto_pad.

One code path for every rank. Three GEMM-based primitives, shared with ConvTranspose (whose
forward is Conv's input gradient and whose input gradient is Conv's forward):

- `correlate`: im2col, then one batched matmul, a chunk of the batch at a time
  (conv_columns.py); for stride-1 2-D convs that narrow the channels, shift-and-add instead
  (conv_shift.py), and for 2-D depthwise convs (and groups of two channels), a numba loop
  (conv_numba.py).
- `scatter`: its adjoint in X, a matmul to columns, then col2im (conv_columns.py).
- `weight_grad`: its adjoint in W, one GEMM per chunk over columns that span the chunk's
  images (conv_columns.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators import batch_split
from netbrew.operators.conv_columns import (
    correlate_columns,
    scatter_columns,
    spans,
    weight_grad_columns,
)
from netbrew.operators.conv_hwc import hwc_correlate, hwc_weights, use_hwc_last
from netbrew.operators.conv_last import pointwise, use_pointwise
from netbrew.operators.conv_numba import NO_CLAMP, direct_correlate, use_direct
from netbrew.operators.conv_shift import shift_correlate, use_shift
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.schema import gradient, kernel, schema
from netbrew.operators.window import Window, layout, make_window, work_dtype

_ATTRS = {
    "auto_pad": "NOTSET",
    "dilations": None,
    "group": 1,
    "kernel_shape": None,
    "pads": None,
    "strides": None,
}
_DEFAULTS = "auto_pad=NOTSET, dilations=1, group=1, kernel_shape=W.shape[2:], pads=0, strides=1"

schema(
    "Conv",
    inputs=["X", "W", "B?"],
    outputs=["Y"],
    attrs=_ATTRS,
    dtypes="float",
    doc="Y[n, m, o] = B[m] + sum_{c in group of m, j} X_pad[n, c, o*strides + j*dilations] "
    f"* W[m, c, j]; X (N, C, D1..Dn), W (M, C/group, k1..kn), B (M,) -> Y (N, M, O1..On); "
    f"{_DEFAULTS}",
)
schema(
    "ConvGradient",
    inputs=["X", "W", "dY"],
    outputs=["dX", "dW", "dB?"],
    attrs=_ATTRS,
    dtypes="float",
    onnx=False,
    output_mask=True,
    doc="dX = col2im(W^T dY), dW = sum_n dY im2col(X)^T, dB = sum of dY over N, O1..On; "
    "X (N, C, D1..Dn), W (M, C/group, k1..kn), dY (N, M, O1..On) -> dX, dW, dB (M,) shaped "
    f"like X, W, B; an output named '' is not computed; attributes as Conv: {_DEFAULTS}",
)


def check_conv_operands(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    group: int,
    kernel_shape: Sequence[int] | None,
    transposed: bool,
) -> int:
    """Checks X, W, B of Conv (W is (M, C/group, k...)) or ConvTranspose (W is (C, M/group,
    k...)) against each other; returns M, the output channel count."""
    what = "transposed convolution" if transposed else "convolution"
    w_dims = "(C, M/group, k1, ..., kn)" if transposed else "(M, C/group, k1, ..., kn)"
    if w.ndim < 3:
        raise ShapeError(f"input W has shape {list(w.shape)}, expected at least 3 dims {w_dims}")
    n = w.ndim - 2
    if x.ndim != w.ndim:
        raise ShapeError(
            f"input X has {x.ndim} dims, expected {w.ndim} {layout(n)} for a {n}-D {what} "
            f"with weight W of shape {list(w.shape)}"
        )
    if group < 1:
        raise SchemaError(f"argument group={group} must be >= 1")
    if kernel_shape is not None and tuple(kernel_shape) != w.shape[2:]:
        raise ShapeError(
            f"argument kernel_shape={list(kernel_shape)} does not match the spatial dims "
            f"{list(w.shape[2:])} of W {list(w.shape)}"
        )
    c = x.shape[1]
    want = w.shape[0] if transposed else group * w.shape[1]
    if c != want:
        detail = "W's first dim" if transposed else "group*C_in"
        raise ShapeError(
            f"input X has C={c} channels but W expects {detail} = {want} "
            f"(group={group}, W shape {list(w.shape)} is {w_dims})"
        )
    m = w.shape[1] * group if transposed else w.shape[0]
    split = c if transposed else m
    if split % group:
        raise ShapeError(
            f"{split} {'input' if transposed else 'output'} channels do not "
            f"divide into group={group}"
        )
    if b is not None and b.shape != (m,):
        raise ShapeError(
            f"input B has shape {list(b.shape)}, expected [{m}] (one per output channel)"
        )
    for name, arr in (("W", w), ("B", b)):
        if arr is not None and arr.dtype != x.dtype:
            raise SchemaError(f"input {name} has dtype {arr.dtype}, expected {x.dtype} like X")
    return m


@kernel("Conv")
def conv_cpu(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> tuple[np.ndarray]:
    """N-d grouped convolution (cross-correlation, as in ONNX).

    Args:
        x: input, (N, C, D1, ..., Dn).
        w: weights, (M, C/group, k1, ..., kn).
        b: optional bias, (M,).

    Returns:
        (Y,), with Y of shape (N, M, O1, ..., On).
    """
    check_conv_operands(x, w, b, group, kernel_shape, transposed=False)
    win = make_window(x.shape[2:], w.shape[2:], strides, dilations, pads, auto_pad)
    work = work_dtype(x.dtype)
    bias = None if b is None else b.astype(work, copy=False)
    y = correlate(x.astype(work, copy=False), w.astype(work, copy=False), win, group, bias)
    return (y.astype(x.dtype, copy=False),)


def correlate(
    x: np.ndarray, w: np.ndarray, win: Window, group: int, bias: np.ndarray | None = None
) -> np.ndarray:
    """The windows of x (N, C, D1..Dn) times w (M, C/group, k1..kn), per group, plus `bias`
    (M,) if given: (N, M, O1..On). A big enough batch goes in parts over the cores
    (batch_split; not the numba direct convs, which are parallel loops already), each part
    or the whole by `correlate_images`."""
    batch = x.shape[0]
    parts = (
        1
        if use_direct(x.shape[1], group, win)
        else batch_split.ways(batch, macs(batch, w.size, win))
    )
    if parts == 1:
        return correlate_images(x, w, win, group, bias)
    y = np.empty((batch, w.shape[0], *win.out), x.dtype)
    return batch_split.run_into(y, lambda s: correlate_images(x[s], w, win, group, bias), parts)


def macs(batch: int, weights: int, win: Window) -> int:
    """Multiply-adds of a conv (or either adjoint) of `batch` images with `weights` weights
    over the windows of `win`."""
    return batch * weights * math.prod(win.out)


def correlate_images(
    x: np.ndarray, w: np.ndarray, win: Window, group: int, bias: np.ndarray | None = None
) -> np.ndarray:
    """`correlate` on one thread's images. 2-D depthwise convs go through conv_numba's
    direct loop where the JIT is on, 1x1 convs of a channels-last x through conv_last (both
    may answer channels-last), stride-1 2-D convs that narrow the channels through
    conv_shift (no im2col copy), big stride-1 3x3 convs through Winograd, other 2-D convs
    of a channels-last x through conv_hwc's channels-last columns (answering
    channels-last); the rest through im2col and one batched matmul."""
    m = w.shape[0]
    if use_direct(x.shape[1], group, win):
        return direct_correlate(x, w, win, bias)
    if use_pointwise(x, w, win, group):
        return pointwise(x, w, win, bias, None, NO_CLAMP, group)
    if use_shift(x.shape[1], m, win, group):
        return shift_correlate(x, w, win, bias)
    if plain_3x3(win, group) and min(win.begin + win.end) >= 0:
        y = winograd(x, w, (*win.begin, *win.end), bias)
        if y is not None:
            return y
    if use_hwc_last(x, w, win, group):
        return hwc_correlate(x, hwc_weights(w), win, bias)
    return correlate_columns(x, w, win, group, bias)


def plain_3x3(win: Window, group: int) -> bool:
    """Whether the conv is 2-D, ungrouped, 3x3, stride 1 and undilated: Winograd's kind."""
    ones = (1, 1)
    return group == 1 and win.kernel == (3, 3) and win.strides == ones and win.dilations == ones


def winograd(
    x: np.ndarray, w: np.ndarray, pads: Sequence[int], bias: np.ndarray | None = None
) -> np.ndarray | None:
    """The `plain_3x3` conv of x (N, C, H, W) with w (M, C, 3, 3), pads (top, left, bottom,
    right) >= 0, by Winograd F(4x4, 3x3) or F(2x2, 3x3), the weights transformed on the
    spot, where one pays for this image size (conv_winograd4.use_winograd4,
    conv_winograd.use_winograd), as a C-ordered (N, M, Ho, Wo); else None.

    Training nets meet these convs with new weights at every step, so the winograd_convs
    pass, which transforms constant weights once, never sees them. (ResNet-18 at batch 32,
    one thread, CPU time against im2col, transforms included: 64 channels at 32x32, F(4x4),
    0.57x; 128 at 16x16, F(2x2), 0.71x; 256 at 8x8 stays on im2col, F(2x2) 1.08x.)"""
    from netbrew.operators import conv_winograd, conv_winograd4  # they import this module

    c, m = x.shape[1], w.shape[0]
    out = (x.shape[2] + pads[0] + pads[2] - 2, x.shape[3] + pads[1] + pads[3] - 2)
    if conv_winograd4.use_winograd4(c, m, out, x.shape[0]):
        u = conv_winograd4.winograd4_weights(w)
        y = conv_winograd4.winograd4_correlate(x, u, tuple(pads), bias)
    elif conv_winograd.use_winograd(c, m, out, x.shape[0]):
        u = conv_winograd.winograd_weights(w)
        y = conv_winograd.winograd_correlate(x, u, tuple(pads), bias)
    else:
        return None
    return np.ascontiguousarray(y)  # channels-last in memory: the next ops want C order


def scatter(
    dy: np.ndarray, w: np.ndarray, win: Window, group: int, out_shape: Sequence[int]
) -> np.ndarray:
    """The adjoint of `correlate` in x: dy (N, M, O1..On), w (M, C/group, k1..kn) -> the
    gradient (N, C, *out_shape) of the windowed input. For a `plain_3x3` conv with pads of
    at most 2 that is itself a 3x3 conv, of dy with w flipped and transposed, which
    `winograd` computes where it pays. A big enough batch goes in parts over the cores
    (batch_split)."""
    batch = dy.shape[0]
    parts = batch_split.ways(batch, macs(batch, w.size, win))
    if parts == 1:
        return scatter_images(dy, w, win, group, out_shape)
    dx = np.empty((batch, w.shape[1] * group, *out_shape), dy.dtype)
    return batch_split.run_into(
        dx, lambda s: scatter_images(dy[s], w, win, group, out_shape), parts
    )


def scatter_images(
    dy: np.ndarray, w: np.ndarray, win: Window, group: int, out_shape: Sequence[int]
) -> np.ndarray:
    """`scatter` on one thread's images. The flipped 3x3 conv that `scatter` describes
    goes through Winograd where it pays, else, for a batch whose images and channels
    conv_columns.spans takes, through correlate_columns, whose GEMM spans the images
    (ResNet-18 at batch 32, two parts: 0.85x scatter_columns' time on its 512-channel 4x4
    convs, 0.93x on the 256-channel 8x8 ones)."""
    ends = [size - o + b for o, size, b in zip(win.out, out_shape, win.begin)]  # 2 - end
    if plain_3x3(win, group) and max(win.begin) <= 2 and min(ends) >= 0:
        flipped = np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
        pads = (2 - win.begin[0], 2 - win.begin[1], *ends)
        dx = winograd(dy, flipped, pads)
        if dx is not None:
            return dx
        if dy.shape[0] > 1 and spans(w.shape[1], w.shape[0], math.prod(out_shape)):
            flipped_win = make_window(dy.shape[2:], [3, 3], None, None, pads, "NOTSET")
            return correlate_columns(dy, flipped, flipped_win, 1, None)
    return scatter_columns(dy, w, win, group, out_shape)


def weight_grad(dy: np.ndarray, x: np.ndarray, win: Window, group: int) -> np.ndarray:
    """The adjoint of `correlate` in w: dy (N, M, O1..On), x (N, C, D1..Dn) -> (M, C/group,
    k..). A big enough batch goes in parts over the cores (batch_split), their sums added."""
    batch = dy.shape[0]
    weights = dy.shape[1] * x.shape[1] // group * math.prod(win.kernel)
    parts = batch_split.ways(batch, macs(batch, weights, win))
    if parts == 1:
        return weight_grad_columns(dy, x, win, group)
    sums = batch_split.run(lambda s: weight_grad_columns(dy[s], x[s], win, group), batch, parts)
    total = sums[0]
    for other in sums[1:]:
        total += other
    return total


def bias_grad(dy: np.ndarray) -> np.ndarray:
    """dB (M,): dY (N, M, ...) summed over all but its channel axis (batch first: fast adds)."""
    return dy.sum(axis=0).reshape(dy.shape[1], -1).sum(axis=1)


def check_grad_shape(dy: np.ndarray, want: Sequence[int], what: str, slot: str = "dY") -> None:
    """Raises ShapeError when the output gradient dY (or `slot`) does not have the forward
    output's shape."""
    if dy.shape != tuple(want):
        raise ShapeError(
            f"input {slot} has shape {list(dy.shape)}, expected {list(want)}, the shape of {what}"
        )


@gradient("Conv")
def conv_grad(op, g_out, g_in):
    return [
        op_def(
            "ConvGradient",
            [op.input[0], op.input[1], g_out[0]],
            [g or "" for g in g_in],
            **copy_attrs(op),
        )
    ]


@kernel("ConvGradient")
def conv_gradient_cpu(
    x: np.ndarray,
    w: np.ndarray,
    dy: np.ndarray,
    *,
    output_mask: Sequence[bool] = (True, True, True),
    auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> tuple[np.ndarray | None, ...]:
    """Gradients of Conv; only the outputs that `output_mask` names are computed.

    Returns:
        (dX, dW, dB), each None where not wanted.
    """
    m = check_conv_operands(x, w, None, group, kernel_shape, transposed=False)
    win = make_window(x.shape[2:], w.shape[2:], strides, dilations, pads, auto_pad)
    check_grad_shape(dy, (x.shape[0], m, *win.out), "Conv's output Y")
    dtype, work = x.dtype, work_dtype(x.dtype)
    x, w, dy = (a.astype(work, copy=False) for a in (x, w, dy))
    want = tuple(output_mask) + (False,) * (3 - len(output_mask))
    grads = (
        scatter(dy, w, win, group, x.shape[2:]) if want[0] else None,
        weight_grad(dy, x, win, group) if want[1] else None,
        bias_grad(dy) if want[2] else None,
    )
    return tuple(None if g is None else g.astype(dtype, copy=False) for g in grads)
