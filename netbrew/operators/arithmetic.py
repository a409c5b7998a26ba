"""Elementwise arithmetic with ONNX multidirectional broadcasting.

Add, Sub, Mul, Div, Pow, Neg, Abs, Exp, Log, Sqrt, Reciprocal and Clip. Binary ops need both
inputs of one dtype (ONNX's type constraint T), except Pow, whose result keeps the base's
dtype. `check_broadcast` and `check_same_dtype` are shared with the comparison, variadic and
activation ops.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import kernel, schema

BROADCAST = "A and B broadcast (ONNX multidirectional)"


def check_broadcast(arrays: Mapping[str, np.ndarray]) -> tuple[int, ...]:
    """Returns the broadcast shape of named arrays, or raises ShapeError naming the clash.

    Args:
        arrays: input slot name -> array, in input order.
    """
    shapes = {name: tuple(a.shape) for name, a in arrays.items()}
    rank = max((len(s) for s in shapes.values()), default=0)
    out = []
    for axis in range(-rank, 0):
        sizes = [(n, s[axis]) for n, s in shapes.items() if len(s) >= -axis and s[axis] != 1]
        clash = [(n, d) for n, d in sizes if d != sizes[0][1]]
        if clash:
            (a, da), (b, db) = sizes[0], clash[0]
            raise ShapeError(
                f"inputs {a!r} {list(shapes[a])} and {b!r} {list(shapes[b])} cannot be broadcast "
                f"(ONNX multidirectional broadcasting): dimension {axis} is {da} vs {db}; "
                "each dimension must match or be 1"
            )
        out.append(sizes[0][1] if sizes else 1)
    return check_numel(out, "broadcast output shape")


def check_same_dtype(arrays: Mapping[str, np.ndarray], allow_bool: bool = False) -> None:
    """Raises SchemaError unless all named arrays share the first one's dtype.

    Args:
        arrays: input slot name -> array, in input order.
        allow_bool: whether bool inputs are accepted (comparisons, Where), else refused.
    """
    (first, ref), *rest = arrays.items()
    if not allow_bool and ref.dtype == np.bool_:
        raise SchemaError(f"input {first!r} has dtype bool, expected a numeric type")
    for name, a in rest:
        if a.dtype != ref.dtype:
            raise SchemaError(
                f"input {name!r} has dtype {a.dtype}, expected {ref.dtype} like input {first!r} "
                "(ONNX needs one type; cast one of them first)"
            )


def _binary(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    named = {"A": a, "B": b}
    check_same_dtype(named)
    check_broadcast(named)
    return a, b


for _name, _sign in (("Add", "+"), ("Sub", "-"), ("Mul", "*"), ("Div", "/")):
    schema(
        _name,
        inputs=["A", "B"],
        outputs=["C"],
        inplace={0: 0},
        dtypes="numeric",
        doc=f"C = A {_sign} B; {BROADCAST}, same dtype; C has the broadcast shape"
        + ("; integer division truncates toward zero" if _name == "Div" else ""),
    )


@kernel("Add")
def add_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    return (np.add(*_binary(a, b)),)


@kernel("Sub")
def sub_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    return (np.subtract(*_binary(a, b)),)


@kernel("Mul")
def mul_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    return (np.multiply(*_binary(a, b)),)


@kernel("Div")
def div_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    """Float division, or integer division truncated toward zero (C-style, as ONNX)."""
    a, b = _binary(a, b)
    if a.dtype.kind not in "iu":
        with np.errstate(divide="ignore", invalid="ignore"):
            return (np.divide(a, b),)
    if not np.all(b):
        raise ValueError("input 'B' contains zeros: integer division by zero is undefined")
    q = np.floor_divide(a, b)
    # floor rounds toward -inf; step back toward zero where the signs differ and r != 0
    inexact = (np.remainder(a, b) != 0) & ((a < 0) ^ (b < 0))
    return (q + inexact.astype(q.dtype),)


schema(
    "Pow",
    inputs=["X", "Y"],
    outputs=["Z"],
    inplace={0: 0},
    dtypes="numeric",
    doc="Z = X ** Y; X and Y broadcast (ONNX multidirectional); Z has X's dtype",
)


@kernel("Pow")
def pow_cpu(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray]:
    """Power computed in the promoted type, then cast to the base's dtype (truncating ints)."""
    check_broadcast({"X": x, "Y": y})
    with np.errstate(all="ignore"):
        if x.dtype.kind not in "iu":
            return (np.power(x, y).astype(x.dtype, copy=False),)
        if y.dtype.kind not in "iu":
            return (np.power(x.astype(np.float64), y).astype(x.dtype),)
        # integer ** negative integer truncates to 0 unless |X| == 1 (as C's pow then a cast)
        z = np.power(x, np.abs(y).astype(x.dtype))
        return (np.where((y < 0) & (np.abs(x) != 1), 0, z).astype(x.dtype),)


def _unary(name: str, formula: str, dtypes: str, x_name: str = "X", y_name: str = "Y") -> None:
    schema(
        name,
        inputs=[x_name],
        outputs=[y_name],
        inplace={0: 0},
        dtypes=dtypes,
        doc=f"{formula}, elementwise; same shape and dtype",
    )


_unary("Neg", "Y = -X", "numeric")
_unary("Abs", "Y = |X|", "numeric")
_unary("Exp", "output = exp(input)", "float", "input", "output")
_unary("Log", "output = log(input)", "float", "input", "output")
_unary("Sqrt", "Y = sqrt(X)", "float")
_unary("Reciprocal", "Y = 1 / X", "float")


@kernel("Neg")
def neg_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    return (np.negative(x),)


@kernel("Abs")
def abs_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    return (np.abs(x),)


@kernel("Exp")
def exp_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    with np.errstate(over="ignore"):
        return (np.exp(x),)


@kernel("Log")
def log_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    with np.errstate(divide="ignore", invalid="ignore"):  # log(0) = -inf, log(<0) = nan
        return (np.log(x),)


@kernel("Sqrt")
def sqrt_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    with np.errstate(invalid="ignore"):
        return (np.sqrt(x),)


@kernel("Reciprocal")
def reciprocal_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    with np.errstate(divide="ignore"):
        return (np.reciprocal(x),)


schema(
    "Clip",
    inputs=["input", "min?", "max?"],
    outputs=["output"],
    inplace={0: 0},
    dtypes="numeric",
    doc="output = min(max(input, min), max); min, max: optional scalars of input's dtype "
    "(default: no bound); same shape and dtype",
)


@kernel("Clip")
def clip_cpu(
    x: np.ndarray, low: np.ndarray | None = None, high: np.ndarray | None = None
) -> tuple[np.ndarray]:
    """Clamps to [min, max]; where min > max every element becomes max, as ONNX says."""
    out = x
    for name, bound, fn in (("min", low, np.maximum), ("max", high, np.minimum)):
        if bound is None:
            continue
        if bound.size != 1:
            raise ShapeError(f"input {name!r} has shape {list(bound.shape)}, expected a scalar")
        check_same_dtype({"input": x, name: bound}, allow_bool=True)
        out = fn(out, bound.reshape(()))
    return (out.copy() if out is x else out,)
