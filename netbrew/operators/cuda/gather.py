"""CUDA kernels of Gather and GatherGradient (gather.cu), checked against the NumPy kernels.

Gather moves elements by size (1, 2, 4, 8 or 16 bytes: any dtype). Its indices are read
back with to_host to be checked as the CPU kernel checks them, made non-negative and
uploaded as int64. GatherGradient uses no atomics: the host sorts the indices (stably)
into per-row lists, and each element of dX sums its dY entries in ascending order,
rounding after every addition as np.add.at does, so it is deterministic (float32/16/64).
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.errors import ShapeError
from netbrew.operators.cuda.launch import empty, grid, kernel, suffix
from netbrew.operators.cuda.shape_ops import copy_array, device, host, is_contiguous, upload
from netbrew.operators.schema import kernel as register

FAMILY = "gather"
_ITEMSIZES = (1, 2, 4, 8, 16)


def _checked(op: str, shape: tuple[int, ...], indices, axis: int) -> tuple[int, np.ndarray]:
    """The normalized axis and the indices (int64, made non-negative), checked as the
    CPU kernel checks them."""
    rank = len(shape)
    if not -rank <= axis < rank:
        raise ShapeError(f"{op}: axis {axis} is out of range [{-rank}, {rank - 1}] for rank {rank}")
    axis %= rank
    dim = shape[axis]
    idx = host(indices).astype(np.int64, copy=False)
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        bad = idx[(idx < -dim) | (idx >= dim)].flat[0]
        raise ShapeError(
            f"{op}: input 'indices' holds {bad}, out of range [{-dim}, {dim - 1}] "
            f"for axis {axis} of data {list(shape)}"
        )
    return axis, np.where(idx < 0, idx + dim, idx)


@register("Gather", device="cuda")
def gather_cuda(x, indices, axis):
    shape = tuple(x.shape)
    axis, idx = _checked("Gather", shape, indices, axis)
    out_shape = shape[:axis] + idx.shape + shape[axis + 1 :]
    out = empty(out_shape, x.dtype)
    n = out.size
    if n == 0:
        return (out,)
    itemsize = x.dtype.itemsize
    if itemsize not in _ITEMSIZES:
        raise TypeError(f"Gather: no CUDA kernel for dtype {x.dtype}")
    if not is_contiguous(x):
        x = copy_array(x, "Gather")
    fn = kernel(FAMILY, f"gather_b{itemsize}", device())
    fn(
        x,
        upload(idx.reshape(-1)),
        out,
        np.int64(idx.size),
        np.int64(shape[axis]),
        np.int64(math.prod(shape[axis + 1 :])),
        np.int64(n),
        **grid(n),
    )
    return (out,)


@register("GatherGradient", device="cuda")
def gather_gradient_cuda(dy, x, indices, *, axis):
    shape = tuple(x.shape)
    rank = len(shape)
    if not -rank <= axis < rank:
        raise ShapeError(f"GatherGradient: axis {axis} is out of range for data of rank {rank}")
    axis, idx = _checked("GatherGradient", shape, indices, axis)
    expected = shape[:axis] + idx.shape + shape[axis + 1 :]
    if tuple(dy.shape) != expected:
        raise ShapeError(
            f"GatherGradient: input dY has shape {list(dy.shape)}, expected {list(expected)}"
        )
    tag = suffix(dy.dtype, "GatherGradient", ("f32", "f16", "f64"))
    dx = empty(shape, dy.dtype)
    n = dx.size
    if n == 0:
        return (dx,)
    if not is_contiguous(dy):
        dy = copy_array(dy, "GatherGradient")
    dim = shape[axis]
    flat = idx.reshape(-1)
    order = np.argsort(flat, kind="stable").astype(np.int64)  # q in ascending order per row
    starts = np.zeros(dim + 1, np.int64)
    np.cumsum(np.bincount(flat, minlength=dim), out=starts[1:])
    fn = kernel(FAMILY, f"gather_grad_{tag}", device())
    fn(
        dy,
        upload(order),
        upload(starts),
        dx,
        np.int64(flat.size),
        np.int64(dim),
        np.int64(math.prod(shape[axis + 1 :])),
        np.int64(n),
        **grid(n),
    )
    return (dx,)
