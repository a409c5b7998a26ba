"""Lowering of script expressions: names, numbers, operators, indexing, calls.

Expressions evaluate to values (see values.py). Tensor arithmetic goes through the
operators of TracedValue and netbrew.nn.functional, which record ops into the block being
built; Python numbers fold at compile time; `x.shape[i]` and `x.size(i)` read the
runtime shape (Shape), so a loop over `range(x.shape[0])` follows the input.
"""

from __future__ import annotations

import ast
import operator
import types
from typing import Any

import numpy as np

from netbrew.nn import _ops
from netbrew.nn import functional as F
from netbrew.nn._dispatch import call
from netbrew.nn.module import Module
from netbrew.script.source import BOOL, FLOAT, INT, TENSOR
from netbrew.script.values import (
    SCALAR_DTYPES,
    TensorList,
    is_number,
    is_runtime,
    kind_of,
    materialize,
    scalar_kind,
    with_kind,
)

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.MatMult: operator.matmul,
    ast.Pow: operator.pow,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_SAMPLE = {INT: 0, FLOAT: 0.0, BOOL: False}


class Undefined:
    """A name a branch or a loop body defined that is not defined after it."""

    def __init__(self, why: str) -> None:
        self.why = why


class ShapeOf:
    """`x.shape`: indexing it reads one dim at run time."""

    def __init__(self, value: Any) -> None:
        self.value = value


def dim(x: Any, i: int) -> Any:
    """Dim i of x as an int64 scalar blob of kind int (Shape, then Squeeze)."""
    end = None if i == -1 else i + 1
    shape = call("Shape", [x], start=i, end=end)
    return with_kind(call("Squeeze", [shape, _ops.const([0])]), INT)


def as_bool(tracer: Any, value: Any) -> Any:
    """A bool blob for a condition."""
    value = materialize(tracer, value, "cond")
    if value.dtype != np.bool_:
        value = _ops.cast(value, np.bool_)
    return with_kind(value, BOOL)


def _result_kind(a: Any, b: Any, result: Any) -> Any:
    if TENSOR in (kind_of(a), kind_of(b)):
        return with_kind(result, TENSOR)
    return with_kind(result, scalar_kind(result.dtype) if result.ndim == 0 else TENSOR)


def _weak(a: Any, b: Any) -> tuple[Any, Any]:
    """A scalar-kind blob meeting a tensor acts as a Python number would (NumPy's weak
    scalars): both take np.result_type(tensor dtype, the number)."""
    ka, kb = kind_of(a), kind_of(b)
    if is_runtime(a) and is_runtime(b) and (ka == TENSOR) != (kb == TENSOR):
        tensor, scalar = (a, b) if ka == TENSOR else (b, a)
        dtype = np.result_type(tensor.dtype, _SAMPLE[kind_of(scalar)])
        a, b = _ops.cast(a, dtype), _ops.cast(b, dtype)
    return a, b


def binary(op: Any, a: Any, b: Any) -> Any:
    """`a op b` for numbers (folded) or runtime values (recorded)."""
    if not is_runtime(a) and not is_runtime(b):
        return op(a, b)
    if op in (operator.floordiv, operator.mod):
        raise TypeError(
            "// and % are folded on Python numbers only; on tensors write a / b (true "
            "division) or keep the integer arithmetic on Python constants"
        )
    if op is operator.pow and kind_of(a) == INT and kind_of(b) == INT:
        # Python's int ** -1 is 0.5: a runtime exponent's sign is unknown, so the power of
        # two script ints is a float, as TorchScript's pow(int, int)
        if is_runtime(b) or b < 0:
            a = _ops.cast(a, SCALAR_DTYPES[FLOAT]) if is_runtime(a) else float(a)
    a, b = _weak(a, b)
    return _result_kind(a, b, op(a, b))


def boolean(tracer: Any, op: str, values: list[Any]) -> Any:
    if not any(is_runtime(v) for v in values):
        result = values[0]
        for v in values[1:]:
            result = (result and v) if op == "And" else (result or v)
        return result
    bools = [as_bool(tracer, v) for v in values]
    result = bools[0]
    for v in bools[1:]:
        result = call(op, [result, v])
    return with_kind(result, BOOL if result.ndim == 0 else TENSOR)


def _whole(item: slice) -> bool:
    """Whether a slice is `:`, without comparing its bounds (a runtime bound would record
    an Equal op and then need a Python bool)."""
    return item.start is None and item.stop is None and item.step is None


def getitem(x: Any, index: Any) -> Any:
    """x[index] where ints and slice bounds may be runtime ints (a loop counter): Slice
    with runtime starts and ends, then Gather for each integer index."""
    items = list(index) if isinstance(index, tuple) else [index]
    if not any(is_runtime(i) or isinstance(i, slice) and _dynamic_slice(i) for i in items):
        return _ops.getitem(x, index)
    if len(items) == 1 and is_runtime(items[0]) and kind_of(items[0]) == TENSOR:
        return call("Gather", [x, items[0]], axis=0)
    if any(i is Ellipsis for i in items):
        at = next(k for k, i in enumerate(items) if i is Ellipsis)
        items = items[:at] + [slice(None)] * (x.ndim - len(items) + 1) + items[at + 1 :]
    starts, ends, axes, steps = [], [], [], []
    for axis, item in enumerate(items):
        if isinstance(item, slice) and not _whole(item):
            step = 1 if item.step is None else int(item.step)
            starts.append(_bound(item.start, 0 if step > 0 else _ops.INT64_MAX))
            ends.append(_bound(item.stop, _ops.INT64_MAX if step > 0 else _ops.INT64_MIN))
            axes.append(axis)
            steps.append(step)
    if axes:
        one = _ops.const([1])
        parts = [
            call("Concat", [call("Reshape", [b, one]) for b in bounds], axis=0)
            for bounds in (starts, ends)
        ]
        x = call("Slice", [x, *parts, _ops.const(axes), _ops.const(steps)])
    for axis in reversed(range(len(items))):
        item = items[axis]
        if not isinstance(item, slice):
            idx = item if is_runtime(item) else _ops.const(int(item))
            x = call("Gather", [x, _ops.cast(idx, np.int64)], axis=axis)
    return with_kind(x, TENSOR)


def _dynamic_slice(s: slice) -> bool:
    return is_runtime(s.start) or is_runtime(s.stop)


def _bound(value: Any, default: int) -> Any:
    if value is None:
        return _ops.const(default)
    if is_runtime(value):
        return _ops.cast(value, np.int64)
    return _ops.const(int(value))


def stack_list(items: TensorList, dim_: int, concat: bool) -> Any:
    """F.stack / F.cat of a list a loop stacked: the scan output (T, ...) moved and merged."""
    x = items.stacked
    rank = x.ndim
    if concat:
        d = dim_ % (rank - 1)
        if d == 0:
            shape = call("Concat", [_ops.const([-1]), call("Shape", [x], start=2)], axis=0)
            return call("Reshape", [x, shape])
        perm = [*range(1, d + 1), 0, *range(d + 1, rank)]
        moved = call("Transpose", [x], perm=tuple(perm))
        head = call("Shape", [moved], start=0, end=d)
        tail = call("Shape", [moved], start=d + 2)
        return call("Reshape", [moved, call("Concat", [head, _ops.const([-1]), tail], axis=0)])
    d = dim_ % rank
    if d == 0:
        return x
    perm = [*range(1, d + 1), 0, *range(d + 1, rank)]
    return call("Transpose", [x], perm=tuple(perm))


def call_builtin(fn: Any, args: list[Any], tracer: Any) -> Any:
    """len, float, int, bool, min, max, abs on script values."""
    name = fn.__name__
    runtime = [a for a in args if is_runtime(a)]
    if name == "len":
        (v,) = args
        if isinstance(v, ShapeOf):
            return v.value.ndim
        if isinstance(v, TensorList):
            return len(v.items) if v.stacked is None else dim(v.stacked, 0)
        return dim(v, 0) if is_runtime(v) else len(v)
    if not runtime:
        return fn(*args)
    if name in ("float", "int", "bool"):
        (v,) = args
        kind = {"float": FLOAT, "int": INT, "bool": BOOL}[name]
        dtype = {FLOAT: np.float64, INT: np.int64, BOOL: np.bool_}[kind]
        return with_kind(_ops.cast(v, dtype), kind)
    if name == "abs":
        return with_kind(abs(args[0]), kind_of(args[0]))
    if name in ("min", "max") and len(args) > 1 and TENSOR not in map(kind_of, args):
        # numbers (a loop counter, a size): the larger kind of them, as Python compares
        kind = FLOAT if FLOAT in map(kind_of, args) else INT
        dtype = SCALAR_DTYPES[kind]
        values = [_ops.cast(a, dtype) if is_runtime(a) else np.asarray(a, dtype) for a in args]
        return with_kind(call(name.capitalize(), values), kind)
    hint = "F.max (a reduction) or F.where" if name == "max" else "F.where or a reduction"
    raise TypeError(f"{name}() of a tensor: use {hint}")


def is_functional(fn: Any) -> bool:
    return getattr(fn, "__module__", "") == F.__name__


def is_user_function(fn: Any) -> bool:
    """A plain Python function (or a method of a Module) to script and inline."""
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if not isinstance(target, types.FunctionType):
        return False
    if isinstance(fn, types.MethodType) and not isinstance(fn.__self__, Module):
        return False
    module = target.__module__ or ""
    return not module.startswith(("netbrew.", "numpy")) or module.startswith("netbrew.script")


def constant_number(value: Any) -> Any:
    """NumPy scalars as Python numbers (folding stays in Python)."""
    if isinstance(value, np.generic) and is_number(value):
        return value.item()
    return value
