"""LpPool and MaxUnpool.

LpPool reduces the strided window views of window.py (padding reads 0) like AveragePool does.
MaxUnpool scatters X to the flat positions of MaxPool's Indices (over the whole default-shaped
output, as ONNX's reference does), then places that tensor at the start of `output_shape`.
Their gradients are in lp_pool_grad.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.limits import check_numel
from netbrew.operators.pool import WINDOW_ATTRS, WINDOW_DEFAULTS, pool_window
from netbrew.operators.schema import REQUIRED, kernel, schema
from netbrew.operators.window import (
    Window,
    explicit_pads,
    layout,
    spatial,
    window_slices,
    work_dtype,
)

schema(
    "LpPool",
    inputs=["X"],
    outputs=["Y"],
    attrs={**WINDOW_ATTRS, "p": 2},
    dtypes="float",
    doc="Y[n, c, o] = (sum_j |X_pad[n, c, o*strides + j*dilations]|^p)^(1/p), padding 0; X (N, "
    f"C, D1..Dn) -> Y (N, C, O1..On); kernel_shape required, {WINDOW_DEFAULTS}, p=2",
)
schema(
    "MaxUnpool",
    inputs=["X", "I", "output_shape?"],
    outputs=["output"],
    attrs={"kernel_shape": REQUIRED, "pads": None, "strides": None},
    dtypes={0: "float", 1: "int", 2: "int"},
    doc="output = zeros, then the flat index I[k] (into the default shape (N, C, (D_i - 1) * "
    "strides_i - pads_begin_i - pads_end_i + kernel_i ...), as MaxPool's Indices) set to X[k]; "
    "X and I (N, C, D1..Dn); with output_shape, that result sits at the start of a zero tensor "
    "of output_shape; kernel_shape required, defaults pads=0, strides=1",
)


@kernel("LpPool")
def lp_pool_cpu(
    x: np.ndarray,
    *,
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
    dilations: Sequence[int] | None = None,
    kernel_shape: Sequence[int],
    p: int = 2,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> tuple[np.ndarray]:
    """The Lp norm of each window; padding adds nothing."""
    attrs = dict(auto_pad=auto_pad, dilations=dilations, pads=pads, strides=strides)
    win = pool_window(x, kernel_shape, attrs, ceil_mode)
    return (lp_norms(x, win, p, "LpPool").astype(x.dtype, copy=False),)


def lp_norms(x: np.ndarray, win: Window, p: int, op: str) -> np.ndarray:
    """(N, C, O1..On): the Lp norm of each window of `x`, in the work dtype (float32 for
    16-bit floats); padding adds nothing.

    Raises:
        SchemaError: p is not positive (the message names `op`).
    """
    if p <= 0:
        raise SchemaError(f"{op}: argument p={p} must be positive")
    xf = np.abs(x.astype(work_dtype(x.dtype), copy=False))
    powered = xf * xf if p == 2 else xf**p
    slices = window_slices(powered, win)
    total = slices[0].copy()
    for values in slices[1:]:
        np.add(total, values, out=total)
    return np.sqrt(total) if p == 2 else total ** (1.0 / p)


@kernel("MaxUnpool")
def max_unpool_cpu(
    x: np.ndarray,
    indices: np.ndarray,
    output_shape: np.ndarray | None = None,
    *,
    kernel_shape: Sequence[int],
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> tuple[np.ndarray]:
    positions, shape = unpool_positions(
        x, indices, output_shape, kernel_shape, pads, strides, "MaxUnpool"
    )
    out = np.zeros(shape, x.dtype)
    out.reshape(-1)[positions] = x.reshape(-1)
    return (out,)


def unpool_positions(
    x: np.ndarray,
    indices: np.ndarray,
    output_shape: np.ndarray | None,
    kernel_shape: Sequence[int],
    pads: Sequence[int] | None,
    strides: Sequence[int] | None,
    op: str,
) -> tuple[np.ndarray, tuple[int, ...]]:
    """(the flat position in the output of each element of X, the output shape).

    Raises:
        ShapeError: X, I or output_shape do not fit, or I points outside the output (the
            messages name `op`).
    """
    n = len(kernel_shape)
    if x.ndim != n + 2:
        raise ShapeError(
            f"{op}: input X has {x.ndim} dims {list(x.shape)}, expected {n + 2} {layout(n)} "
            f"for kernel_shape={list(kernel_shape)}"
        )
    if indices.shape != x.shape:
        raise ShapeError(
            f"{op}: input I has shape {list(indices.shape)}, expected X's {list(x.shape)}"
        )
    kernel_ = spatial(kernel_shape, n, "kernel_shape")
    steps = spatial(strides, n, "strides")
    begin, end = explicit_pads(pads, n)
    default = x.shape[:2] + tuple(
        (d - 1) * s - b - e + k for d, s, b, e, k in zip(x.shape[2:], steps, begin, end, kernel_)
    )
    default = check_numel(default, f"{op} default output shape")
    if output_shape is None:
        shape = default
    else:
        given = np.asarray(output_shape).reshape(-1).tolist()
        if len(given) != x.ndim:
            raise ShapeError(
                f"{op}: input output_shape is {given}, expected {x.ndim} values {layout(n)}"
            )
        shape = check_numel(given, f"{op} output_shape")
    flat = indices.reshape(-1).astype(np.int64, copy=False)
    size = math.prod(default)
    if flat.size and (flat.min() < 0 or flat.max() >= size):
        bad = flat[(flat < 0) | (flat >= size)][0]
        raise ShapeError(
            f"{op}: input I holds {bad}, out of range for the unpooled shape "
            f"{list(default)} ({size} elements)"
        )
    coords = np.unravel_index(flat, default)
    outside = np.zeros(flat.shape, bool)
    for c, d in zip(coords, shape):
        outside |= c >= d
    if np.any(outside):
        at = [int(c[np.argmax(outside)]) for c in coords]
        raise ShapeError(
            f"{op}: input I places a value at {at}, outside output_shape {list(shape)}"
        )
    return np.ravel_multi_index(coords, shape), tuple(shape)
