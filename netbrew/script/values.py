"""What script-mode variables hold, and their types.

A variable holds a compile-time Python value (a number, a bool, a string, a tuple, a
module or function), a runtime value (a TracedValue: a blob of the net being built), or
a TensorList. Runtime values carry a kind: "tensor", or "int", "float", "bool" for
Python-number arguments and results (0-d blobs that act as NumPy's weak scalars).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netbrew.nn._tracer import TracedValue, Tracer
from netbrew.script.source import BOOL, FLOAT, INT, TENSOR

SCALAR_DTYPES = {INT: np.dtype(np.int64), FLOAT: np.dtype(np.float64), BOOL: np.dtype(np.bool_)}
_PY_TYPES = {bool: BOOL, int: INT, float: FLOAT}


@dataclass
class TensorList:
    """A list of tensors: Python items, or (after a loop appended to it) one stacked blob
    whose axis 0 runs over the iterations (the Loop's scan output)."""

    items: list[Any] = field(default_factory=list)
    stacked: TracedValue | None = None

    def append(self, value: Any) -> None:
        if self.stacked is not None:
            raise TypeError("append to a list that a loop already stacked")
        self.items.append(value)


def is_runtime(value: Any) -> bool:
    return isinstance(value, TracedValue)


def is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float, np.integer, np.floating, np.bool_))


def kind_of(value: Any) -> str | None:
    """ "tensor", "int", "float", "bool" for runtime values and Python numbers; else None."""
    if is_runtime(value):
        return getattr(value, "script_kind", TENSOR)
    if isinstance(value, (bool, np.bool_)):
        return BOOL
    if isinstance(value, (int, np.integer)):
        return INT
    if isinstance(value, (float, np.floating)):
        return FLOAT
    return None


def with_kind(value: Any, kind: str) -> Any:
    if is_runtime(value):
        value.script_kind = kind
    return value


def scalar_kind(dtype: np.dtype) -> str:
    """The Python-number kind of a 0-d result of this dtype."""
    return BOOL if dtype == np.bool_ else INT if dtype.kind in "iu" else FLOAT


def describe(value: Any) -> str:
    """A type as error messages name it: `float32 tensor (rank 2)`, `int`, `list`..."""
    if is_runtime(value):
        kind = kind_of(value)
        if kind != TENSOR:
            return kind
        return f"{value.dtype} tensor (rank {value.ndim})"
    if isinstance(value, TensorList):
        return "list of tensors"
    if is_number(value):
        return f"Python {kind_of(value)} {value!r}"
    return type(value).__name__


def signature(value: Any) -> tuple:
    """What must agree between branches and iterations: kind, dtype and rank."""
    if is_runtime(value):
        return (kind_of(value), value.dtype.str, value.ndim)
    if is_number(value):
        kind = kind_of(value)
        return (kind, SCALAR_DTYPES[kind].str, 0)
    return ("other", type(value).__name__)


def materialize(tracer: Tracer, value: Any, hint: str = "const") -> TracedValue:
    """A runtime value for `value`: itself, or a constant blob for a Python number."""
    if is_runtime(value):
        return value
    if is_number(value):
        kind = kind_of(value)
        blob = tracer.constant(np.asarray(value, SCALAR_DTYPES[kind]), hint)
        return with_kind(blob, kind)
    raise TypeError(f"a {describe(value)} cannot be a value of the net")
