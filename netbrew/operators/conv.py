"""Conv: N-d convolution with groups, dilations, strides, pads and auto_pad.

One code path for every rank: pad, take the windows as a strided view, copy them once into
columns (im2col), then one batched matmul over (batch, group).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from netbrew.operators.schema import kernel, schema
from netbrew.operators.window import (
    Window,
    check_conv_operands,
    make_window,
    pad_to_windows,
    windows,
    work_dtype,
)

schema(
    "Conv",
    inputs=["X", "W", "B?"],
    outputs=["Y"],
    attrs={
        "auto_pad": "NOTSET",
        "dilations": None,
        "group": 1,
        "kernel_shape": None,
        "pads": None,
        "strides": None,
    },
    dtypes="float",
    doc="Y[n, m, o] = B[m] + sum_{c in group of m, j} X_pad[n, c, o*strides + j*dilations] "
    "* W[m, c, j]; X (N, C, D1..Dn), W (M, C/group, k1..kn), B (M,) -> Y (N, M, O1..On); "
    "auto_pad=NOTSET, dilations=1, group=1, kernel_shape=W.shape[2:], pads=0, strides=1",
)


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
    m = check_conv_operands(x, w, b, group, kernel_shape, transposed=False)
    win = make_window(x.shape[2:], w.shape[2:], strides, dilations, pads, auto_pad)
    work = work_dtype(x.dtype)
    cols = im2col(x.astype(work, copy=False), win, group)
    weights = w.astype(work, copy=False).reshape(group, m // group, -1)
    y = np.matmul(weights, cols).reshape(x.shape[0], m, *win.out)
    if b is not None:
        y += b.astype(work, copy=False).reshape(m, *(1,) * len(win.out))
    return (y.astype(x.dtype, copy=False),)


def im2col(x: np.ndarray, win: Window, group: int) -> np.ndarray:
    """The windows of `x` (N, C, D1..Dn) as columns (N, group, C/group * K, O1*...*On).

    Rows are ordered (channel, k1, ..., kn), matching W reshaped to (group, M/group, -1).
    A 1x1 kernel with stride 1 and no padding is already in column form: no copy.
    """
    batch, channels = x.shape[:2]
    positions = math.prod(win.out)
    n = len(win.kernel)
    if set(win.kernel) == {1} and set(win.strides) == {1} and not any(win.begin + win.end):
        return x.reshape(batch, group, channels // group, positions)
    view = windows(pad_to_windows(x, win), win)  # (N, C, O1..On, k1..kn), no copy
    order = (0, 1, *range(2 + n, 2 + 2 * n), *range(2, 2 + n))
    return view.transpose(order).reshape(batch, group, -1, positions)
