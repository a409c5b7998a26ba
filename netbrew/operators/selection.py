"""NonZero, Compress, Unique, TopK and ArgMin: ops that pick elements by value or condition.

NonZero and ArgMin pass no gradient (their outputs are indices). TopK's Values, Compress's
output and Unique's Y are elements of the input picked by a locally constant choice: their
gradients scatter dY back to those elements (selection_grad.py).
Half-precision inputs (bfloat16 especially, which NumPy cannot sort) are compared as float32.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.operators.schema import kernel, no_gradient, schema

schema(
    "NonZero",
    inputs=["X"],
    outputs=["Y"],
    doc="Y = the indices of the non-zero elements of X, int64 [rank(X), count], in row-major "
    "order (like numpy.nonzero); a scalar X counts as shape [1]",
)
schema(
    "Compress",
    inputs=["input", "condition"],
    outputs=["output"],
    attrs={"axis": None},
    dtypes={1: "bool"},
    doc="output = the slices of input along axis where condition (bool 1-D, no longer than "
    "that dim; missing entries count as false) is true; input is flattened when axis is "
    "unset (the default)",
)
schema(
    "Unique",
    inputs=["X"],
    outputs=["Y", "indices?", "inverse_indices?", "counts?"],
    attrs={"axis": None, "sorted": 1},
    doc="Y = the unique elements of X (flattened; or unique slices along axis), in ascending "
    "order (sorted=1) or by first occurrence (sorted=0); indices = first occurrence of each in "
    "X, inverse_indices = position in Y of each element (slice) of X, counts = occurrences; "
    "all int64; defaults axis unset, sorted=1",
)
schema(
    "TopK",
    inputs=["X", "K"],
    outputs=["Values", "Indices"],
    attrs={"axis": -1, "largest": 1, "sorted": 1},
    dtypes={1: "int"},
    doc="Values, Indices = the K (int64 [1]) largest (or smallest if largest=0) elements of X "
    "along axis and their int64 indices, sorted, equal values by lower index first; "
    "defaults axis=-1, largest=1, sorted=1",
)
schema(
    "ArgMin",
    inputs=["data"],
    outputs=["reduced"],
    attrs={"axis": 0, "keepdims": 1, "select_last_index": 0},
    doc="reduced = argmin(data, axis) as int64, first (or last if select_last_index) minimum; "
    "defaults axis=0, keepdims=1, select_last_index=0",
)
no_gradient("NonZero", "its output is integer indices")
no_gradient("ArgMin", "its output is an integer index")


def sort_keys(x: np.ndarray) -> np.ndarray:
    """`x` in a dtype NumPy can sort and compare: float32 for float16 and bfloat16."""
    if x.dtype.kind == "V" or (x.dtype.kind == "f" and x.dtype.itemsize < 4):
        return x.astype(np.float32)
    return x


def axis_of(axis: int, ndim: int, op: str) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise ShapeError(f"{op}: axis {axis} is out of range for input of rank {ndim}")
    return axis % max(ndim, 1)


@kernel("NonZero")
def non_zero_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    x = np.asarray(x)
    flags = x.reshape(-1) != 0 if x.ndim == 0 else x != 0
    return (np.array(np.nonzero(flags), dtype=np.int64).reshape(max(x.ndim, 1), -1),)


@kernel("Compress")
def compress_cpu(x: np.ndarray, condition: np.ndarray, axis: int | None) -> tuple[np.ndarray]:
    cond = np.asarray(condition).reshape(-1)
    if axis is None:
        x, dim = x.reshape(-1), 0
    else:
        dim = axis_of(axis, x.ndim, "Compress")
    size = x.shape[dim]
    if cond.size > size:
        if cond[size:].any():
            raise ShapeError(
                f"Compress: input 'condition' has {cond.size} entries, more than the {size} "
                f"of the input along axis {axis} (and one past the end is true)"
            )
        cond = cond[:size]
    return (np.compress(cond, x, axis=dim),)


@kernel("Unique")
def unique_cpu(x: np.ndarray, axis: int | None, sorted: int) -> tuple[np.ndarray, ...]:  # noqa: A002
    if axis is None:
        x, dim = x.reshape(-1), 0
    else:
        dim = axis_of(axis, x.ndim, "Unique")
    keys = sort_keys(x)
    _, first, inverse, counts = np.unique(
        keys, return_index=True, return_inverse=True, return_counts=True, axis=dim
    )
    inverse = inverse.reshape(-1)
    if not sorted:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    as_int = [np.asarray(a, np.int64) for a in (first, inverse, counts)]
    return (np.take(x, first, axis=dim), *as_int)


@kernel("TopK")
def top_k_cpu(
    x: np.ndarray,
    k: np.ndarray,
    axis: int,
    largest: int,
    sorted: int,  # noqa: A002
) -> tuple[np.ndarray, np.ndarray]:
    if np.size(k) != 1:
        raise ShapeError(f"TopK: input 'K' has shape {list(np.shape(k))}, expected [1]")
    count = int(np.asarray(k).reshape(-1)[0])
    dim = axis_of(axis, x.ndim, "TopK")
    size = x.shape[dim]
    if not 0 <= count <= size:
        raise ShapeError(
            f"TopK: K={count} is out of range for axis {axis} of size {size} (expected 0 to {size})"
        )
    keys = sort_keys(x)
    if largest:
        # A stable ascending sort of the flipped array, read backwards: largest first, and
        # equal values by ascending original index (no negation, so unsigned ints work).
        order = np.argsort(np.flip(keys, dim), axis=dim, kind="stable")
        order = size - 1 - np.flip(order, dim)
    else:
        order = np.argsort(keys, axis=dim, kind="stable")
    index = np.take(order, np.arange(count), axis=dim).astype(np.int64)
    return np.take_along_axis(x, index, axis=dim), index


@kernel("ArgMin")
def argmin_cpu(
    data: np.ndarray, *, axis: int, keepdims: int, select_last_index: int
) -> tuple[np.ndarray]:
    dim = axis_of(axis, data.ndim, "ArgMin")
    if data.shape[dim] == 0:
        raise ShapeError(f"ArgMin: data {list(data.shape)} is empty along axis {axis}")
    keys = sort_keys(data)
    if select_last_index:
        flipped = np.argmin(np.flip(keys, axis=dim), axis=dim, keepdims=bool(keepdims))
        index = data.shape[dim] - 1 - flipped
    else:
        index = np.argmin(keys, axis=dim, keepdims=bool(keepdims))
    return (np.asarray(index, dtype=np.int64),)
