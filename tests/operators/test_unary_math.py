"""Ceil, Floor, Round, Sign, Sin ... Atanh, Erf and Mod against Python's math module."""

import math

import ml_dtypes
import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.operators import GRADIENTS, NoGradient
from netbrew.testing import check_op, rand, run_op

FLOATS = [np.float32, np.float64, np.float16]


def python_round(v):
    """Round half to even (Python's round), with inf and NaN passed through."""
    return v if not math.isfinite(v) else float(round(v))


def domain_acosh(v):
    return math.acosh(v) if v >= 1 else math.nan


def domain_atanh(v):
    if abs(v) == 1:
        return math.copysign(math.inf, v)
    return math.atanh(v) if abs(v) < 1 else math.nan


def domain(fn, low, high):
    return lambda v: fn(v) if low <= v <= high else math.nan


# op -> (scalar reference on Python floats, input range)
REFERENCES = {
    "Ceil": (math.ceil, (-5, 5)),
    "Floor": (math.floor, (-5, 5)),
    "Round": (python_round, (-5, 5)),
    "Sign": (lambda v: (v > 0) - (v < 0), (-5, 5)),
    "Sin": (math.sin, (-6, 6)),
    "Cos": (math.cos, (-6, 6)),
    "Tan": (math.tan, (-1.4, 1.4)),
    "Asin": (domain(math.asin, -1, 1), (-1.2, 1.2)),
    "Acos": (domain(math.acos, -1, 1), (-1.2, 1.2)),
    "Atan": (math.atan, (-10, 10)),
    "Sinh": (math.sinh, (-5, 5)),
    "Cosh": (math.cosh, (-5, 5)),
    "Asinh": (math.asinh, (-10, 10)),
    "Acosh": (domain_acosh, (0.5, 10)),
    "Atanh": (domain_atanh, (-1.1, 1.1)),
    "Erf": (math.erf, (-4, 4)),
}


def elementwise(fn, x, dtype):
    flat = [fn(float(v)) for v in np.asarray(x, np.float64).ravel()]
    return np.array(flat, np.float64).reshape(x.shape).astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(), (7,), (2, 3, 4)])
@pytest.mark.parametrize("op", sorted(REFERENCES))
def test_unary(op, shape, dtype):
    fn, (low, high) = REFERENCES[op]
    x = rand(*shape, dtype=np.float64, low=low, high=high).astype(dtype)
    tol = {np.float16: 1e-3, np.float32: 1e-5, np.float64: 1e-12}[dtype]
    check_op(op, [x], reference=lambda x: (elementwise(fn, x, dtype),), rtol=tol, atol=tol)


@pytest.mark.parametrize("op", ["Ceil", "Floor", "Round", "Sign", "Sin", "Erf"])
def test_bfloat16(op):
    fn = REFERENCES[op][0]
    x = np.array([-2.5, -1.25, -0.5, 0, 0.5, 1.5, 2.5, 3.75], ml_dtypes.bfloat16)
    expected = elementwise(fn, x, ml_dtypes.bfloat16)
    (got,) = run_op(op, [x])
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(got.astype(np.float32), expected.astype(np.float32), rtol=1e-2)


def test_special_values():
    x = np.array([-np.inf, -0.5, 0.5, 1.5, 2.5, np.inf, np.nan], np.float32)
    check_op("Round", [x], reference=lambda x: (np.array([-np.inf, -0, 0, 2, 2, np.inf, np.nan],
                                                         np.float32),))  # fmt: skip
    check_op("Sign", [x], reference=lambda x: (np.array([-1, -1, 1, 1, 1, 1, np.nan],
                                                        np.float32),))  # fmt: skip
    check_op("Erf", [x], reference=lambda x: (elementwise(math.erf, x, np.float32),))
    tiny = np.array([1e-300, -1e-20, 1e-8], np.float64)
    check_op("Erf", [tiny], reference=lambda x: (x * 2 / math.sqrt(math.pi),), rtol=1e-15, atol=0)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint32])
def test_sign_int(dtype):
    x = np.arange(-4, 4).astype(dtype)
    check_op("Sign", [x], reference=lambda x: (elementwise(REFERENCES["Sign"][0], x, dtype),))


def mod_reference(a, b, fmod):
    a, b = np.broadcast_arrays(a, b)
    if a.dtype.kind in "iu":
        pairs = zip(a.ravel().tolist(), b.ravel().tolist())
        out = [int(math.fmod(x, y)) if fmod else x % y for x, y in pairs]
        return np.array(out, a.dtype).reshape(a.shape)
    pairs = zip(a.astype(np.float64).ravel().tolist(), b.astype(np.float64).ravel().tolist())
    out = [math.fmod(x, y) if fmod else _py_mod(x, y) for x, y in pairs]
    return np.array(out, np.float64).reshape(a.shape).astype(a.dtype)


def _py_mod(x, y):
    if y == 0 or math.isinf(x) or math.isnan(x) or math.isnan(y):
        return math.nan
    return x % y


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint64] + FLOATS)
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((5,), ())])
def test_mod(shapes, dtype, fmod):
    rng = np.random.default_rng(0)
    low = 0 if np.dtype(dtype).kind == "u" else -20
    a = rng.integers(low, 20, size=shapes[0]).astype(dtype)
    b = rng.integers(1, 7, size=shapes[1]) * (1 if low == 0 else rng.choice([-1, 1], shapes[1]))
    b = b.astype(dtype)
    if np.dtype(dtype).kind == "f":
        a = (a + rand(*shapes[0], dtype=np.float64)).astype(dtype)
    tol = 1e-3 if dtype == np.float16 else 1e-6
    check_op("Mod", [a, b], reference=lambda a, b: (mod_reference(a, b, fmod),), fmod=fmod,
             rtol=tol, atol=tol)  # fmt: skip


def test_mod_float_special_cases():
    a = np.array([0.0, -0.0, np.inf, 3.0, 1.0, 1.0, -1.0, np.nan, 5.0], np.float32)
    b = np.array([-2.0, 3.0, 2.0, 0.0, np.inf, -np.inf, np.inf, 1.0, np.nan], np.float32)
    (got,) = run_op("Mod", [a, b])
    want = np.array([-0.0, 0.0, np.nan, np.nan, 1.0, -np.inf, np.inf, np.nan, np.nan], np.float32)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got[:2]), [True, False])  # zero takes B's sign
    (got,) = run_op("Mod", [a, b], fmod=1)
    np.testing.assert_array_equal(got[4:7], [1.0, 1.0, -1.0])


def test_errors():
    with pytest.raises(OperatorError, match="integer modulo by zero"):
        run_op("Mod", [np.ones(3, np.int32), np.array([1, 0, 2], np.int32)])
    with pytest.raises(OperatorError, match="'fmod' is 2, expected 0 or 1"):
        run_op("Mod", [rand(3), rand(3)], fmod=2)
    with pytest.raises(OperatorError, match="'input' has dtype int32, expected a float type"):
        run_op("Sin", [np.ones(3, np.int32)])
    with pytest.raises(OperatorError, match="'X' has dtype bool, expected a float type"):
        run_op("Floor", [np.ones(3, bool)])


@pytest.mark.parametrize("op", ["Ceil", "Floor", "Round", "Sign", "Mod"])
def test_no_gradient(op):
    assert isinstance(GRADIENTS[op], NoGradient)
