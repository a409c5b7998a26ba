"""CUDA MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool and their gradients (pool.cu).

One thread per window for the forward pools (any number of spatial axes, the window
geometry of netbrew.operators.window: pads, auto_pad, strides, dilations, ceil_mode), with
the CPU kernels' rules: padding never wins a max, the first max gives Indices (row or
column major with storage_order), AveragePool divides by the CPU's own window counts
(count_include_pad, ceil_mode). MaxPool's gradient sends dY to each window's first max
with atomic adds; AveragePool's gathers dY / count over the windows covering each pixel.
The windowed gradients run in float32 (float16 widened, as the CPU kernels compute).
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.operators.conv import check_grad_shape
from netbrew.operators.cuda.conv import window_meta
from netbrew.operators.cuda.gemm import cast, fn, ptr, reduce_sum
from netbrew.operators.cuda.launch import MAX_GRID, constant, empty, grid, suffix, zeros
from netbrew.operators.pool import global_axes, pool_window, window_counts
from netbrew.operators.pool_grad import _checked_window
from netbrew.operators.schema import kernel as register
from netbrew.operators.window import tiles

FAMILY = "pool"
F32 = np.dtype(np.float32)
REDUCE_BLOCK = 256  # window.cuh's NB_REDUCE_BLOCK


def _rows_launch(rows: int) -> dict:
    """One block of REDUCE_BLOCK threads per row (grid-stride past MAX_GRID rows)."""
    return {"grid": (max(1, min(rows, MAX_GRID)), 1, 1), "block": (REDUCE_BLOCK, 1, 1)}


def _sizes(x, win) -> tuple[np.int64, ...]:
    """(P, K, pixels) as kernel arguments: windows, taps per window, pixels per plane."""
    values = (math.prod(win.out), math.prod(win.kernel), math.prod(x.shape[2:]))
    return tuple(np.int64(v) for v in values)


def _counts(win, x, include_pad: bool):
    """The CPU kernel's divisor per window (O1..On), as float32 on the device."""
    return constant(window_counts(win, tuple(x.shape[2:]), include_pad), np.float32)


@register("MaxPool", device="cuda")
def max_pool_cuda(
    x, *, output_mask=(True, True), auto_pad="NOTSET", ceil_mode=0, dilations=None,
    kernel_shape, pads=None, storage_order=0, strides=None,
):  # fmt: skip
    """Max over each window; padding never wins. Returns (Y, Indices), Indices only if named."""
    tag = suffix(x.dtype, "MaxPool")
    attrs = dict(auto_pad=auto_pad, dilations=dilations, pads=pads, strides=strides)
    win = pool_window(x, kernel_shape, attrs, ceil_mode)
    y = empty((*x.shape[:2], *win.out), x.dtype)
    indices = empty(y.shape, np.int64) if len(output_mask) > 1 and output_mask[1] else None
    if y.size:
        spatial = x.shape[2:]
        n = len(spatial)
        steps, step = [0] * n, 1
        for d in range(n) if storage_order else reversed(range(n)):
            steps[d], step = step, step * spatial[d]
        meta = window_meta(spatial, win, steps)
        args = (ptr(x), ptr(y), ptr(indices), meta, np.int32(n), *_sizes(x, win))
        fn(FAMILY, f"max_pool_{tag}")(*args, np.int64(y.size), **grid(y.size))
    return y, indices


@register("AveragePool", device="cuda")
def average_pool_cuda(
    x, *, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=None, kernel_shape,
    pads=None, strides=None,
):  # fmt: skip
    """Mean over each window; the divisor counts pads only with count_include_pad."""
    tag = suffix(x.dtype, "AveragePool")
    attrs = dict(auto_pad=auto_pad, dilations=dilations, pads=pads, strides=strides)
    win = pool_window(x, kernel_shape, attrs, ceil_mode)
    y = empty((*x.shape[:2], *win.out), x.dtype)
    if y.size:
        meta = window_meta(x.shape[2:], win)
        counts = _counts(win, x, bool(count_include_pad))
        args = (ptr(x), ptr(y), counts, meta, np.int32(x.ndim - 2), *_sizes(x, win))
        fn(FAMILY, f"average_pool_{tag}")(*args, np.int64(y.size), **grid(y.size))
    return (y,)


def _global(x) -> tuple[tuple[int, ...], int, int]:
    """(Y's shape, planes N*C, pixels per plane) of a global pool over x."""
    axes = global_axes(x)
    return (*x.shape[:2], *(1,) * len(axes)), x.shape[0] * x.shape[1], math.prod(x.shape[2:])


@register("GlobalAveragePool", device="cuda")
def global_average_pool_cuda(x):
    """Mean over every spatial axis, kept as size-1 axes (float accumulation)."""
    suffix(x.dtype, "GlobalAveragePool")
    shape, planes, pixels = _global(x)
    y = empty(shape, x.dtype)
    scale = 1.0 / pixels if pixels else float("nan")  # numpy's mean of nothing
    reduce_sum(x, (planes, pixels), y, (planes, 1), scale)
    return (y,)


@register("GlobalMaxPool", device="cuda")
def global_max_pool_cuda(x):
    """Max over every spatial axis, kept as size-1 axes (NaN wins, as in numpy.max)."""
    tag = suffix(x.dtype, "GlobalMaxPool")
    shape, planes, pixels = _global(x)
    y = empty(shape, x.dtype)
    if planes and not pixels:
        raise ValueError("GlobalMaxPool: input X has no spatial elements to take the max of")
    if planes:
        fn(FAMILY, f"global_max_{tag}")(ptr(x), ptr(y), np.int64(pixels), np.int64(planes),
                                        **_rows_launch(planes))  # fmt: skip
    return (y,)


@register("MaxPoolGradient", device="cuda")
def max_pool_gradient_cuda(x, y, dy, *, ceil_mode=0, kernel_shape, **attrs):
    """Routes each dY pixel to the first max of its window (ties: the first tap in row-major
    kernel order, like the forward's Indices)."""
    op = "MaxPoolGradient"
    suffix(x.dtype, op)
    win = _checked_window(x, dy, kernel_shape, ceil_mode, attrs, "MaxPool")
    check_grad_shape(y, dy.shape, "dY", slot="Y")
    dx = zeros(x.shape, F32)
    if dy.size and dx.size:
        xf, yf, dyf = (cast(a, F32, op) for a in (x, y, dy))
        meta = window_meta(x.shape[2:], win)
        first_default = np.int32(not tiles(win, x.shape[2:]))  # the CPU kernel's two paths
        fn(FAMILY, "max_pool_grad_f32")(ptr(xf), ptr(yf), ptr(dyf), ptr(dx), meta,
                                        np.int32(x.ndim - 2), *_sizes(x, win), first_default,
                                        np.int64(dy.size), **grid(dy.size))  # fmt: skip
    return (cast(dx, x.dtype, op),)


@register("AveragePoolGradient", device="cuda")
def average_pool_gradient_cuda(x, dy, *, ceil_mode=0, count_include_pad=0, kernel_shape, **attrs):
    """Spreads dY / count over each window."""
    op = "AveragePoolGradient"
    suffix(x.dtype, op)
    win = _checked_window(x, dy, kernel_shape, ceil_mode, attrs, "AveragePool")
    dx = empty(x.shape, F32)
    if dx.size:
        dyf = cast(dy, F32, op)
        meta = window_meta(x.shape[2:], win)
        counts = _counts(win, x, bool(count_include_pad))
        fn(FAMILY, "average_pool_grad_f32")(ptr(dyf), ptr(dx), counts, meta,
                                            np.int32(x.ndim - 2), *_sizes(x, win),
                                            np.int64(dx.size), **grid(dx.size))  # fmt: skip
    return (cast(dx, x.dtype, op),)


@register("GlobalAveragePoolGradient", device="cuda")
def global_average_pool_gradient_cuda(x, dy):
    """dY divided by the pixel count, broadcast back over the spatial axes."""
    op = "GlobalAveragePoolGradient"
    tag = suffix(x.dtype, op)
    shape, planes, pixels = _global(x)
    check_grad_shape(dy, shape, "GlobalAveragePool's output Y")
    dx = empty(x.shape, x.dtype)
    dy = cast(dy, x.dtype, op)  # held until the launch: its memory must outlive it
    if dx.size:
        fn(FAMILY, f"global_average_grad_{tag}")(ptr(dy), ptr(dx),
                                                 np.int64(pixels), np.int64(dx.size),
                                                 **grid(dx.size))  # fmt: skip
    return (dx,)


@register("GlobalMaxPoolGradient", device="cuda")
def global_max_pool_gradient_cuda(x, dy):
    """dY placed at the first max of each (n, c) plane (NaN first, as numpy.argmax)."""
    op = "GlobalMaxPoolGradient"
    tag = suffix(x.dtype, op)
    shape, planes, pixels = _global(x)
    check_grad_shape(dy, shape, "GlobalMaxPool's output Y")
    dx = zeros(x.shape, x.dtype)
    dy = cast(dy, x.dtype, op)
    if planes and pixels:
        fn(FAMILY, f"global_max_grad_{tag}")(ptr(x), ptr(dy), ptr(dx),
                                             np.int64(pixels), np.int64(planes),
                                             **_rows_launch(planes))  # fmt: skip
    return (dx,)
