"""CUDA Conv, ConvTranspose, their gradients and ConvRelu (conv.cu, GEMMs from gemm.py).

The CPU kernels' three primitives (netbrew.operators.conv), on the GPU:

- `correlate`: im2col (conv.cu) into columns (C*K, P) per image, then one GEMM per group
  (cuBLAS batched over images or over groups); depthwise convs (one input channel per
  group) take a direct kernel instead.
- `scatter`, its adjoint in X: W_gᵀ · dY_g into columns, then col2im (a gather per pixel,
  no atomics).
- `weight_grad`, its adjoint in W: dY_g · columnsᵀ accumulated over the images.

ConvTranspose's forward is `scatter` and its input gradient `correlate`, over the windows
conv_transpose.transpose_window lays on its output, as on the CPU. N-d throughout (up to 8
spatial axes). Everything runs in float32; float16 inputs are widened first and the
results narrowed, as the CPU kernels do. Columns are made a chunk of images at a time
(COLS_BYTES at most).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from netbrew.cuda import current_device
from netbrew.operators.conv import check_conv_operands, check_grad_shape
from netbrew.operators.conv_transpose import transpose_window
from netbrew.operators.cuda.gemm import addr, cast, fn, gemm, ptr, reduce_sum, relu_
from netbrew.operators.cuda.launch import MAX_RANK, constant, empty, grid, suffix
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import kernel as register
from netbrew.operators.window import Window, make_window

FAMILY = "conv"
F32 = np.dtype(np.float32)
COLS_BYTES = 1 << 28  # the most column memory one chunk of images takes


def window_meta(image: Sequence[int], win: Window, steps: Sequence[int] | None = None) -> Any:
    """window.cuh's metadata on the device: rows in, out, kernel, strides, dilations, begin,
    end, steps (MaxPool's Indices), NB_MAX_RANK wide."""
    nd = len(image)
    if nd > MAX_RANK:
        raise ValueError(f"{nd} spatial axes are over the CUDA kernels' limit of {MAX_RANK}")
    rows = [image, win.out, win.kernel, win.strides, win.dilations, win.begin, win.end]
    table = np.zeros((8, MAX_RANK), np.int64)
    for r, values in enumerate([*rows, steps or [0] * nd]):
        table[r, :nd] = values
    return constant(table.reshape(-1))


def cudnn_plan(x_shape, w_shape, win: Window, group: int) -> Any:
    """cuDNN's plan for this conv (netbrew.cuda.cudnn), or None: then im2col + cuBLAS."""
    from netbrew.cuda import cudnn

    return cudnn.plan(current_device(), x_shape, w_shape, win, group)


def _geometry(image: Sequence[int], win: Window) -> tuple[int, int, int]:
    """(P, K, pixels): windows, taps per window and pixels of the image."""
    return math.prod(win.out), math.prod(win.kernel), math.prod(image)


def _chunk(batch: int, per_image: int) -> int:
    """Images per chunk of columns."""
    return max(1, min(batch, COLS_BYTES // max(1, 4 * per_image)))


def _launch_window(name: str, *arrays: Any, meta: Any, nd: int, sizes: Sequence[int], n: int):
    if n:
        args = [ptr(a) if not isinstance(a, np.uintp) else a for a in arrays]
        i64 = [np.int64(s) for s in sizes]
        fn(FAMILY, name)(*args, meta, np.int32(nd), *i64, np.int64(n), **grid(n))


def _grouped_gemm(nb, group, ta, tb, m, n, k, a, a_img, a_grp, lda, b, b_img, b_grp, ldb,
                  c, c_img, c_grp, ldc) -> None:  # fmt: skip
    """For every image i < nb and group g, C[i, g] = op(A[i, g]) op(B[i, g]) (float32), where
    X[i, g] starts at address x + (i * x_img + g * x_grp) floats: batched over the images
    for each group, or over the groups for each image, whichever loops less."""
    f = F32.itemsize
    if nb >= group:
        for g in range(group):
            gemm(F32, ta, tb, m, n, k, 1.0, a + g * a_grp * f, lda, a_img, b + g * b_grp * f,
                 ldb, b_img, 0.0, c + g * c_grp * f, ldc, c_img, nb)  # fmt: skip
    else:
        for i in range(nb):
            gemm(F32, ta, tb, m, n, k, 1.0, a + i * a_img * f, lda, a_grp, b + i * b_img * f,
                 ldb, b_grp, 0.0, c + i * c_img * f, ldc, c_grp, group)  # fmt: skip


def correlate(x, x_shape, w, w_shape, win: Window, group: int, bias, y) -> None:
    """y (N, M, *win.out) = the windows of x (N, C, *image) times w (M, C/group, *kernel),
    per group, plus bias (M,) if given; all float32."""
    batch, c, image = x_shape[0], x_shape[1], tuple(x_shape[2:])
    m = w_shape[0]
    (p, k, pixels), nd = _geometry(image, win), len(image)
    found = cudnn_plan(x_shape, w_shape, win, group)
    if found is not None and found.forward(x, w, y):
        if bias is not None:
            add_bias(y, bias, m, p)
        return
    meta = window_meta(image, win)
    if group > 1 and c == group:  # depthwise: a direct kernel, no columns
        _launch_window("depthwise_f32", x, w, ptr(bias), y, meta=meta, nd=nd,
                       sizes=(c, m, p, k, pixels), n=batch * m * p)  # fmt: skip
        return
    cg, mg = c // group, m // group
    rows = cg * k  # the GEMM's inner dim
    per_image = c * k * p
    chunk = _chunk(batch, per_image)
    cols = empty((chunk * per_image,), F32)
    for b0 in range(0, batch, chunk):
        nb = min(chunk, batch - b0)
        _launch_window("im2col_f32", ptr(x, b0 * c * pixels), cols, meta=meta, nd=nd,
                       sizes=(p, k, pixels), n=nb * per_image)  # fmt: skip
        _grouped_gemm(nb, group, False, False, mg, p, rows, addr(w), 0, mg * rows, rows,
                      addr(cols), per_image, rows * p, p, addr(y, b0 * m * p), m * p, mg * p,
                      p)  # fmt: skip
    if bias is not None:
        add_bias(y, bias, m, p)


def add_bias(y, bias, channels: int, inner: int) -> None:
    """y (N, channels, inner) += bias[channel]."""
    if y.size:
        fn(FAMILY, "add_bias_f32")(ptr(y), ptr(bias), np.int64(channels), np.int64(inner),
                                   np.int64(y.size), **grid(y.size))  # fmt: skip


def scatter(dy, dy_shape, w, w_shape, win: Window, group: int, out_shape, dx) -> None:
    """dx (N, C, *out_shape) = the adjoint of `correlate` in x: dy (N, M, *win.out),
    w (M, C/group, *kernel); C = w_shape[1] * group."""
    batch, m = dy_shape[0], dy_shape[1]
    cg, out_shape = w_shape[1], tuple(out_shape)
    c, mg = cg * group, m // group
    (p, k, pixels), nd = _geometry(out_shape, win), len(out_shape)
    found = cudnn_plan((batch, c, *out_shape), w_shape, win, group)
    if found is not None and found.backward_data(w, dy, dx):
        return
    rows = cg * k
    per_image = c * k * p
    chunk = _chunk(batch, per_image)
    cols = empty((chunk * per_image,), F32)
    meta = window_meta(out_shape, win)
    for b0 in range(0, batch, chunk):
        nb = min(chunk, batch - b0)
        # columns (C*K, P) of image i, group g: W_gᵀ (rows, M/G) · dY[i, g] (M/G, P)
        _grouped_gemm(nb, group, True, False, rows, p, mg, addr(w), 0, mg * rows, rows,
                      addr(dy, b0 * m * p), m * p, mg * p, p, addr(cols), per_image,
                      rows * p, p)  # fmt: skip
        _launch_window("col2im_f32", cols, ptr(dx, b0 * c * pixels), meta=meta, nd=nd,
                       sizes=(p, k, pixels), n=nb * c * pixels)  # fmt: skip


def weight_grad(dy, dy_shape, x, x_shape, win: Window, group: int, dw) -> None:
    """dw (M, C/group, *kernel) = the adjoint of `correlate` in w: dy (N, M, *win.out),
    x (N, C, *image); summed over the images, one GEMM batched over the groups each."""
    batch, m = dy_shape[0], dy_shape[1]
    c, image = x_shape[1], tuple(x_shape[2:])
    (p, k, pixels), nd = _geometry(image, win), len(image)
    cg, mg = c // group, m // group
    rows = cg * k
    if not dw.size:
        return
    if not (batch and p):  # no window anywhere: nothing reaches W
        dw.fill(0)
        return
    found = cudnn_plan(x_shape, dw.shape, win, group)
    if found is not None and found.backward_filter(x, dy, dw):
        return
    per_image = c * k * p
    chunk = _chunk(batch, per_image)
    cols = empty((chunk * per_image,), F32)
    meta = window_meta(image, win)
    f = F32.itemsize
    for b0 in range(0, batch, chunk):
        nb = min(chunk, batch - b0)
        _launch_window("im2col_f32", ptr(x, b0 * c * pixels), cols, meta=meta, nd=nd,
                       sizes=(p, k, pixels), n=nb * per_image)  # fmt: skip
        for i in range(nb):
            # dW_g (M/G, rows) (+)= dY[i, g] (M/G, P) · cols[i, g]ᵀ (P, rows)
            gemm(F32, False, True, mg, rows, p, 1.0, addr(dy, (b0 + i) * m * p), p, mg * p,
                 addr(cols) + i * per_image * f, p, rows * p, 0.0 if b0 + i == 0 else 1.0,
                 addr(dw), rows, mg * rows, group)  # fmt: skip


def bias_grad(dy, dy_shape, db) -> None:
    """db (M,) = dy (N, M, ...) summed over all but its channel axis."""
    batch, m = dy_shape[0], dy_shape[1]
    inner = math.prod(dy_shape[2:])
    reduce_sum(dy, (batch, m, inner), db, (1, m, 1))


def _f32(a: Any, op: str) -> Any:
    return None if a is None else cast(a, F32, op)


def _narrow(a: Any, dtype: Any, op: str) -> Any:
    """A float32 result in the op's dtype."""
    return None if a is None else cast(a, dtype, op)


@register("Conv", device="cuda")
def conv_cuda(
    x, w, b=None, *, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None, pads=None,
    strides=None,
):  # fmt: skip
    """N-d grouped convolution (cross-correlation, as in ONNX)."""
    suffix(x.dtype, "Conv")
    m = check_conv_operands(x, w, b, group, kernel_shape, transposed=False)
    win = make_window(x.shape[2:], w.shape[2:], strides, dilations, pads, auto_pad)
    y = empty((x.shape[0], m, *win.out), F32)
    if y.size:
        xf, wf, bf = (_f32(a, "Conv") for a in (x, w, b))
        correlate(xf, x.shape, wf, w.shape, win, group, bf, y)
    return (_narrow(y, x.dtype, "Conv"),)


@register("ConvGradient", device="cuda")
def conv_gradient_cuda(
    x, w, dy, *, output_mask=(True, True, True), auto_pad="NOTSET", dilations=None, group=1,
    kernel_shape=None, pads=None, strides=None,
):  # fmt: skip
    """Gradients of Conv: (dX, dW, dB), each None where output_mask does not name it."""
    op = "ConvGradient"
    suffix(x.dtype, op)
    m = check_conv_operands(x, w, None, group, kernel_shape, transposed=False)
    win = make_window(x.shape[2:], w.shape[2:], strides, dilations, pads, auto_pad)
    check_grad_shape(dy, (x.shape[0], m, *win.out), "Conv's output Y")
    want = tuple(output_mask) + (False,) * (3 - len(output_mask))
    xf, wf, dyf = _f32(x, op), _f32(w, op), _f32(dy, op)
    dx = dw = db = None
    if want[0]:
        dx = empty(x.shape, F32)
        scatter(dyf, dy.shape, wf, w.shape, win, group, x.shape[2:], dx)
    if want[1]:
        dw = empty(w.shape, F32)
        weight_grad(dyf, dy.shape, xf, x.shape, win, group, dw)
    if want[2]:
        db = empty((m,), F32)
        bias_grad(dyf, dy.shape, db)
    return tuple(_narrow(g, x.dtype, op) for g in (dx, dw, db))


@register("ConvTranspose", device="cuda")
def conv_transpose_cuda(x, w, b=None, *, group=1, kernel_shape=None, **geometry):
    """N-d grouped transposed convolution with ONNX's padding rules: Conv's `scatter`."""
    op = "ConvTranspose"
    suffix(x.dtype, op)
    m = check_conv_operands(x, w, b, group, kernel_shape, transposed=True)
    win, out = transpose_window(x.shape[2:], w.shape[2:], **geometry)
    check_numel((x.shape[0], m, *out), "ConvTranspose output Y")
    y = empty((x.shape[0], m, *out), F32)
    if y.size:
        xf, wf = _f32(x, op), _f32(w, op)
        scatter(xf, x.shape, wf, w.shape, win, group, out, y)
        if b is not None:
            add_bias(y, _f32(b, op), m, math.prod(out))
    return (_narrow(y, x.dtype, op),)


@register("ConvTransposeGradient", device="cuda")
def conv_transpose_gradient_cuda(
    x, w, dy, *, output_mask=(True, True, True), group=1, kernel_shape=None, **geometry
):
    """Gradients of ConvTranspose: dX = Conv(dY, W) over its windows, dW, dB."""
    op = "ConvTransposeGradient"
    suffix(x.dtype, op)
    m = check_conv_operands(x, w, None, group, kernel_shape, transposed=True)
    win, out = transpose_window(x.shape[2:], w.shape[2:], **geometry)
    check_grad_shape(dy, (x.shape[0], m, *out), "ConvTranspose's output Y")
    want = tuple(output_mask) + (False,) * (3 - len(output_mask))
    xf, wf, dyf = _f32(x, op), _f32(w, op), _f32(dy, op)
    dx = dw = db = None
    if want[0]:
        dx = empty(x.shape, F32)
        if dx.size:
            correlate(dyf, dy.shape, wf, w.shape, win, group, None, dx)
    if want[1]:
        dw = empty(w.shape, F32)
        weight_grad(xf, x.shape, dyf, dy.shape, win, group, dw)
    if want[2]:
        db = empty((m,), F32)
        bias_grad(dyf, dy.shape, db)
    return tuple(_narrow(g, x.dtype, op) for g in (dx, dw, db))


@register("ConvRelu", device="cuda")
def conv_relu_cuda(*arrays, **attrs):
    """Conv, then Relu on its output in place."""
    return (relu_(conv_cuda(*arrays, **attrs)[0]),)
