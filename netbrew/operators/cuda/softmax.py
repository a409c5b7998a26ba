"""CUDA kernels of Softmax, LogSoftmax and their gradients (softmax.cu), checked against the
NumPy kernels: one axis (ONNX opset 13), float32/16/64 (half computes in float), max-shifted
so large inputs never overflow. The gradient ops take Y and dY of one dtype.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.operators.cuda.launch import empty, grid, suffix
from netbrew.operators.cuda.reduce import FLOATS, block_launch, fn, thread_mode
from netbrew.operators.schema import kernel as register
from netbrew.operators.softmax import _axis

FAMILY = "softmax"


def _rows(shape, axis: int) -> tuple[int, int, int]:
    """(rows, n, inner) of `shape` seen as (outer, n, inner) around `axis`."""
    n, inner = int(shape[axis]), math.prod(shape[axis + 1 :])
    return math.prod(shape[:axis]) * inner, n, inner


def _launch(name: str, op: str, inputs, dtype, shape, axis: int):
    out = empty(shape, dtype)
    if out.size == 0:
        return (out,)
    rows, n, inner = _rows(shape, axis)
    tag = suffix(dtype, op, FLOATS)
    args = (*inputs, out, np.int64(rows), np.int64(n), np.int64(inner))
    if thread_mode(n, rows, inner > 1):
        fn(f"{name}_thread_{tag}", FAMILY)(*args, **grid(rows))
    else:
        fn(f"{name}_block_{tag}", FAMILY)(*args, **block_launch(rows, n))
    return (out,)


@register("Softmax", device="cuda")
def softmax_cuda(x, *, axis):
    return _launch("softmax", "Softmax", (x,), x.dtype, x.shape, _axis(x, axis))


@register("LogSoftmax", device="cuda")
def log_softmax_cuda(x, *, axis):
    return _launch("log_softmax", "LogSoftmax", (x,), x.dtype, x.shape, _axis(x, axis))


def _gradient(name: str, op: str, y, dy, axis: int):
    dim = _axis(y, axis, "Y")
    if tuple(dy.shape) != tuple(y.shape) or dy.dtype != y.dtype:
        raise TypeError(
            f"{op}: inputs Y {y.dtype}{list(y.shape)} and dY {dy.dtype}{list(dy.shape)} must "
            "have one shape and dtype on CUDA"
        )
    return _launch(name, op, (y, dy), y.dtype, y.shape, dim)


@register("SoftmaxGradient", device="cuda")
def softmax_gradient_cuda(y, dy, *, axis):
    return _gradient("softmax_grad", "SoftmaxGradient", y, dy, axis)


@register("LogSoftmaxGradient", device="cuda")
def log_softmax_gradient_cuda(y, dy, *, axis):
    return _gradient("log_softmax_grad", "LogSoftmaxGradient", y, dy, axis)
