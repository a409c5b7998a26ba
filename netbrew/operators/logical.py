"""Logical and bitwise ops: Not, And, Or, Xor, GreaterOrEqual, LessOrEqual, IsInf, IsNaN,
BitShift, BitwiseAnd, BitwiseOr, BitwiseXor and BitwiseNot.

Binary ops broadcast (ONNX multidirectional) and need both inputs of one dtype. None has a
gradient: their outputs are bools or integers.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import SchemaError
from netbrew.operators.arithmetic import check_broadcast, check_same_dtype
from netbrew.operators.schema import REQUIRED, kernel, no_gradient, schema

_BROADCAST = "A and B broadcast (ONNX multidirectional), same dtype"


def _binary(a: np.ndarray, b: np.ndarray, names: tuple[str, str] = ("A", "B")):
    named = dict(zip(names, (a, b), strict=True))
    check_same_dtype(named, allow_bool=True)
    check_broadcast(named)
    return a, b


def _is_real(dtype: np.dtype) -> bool:
    """Integers and floats, including bfloat16 and float8 (ml_dtypes, kind 'V')."""
    return dtype.kind in "iuf" or dtype.name.startswith(("bfloat", "float"))


def _require(x: np.ndarray, ok: bool, slot: str, want: str) -> None:
    if not ok:
        raise SchemaError(f"input {slot!r} has dtype {x.dtype}, expected {want}")


# --- boolean logic ----------------------------------------------------------------------------

schema(
    "Not",
    inputs=["X"],
    outputs=["Y"],
    inplace={0: 0},
    dtypes="bool",
    doc="Y = not X, elementwise; X and Y bool, same shape",
)
no_gradient("Not", "bool input and output")


@kernel("Not")
def not_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    return (np.logical_not(x),)


_LOGIC = {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}
for _name in _LOGIC:
    schema(
        _name,
        inputs=["A", "B"],
        outputs=["C"],
        dtypes="bool",
        doc=f"C = A {_name.lower()} B; {_BROADCAST} (bool); C: bool, broadcast shape",
    )
    no_gradient(_name, "bool inputs and output")


@kernel("And")
def and_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    return (np.logical_and(*_binary(a, b)),)


@kernel("Or")
def or_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    return (np.logical_or(*_binary(a, b)),)


@kernel("Xor")
def xor_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    return (np.logical_xor(*_binary(a, b)),)


# --- comparisons --------------------------------------------------------------------------------

for _name, _sign in (("GreaterOrEqual", ">="), ("LessOrEqual", "<=")):
    schema(
        _name,
        inputs=["A", "B"],
        outputs=["C"],
        doc=f"C = A {_sign} B; {_BROADCAST} (integer or float, bfloat16 included); "
        "C: bool, broadcast shape",
    )
    no_gradient(_name, "a bool output is piecewise constant: zero gradient almost everywhere")


def _compare(a: np.ndarray, b: np.ndarray):
    _require(a, _is_real(a.dtype), "A", "an integer or float type")
    return _binary(a, b)


@kernel("GreaterOrEqual")
def greater_or_equal_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    return (np.greater_equal(*_compare(a, b)),)


@kernel("LessOrEqual")
def less_or_equal_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    return (np.less_equal(*_compare(a, b)),)


# --- IsInf, IsNaN -------------------------------------------------------------------------------

schema(
    "IsInf",
    attrs={"detect_negative": 1, "detect_positive": 1},
    doc="Y = X is +inf (if detect_positive=1) or -inf (if detect_negative=1), elementwise; "
    "X float (float8 and bfloat16 included); Y bool, same shape",
)
schema(
    "IsNaN",
    doc="Y = X is NaN, elementwise; X float (float8 and bfloat16 included); Y bool, same shape",
)
no_gradient("IsInf", "bool output")
no_gradient("IsNaN", "bool output")


def _float_input(x: np.ndarray) -> None:
    _require(
        x, x.dtype.kind == "f" or x.dtype.name.startswith(("bfloat", "float")), "X", "a float type"
    )


@kernel("IsInf")
def is_inf_cpu(x: np.ndarray, detect_negative: int, detect_positive: int) -> tuple[np.ndarray]:
    _float_input(x)
    inf = np.isinf(x)
    if not detect_negative:
        inf &= ~np.signbit(x)
    if not detect_positive:
        inf &= np.signbit(x)
    return (inf,)


@kernel("IsNaN")
def is_nan_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    _float_input(x)
    return (np.isnan(x),)


# --- bitwise ------------------------------------------------------------------------------------

schema(
    "BitShift",
    inputs=["X", "Y"],
    outputs=["Z"],
    attrs={"direction": REQUIRED},
    dtypes="int",
    doc="Z = X << Y (direction='LEFT') or X >> Y (direction='RIGHT', arithmetic for signed X); "
    "X and Y broadcast, same integer dtype; a shift by Y < 0 or Y >= bits of X gives 0 "
    "(-1 for a right shift of a negative X)",
)
no_gradient("BitShift", "integer inputs and output")


@kernel("BitShift")
def bit_shift_cpu(x: np.ndarray, y: np.ndarray, direction: str) -> tuple[np.ndarray]:
    _binary(x, y, ("X", "Y"))
    bits = x.dtype.itemsize * 8
    signed = x.dtype.kind == "i"
    out_of_range = (y < 0) | (y >= bits)
    if direction == "LEFT":
        unsigned = x.view(np.dtype(f"u{x.dtype.itemsize}"))  # wraps past the sign bit
        shift = np.where(out_of_range, 0, y).astype(unsigned.dtype)
        z = np.left_shift(unsigned, shift).view(x.dtype)
        return (np.where(out_of_range, np.zeros((), x.dtype), z),)
    if direction == "RIGHT":
        # a signed shift by bits - 1 is the sign fill alone: -1 or 0, as ONNX asks
        full = bits - 1 if signed else 0
        shift = np.where(out_of_range, full, y).astype(x.dtype)
        z = np.right_shift(x, shift)
        if not signed:
            z = np.where(out_of_range, np.zeros((), x.dtype), z)
        return (z.astype(x.dtype, copy=False),)
    raise ValueError(f"argument 'direction' is {direction!r}, expected 'LEFT' or 'RIGHT'")


_BITWISE = {"BitwiseAnd": "&", "BitwiseOr": "|", "BitwiseXor": "^"}
for _name, _sign in _BITWISE.items():
    schema(
        _name,
        inputs=["A", "B"],
        outputs=["C"],
        dtypes="int",
        doc=f"C = A {_sign} B, bitwise; {_BROADCAST} (integer); C: A's dtype, broadcast shape",
    )
    no_gradient(_name, "integer inputs and output")

schema(
    "BitwiseNot",
    inplace={0: 0},
    dtypes="int",
    doc="Y = ~X, bitwise, elementwise; X integer; Y same shape and dtype",
)
no_gradient("BitwiseNot", "integer input and output")


@kernel("BitwiseAnd")
def bitwise_and_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    return (np.bitwise_and(*_binary(a, b)),)


@kernel("BitwiseOr")
def bitwise_or_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    return (np.bitwise_or(*_binary(a, b)),)


@kernel("BitwiseXor")
def bitwise_xor_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    return (np.bitwise_xor(*_binary(a, b)),)


@kernel("BitwiseNot")
def bitwise_not_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    return (np.invert(x),)
