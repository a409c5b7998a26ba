"""ReduceMean, ReduceSum, ReduceMax and ArgMax."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from netbrew.errors import ShapeError
from netbrew.operators.schema import kernel, schema

_REDUCE_ATTRS = {"keepdims": 1, "noop_with_empty_axes": 0}
_REDUCE_DOC = (
    "over `axes` (int64 1-D input; all dims when absent or empty, or none if "
    "noop_with_empty_axes=1); reduced dims kept as 1 when keepdims; "
    "defaults keepdims=1, noop_with_empty_axes=0"
)

schema(
    "ReduceMean",
    inputs=["data", "axes?"],
    outputs=["reduced"],
    attrs=_REDUCE_ATTRS,
    dtypes={0: "numeric", 1: "int"},
    doc=f"reduced = mean(data) {_REDUCE_DOC}; NaN over an empty set",
)
schema(
    "ReduceSum",
    inputs=["data", "axes?"],
    outputs=["reduced"],
    attrs=_REDUCE_ATTRS,
    dtypes={0: "numeric", 1: "int"},
    doc=f"reduced = sum(data) {_REDUCE_DOC}; 0 over an empty set",
)
schema(
    "ReduceMax",
    inputs=["data", "axes?"],
    outputs=["reduced"],
    attrs=_REDUCE_ATTRS,
    dtypes={0: "numeric", 1: "int"},
    doc=f"reduced = max(data) {_REDUCE_DOC}; over an empty set -inf for floats, the "
    "dtype's minimum for integers, False for bool",
)
schema(
    "ArgMax",
    inputs=["data"],
    outputs=["reduced"],
    attrs={"axis": 0, "keepdims": 1, "select_last_index": 0},
    dtypes="numeric",
    doc="reduced = argmax(data, axis) as int64, first (or last if select_last_index) maximum; "
    "defaults axis=0, keepdims=1, select_last_index=0",
)


def _acc_dtype(dtype: np.dtype) -> np.dtype:
    """float32 for 16-bit floats, so sums are not accumulated in half precision."""
    small_float = dtype.kind == "f" or dtype.name == "bfloat16"
    return np.dtype(np.float32) if small_float and dtype.itemsize < 4 else dtype


def _axes(
    op: str, axes: np.ndarray | None, ndim: int, noop: int, what: str = "input axes"
) -> tuple[int, ...] | None:
    """Normalized axes, or None when the op is a no-op (noop_with_empty_axes)."""
    if axes is None or np.size(axes) == 0:
        return None if noop else tuple(range(ndim))
    out = []
    for a in np.asarray(axes).reshape(-1).tolist():
        if not -ndim <= a < ndim:
            raise ShapeError(
                f"{op}: axis {a} in {what} is out of range for data with {ndim} dims "
                f"(expected {-ndim} to {ndim - 1})"
            )
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ShapeError(f"{op}: input axes {np.asarray(axes).tolist()} repeats a dimension")
    return tuple(out)


def _reduce(
    op: str,
    fn: Callable[..., np.ndarray],
    data: np.ndarray,
    axes: np.ndarray | None,
    keepdims: int,
    noop_with_empty_axes: int,
) -> tuple[np.ndarray]:
    """Runs `fn(data, axis=..., keepdims=...)` after checking axes; keeps data's dtype."""
    dims = _axes(op, axes, data.ndim, noop_with_empty_axes)
    if dims is None:
        return (data,)
    out = fn(data, axis=dims, keepdims=bool(keepdims))
    return (np.asarray(out).astype(data.dtype, copy=False),)


def _sum(data: np.ndarray, **kw) -> np.ndarray:
    return np.sum(data, dtype=_acc_dtype(data.dtype), **kw)


def _mean(data: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    count = int(np.prod([data.shape[a] for a in axis]))
    total = np.sum(data, axis=axis, keepdims=keepdims, dtype=_acc_dtype(data.dtype))
    with np.errstate(invalid="ignore", divide="ignore"):  # an empty set gives NaN, as ONNX
        return total / count if data.dtype.kind in "fc" else total / np.float64(count)


def _max(data: np.ndarray, **kw) -> np.ndarray:
    if data.dtype.kind == "b":
        lowest = False
    elif data.dtype.kind in "iu":
        lowest = np.iinfo(data.dtype).min
    else:
        lowest = -np.inf
    return np.max(data, initial=lowest, **kw)


@kernel("ReduceMean")
def reduce_mean_cpu(
    data: np.ndarray, axes: np.ndarray | None = None, *, keepdims: int, noop_with_empty_axes: int
) -> tuple[np.ndarray]:
    """Mean over axes."""
    return _reduce("ReduceMean", _mean, data, axes, keepdims, noop_with_empty_axes)


@kernel("ReduceSum")
def reduce_sum_cpu(
    data: np.ndarray, axes: np.ndarray | None = None, *, keepdims: int, noop_with_empty_axes: int
) -> tuple[np.ndarray]:
    """Sum over axes."""
    return _reduce("ReduceSum", _sum, data, axes, keepdims, noop_with_empty_axes)


@kernel("ReduceMax")
def reduce_max_cpu(
    data: np.ndarray, axes: np.ndarray | None = None, *, keepdims: int, noop_with_empty_axes: int
) -> tuple[np.ndarray]:
    """Max over axes."""
    return _reduce("ReduceMax", _max, data, axes, keepdims, noop_with_empty_axes)


@kernel("ArgMax")
def argmax_cpu(
    data: np.ndarray, *, axis: int, keepdims: int, select_last_index: int
) -> tuple[np.ndarray]:
    """Index of the maximum along `axis`, as int64."""
    (dim,) = _axes("ArgMax", np.array([axis]), data.ndim, 0, "argument axis")
    if data.shape[dim] == 0:
        raise ShapeError(f"ArgMax: data {list(data.shape)} is empty along axis {axis}")
    if select_last_index:
        flipped = np.argmax(np.flip(data, axis=dim), axis=dim, keepdims=bool(keepdims))
        index = data.shape[dim] - 1 - flipped
    else:
        index = np.argmax(data, axis=dim, keepdims=bool(keepdims))
    return (np.asarray(index, dtype=np.int64),)
