"""NumPy-style building blocks over the dispatch point: dtype promotion, casts, reductions
and basic indexing. Traced values use them for their operators (`x + 1`, `x.sum()`,
`x[:, 0]`), so code written for NumPy arrays records the same computation when traced.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netbrew.netdef.dtypes import type_name
from netbrew.nn._dispatch import call

_PY_SCALARS = (bool, int, float)
INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def is_scalar(value: Any) -> bool:
    """A Python number (NumPy treats these as 'weak': they take the array's dtype)."""
    return isinstance(value, _PY_SCALARS)


def cast(x: Any, dtype: Any) -> Any:
    """x as `dtype` (Cast); x itself when it already has that dtype."""
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    return call("Cast", [x], to=type_name(dtype))


def promote(*values: Any) -> list[Any]:
    """The operands in NumPy's result dtype: scalars become arrays of it, others are cast.

    The registry's binary ops want one dtype (as ONNX); NumPy promotes. Promoting first
    keeps eager and traced results equal to what NumPy gives.
    """
    dtype = np.result_type(*(v if is_scalar(v) else _dtype(v) for v in values))
    return [np.asarray(v, dtype=dtype) if is_scalar(v) else cast(_array(v), dtype) for v in values]


def _dtype(value: Any) -> np.dtype:
    return value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype


def _array(value: Any) -> Any:
    return value if hasattr(value, "dtype") else np.asarray(value)


def binary(op_type: str, a: Any, b: Any) -> Any:
    """An elementwise binary op (Add, Sub, Mul, Div, Pow, MatMul, comparisons) with
    NumPy's dtype promotion."""
    a, b = promote(a, b)
    return call(op_type, [a, b])


def true_divide(a: Any, b: Any) -> Any:
    """a / b as NumPy's true division: integer operands divide as float64."""
    a, b = promote(a, b)
    if a.dtype.kind in "iub":
        a, b = cast(a, np.float64), cast(b, np.float64)
    return call("Div", [a, b])


def const(values: Any, dtype: Any = np.int64) -> np.ndarray:
    return np.asarray(values, dtype=dtype)


def reduce(op_type: str, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """A ReduceSum/Mean/Max/Min over `axis` (None: every axis), as ndarray.sum and friends
    (a sum of bools counts them, as int64)."""
    if op_type == "ReduceSum" and np.dtype(getattr(x, "dtype", np.float32)) == np.bool_:
        x = call("Cast", [x], to="INT64")
    if axis is None:
        return call(op_type, [x], keepdims=int(keepdims))
    axes = [axis] if isinstance(axis, int) else list(axis)
    return call(op_type, [x, const(axes)], keepdims=int(keepdims))


def argmax(x: Any, axis: int | None = None, keepdims: bool = False) -> Any:
    """ndarray.argmax: the flat index when axis is None."""
    if axis is None:
        x, axis = call("Reshape", [x, const([-1])]), 0
    return call("ArgMax", [x], axis=axis, keepdims=int(keepdims))


def reshape(x: Any, shape: Any) -> Any:
    """Reshape to `shape` (ints, one may be -1); a shape of one tuple or list also works."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return call("Reshape", [x, const([int(d) for d in shape])])


def permute(x: Any, axes: Any) -> Any:
    """Transpose with the given axis order (None or () reverses them, as NumPy)."""
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = axes[0]
    perm = list(reversed(range(x.ndim))) if not axes else [int(a) % x.ndim for a in axes]
    return call("Transpose", [x], perm=tuple(perm))


def getitem(x: Any, index: Any) -> Any:
    """Basic indexing: ints, slices (any step) and one Ellipsis, in one Slice op followed by
    a Squeeze for the integer axes; a lone integer array indexes axis 0 (Gather)."""
    if hasattr(index, "dtype") and not isinstance(index, np.generic):
        return call("Gather", [x, index], axis=0)
    items = list(index) if isinstance(index, tuple) else [index]
    if sum(i is Ellipsis for i in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if Ellipsis in items:
        at = next(k for k, i in enumerate(items) if i is Ellipsis)
        fill = [slice(None)] * (x.ndim - len(items) + 1)
        items = items[:at] + fill + items[at + 1 :]
    if len(items) > x.ndim:
        raise IndexError(f"too many indices: {len(items)} for an array of {x.ndim} dims")
    starts, ends, axes, steps, squeeze = [], [], [], [], []
    for axis, item in enumerate(items):
        if isinstance(item, (int, np.integer)):
            item = int(item)
            if not -x.shape[axis] <= item < x.shape[axis]:
                raise IndexError(
                    f"index {item} is out of bounds for axis {axis} with size {x.shape[axis]}"
                )
            starts.append(item)
            ends.append(item + 1 if item != -1 else INT64_MAX)
            steps.append(1)
            squeeze.append(axis)
        elif isinstance(item, slice):
            if item.start is None and item.stop is None and item.step is None:
                continue
            step = 1 if item.step is None else int(item.step)
            if step == 0:
                raise ValueError("slice step cannot be zero")
            default_start, default_end = (0, INT64_MAX) if step > 0 else (INT64_MAX, INT64_MIN)
            starts.append(default_start if item.start is None else int(item.start))
            ends.append(default_end if item.stop is None else int(item.stop))
            steps.append(step)
        else:
            raise IndexError(
                f"traced values support ints, slices and '...' as indices, got "
                f"{type(item).__name__}; index axis 0 with an integer array, or use "
                "netbrew.nn.functional (reshape, embedding) for other cases"
            )
        axes.append(axis)
    if axes:
        x = call("Slice", [x, const(starts), const(ends), const(axes), const(steps)])
    if squeeze:
        x = call("Squeeze", [x, const(squeeze)])
    return x
