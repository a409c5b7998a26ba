"""MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool.

The pooled ops take strided window views of the padded input and reduce them with one
vectorised step per kernel offset (a loop over the K offsets, never over pixels).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from netbrew.errors import ShapeError
from netbrew.operators.schema import REQUIRED, kernel, schema
from netbrew.operators.window import (
    Window,
    layout,
    make_window,
    pad_to_windows,
    windows,
    work_dtype,
)

_WINDOW_ATTRS = {
    "auto_pad": "NOTSET",
    "ceil_mode": 0,
    "dilations": None,
    "kernel_shape": REQUIRED,
    "pads": None,
    "strides": None,
}
_DEFAULTS = "auto_pad=NOTSET, ceil_mode=0, dilations=1, pads=0, strides=1"

schema(
    "MaxPool",
    inputs=["X"],
    outputs=["Y", "Indices?"],
    attrs={**_WINDOW_ATTRS, "storage_order": 0},
    dtypes="numeric",
    doc="Y[n, c, o] = max_j X_pad[n, c, o*strides + j*dilations], Indices = flat index of that "
    "max in X (row major, or column major over D1..Dn if storage_order=1); X (N, C, D1..Dn) "
    f"-> Y, Indices (N, C, O1..On) int64; kernel_shape required, {_DEFAULTS}, storage_order=0",
)
schema(
    "AveragePool",
    inputs=["X"],
    outputs=["Y"],
    attrs={**_WINDOW_ATTRS, "count_include_pad": 0},
    dtypes="float",
    doc="Y[n, c, o] = sum_j X_pad[n, c, o*strides + j*dilations] / count, count = window pixels "
    "inside X (or inside the padded X if count_include_pad=1); X (N, C, D1..Dn) -> Y "
    f"(N, C, O1..On); kernel_shape required, {_DEFAULTS}, count_include_pad=0",
)
schema(
    "GlobalAveragePool",
    dtypes="float",
    doc="Y = mean of X over D1..Dn; X (N, C, D1..Dn) -> Y (N, C, 1, ..., 1)",
)
schema(
    "GlobalMaxPool",
    dtypes="float",
    doc="Y = max of X over D1..Dn; X (N, C, D1..Dn) -> Y (N, C, 1, ..., 1)",
)


def _window(x: np.ndarray, kernel_shape: Sequence[int], attrs: dict, ceil_mode: int) -> Window:
    """Checks X's rank against kernel_shape and resolves the pooling windows."""
    n = len(kernel_shape)
    if x.ndim != n + 2:
        raise ShapeError(
            f"input X has {x.ndim} dims, expected {n + 2} {layout(n)} for "
            f"kernel_shape={list(kernel_shape)}"
        )
    return make_window(x.shape[2:], kernel_shape, ceil_mode=bool(ceil_mode), **attrs)


@kernel("MaxPool")
def max_pool_cpu(
    x: np.ndarray,
    *,
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
    dilations: Sequence[int] | None = None,
    kernel_shape: Sequence[int],
    pads: Sequence[int] | None = None,
    storage_order: int = 0,
    strides: Sequence[int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Max over each window; padding never wins. Returns (Y, Indices)."""
    attrs = dict(auto_pad=auto_pad, dilations=dilations, pads=pads, strides=strides)
    win = _window(x, kernel_shape, attrs, ceil_mode)
    # Small integer types widen to float64 (exact) so -inf padding can never tie a value.
    work = np.float64 if x.dtype.kind in "iub" and x.dtype.itemsize <= 4 else x.dtype
    low = -np.inf if np.dtype(work).kind == "f" else np.iinfo(work).min
    view = windows(pad_to_windows(x.astype(work, copy=False), win, low), win)
    best = arg = None
    for j, offset in enumerate(np.ndindex(*win.kernel)):
        values = view[(..., *offset)]
        if best is None:
            best, arg = values.copy(), np.zeros(values.shape, dtype=np.int64)
            continue
        np.putmask(arg, values > best, j)  # strictly greater: the first max wins
        np.maximum(best, values, out=best)
    return best.astype(x.dtype, copy=False), _flat_indices(arg, win, x.shape, storage_order)


def _flat_indices(
    arg: np.ndarray, win: Window, shape: Sequence[int], storage_order: int
) -> np.ndarray:
    """Turns window offsets (N, C, O1..On) into flat indices into X of `shape`."""
    n = len(win.kernel)
    spatial_in = shape[2:]
    order = range(n) if storage_order else reversed(range(n))
    step, steps = 1, [0] * n
    for d in order:  # row major: the last axis moves fastest; column major: the first
        steps[d], step = step, step * spatial_in[d]
    offsets = np.unravel_index(arg, win.kernel)
    flat = np.arange(shape[0] * shape[1], dtype=np.int64).reshape(shape[0], shape[1], *(1,) * n)
    flat = flat * math.prod(spatial_in)
    for d in range(n):
        along = np.arange(win.out[d], dtype=np.int64).reshape((-1,) + (1,) * (n - 1 - d))
        pos = along * win.strides[d] + offsets[d] * win.dilations[d] - win.begin[d]
        flat = flat + pos * steps[d]
    return flat


@kernel("AveragePool")
def average_pool_cpu(
    x: np.ndarray,
    *,
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
    count_include_pad: int = 0,
    dilations: Sequence[int] | None = None,
    kernel_shape: Sequence[int],
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> tuple[np.ndarray]:
    """Mean over each window; the divisor counts pads only with count_include_pad."""
    attrs = dict(auto_pad=auto_pad, dilations=dilations, pads=pads, strides=strides)
    win = _window(x, kernel_shape, attrs, ceil_mode)
    work = work_dtype(x.dtype)
    view = windows(pad_to_windows(x.astype(work, copy=False), win), win)
    total = None
    for offset in np.ndindex(*win.kernel):
        values = view[(..., *offset)]
        total = values.copy() if total is None else np.add(total, values, out=total)
    total /= _window_counts(win, x.shape[2:], bool(count_include_pad)).astype(work)
    return (total.astype(x.dtype, copy=False),)


def _window_counts(win: Window, in_shape: Sequence[int], include_pad: bool) -> np.ndarray:
    """Pixels of each window (O1..On) inside X, or inside the padded X with include_pad.

    Pixels that ceil_mode windows reach past the end padding never count.
    """
    count = np.ones((), dtype=np.int64)
    for i, k, s, d, b, e, o in zip(
        in_shape, win.kernel, win.strides, win.dilations, win.begin, win.end, win.out
    ):
        pos = np.arange(o)[:, None] * s + np.arange(k)[None, :] * d - b
        low, high = (-b, i + e) if include_pad else (0, i)
        count = np.multiply.outer(count, ((pos >= low) & (pos < high)).sum(axis=1))
    return count


def _global_axes(x: np.ndarray) -> tuple[int, ...]:
    if x.ndim < 3:
        raise ShapeError(
            f"input X has {x.ndim} dims {list(x.shape)}, expected at least 3 (N, C, D1, ..., Dn)"
        )
    return tuple(range(2, x.ndim))


@kernel("GlobalAveragePool")
def global_average_pool_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    """Mean over every spatial axis, kept as size-1 axes."""
    return (
        np.mean(x, axis=_global_axes(x), keepdims=True, dtype=work_dtype(x.dtype)).astype(
            x.dtype, copy=False
        ),
    )


@kernel("GlobalMaxPool")
def global_max_pool_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    """Max over every spatial axis, kept as size-1 axes."""
    return (np.max(x, axis=_global_axes(x), keepdims=True),)
