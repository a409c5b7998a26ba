"""Not, And, Or, Xor, GreaterOrEqual, LessOrEqual, IsInf, IsNaN, BitShift and the bitwise ops."""

import ml_dtypes
import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.operators import GRADIENTS, NoGradient
from netbrew.testing import check_op, rand, run_op

PAIRS = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (5,))]
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def bools(*shape, seed=0):
    return rand(*shape, seed=seed) > 0


def ints(*shape, dtype=np.int32, seed=0):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


def test_not():
    x = bools(3, 4)
    check_op("Not", [x], reference=lambda x: (~x,))


@pytest.mark.parametrize("shapes", PAIRS)
@pytest.mark.parametrize(
    "op, fn", [("And", lambda a, b: a & b), ("Or", lambda a, b: a | b), ("Xor", lambda a, b: a ^ b)]
)
def test_logic(op, fn, shapes):
    a, b = bools(*shapes[0]), bools(*shapes[1], seed=1)
    check_op(op, [a, b], reference=lambda a, b: (fn(a, b),))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.uint64])
@pytest.mark.parametrize("shapes", PAIRS)
@pytest.mark.parametrize(
    "op, fn", [("GreaterOrEqual", lambda a, b: a >= b), ("LessOrEqual", lambda a, b: a <= b)]
)
def test_compare(op, fn, shapes, dtype):
    a = (rand(*shapes[0], low=-3, high=3) * 2).round().astype(dtype)
    b = (rand(*shapes[1], seed=1, low=-3, high=3) * 2).round().astype(dtype)
    check_op(op, [a, b], reference=lambda a, b: (fn(a, b),))


def test_compare_bfloat16():
    a = np.array([1, 2, 3], ml_dtypes.bfloat16)
    b = np.array([2, 2, 2], ml_dtypes.bfloat16)
    check_op("GreaterOrEqual", [a, b], reference=lambda a, b: (np.array([False, True, True]),))
    check_op("LessOrEqual", [a, b], reference=lambda a, b: (np.array([True, True, False]),))


SPECIAL = np.array([-np.inf, -1.5, 0.0, np.nan, 2.0, np.inf])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("neg, pos", [(1, 1), (0, 1), (1, 0), (0, 0)])
def test_isinf(neg, pos, dtype):
    x = SPECIAL.astype(dtype)
    want = ((SPECIAL == np.inf) & bool(pos)) | ((SPECIAL == -np.inf) & bool(neg))
    check_op("IsInf", [x], reference=lambda x: (want,), detect_negative=neg, detect_positive=pos)


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn]
)
def test_isnan(dtype):
    x = SPECIAL[1:-1].astype(dtype)
    check_op("IsNaN", [x], reference=lambda x: (np.isnan(SPECIAL[1:-1]),))


def shift_reference(x, y, direction):
    """Python big integers, wrapped to the dtype's width; out-of-range shifts per ONNX."""
    bits = x.dtype.itemsize * 8
    out = []
    for a, s in zip(x.ravel().tolist(), np.broadcast_to(y, x.shape).ravel().tolist()):
        if s < 0 or s >= bits:
            out.append(-1 if direction == "RIGHT" and a < 0 else 0)
        elif direction == "LEFT":
            v = (a << s) & ((1 << bits) - 1)
            out.append(v - (1 << bits) if x.dtype.kind == "i" and v >> (bits - 1) else v)
        else:
            out.append(a >> s)
    return np.array(out, dtype=x.dtype).reshape(x.shape)


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift(direction, dtype):
    bits = np.dtype(dtype).itemsize * 8
    x = ints(4, 6, dtype=dtype)
    low = -3 if np.dtype(dtype).kind == "i" else 0
    y = np.random.default_rng(1).integers(low, bits + 3, size=(6,)).astype(dtype)
    check_op(
        "BitShift",
        [x, y],
        reference=lambda x, y: (shift_reference(x, y, direction),),
        direction=direction,
    )


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("shapes", PAIRS)
@pytest.mark.parametrize(
    "op, fn",
    [("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or), ("BitwiseXor", np.bitwise_xor)],
)
def test_bitwise(op, fn, shapes, dtype):
    a, b = ints(*shapes[0], dtype=dtype), ints(*shapes[1], dtype=dtype, seed=1)
    check_op(op, [a, b], reference=lambda a, b: (fn(a, b),))


@pytest.mark.parametrize("dtype", INTS)
def test_bitwise_not(dtype):
    x = ints(2, 5, dtype=dtype)
    check_op("BitwiseNot", [x], reference=lambda x: (np.invert(x),))


def test_errors():
    with pytest.raises(OperatorError, match="'direction' is 'UP', expected 'LEFT' or 'RIGHT'"):
        run_op("BitShift", [np.ones(3, np.int32), np.ones(3, np.int32)], direction="UP")
    with pytest.raises(OperatorError, match="'B' has dtype int64, expected int32"):
        run_op("BitwiseAnd", [np.ones(3, np.int32), np.ones(3, np.int64)])
    with pytest.raises(OperatorError, match="cannot be broadcast"):
        run_op("And", [bools(3), bools(4)])
    with pytest.raises(OperatorError, match="'X' has dtype int32, expected a float type"):
        run_op("IsNaN", [np.ones(3, np.int32)])
    with pytest.raises(OperatorError, match="'A' has dtype bool, expected an integer or float"):
        run_op("GreaterOrEqual", [bools(3), bools(3)])


def test_no_gradients():
    for op in ["Not", "And", "Or", "Xor", "GreaterOrEqual", "LessOrEqual", "IsInf", "IsNaN",
               "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"]:  # fmt: skip
        assert isinstance(GRADIENTS[op], NoGradient)
