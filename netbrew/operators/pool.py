"""MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool.

MaxPool and AveragePool of channels-last images (2-D windows) run pool_jit's numba loop
where the JIT is on, and answer channels-last; C-ordered 2x2 stride-2 max pools that tile
their input run its loop for that window. The NumPy kernels, its fallback and oracle,
reduce strided views of the padded input, one vectorised step per kernel offset along one
axis at a time (window.window_reduce: k1 + k2 steps for a k1 x k2 window, never a loop over
pixels). MaxPool with Indices reduces over all K offsets at once to track the first max.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from netbrew.errors import ShapeError
from netbrew.operators import pool_jit
from netbrew.operators.schema import REQUIRED, kernel, schema
from netbrew.operators.window import (
    Window,
    layout,
    make_window,
    window_reduce,
    window_slices,
    work_dtype,
)

WINDOW_ATTRS = {
    "auto_pad": "NOTSET",
    "ceil_mode": 0,
    "dilations": None,
    "kernel_shape": REQUIRED,
    "pads": None,
    "strides": None,
}
WINDOW_DEFAULTS = "auto_pad=NOTSET, ceil_mode=0, dilations=1, pads=0, strides=1"

schema(
    "MaxPool",
    inputs=["X"],
    outputs=["Y", "Indices?"],
    attrs={**WINDOW_ATTRS, "storage_order": 0},
    dtypes="numeric",
    output_mask=True,
    doc="Y[n, c, o] = max_j X_pad[n, c, o*strides + j*dilations], Indices = flat index of that "
    "max in X (row major, or column major over D1..Dn if storage_order=1); X (N, C, D1..Dn) "
    f"-> Y, Indices (N, C, O1..On) int64 (computed only when named); kernel_shape required, "
    f"{WINDOW_DEFAULTS}, storage_order=0",
)
schema(
    "AveragePool",
    inputs=["X"],
    outputs=["Y"],
    attrs={**WINDOW_ATTRS, "count_include_pad": 0},
    dtypes="float",
    doc="Y[n, c, o] = sum_j X_pad[n, c, o*strides + j*dilations] / count, count = window pixels "
    "inside X (or inside the padded X if count_include_pad=1); X (N, C, D1..Dn) -> Y "
    f"(N, C, O1..On); kernel_shape required, {WINDOW_DEFAULTS}, count_include_pad=0",
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


def pool_window(x: np.ndarray, kernel_shape: Sequence[int], attrs: dict, ceil_mode: int) -> Window:
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
    output_mask: Sequence[bool] = (True, True),
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
    dilations: Sequence[int] | None = None,
    kernel_shape: Sequence[int],
    pads: Sequence[int] | None = None,
    storage_order: int = 0,
    strides: Sequence[int] | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Max over each window; padding never wins. Returns (Y, Indices), Indices only if named."""
    attrs = dict(auto_pad=auto_pad, dilations=dilations, pads=pads, strides=strides)
    win = pool_window(x, kernel_shape, attrs, ceil_mode)
    # Small integer types widen to float64 (exact) so -inf padding can never tie a value.
    work = np.float64 if x.dtype.kind in "iub" and x.dtype.itemsize <= 4 else x.dtype
    if not (len(output_mask) > 1 and output_mask[1]):
        best = pool_jit.pool(x, win, True, None)
        if best is not None:
            return best, None
        if pool_jit.tiles_2x2(x, win):
            return pool_jit.max_pool_2x2(x), None
        best = window_reduce(x.astype(work, copy=False), win, np.maximum, lowest(work))
        return best.astype(x.dtype, copy=False), None
    best, arg = window_max(max_slices(x.astype(work, copy=False), win))
    return best.astype(x.dtype, copy=False), _flat_indices(arg, win, x.shape, storage_order)


def max_slices(x: np.ndarray, win: Window) -> list[np.ndarray]:
    """`window_slices` of `x` with padding read as the lowest value of its dtype."""
    return window_slices(x, win, lowest(x.dtype))


def lowest(dtype: np.dtype) -> float:
    """The value max pooling pads with: -inf, or the integer type's minimum."""
    return -np.inf if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min


def window_max(slices: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The max over the K `slices` and the index of the first max (in the smallest integer
    type that holds K - 1). Without indices, MaxPool uses window.window_reduce instead."""
    best = slices[0].copy()
    arg = np.zeros(best.shape, np.min_scalar_type(len(slices) - 1))
    for j, values in enumerate(slices[1:], 1):
        np.putmask(arg, values > best, j)  # strictly greater: the first max wins
        np.maximum(best, values, out=best)
    return best, arg


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
    win = pool_window(x, kernel_shape, attrs, ceil_mode)
    work = work_dtype(x.dtype)
    spatial_in = x.shape[2:]
    ones = (1,) * len(spatial_in)
    if win.kernel == spatial_in and win.out == ones == win.dilations and not any(win.begin):
        # one undilated window over the whole image (a global pool written as AveragePool):
        # a plain reduction, without the per-axis window steps
        total = np.add.reduce(x, axis=tuple(range(2, x.ndim)), keepdims=True, dtype=work)
        total /= window_counts(win, spatial_in, bool(count_include_pad)).astype(work)
        return (total.astype(x.dtype, copy=False),)
    counts = window_counts(win, spatial_in, bool(count_include_pad))
    mean = pool_jit.pool(x, win, False, counts)
    if mean is not None:
        return (mean,)
    total = window_reduce(x.astype(work, copy=False), win, np.add)
    total /= counts.astype(work)
    return (total.astype(x.dtype, copy=False),)


@functools.lru_cache(maxsize=64)
def window_counts(win: Window, in_shape: Sequence[int], include_pad: bool) -> np.ndarray:
    """Pixels of each window (O1..On) inside X, or inside the padded X with include_pad.
    Read-only; memoised, as a net asks for the same few windows on every run.

    Pixels that ceil_mode windows reach past the end padding never count.
    """
    count = np.ones((), dtype=np.int64)
    for i, k, s, d, b, e, o in zip(
        in_shape, win.kernel, win.strides, win.dilations, win.begin, win.end, win.out
    ):
        pos = np.arange(o)[:, None] * s + np.arange(k)[None, :] * d - b
        low, high = (-b, i + e) if include_pad else (0, i)
        count = np.multiply.outer(count, ((pos >= low) & (pos < high)).sum(axis=1))
    count.flags.writeable = False
    return count


def global_axes(x: np.ndarray) -> tuple[int, ...]:
    if x.ndim < 3:
        raise ShapeError(
            f"input X has {x.ndim} dims {list(x.shape)}, expected at least 3 (N, C, D1, ..., Dn)"
        )
    return tuple(range(2, x.ndim))


@kernel("GlobalAveragePool")
def global_average_pool_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    """Mean over every spatial axis, kept as size-1 axes."""
    return (
        np.mean(x, axis=global_axes(x), keepdims=True, dtype=work_dtype(x.dtype)).astype(
            x.dtype, copy=False
        ),
    )


@kernel("GlobalMaxPool")
def global_max_pool_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    """Max over every spatial axis, kept as size-1 axes."""
    return (np.max(x, axis=global_axes(x), keepdims=True),)
