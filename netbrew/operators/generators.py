"""ConstantOfShape, Size, Range, EyeLike, OneHot and Trilu: tensors made from shapes and indices.

The ops that size their output from data (ConstantOfShape, Range, EyeLike, OneHot) check the
requested size with `check_numel` before allocating. Trilu is linear in its input: its
gradient is Trilu of the output gradient with the same k and upper. Range's start and delta
and OneHot's values have gradients too (generators_grad.py).
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.constant import onnx_dtype
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import gradient, kernel, no_gradient, schema

schema(
    "ConstantOfShape",
    inputs=["input"],
    outputs=["output"],
    attrs={"value": None},
    dtypes="int",
    doc="output = a tensor of shape `input` (int64 1-D) filled with value (a one-element "
    "tensor attribute, whose dtype the output takes); default value float32 0",
)
no_gradient("ConstantOfShape", "its input is a shape, and the output does not depend on data")

schema(
    "Size",
    inputs=["data"],
    outputs=["size"],
    doc="size = the number of elements of data, an int64 scalar",
)
no_gradient("Size", "its output is an integer count")

schema(
    "Range",
    inputs=["start", "limit", "delta"],
    outputs=["output"],
    attrs={"stash_type": 1},
    doc="output[i] = start + i * delta for i < max(ceil((limit - start) / delta), 0); 1-D, of "
    "the inputs' dtype (scalars of one dtype); float16/bfloat16 are computed in float32 "
    "(stash_type=1, the default) or float64 (stash_type=11)",
)

schema(
    "EyeLike",
    inputs=["input"],
    outputs=["output"],
    attrs={"dtype": None, "k": 0},
    doc="output = 2-D tensor of input's shape with output[i, i + k] = 1 and 0 elsewhere; "
    "dtype is an ONNX TensorProto type (default: input's dtype); default k=0",
)
no_gradient("EyeLike", "its output does not depend on the input's values")

schema(
    "OneHot",
    inputs=["indices", "depth", "values"],
    outputs=["output"],
    attrs={"axis": -1},
    dtypes={0: "numeric", 1: "numeric"},
    doc="output = values[1] where the new axis position equals indices (negatives count from "
    "depth), else values[0]; a new axis of size depth (scalar) is inserted at axis; "
    "out-of-range indices give all values[0]; output has values' dtype; default axis=-1",
)

schema(
    "Trilu",
    inputs=["input", "k?"],
    outputs=["output"],
    attrs={"upper": 1},
    dtypes={1: "int"},
    doc="output = input with elements below (upper=1) or above (upper=0) the k-th diagonal "
    "of the last two dims zeroed: kept where col - row >= k (upper) or <= k (lower); "
    "k is an optional int64 scalar (default 0); default upper=1",
)


def _scalar(x: np.ndarray, op: str, slot: str) -> np.ndarray:
    x = np.asarray(x)
    if x.size != 1:
        raise ShapeError(f"{op}: input {slot!r} has shape {list(x.shape)}, expected a scalar")
    return x.reshape(())


@kernel("ConstantOfShape")
def constant_of_shape_cpu(shape: np.ndarray, value: np.ndarray | None) -> tuple[np.ndarray]:
    if shape.ndim != 1:
        raise ShapeError(
            f"ConstantOfShape: input 'input' has shape {list(shape.shape)}, expected 1-D"
        )
    dims = check_numel(shape.tolist(), "ConstantOfShape output")
    if value is None:
        value = np.zeros(1, np.float32)
    value = np.asarray(value)
    if value.size != 1:
        raise ShapeError(
            f"ConstantOfShape: attribute 'value' has {value.size} elements, expected one"
        )
    return (np.full(dims, value.reshape(-1)[0], dtype=value.dtype),)


@kernel("Size")
def size_cpu(data: np.ndarray) -> tuple[np.ndarray]:
    return (np.array(np.size(data), np.int64),)


@kernel("Range")
def range_cpu(
    start: np.ndarray, limit: np.ndarray, delta: np.ndarray, stash_type: int
) -> tuple[np.ndarray]:
    start, limit, delta = (
        _scalar(v, "Range", n) for v, n in ((start, "start"), (limit, "limit"), (delta, "delta"))
    )
    dtype = start.dtype
    if limit.dtype != dtype or delta.dtype != dtype:
        raise SchemaError(
            f"Range: inputs have dtypes {start.dtype}, {limit.dtype}, {delta.dtype}; "
            "expected one dtype"
        )
    if dtype.kind in "iu":
        s, lim, d = int(start), int(limit), int(delta)
        if d == 0:
            raise ValueError("Range: input 'delta' is 0")
        n = max(-((s - lim) // d), 0)  # ceil((lim - s) / d) in exact integers
        check_numel([n], "Range output")
        return ((s + np.arange(n, dtype=np.int64) * d).astype(dtype),)
    compute = np.dtype(np.float64)
    if dtype.itemsize < 4:  # float16 and bfloat16 are stashed
        compute = np.dtype(np.float64 if stash_type == 11 else np.float32)
    s, lim, d = (float(v.astype(compute)) for v in (start, limit, delta))
    if d == 0:
        raise ValueError("Range: input 'delta' is 0")
    n = max(math.ceil((lim - s) / d), 0)
    check_numel([n], "Range output")
    return (np.arange(s, lim, d, dtype=compute)[:n].astype(dtype),)


@kernel("EyeLike")
def eye_like_cpu(x: np.ndarray, dtype: int | None, k: int) -> tuple[np.ndarray]:
    if x.ndim != 2:
        raise ShapeError(f"EyeLike: input 'input' has shape {list(x.shape)}, expected 2-D")
    out_dtype = x.dtype if dtype is None else onnx_dtype(dtype)
    rows, cols = check_numel(x.shape, "EyeLike output")
    return (np.eye(rows, cols, k=k, dtype=out_dtype),)


def one_hot_mask(
    indices: np.ndarray, depth: np.ndarray, values: np.ndarray, axis: int, op: str = "OneHot"
) -> np.ndarray:
    """The bool mask, of OneHot's output shape, of the positions that take values[1].

    Raises:
        ValueError, ShapeError: depth is negative, values has not 2 elements, or axis is out
            of range (the messages name `op`).
    """
    depth = int(_scalar(depth, op, "depth"))
    if depth < 0:
        raise ValueError(f"{op}: input 'depth' is {depth}, expected >= 0")
    if np.size(values) != 2:
        raise ShapeError(
            f"{op}: input 'values' has shape {list(np.shape(values))}, expected 2 elements "
            "[off_value, on_value]"
        )
    rank = indices.ndim
    if not -rank - 1 <= axis <= rank:
        raise ShapeError(f"{op}: axis {axis} is out of range for output rank {rank + 1}")
    axis %= rank + 1
    out_shape = indices.shape[:axis] + (depth,) + indices.shape[axis:]
    check_numel(out_shape, f"{op} output")
    idx = np.asarray(indices)
    idx = (np.trunc(idx) if idx.dtype.kind == "f" else idx).astype(np.int64)
    idx = np.where(idx < 0, idx + depth, idx)
    positions = np.arange(depth).reshape((depth,) + (1,) * (rank - axis))
    return np.expand_dims(idx, axis) == positions


@kernel("OneHot")
def one_hot_cpu(
    indices: np.ndarray, depth: np.ndarray, values: np.ndarray, axis: int
) -> tuple[np.ndarray]:
    hot = one_hot_mask(indices, depth, values, axis)
    off, on = np.asarray(values).reshape(-1)
    return (np.where(hot, on, off).astype(values.dtype, copy=False),)


def trilu_mask(shape: tuple[int, ...], k: int, upper: int) -> np.ndarray:
    """The bool mask of the kept elements over the last two dims of `shape`."""
    rows, cols = shape[-2:]
    diff = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    return diff >= k if upper else diff <= k


@kernel("Trilu")
def trilu_cpu(x: np.ndarray, k: np.ndarray | None = None, *, upper: int) -> tuple[np.ndarray]:
    if x.ndim < 2:
        raise ShapeError(f"Trilu: input 'input' has shape {list(x.shape)}, expected rank >= 2")
    diag = 0 if k is None else int(_scalar(k, "Trilu", "k"))
    mask = trilu_mask(x.shape, diag, upper)
    return (np.where(mask, x, np.zeros((), x.dtype)),)


@gradient("Trilu")
def trilu_grad(op, g_out, g_in):
    """dX = Trilu(dY, k) with the same upper: the op only masks its input."""
    if not g_in[0]:
        return []
    return [op_def("Trilu", [g_out[0], *op.input[1:]], [g_in[0]], **copy_attrs(op))]
