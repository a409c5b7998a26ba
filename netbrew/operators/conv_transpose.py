"""ConvTranspose: N-d transposed convolution (the gradient of Conv with respect to its input).

One matmul per (batch, group) turns every input pixel into a kernel-sized patch (columns);
col2im then scatter-adds the patches into the output with one strided slice per kernel
offset (a loop over the K kernel offsets, never over pixels).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netbrew.errors import ShapeError
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import kernel, schema
from netbrew.operators.window import (
    check_auto_pad,
    check_conv_operands,
    explicit_pads,
    same_split,
    spatial,
    work_dtype,
)

schema(
    "ConvTranspose",
    inputs=["X", "W", "B?"],
    outputs=["Y"],
    attrs={
        "auto_pad": "NOTSET",
        "dilations": None,
        "group": 1,
        "kernel_shape": None,
        "output_padding": None,
        "output_shape": None,
        "pads": None,
        "strides": None,
    },
    dtypes="float",
    doc="Y[n, m, i*strides + j*dilations - pads_begin] += X[n, c, i] * W[c, m, j] (+ B[m]); "
    "X (N, C, D1..Dn), W (C, M/group, k1..kn), B (M,) -> Y (N, M, O1..On) with "
    "O = strides*(D-1) + output_padding + (k-1)*dilations + 1 - pads_begin - pads_end, or "
    "output_shape (pads derived); auto_pad=NOTSET, dilations=1, group=1, output_padding=0, "
    "pads=0, strides=1",
)


@kernel("ConvTranspose")
def conv_transpose_cpu(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    output_padding: Sequence[int] | None = None,
    output_shape: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> tuple[np.ndarray]:
    """N-d grouped transposed convolution with ONNX's padding rules.

    Args:
        x: input, (N, C, D1, ..., Dn).
        w: weights, (C, M/group, k1, ..., kn).
        b: optional bias, (M,).

    Returns:
        (Y,), with Y of shape (N, M, O1, ..., On).
    """
    m = check_conv_operands(x, w, b, group, kernel_shape, transposed=True)
    n = x.ndim - 2
    in_shape, kernel_dims = x.shape[2:], w.shape[2:]
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
    check_numel((x.shape[0], m, *out), "ConvTranspose output Y")
    work = work_dtype(x.dtype)
    cols = _columns(x.astype(work, copy=False), w.astype(work, copy=False), group)
    y = np.zeros((x.shape[0], m, *out), dtype=work)
    for offset in np.ndindex(*kernel_dims):
        dst, src = [], []
        for i, j, s, d, b0, o in zip(in_shape, offset, strides, dilations, begin, out):
            shift = j * d - b0  # input pixel p lands on output pixel p * s + shift
            lo, hi = max(0, -(shift // s)), min(i, (o - 1 - shift) // s + 1)
            src.append(slice(lo, max(lo, hi)))
            dst.append(slice(lo * s + shift, max(lo, hi - 1) * s + shift + 1, s))
        if all(sl.stop > sl.start for sl in src):
            y[(..., *dst)] += cols[(slice(None), slice(None), *offset, *src)]
    if b is not None:
        y += b.astype(work, copy=False).reshape(m, *(1,) * n)
    return (y.astype(x.dtype, copy=False),)


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


def _columns(x: np.ndarray, w: np.ndarray, group: int) -> np.ndarray:
    """W^T X per group: (N, M, k1..kn, D1..Dn), every input pixel's output patch."""
    batch, channels = x.shape[:2]
    k, spatial_in = w.shape[2:], x.shape[2:]
    xg = x.reshape(batch, group, channels // group, -1)
    wg = w.reshape(group, channels // group, -1).transpose(0, 2, 1)  # (G, M/G * K, C/G)
    cols = np.matmul(wg, xg)  # (N, G, M/G * K, D1*...*Dn)
    return cols.reshape(batch, w.shape[1] * group, *k, *spatial_in)
