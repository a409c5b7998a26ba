"""Gradients of MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool.

Nothing loops over pixels. MaxPool recomputes each window's first max (one comparison with
Y per kernel offset; ties go where its Indices output points) and routes dY there with one
fancy assignment, or through col2im where windows overlap. AveragePool spreads dY / count
over each window with col2im, with the forward's count (count_include_pad, ceil_mode).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from netbrew.netdef.net import op_def
from netbrew.operators import pool_jit
from netbrew.operators.conv import check_grad_shape
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.pool import (
    WINDOW_ATTRS,
    WINDOW_DEFAULTS,
    global_axes,
    max_slices,
    pool_window,
    window_counts,
)
from netbrew.operators.schema import gradient, kernel, schema
from netbrew.operators.window import Window, tiles
from netbrew.operators.window_grad import col2im, scatter_picks

schema(
    "MaxPoolGradient",
    inputs=["X", "Y", "dY"],
    outputs=["dX"],
    attrs=WINDOW_ATTRS,
    dtypes="float",
    onnx=False,
    doc="dX[n, c, i] = sum of dY[n, c, o] over the windows o whose first max (a NaN max: "
    "first NaN) is X[n, c, i]; "
    "X (N, C, D1..Dn), Y and dY (N, C, O1..On) -> dX like X; attributes as MaxPool: "
    f"{WINDOW_DEFAULTS}",
)
schema(
    "AveragePoolGradient",
    inputs=["X", "dY"],
    outputs=["dX"],
    attrs={**WINDOW_ATTRS, "count_include_pad": 0},
    dtypes="float",
    onnx=False,
    doc="dX[n, c, i] = sum of dY[n, c, o] / count[o] over the windows o that cover pixel i; "
    "X (N, C, D1..Dn), dY (N, C, O1..On) -> dX like X; attributes as AveragePool: "
    f"{WINDOW_DEFAULTS}, count_include_pad=0",
)
schema(
    "GlobalAveragePoolGradient",
    inputs=["X", "dY"],
    outputs=["dX"],
    dtypes="float",
    onnx=False,
    doc="dX = dY / (D1*...*Dn) broadcast over D1..Dn; X (N, C, D1..Dn), dY (N, C, 1..1) -> dX",
)
schema(
    "GlobalMaxPoolGradient",
    inputs=["X", "dY"],
    outputs=["dX"],
    dtypes="float",
    onnx=False,
    doc="dX = dY at the first max of each X[n, c] (row major), 0 elsewhere; "
    "X (N, C, D1..Dn), dY (N, C, 1..1) -> dX like X",
)


def _window_attrs(op) -> dict:
    attrs = copy_attrs(op)
    attrs.pop("storage_order", None)
    return attrs


@gradient("MaxPool")
def max_pool_grad(op, g_out, g_in):
    if g_out[0] is None:  # only Indices has a gradient: it is an integer, so none reaches X
        return []
    inputs = [op.input[0], op.output[0], g_out[0]]
    return [op_def("MaxPoolGradient", inputs, [g_in[0]], **_window_attrs(op))]


@gradient("AveragePool")
def average_pool_grad(op, g_out, g_in):
    return [op_def("AveragePoolGradient", [op.input[0], g_out[0]], [g_in[0]], **copy_attrs(op))]


@gradient("GlobalAveragePool")
def global_average_pool_grad(op, g_out, g_in):
    return [op_def("GlobalAveragePoolGradient", [op.input[0], g_out[0]], [g_in[0]])]


@gradient("GlobalMaxPool")
def global_max_pool_grad(op, g_out, g_in):
    return [op_def("GlobalMaxPoolGradient", [op.input[0], g_out[0]], [g_in[0]])]


def _checked_window(x, dy, kernel_shape, ceil_mode, attrs, what) -> Window:
    win = pool_window(x, kernel_shape, attrs, ceil_mode)
    check_grad_shape(dy, (*x.shape[:2], *win.out), f"{what}'s output Y")
    return win


def _like_x(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """dY in X's dtype, so that dX comes out in it."""
    return dy.astype(x.dtype, copy=False)


@kernel("MaxPoolGradient")
def max_pool_gradient_cpu(
    x: np.ndarray,
    y: np.ndarray,
    dy: np.ndarray,
    *,
    ceil_mode: int = 0,
    kernel_shape: Sequence[int],
    **attrs,
) -> tuple[np.ndarray]:
    """Routes each dY pixel to the first max of its window (ties: the first in row-major
    kernel order, like the forward's Indices; a NaN max: the window's first NaN).
    `attrs`: auto_pad, dilations, pads, strides."""
    win = _checked_window(x, dy, kernel_shape, ceil_mode, attrs, "MaxPool")
    check_grad_shape(y, dy.shape, "dY", slot="Y")
    if pool_jit.tiles_2x2(x, win) and y.dtype == x.dtype:
        return (pool_jit.max_pool_2x2_gradient(x, y, _like_x(x, dy)),)
    planes = pool_jit.plane_window(x, win)
    if planes is not None and y.dtype == x.dtype:
        xp, dims = planes
        dx = np.empty(xp.shape, x.dtype)
        yp, dyp = (a.reshape(*xp.shape[:2], *dims[-2:]) for a in (y, _like_x(x, dy)))
        pool_jit.max_pool_grad_2d(xp, yp, dyp, *dims[:-2], dx)
        return (dx.reshape(x.shape),)
    if tiles(win, x.shape[2:]):
        return (_tiled_max_gradient(x, y, _like_x(x, dy), win),)
    slices = max_slices(x, win)
    count = len(slices)
    arg = np.zeros(y.shape, np.min_scalar_type(count - 1))
    for j in reversed(range(count)):  # the smallest offset where X equals the max wins
        np.putmask(arg, is_max(slices[j], y), j)
    return (scatter_picks(_like_x(x, dy), arg, win, x.shape[2:]),)


def is_max(values: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Where `values` are the window max `y`: equal to it, or NaN where the max is NaN (the
    NaN made the max, and its gradient goes there, as in PyTorch)."""
    hit = values == y
    if values.dtype.kind == "f":
        hit |= np.isnan(values) & np.isnan(y)
    return hit


def _tiled_max_gradient(x, y, dy, win: Window) -> np.ndarray:
    """One strided view per kernel offset: each dY goes to the first X equal to its max.
    The NumPy path for windows that tile the input; where the JIT is on,
    `pool_jit.max_pool_2x2_gradient` takes 2x2 stride-2 ones and `pool_jit.max_pool_grad_2d`
    the others (2x2 stride 2, 2 cores: 0.35-0.4x this path's time on LeNet's 8x8 and 4x4
    planes at batch 64, 0.39-0.64x at 112x112 and 28x28)."""
    dx = np.zeros(x.shape, dtype=x.dtype)
    taken = np.zeros(y.shape, dtype=bool)
    for offset in np.ndindex(*win.kernel):
        view = (slice(None), slice(None), *(slice(o, None, k) for o, k in zip(offset, win.kernel)))
        hit = is_max(x[view], y)
        hit &= ~taken
        taken |= hit
        np.multiply(dy, hit, out=dx[view])
    return dx


@kernel("AveragePoolGradient")
def average_pool_gradient_cpu(
    x: np.ndarray,
    dy: np.ndarray,
    *,
    ceil_mode: int = 0,
    count_include_pad: int = 0,
    kernel_shape: Sequence[int],
    **attrs,
) -> tuple[np.ndarray]:
    """Spreads dY / count over each window. `attrs`: auto_pad, dilations, pads, strides."""
    win = _checked_window(x, dy, kernel_shape, ceil_mode, attrs, "AveragePool")
    dy = _like_x(x, dy)
    counts = window_counts(win, x.shape[2:], bool(count_include_pad)).astype(dy.dtype)
    n = len(win.kernel)
    share = (dy / counts).reshape(*dy.shape[:2], *(1,) * n, *win.out)
    cols = np.broadcast_to(share, (*dy.shape[:2], *win.kernel, *win.out))  # no copy
    return (col2im(cols, win, x.shape[2:]),)


@kernel("GlobalAveragePoolGradient")
def global_average_pool_gradient_cpu(x: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray]:
    """dY divided by the pixel count, broadcast back over the spatial axes."""
    axes = global_axes(x)
    check_grad_shape(dy, (*x.shape[:2], *(1,) * len(axes)), "GlobalAveragePool's output Y")
    dx = np.empty(x.shape, dtype=x.dtype)
    dx[...] = dy / math.prod(x.shape[2:])
    return (dx,)


@kernel("GlobalMaxPoolGradient")
def global_max_pool_gradient_cpu(x: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray]:
    """dY placed at the first max of each (n, c) plane."""
    axes = global_axes(x)
    check_grad_shape(dy, (*x.shape[:2], *(1,) * len(axes)), "GlobalMaxPool's output Y")
    flat = x.reshape(*x.shape[:2], -1)
    dx = np.zeros(flat.shape, dtype=x.dtype)
    where = flat.argmax(axis=-1)[..., None]
    np.put_along_axis(dx, where, dy.reshape(*x.shape[:2], 1), axis=-1)
    return (dx.reshape(x.shape),)
