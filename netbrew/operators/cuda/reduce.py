"""CUDA kernels of the reductions (reduce.cu), checked against the NumPy kernels.

- ReduceSum, ReduceMean, ReduceMax and ReduceMin (float32/16/64, int32/64; 16-bit floats
  and integers accumulate in float32 / int64) over `axes` given as an input (read back with
  to_host when it arrives on the GPU), with keepdims and noop_with_empty_axes as the CPU
  kernels; ArgMax and ArgMin (keepdims, select_last_index; NaN counts as the extreme, as
  NumPy's).
- ReduceSumGradient, ReduceMeanGradient and ReduceMaxGradient (which ReduceMin's gradient
  reuses).

A reduction views its input as (kept dims, reduced dims): size-1 dims are dropped and
neighbouring dims of the same kind merged, so most reductions index one strided dim. Each
output gets a thread block (block reduction in reduce_common.cuh) or, for short reductions
and kept inner dims, a thread. Also the helpers the other reduction families share:
`reduce_values`, `fill`, `cast`, `copy`, `host`, `acc_dtype`, `fn`, `block_launch`.

Arrays are passed to kernels as GPUArrays (PyCUDA packs their __cuda_array_interface__
pointer, 0 for an empty array, whose gpudata is None).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netbrew.cuda import to_host
from netbrew.errors import ShapeError
from netbrew.operators.cuda.launch import (
    MAX_GRID,
    MAX_RANK,
    broadcast_meta,
    constant,
    empty,
    grid,
    kernel,
    suffix,
)
from netbrew.operators.reduce import _axes
from netbrew.operators.schema import kernel as register
from netbrew.operators.selection import axis_of

FAMILY = "reduce"
VALUES = ("f32", "f16", "f64", "i32", "i64")
FLOATS = ("f32", "f16", "f64")

# -- helpers shared by softmax.py, losses.py and normalization.py -----------------------------


def fn(name: str, family: str = FAMILY):
    """Kernel `name` of `family`.cu, on the current device."""
    return kernel(family, name)


def host(a: Any) -> np.ndarray | None:
    """A small integer input (axes, labels) as NumPy, copied back when it is on the GPU."""
    return None if a is None else np.asarray(to_host(a))


def acc_dtype(dtype: Any) -> np.dtype:
    """float64 for float64, float32 for the other floats: where statistics are computed."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def fill(shape: Sequence[int], dtype: Any, value: float) -> Any:
    """A new GPU array of `shape` and `dtype` filled with `value`."""
    y = empty(shape, dtype)
    if y.size:
        f = fn(f"fill_{suffix(dtype, 'fill', VALUES)}")
        f(y, np.int64(y.size), np.float64(value), **grid(y.size))
    return y


def cast(a: Any, dtype: Any, op: str, shape: Sequence[int] | None = None) -> Any:
    """`a` converted to a float `dtype` in a new array (of `shape`, default a's); `a` itself
    when it already has that dtype and shape."""
    dtype = np.dtype(dtype)
    shape = tuple(a.shape) if shape is None else tuple(shape)
    if a.dtype == dtype and tuple(a.shape) == shape:
        return a
    if math.prod(shape) != a.size:
        raise ValueError(f"{op}: cannot view {list(a.shape)} as {list(shape)}")
    y = empty(shape, dtype)
    if a.size:
        f = fn(f"cast_{suffix(a.dtype, op, VALUES)}_{suffix(dtype, op, FLOATS)}")
        f(a, y, np.int64(a.size), **grid(a.size))
    return y


def copy(a: Any, shape: Sequence[int] | None = None) -> Any:
    """A new copy of float array `a` (with `shape`, default a's)."""
    shape = tuple(a.shape) if shape is None else tuple(shape)
    y = empty(shape, a.dtype)
    if a.size:
        tag = suffix(a.dtype, "copy", FLOATS)
        fn(f"cast_{tag}_{tag}")(a, y, np.int64(a.size), **grid(a.size))
    return y


def block_threads(n: int, most: int = 256) -> int:
    """Threads for a block reduction over n elements: a power of two from 32 to `most`."""
    return min(most, 1 << max(5, (max(n, 1) - 1).bit_length()))


def block_launch(rows: int, n: int, most: int = 256) -> dict[str, tuple]:
    """A block per row (grid-stride over rows), its threads sized to n."""
    return {"grid": (max(1, min(rows, MAX_GRID)), 1, 1), "block": (block_threads(n, most), 1, 1)}


# -- reduction plans ------------------------------------------------------------------------


@dataclass
class Plan:
    """Input `shape` reduced over `dims`: outputs reduce `count` elements each."""

    kept: list[tuple[int, int]]  # (size, stride) of the merged kept dims, outer first
    reduced: list[tuple[int, int]]  # the same for the reduced dims
    outputs: int
    count: int
    inner_kept: bool  # the innermost (stride 1) dim is kept

    def meta(self) -> Any:
        rows = []
        for dims in (self.kept, self.reduced):
            rows.append([n for n, _ in dims] + [1] * (MAX_RANK - len(dims)))
            rows.append([s for _, s in dims] + [0] * (MAX_RANK - len(dims)))
        return constant([v for row in rows for v in row])


def plan(op: str, shape: Sequence[int], dims: Sequence[int]) -> Plan:
    strides, step = [0] * len(shape), 1
    for d in reversed(range(len(shape))):
        strides[d] = step
        step *= max(int(shape[d]), 1)
    groups: list[list] = []  # [reduced?, size, stride]
    for axis, n in enumerate(shape):
        if n == 1:
            continue
        red = axis in dims
        if groups and groups[-1][0] == red:
            groups[-1][1] *= n
            groups[-1][2] = strides[axis]
        else:
            groups.append([red, int(n), strides[axis]])
    kept = [(n, s) for r, n, s in groups if not r]
    reduced = [(n, s) for r, n, s in groups if r]
    if len(kept) > MAX_RANK or len(reduced) > MAX_RANK:
        raise ValueError(f"{op}: input of rank {len(shape)} is over the CUDA kernels' limit")
    outputs = math.prod(int(n) for a, n in enumerate(shape) if a not in dims)
    count = math.prod(int(shape[a]) for a in dims)
    return Plan(kept, reduced, outputs, count, bool(groups) and not groups[-1][0])


def thread_mode(count: int, outputs: int, inner_kept: bool) -> bool:
    """A thread per output (else a block): short reductions, or many outputs whose
    neighbours sit next to each other in memory."""
    return count <= 32 or (inner_kept and outputs >= 1024)


def reduced_shape(shape: Sequence[int], dims: Sequence[int], keepdims: int) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if a in dims else int(n) for a, n in enumerate(shape))
    return tuple(int(n) for a, n in enumerate(shape) if a not in dims)


def reduce_values(x: Any, dims: Sequence[int], op: str, keepdims: int, op_type: str) -> Any:
    """x reduced over `dims` with op in sum, mean, max, min; the result has x's dtype."""
    y = empty(reduced_shape(x.shape, dims, keepdims), x.dtype)
    if y.size == 0:
        return y
    p = plan(op_type, x.shape, dims)
    tag = suffix(x.dtype, op_type, VALUES)
    args = (x, y, p.meta(), np.int32(len(p.kept)), np.int32(len(p.reduced)))
    args += (np.int64(p.outputs), np.int64(p.count))
    if thread_mode(p.count, p.outputs, p.inner_kept):
        fn(f"reduce_{op}_thread_{tag}")(*args, **grid(p.outputs))
    else:
        fn(f"reduce_{op}_block_{tag}")(*args, **block_launch(p.outputs, p.count))
    return y


# -- ReduceSum, ReduceMean, ReduceMax, ReduceMin ---------------------------------------------


def _reduce(op_type: str, op: str, data, axes, keepdims: int, noop: int, copy_noop: bool):
    dims = _axes(op_type, host(axes), len(data.shape), noop)
    if dims is None:
        if not copy_noop:
            return (data,)  # as the NumPy kernel: the input itself
        dims = ()  # ReduceMin reduces over no axes: a copy
    return (reduce_values(data, dims, op, keepdims, op_type),)


@register("ReduceSum", device="cuda")
def reduce_sum_cuda(data, axes=None, *, keepdims, noop_with_empty_axes):
    return _reduce("ReduceSum", "sum", data, axes, keepdims, noop_with_empty_axes, False)


@register("ReduceMean", device="cuda")
def reduce_mean_cuda(data, axes=None, *, keepdims, noop_with_empty_axes):
    return _reduce("ReduceMean", "mean", data, axes, keepdims, noop_with_empty_axes, False)


@register("ReduceMax", device="cuda")
def reduce_max_cuda(data, axes=None, *, keepdims, noop_with_empty_axes):
    return _reduce("ReduceMax", "max", data, axes, keepdims, noop_with_empty_axes, False)


@register("ReduceMin", device="cuda")
def reduce_min_cuda(data, axes=None, *, keepdims, noop_with_empty_axes):
    return _reduce("ReduceMin", "min", data, axes, keepdims, noop_with_empty_axes, True)


# -- ArgMax, ArgMin --------------------------------------------------------------------------


def _arg(op_type: str, which: str, data, dim: int, keepdims: int, select_last_index: int):
    shape = tuple(data.shape)
    n = shape[dim]
    if n == 0:
        raise ShapeError(f"{op_type}: data {list(shape)} is empty along axis {dim}")
    y = empty(reduced_shape(shape, (dim,), keepdims), np.int64)
    if y.size == 0:
        return (y,)
    inner = math.prod(shape[dim + 1 :])
    tag = suffix(data.dtype, op_type, VALUES)
    args = (data, y, np.int64(y.size), np.int64(n), np.int64(inner), np.int32(select_last_index))
    if thread_mode(n, y.size, inner > 1):
        fn(f"{which}_thread_{tag}")(*args, **grid(y.size))
    else:
        fn(f"{which}_block_{tag}")(*args, **block_launch(y.size, n))
    return (y,)


@register("ArgMax", device="cuda")
def argmax_cuda(data, *, axis, keepdims, select_last_index):
    (dim,) = _axes("ArgMax", np.array([axis]), len(data.shape), 0, "argument axis")
    return _arg("ArgMax", "argmax", data, dim, keepdims, select_last_index)


@register("ArgMin", device="cuda")
def argmin_cuda(data, *, axis, keepdims, select_last_index):
    dim = axis_of(axis, len(data.shape), "ArgMin")
    if not data.shape:
        raise IndexError("ArgMin: tuple index out of range (data is a scalar)")
    return _arg("ArgMin", "argmin", data, dim, keepdims, select_last_index)


# -- gradients -------------------------------------------------------------------------------


def _expand(op_type: str, dy, x, axes, keepdims: int, noop: int):
    """(the shape dY is read as, broadcast to x's; the reduced dims): reduce_grad._expand."""
    dims = _axes(op_type, host(axes), len(x.shape), noop)
    if dims is None:
        try:
            ok = np.broadcast_shapes(tuple(dy.shape), tuple(x.shape)) == tuple(x.shape)
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(
                f"{op_type}: input dY has shape {list(dy.shape)}, which does not broadcast to "
                f"data {list(x.shape)}"
            )
        return tuple(dy.shape), None
    kept = tuple(1 if i in dims else int(d) for i, d in enumerate(x.shape))
    if dy.size != math.prod(kept):
        raise ValueError(
            f"{op_type}: input dY has shape {list(dy.shape)}, expected the reduced shape of data "
            f"{list(x.shape)} over axes {list(dims)} (keepdims={keepdims})"
        )
    return kept, dims


def _broadcast_back(op_type: str, dy, x, kept, divisor: float):
    dx = empty(x.shape, dy.dtype)
    if dx.size:
        meta = broadcast_meta(tuple(x.shape), kept)
        f = fn(f"reduce_bcast_{suffix(dy.dtype, op_type, FLOATS)}")
        f(dy, dx, meta, np.int32(len(x.shape)), np.int64(dx.size), np.float64(divisor),
          **grid(dx.size))  # fmt: skip
    return (dx,)


@register("ReduceSumGradient", device="cuda")
def reduce_sum_gradient_cuda(dy, x, axes=None, *, keepdims, noop_with_empty_axes):
    kept, _ = _expand("ReduceSumGradient", dy, x, axes, keepdims, noop_with_empty_axes)
    return _broadcast_back("ReduceSumGradient", dy, x, kept, 1.0)


@register("ReduceMeanGradient", device="cuda")
def reduce_mean_gradient_cuda(dy, x, axes=None, *, keepdims, noop_with_empty_axes):
    op = "ReduceMeanGradient"
    kept, dims = _expand(op, dy, x, axes, keepdims, noop_with_empty_axes)
    count = math.prod(int(x.shape[d]) for d in dims or ())
    return _broadcast_back(op, dy, x, kept, float(count or 1))


@register("ReduceMaxGradient", device="cuda")
def reduce_max_gradient_cuda(dy, x, reduced, axes=None, *, keepdims, noop_with_empty_axes):
    op = "ReduceMaxGradient"
    kept, dims = _expand(op, dy, x, axes, keepdims, noop_with_empty_axes)
    suffix(dy.dtype, op, FLOATS)
    if not dims:  # no axes reduced: dY passes through unchanged
        return (copy(dy, kept),)
    if reduced.size != math.prod(kept):
        raise ValueError(
            f"{op}: input reduced has shape {list(reduced.shape)}, expected {list(kept)} "
            f"elements' worth ({math.prod(kept)})"
        )
    if reduced.dtype != x.dtype:
        raise TypeError(f"{op}: input reduced has dtype {reduced.dtype}, data {x.dtype}")
    dx = empty(x.shape, dy.dtype)
    if dx.size == 0:
        return (dx,)
    tx = suffix(x.dtype, op, VALUES)
    p = plan(op, x.shape, dims)
    ties = empty(kept, np.int64)
    args = (x, reduced, ties, p.meta(), np.int32(len(p.kept)), np.int32(len(p.reduced)))
    args += (np.int64(p.outputs), np.int64(p.count))
    if thread_mode(p.count, p.outputs, p.inner_kept):
        fn(f"reduce_ties_thread_{tx}")(*args, **grid(p.outputs))
    else:
        fn(f"reduce_ties_block_{tx}")(*args, **block_launch(p.outputs, p.count))
    meta = broadcast_meta(tuple(x.shape), kept)
    f = fn(f"reduce_max_grad_{suffix(dy.dtype, op, FLOATS)}_{tx}")
    f(dy, x, reduced, ties, dx, meta, np.int32(len(x.shape)), np.int64(dx.size),
      **grid(dx.size))  # fmt: skip
    return (dx,)
