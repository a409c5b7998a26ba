"""ConvTranspose and its gradient: N-d transposed convolution, the adjoint of Conv in X.

Conv's primitives do the work: the forward is `scatter` (one matmul per (batch, group)
turns every input pixel into a kernel-sized patch, and col2im adds the patches into the
output, one strided slice per kernel offset); the input gradient is `correlate` (Conv's
forward) over the same windows, and the weight gradient is `weight_grad`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.conv import (
    bias_grad,
    check_conv_operands,
    check_grad_shape,
    correlate,
    scatter,
    weight_grad,
)
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import gradient, kernel, schema
from netbrew.operators.window import (
    Window,
    check_auto_pad,
    explicit_pads,
    same_split,
    spatial,
    work_dtype,
)

_ATTRS = {
    "auto_pad": "NOTSET",
    "dilations": None,
    "group": 1,
    "kernel_shape": None,
    "output_padding": None,
    "output_shape": None,
    "pads": None,
    "strides": None,
}
_DEFAULTS = "auto_pad=NOTSET, dilations=1, group=1, output_padding=0, pads=0, strides=1"

schema(
    "ConvTranspose",
    inputs=["X", "W", "B?"],
    outputs=["Y"],
    attrs=_ATTRS,
    dtypes="float",
    doc="Y[n, m, i*strides + j*dilations - pads_begin] += X[n, c, i] * W[c, m, j] (+ B[m]); "
    "X (N, C, D1..Dn), W (C, M/group, k1..kn), B (M,) -> Y (N, M, O1..On) with "
    "O = strides*(D-1) + output_padding + (k-1)*dilations + 1 - pads_begin - pads_end, or "
    f"output_shape (pads derived); {_DEFAULTS}",
)
schema(
    "ConvTransposeGradient",
    inputs=["X", "W", "dY"],
    outputs=["dX", "dW", "dB?"],
    attrs=_ATTRS,
    dtypes="float",
    onnx=False,
    output_mask=True,
    doc="dX = Conv(dY, W) over ConvTranspose's windows, dW[c, m, j] = sum_{n, i} X[n, c, i] * "
    "dY[n, m, i*strides + j*dilations - pads_begin], dB = sum of dY over N, O1..On; "
    "X (N, C, D1..Dn), W (C, M/group, k1..kn), dY (N, M, O1..On) -> dX, dW, dB (M,) shaped "
    f"like X, W, B; an output named '' is not computed; attributes as ConvTranspose: {_DEFAULTS}",
)


@kernel("ConvTranspose")
def conv_transpose_cpu(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    *,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    **geometry,
) -> tuple[np.ndarray]:
    """N-d grouped transposed convolution with ONNX's padding rules.

    Args:
        x: input, (N, C, D1, ..., Dn).
        w: weights, (C, M/group, k1, ..., kn).
        b: optional bias, (M,).
        geometry: auto_pad, dilations, output_padding, output_shape, pads, strides.

    Returns:
        (Y,), with Y of shape (N, M, O1, ..., On).
    """
    m = check_conv_operands(x, w, b, group, kernel_shape, transposed=True)
    win, out = transpose_window(x.shape[2:], w.shape[2:], **geometry)
    check_numel((x.shape[0], m, *out), "ConvTranspose output Y")
    work = work_dtype(x.dtype)
    y = scatter(x.astype(work, copy=False), w.astype(work, copy=False), win, group, out)
    if b is not None:
        y += b.astype(work, copy=False).reshape(m, *(1,) * len(out))
    return (y.astype(x.dtype, copy=False),)


def transpose_window(
    in_shape: Sequence[int],
    kernel_dims: Sequence[int],
    *,
    auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None,
    output_padding: Sequence[int] | None = None,
    output_shape: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> tuple[Window, list[int]]:
    """The windows of a transposed convolution, laid over its output, and the output size.

    Input pixel i spreads over output window i (so `Window.out` is the input's spatial
    shape), starting at i * stride - begin.
    """
    n = len(in_shape)
    strides = spatial(strides, n, "strides")
    dilations = spatial(dilations, n, "dilations")
    extra = spatial(output_padding, n, "output_padding", default=0)
    for e, s, d in zip(extra, strides, dilations):
        if e >= max(s, d):
            raise ShapeError(
                f"argument output_padding={list(extra)} must be smaller than the stride "
                f"{list(strides)} or dilation {list(dilations)} of each axis"
            )
    full = [
        s * (i - 1) + e + (k - 1) * d + 1
        for i, k, s, d, e in zip(in_shape, kernel_dims, strides, dilations, extra)
    ]
    begin, out = _begin_and_out(full, in_shape, strides, pads, auto_pad, output_shape)
    end = tuple(f - o - b0 for f, o, b0 in zip(full, out, begin))
    win = Window(tuple(kernel_dims), strides, dilations, tuple(begin), end, tuple(in_shape))
    return win, out


@gradient("ConvTranspose")
def conv_transpose_grad(op, g_out, g_in):
    return [
        op_def(
            "ConvTransposeGradient",
            [op.input[0], op.input[1], g_out[0]],
            [g or "" for g in g_in],
            **copy_attrs(op),
        )
    ]


@kernel("ConvTransposeGradient")
def conv_transpose_gradient_cpu(
    x: np.ndarray,
    w: np.ndarray,
    dy: np.ndarray,
    *,
    output_mask: Sequence[bool] = (True, True, True),
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    **geometry,
) -> tuple[np.ndarray | None, ...]:
    """Gradients of ConvTranspose; only the outputs that `output_mask` names are computed.

    Returns:
        (dX, dW, dB), each None where not wanted.
    """
    m = check_conv_operands(x, w, None, group, kernel_shape, transposed=True)
    win, out = transpose_window(x.shape[2:], w.shape[2:], **geometry)
    check_grad_shape(dy, (x.shape[0], m, *out), "ConvTranspose's output Y")
    dtype, work = x.dtype, work_dtype(x.dtype)
    x, w, dy = (a.astype(work, copy=False) for a in (x, w, dy))
    want = tuple(output_mask) + (False,) * (3 - len(output_mask))
    grads = (
        correlate(dy, w, win, group) if want[0] else None,
        weight_grad(x, dy, win, group) if want[1] else None,
        bias_grad(dy) if want[2] else None,
    )
    return tuple(None if g is None else g.astype(dtype, copy=False) for g in grads)


def _begin_and_out(
    full: Sequence[int],
    in_shape: Sequence[int],
    strides: Sequence[int],
    pads: Sequence[int] | None,
    auto_pad: str,
    output_shape: Sequence[int] | None,
) -> tuple[list[int], list[int]]:
    """Leading padding (cropped from the full output) and output size of each axis.

    `full` is the unpadded output size. With output_shape (or SAME_*, whose target is
    in * stride) the total padding is full - target, split as ONNX specifies: the odd pixel
    at the end for SAME_UPPER, at the start otherwise; `pads` is ignored then.
    """
    n = len(full)
    auto_pad = check_auto_pad(auto_pad, None if output_shape is not None else pads)
    if output_shape is not None:
        target = list(spatial(output_shape, n, "output_shape"))
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = [i * s for i, s in zip(in_shape, strides)]
    else:
        begin, end = explicit_pads(pads if auto_pad == "NOTSET" else None, n)
        out = [f - b0 - e for f, b0, e in zip(full, begin, end)]
        if any(o < 1 for o in out):
            raise ShapeError(
                f"pads={list(begin + end)} crop the whole output (unpadded size {list(full)})"
            )
        return list(begin), out
    begin = [same_split(f - t, auto_pad)[0] for f, t in zip(full, target)]
    return begin, target
