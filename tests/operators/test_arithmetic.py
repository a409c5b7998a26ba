"""Add, Sub, Mul, Div, Pow, Neg, Abs, Exp, Log, Sqrt, Reciprocal and Clip against NumPy."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op

DTYPES = [np.float32, np.float64, np.int32, np.int64]
SHAPES = [
    ((3, 4), (3, 4)),
    ((2, 3, 4), (4,)),
    ((3, 1), (1, 5)),
    ((), (2, 3)),
    ((1, 4, 1), (3, 1, 2)),
]


def data(shape, dtype, seed=0, low=-9, high=9):
    return rand(*shape, dtype=np.float64, seed=seed, low=low, high=high).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("op, fn", [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply)])
def test_add_sub_mul(op, fn, shapes, dtype):
    a, b = data(shapes[0], dtype), data(shapes[1], dtype, seed=1)
    check_op(op, [a, b], reference=lambda a, b: (fn(a, b).astype(dtype),))


def trunc_div(a, b):
    if a.dtype.kind == "f":
        return (a / b,)
    return ((np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))).astype(a.dtype),)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", SHAPES)
def test_div(shapes, dtype):
    a = data(shapes[0], dtype)
    b = data(shapes[1], dtype, seed=1)
    b = np.where(b == 0, dtype(3), b).astype(dtype)
    check_op("Div", [a, b], reference=trunc_div)


def test_div_int_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 6, -6], np.int64)
    b = np.array([2, 2, -2, -2, -4, 4], np.int64)
    check_op("Div", [a, b], reference=lambda a, b: (np.array([3, -3, -3, 3, -1, -1]),))


def int_pow(x, y):
    out = [int(math_pow(int(b), int(e))) for b, e in np.broadcast(x, y)]
    return np.array(out, dtype=x.dtype).reshape(np.broadcast_shapes(x.shape, y.shape))


def math_pow(b, e):
    return float(b) ** e if e < 0 and b != 0 else b**e


@pytest.mark.parametrize(
    "x, y",
    [
        (rand(3, 4, low=0.1, high=3), rand(4, low=-2, high=2)),
        (rand(3, 4, dtype=np.float64), np.array(2, np.int64)),
        (rand(2, 3, low=0.1, high=3), np.array([1.5, 2.0, -0.5])),
        (np.array([2, -1, 1, 3, -3, 5], np.int32), np.array([-1, -3, -2, 3, 3, 0], np.int64)),
        (np.array([[2], [3]], np.int64), np.array([0, 1, 2, 10], np.int32)),
    ],
)
def test_pow(x, y):
    if x.dtype.kind == "i" and y.dtype.kind == "i":
        reference = lambda x, y: (int_pow(x, y),)  # noqa: E731
    else:
        reference = lambda x, y: (np.power(x.astype(np.float64), y).astype(x.dtype),)  # noqa: E731
    check_op("Pow", [x, y], reference=reference)


def test_pow_int_base_float_exponent_truncates():
    x, y = np.array([2, 3, 10], np.int32), np.array(0.5, np.float32)
    check_op("Pow", [x, y], reference=lambda x, y: (np.array([1, 1, 3], np.int32),))


UNARY = [
    ("Neg", lambda x: -x, DTYPES, (-5, 5)),
    ("Abs", np.abs, DTYPES, (-5, 5)),
    ("Exp", np.exp, DTYPES[:2], (-5, 5)),
    ("Log", np.log, DTYPES[:2], (0.01, 5)),
    ("Sqrt", np.sqrt, DTYPES[:2], (0, 5)),
    ("Reciprocal", lambda x: 1 / x, DTYPES[:2], (0.1, 5)),
]


@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 4)])
@pytest.mark.parametrize(
    "op, fn, dtype, bounds", [(o, f, d, b) for o, f, ds, b in UNARY for d in ds]
)
def test_unary(op, fn, dtype, bounds, shape):
    x = data(shape, dtype, low=bounds[0], high=bounds[1])
    check_op(op, [x], reference=lambda x: (np.asarray(fn(x)).astype(dtype),))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("low, high", [(-2, 3), (None, 1), (-1, None), (None, None), (2, -2)])
def test_clip(dtype, low, high):
    x = data((4, 5), dtype, low=-5, high=5)
    bounds = [None if v is None else np.array(v, dtype) for v in (low, high)]

    def reference(x, lo, hi):
        lo = -np.inf if lo is None else lo
        hi = np.inf if hi is None else hi
        return (np.where(x < lo, lo, x).clip(max=hi).astype(dtype),)

    check_op("Clip", [x, *bounds], reference=reference)


def test_errors():
    f32 = rand(2, 3)
    with pytest.raises(OperatorError, match=r"'A' \[2, 3\] and 'B' \[4\] cannot be broadcast"):
        run_op("Add", [f32, rand(4)])
    with pytest.raises(OperatorError, match="input 'B' has dtype float64, expected float32"):
        run_op("Mul", [f32, rand(3, dtype=np.float64)])
    with pytest.raises(OperatorError, match="integer division by zero"):
        run_op("Div", [np.ones(3, np.int32), np.array([1, 0, 2], np.int32)])
    with pytest.raises(OperatorError, match=r"input 'min' has shape \[2\], expected a scalar"):
        run_op("Clip", [f32, rand(2)])
    with pytest.raises(OperatorError, match="expected a float type"):
        run_op("Exp", [np.ones(3, np.int32)])
