"""CUDA kernels of the broadcasting ops (elementwise_binary.cu): Add, Sub, Mul, Div, Pow,
the variadic Sum, Mean, Max and Min (folded pairwise, as the CPU's functools.reduce), the
comparisons, And, Or, Xor, Not, Where and SumReduceLike; and the gradients that sum a
broadcast term back to an input's shape (PowGradient, Max/MinGradient, MeanGradient,
WhereGradient).

Broadcasting is ONNX's multidirectional one, checked by the CPU kernels' helpers so the
errors read the same. Sums accumulate in float64 (int64 for integers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from netbrew.cuda import to_gpu, to_host
from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.arithmetic import check_broadcast, check_same_dtype
from netbrew.operators.cuda.elementwise import (
    FLOAT,
    INT,
    NULL,
    NUMERIC,
    broadcast,
    copy,
    fill,
    launch,
    same_dtype,
)
from netbrew.operators.cuda.launch import MAX_RANK, constant, empty, suffix
from netbrew.operators.schema import kernel as register
from netbrew.operators.variadic import sum_sequences

FAMILY = "elementwise_binary"
ALL = NUMERIC + ("b8",)
SUM_THREADS = 65536  # SumReduceLike splits each output's elements until about this many run


def zip_with(op: str, name: str, a, b, allowed=NUMERIC, out_dtype=None):
    """C = name(A, B) broadcast; kernel `<name>_<A's dtype>`; C has A's dtype or out_dtype."""
    shape = check_broadcast({"A": a, "B": b})
    tag = suffix(a.dtype, op, allowed)
    c = empty(shape, a.dtype if out_dtype is None else out_dtype)
    if c.size:
        meta, rank = broadcast(shape, a.shape, b.shape)
        launch(FAMILY, f"{name}_{tag}", c.size, (a, b, c, meta), rank)
    return c


# --- arithmetic -------------------------------------------------------------------------------


def _arithmetic(op: str, name: str) -> None:
    def binary_cuda(a, b):
        check_same_dtype({"A": a, "B": b})
        return (zip_with(op, name, a, b),)

    binary_cuda.__name__ = f"{name}_cuda"
    register(op, device="cuda")(binary_cuda)


for _op, _name in (("Add", "add"), ("Sub", "sub"), ("Mul", "mul")):
    _arithmetic(_op, _name)


@register("Div", device="cuda")
def div_cuda(a, b):
    """Float division, or integer division truncated toward zero (C-style, as ONNX)."""
    check_same_dtype({"A": a, "B": b})
    if np.dtype(a.dtype).kind not in "iu":
        return (zip_with("Div", "div", a, b, FLOAT),)
    shape = check_broadcast({"A": a, "B": b})
    tag = suffix(a.dtype, "Div", INT)
    c = empty(shape, a.dtype)
    if c.size:
        err = to_gpu(np.zeros(1, np.int32), device=None)
        meta, rank = broadcast(shape, a.shape, b.shape)
        launch(FAMILY, f"div_{tag}", c.size, (a, b, c, err, meta), rank)
        if to_host(err)[0]:
            raise ValueError("input 'B' contains zeros: integer division by zero is undefined")
    return (c,)


@register("Pow", device="cuda")
def pow_cuda(x, y):
    """X ** Y in X's dtype: a float side computes in float64; integers wrap, and a negative
    integer exponent gives 0 unless |X| == 1 (as the CPU kernel)."""
    shape = check_broadcast({"X": x, "Y": y})
    tx, ty = suffix(x.dtype, "Pow", NUMERIC), suffix(y.dtype, "Pow", NUMERIC)
    z = empty(shape, x.dtype)
    if z.size:
        meta, rank = broadcast(shape, x.shape, y.shape)
        launch(FAMILY, f"pow_{tx}_{ty}", z.size, (x, y, z, meta), rank)
    return (z,)


# --- variadic ---------------------------------------------------------------------------------


def _fold(op: str, name: str, arrays: Sequence[Any], allowed: Sequence[str]):
    named = {f"data_{i}": a for i, a in enumerate(arrays)}
    check_same_dtype(named, allow_bool=False)
    check_broadcast(named)
    if len(arrays) == 1:
        return copy(arrays[0])
    acc = arrays[0]
    for x in arrays[1:]:
        acc = zip_with(op, name, acc, x, allowed)
    return acc


@register("Sum", device="cuda")
def sum_cuda(*arrays):
    if any(isinstance(a, list) for a in arrays):
        return (sum_sequences(arrays, sum_cuda),)
    return (_fold("Sum", "add", arrays, FLOAT),)


def divide(x, count: int):
    """x / count in x's dtype (Mean's last step)."""
    y = empty(x.shape, x.dtype)
    tag = suffix(x.dtype, "Mean", FLOAT)
    launch(FAMILY, f"div_scalar_{tag}", x.size, (x, y), np.float64(count))
    return y


@register("Mean", device="cuda")
def mean_cuda(*arrays):
    return (divide(_fold("Mean", "add", arrays, FLOAT), len(arrays)),)


@register("Max", device="cuda")
def max_cuda(*arrays):
    return (_fold("Max", "max", arrays, NUMERIC),)


@register("Min", device="cuda")
def min_cuda(*arrays):
    return (_fold("Min", "min", arrays, NUMERIC),)


# --- comparisons and logic --------------------------------------------------------------------


def _compare(op: str, name: str, allowed: Sequence[str], real_only: bool = False) -> None:
    def compare_cuda(a, b):
        if real_only and np.dtype(a.dtype).kind not in "iuf":
            raise SchemaError(f"input 'A' has dtype {a.dtype}, expected an integer or float type")
        check_same_dtype({"A": a, "B": b}, allow_bool=True)
        return (zip_with(op, name, a, b, allowed, out_dtype=np.bool_),)

    compare_cuda.__name__ = f"{name}_cuda"
    register(op, device="cuda")(compare_cuda)


for _op, _name, _allowed, _real in (
    ("Equal", "equal", ALL, False),
    ("Less", "less", ALL, False),
    ("Greater", "greater", ALL, False),
    ("LessOrEqual", "less_or_equal", NUMERIC, True),
    ("GreaterOrEqual", "greater_or_equal", NUMERIC, True),
    ("And", "logic_and", ("b8",), False),
    ("Or", "logic_or", ("b8",), False),
    ("Xor", "logic_xor", ("b8",), False),
):
    _compare(_op, _name, _allowed, _real)


@register("Not", device="cuda")
def not_cuda(x):
    y = empty(x.shape, np.bool_)
    launch(FAMILY, f"logic_not_{suffix(x.dtype, 'Not', ('b8',))}", x.size, (x, y))
    return (y,)


@register("Where", device="cuda")
def where_cuda(condition, x, y):
    check_same_dtype({"X": x, "Y": y}, allow_bool=True)
    shape = check_broadcast({"condition": condition, "X": x, "Y": y})
    dtype = np.dtype(x.dtype)
    if dtype.kind not in "biufc" or dtype.itemsize not in (1, 2, 4, 8):
        raise TypeError(f"Where: no CUDA kernel for dtype {dtype}")
    suffix(condition.dtype, "Where", ("b8",))
    out = empty(shape, dtype)
    if out.size:
        meta, rank = broadcast(shape, condition.shape, x.shape, y.shape)
        launch(FAMILY, f"where_{dtype.itemsize}", out.size, (condition, x, y, out, meta), rank)
    return (out,)


# --- SumReduceLike ----------------------------------------------------------------------------


def sum_to_shape(a, shape: Sequence[int], dtype: Any = None, fresh: bool = True):
    """netbrew.operators.sum_reduce_like.sum_to_shape on the GPU, the result in `dtype`
    (default a's). Returns a itself when nothing is summed or converted, unless `fresh`."""
    shape = tuple(int(d) for d in shape)
    dtype = np.dtype(a.dtype if dtype is None else dtype)
    lead = len(a.shape) - len(shape)
    if lead < 0:
        raise ShapeError(f"cannot sum shape {list(a.shape)} down to longer {list(shape)}")
    for i, d in enumerate(shape):
        if d not in (1, a.shape[lead + i]):
            raise ShapeError(f"shape {list(shape)} does not broadcast to {list(a.shape)}")
    if tuple(a.shape) == shape and dtype == a.dtype:
        return copy(a) if fresh else a
    tag = suffix(a.dtype, "SumReduceLike", NUMERIC)
    acc = "f64" if tag in FLOAT else "i64"
    out_tag = suffix(dtype, "SumReduceLike", FLOAT if acc == "f64" else INT)
    out = empty(shape, dtype)
    if out.size == 0:
        return out
    if a.size == 0:
        return fill(0, shape, dtype)
    if len(a.shape) > MAX_RANK:
        raise ValueError(f"rank {len(a.shape)} is over the CUDA kernels' limit of {MAX_RANK}")
    strides = [math.prod(a.shape[j + 1 :]) for j in range(len(a.shape))]
    kept, reduced = [], []
    for j, size in enumerate(a.shape):
        if size > 1:
            summed = j < lead or shape[j - lead] == 1
            (reduced if summed else kept).append((int(size), strides[j]))
    m, r = out.size, a.size // out.size
    chunks = 1 if m >= SUM_THREADS else max(1, min(-(-SUM_THREADS // m), -(-r // 64)))
    meta = np.zeros(4 * MAX_RANK, np.int64)
    for k, dims in enumerate((kept, reduced)):
        meta[2 * k * MAX_RANK : 2 * k * MAX_RANK + len(dims)] = [s for s, _ in dims]
        meta[(2 * k + 1) * MAX_RANK : (2 * k + 1) * MAX_RANK + len(dims)] = [t for _, t in dims]
    meta_gpu = constant(meta)
    part = empty((chunks * m,), np.float64 if acc == "f64" else np.int64)
    scalars = (
        np.int64(m),
        np.int64(r),
        np.int64(chunks),
        np.int32(len(kept)),
        np.int32(len(reduced)),
    )
    launch(FAMILY, f"sum_part_{tag}", chunks * m, (a, part, meta_gpu), *scalars)
    launch(FAMILY, f"sum_finish_{acc}_{out_tag}", m, (part, out), np.int64(chunks))
    return out


@register("SumReduceLike", device="cuda")
def sum_reduce_like_cuda(a, b):
    return (sum_to_shape(a, b.shape),)


# --- gradients --------------------------------------------------------------------------------


@register("PowGradient", device="cuda")
def pow_gradient_cuda(x, y, z, dz, output_mask):
    op = "PowGradient"
    same_dtype(op, X=x, Z=z, dZ=dz)
    shape = check_broadcast({"X": x, "Y": y})
    for name, v in (("Z", z), ("dZ", dz)):
        if tuple(v.shape) != tuple(shape):
            raise ShapeError(f"{op}: {name} has shape {list(v.shape)}, expected {list(shape)}")
    tx, ty = suffix(x.dtype, op, FLOAT), suffix(y.dtype, op, NUMERIC)
    y_int = ty in INT
    gx = empty(shape, np.float64) if output_mask[0] else None
    gy = empty(shape, np.float64) if output_mask[1] and not y_int else None
    if (gx is not None or gy is not None) and dz.size:
        meta, rank = broadcast(shape, x.shape, y.shape)
        ins = (x, y, z, dz, NULL if gx is None else gx, NULL if gy is None else gy, meta)
        launch(FAMILY, f"pow_grad_{tx}_{ty}", dz.size, ins, rank)
    dx = None if gx is None else sum_to_shape(gx, x.shape, x.dtype)
    dy = None
    if output_mask[1]:
        dy = fill(0, y.shape, y.dtype) if y_int else sum_to_shape(gy, y.shape, y.dtype)
    return dx, dy


def _select_gradient(op: str):
    def select_gradient_cuda(y, dy, *xs, output_mask):
        if tuple(dy.shape) != tuple(y.shape):
            raise ShapeError(f"{op}: dY has shape {list(dy.shape)}, expected {list(y.shape)}")
        grads = []
        for x, want in zip(xs, output_mask):
            if not want:
                grads.append(None)
                continue
            tag = suffix(same_dtype(op, X=x, Y=y, dY=dy), op, NUMERIC)
            g = empty(y.shape, dy.dtype)
            if g.size:
                meta, rank = broadcast(y.shape, x.shape)
                launch(FAMILY, f"select_grad_{tag}", g.size, (x, y, dy, g, meta), rank)
            grads.append(sum_to_shape(g, x.shape, fresh=False))
        return tuple(grads)

    select_gradient_cuda.__name__ = f"{op[:3].lower()}_gradient_cuda"
    register(op, device="cuda")(select_gradient_cuda)


_select_gradient("MaxGradient")
_select_gradient("MinGradient")


@register("MeanGradient", device="cuda")
def mean_gradient_cuda(dy, *xs, output_mask):
    scaled = divide(dy, len(xs))
    return tuple(
        sum_to_shape(scaled, x.shape) if want else None for x, want in zip(xs, output_mask)
    )


@register("WhereGradient", device="cuda")
def where_gradient_cuda(condition, d, x=None, y=None, output_mask=(True, True)):
    op = "WhereGradient"
    tag = suffix(d.dtype, op, NUMERIC)
    grads = []
    for like, want, take in ((x, output_mask[0], 1), (y, output_mask[1], 0)):
        if not want:
            grads.append(None)
            continue
        g = empty(d.shape, d.dtype)
        if g.size:
            meta, rank = broadcast(d.shape, condition.shape)
            launch(
                FAMILY, f"where_grad_{tag}", g.size, (condition, d, g, meta), rank, np.int32(take)
            )
        grads.append(sum_to_shape(g, like.shape, fresh=False))
    return tuple(grads)
