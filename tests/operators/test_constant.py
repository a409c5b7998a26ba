"""Cast, Constant and Identity against NumPy."""

import ml_dtypes
import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op

# Types by name (netbrew.netdef.dtypes); tests/netdef/test_dtypes.py checks every spelling.
TARGETS = {
    "FLOAT": np.float32,
    "DOUBLE": np.float64,
    "FLOAT16": np.float16,
    "BFLOAT16": ml_dtypes.bfloat16,
    "INT8": np.int8,
    "UINT8": np.uint8,
    "INT32": np.int32,
    "INT64": np.int64,
    "BOOL": np.bool_,
}


def sources():
    return {
        "float32": rand(2, 3, low=-100, high=100),
        "int64": np.array([[-3, 0, 7], [120, -128, 5]], dtype=np.int64),
        "bool": np.array([True, False, True]),
        "float64": rand(4, dtype=np.float64, low=-50, high=50),
    }


@pytest.mark.parametrize("to", list(TARGETS))
@pytest.mark.parametrize("source", ["float32", "int64", "bool", "float64"])
def test_cast_numbers(source, to):
    x = sources()[source]
    check_op("Cast", [x], reference=lambda x: (x.astype(TARGETS[to]),), to=to)


@pytest.mark.parametrize(
    "x, expected",
    [
        (np.array([1.5, -2.0, 0.25], np.float32), ["1.5", "-2.0", "0.25"]),
        (np.array([[7, -3]], np.int64), [["7", "-3"]]),
        (np.array([True, False]), ["True", "False"]),
        (np.array(["keep", "as is"], dtype=object), ["keep", "as is"]),
    ],
)
def test_cast_to_string(x, expected):
    check_op("Cast", [x], reference=lambda x: (np.array(expected, dtype=object),), to="STRING")


@pytest.mark.parametrize(
    "strings, to, expected",
    [
        (["3.14", "1e-5", "1E8", "-2"], "FLOAT", [3.14, 1e-5, 1e8, -2.0]),
        (["INF", "+INF", "-inf", "NaN"], "DOUBLE", [np.inf, np.inf, -np.inf, np.nan]),
        (["1000", "-7", "9223372036854775807"], "INT64", [1000, -7, 2**63 - 1]),
        (["100.5", "-2.5"], "INT32", [100, -2]),
        (["true", "False", "0", "2.5"], "BOOL", [True, False, False, True]),
        ([b"1.5", "2"], "FLOAT", [1.5, 2.0]),
    ],
)
def test_cast_from_string(strings, to, expected):
    x = np.empty(len(strings), dtype=object)
    x[:] = strings
    want = np.array(expected).astype(TARGETS[to])
    check_op("Cast", [x], reference=lambda x: (want,), to=to)


@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("to", ["FLOAT8E4M3FN", "FLOAT8E5M2"])
def test_cast_float8_saturate(to, saturate):
    dtype = {"FLOAT8E4M3FN": ml_dtypes.float8_e4m3fn, "FLOAT8E5M2": ml_dtypes.float8_e5m2}
    dtype = dtype[to]
    x = np.array([1.5, -3.0, 1e6, -1e6, np.inf], np.float32)
    (got,) = run_op("Cast", [x], to=to, saturate=saturate)
    assert got.dtype == dtype
    big = float(ml_dtypes.finfo(dtype).max)
    back = got.astype(np.float32)
    np.testing.assert_array_equal(back[:2], [1.5, -3.0])
    if saturate:
        np.testing.assert_array_equal(back[2:], [big, -big, big])
    else:  # out of range: inf where the type has one, NaN where it does not
        assert not np.isfinite(back[2:]).any()


def test_cast_to_by_name():
    check_op("Cast", [rand(3)], reference=lambda x: (x.astype(np.float16),), to="FLOAT16")


def test_cast_errors():
    with pytest.raises(OperatorError, match="to=0 is not an ONNX TensorProto data type"):
        run_op("Cast", [rand(2)], to=0)
    with pytest.raises(OperatorError, match="a string that is not a number"):
        run_op("Cast", [np.array(["hello"], dtype=object)], to="FLOAT")


@pytest.mark.parametrize(
    "attr, value, expected",
    [
        ("value", rand(2, 3), rand(2, 3)),
        ("value", np.arange(4, dtype=np.int64), np.arange(4, dtype=np.int64)),
        ("value", np.array([True, False]), np.array([True, False])),
        ("value", np.array(["a", "bc"], dtype=object), np.array(["a", "bc"], dtype=object)),
        ("value_float", 2.5, np.array(2.5, np.float32)),
        ("value_floats", [1.0, -2.5], np.array([1.0, -2.5], np.float32)),
        ("value_floats", [1, 2], np.array([1.0, 2.0], np.float32)),
        ("value_int", 7, np.array(7, np.int64)),
        ("value_ints", [3, -4, 5], np.array([3, -4, 5], np.int64)),
        ("value_string", "hello", np.array("hello", dtype=object)),
        ("value_strings", ["x", "yz"], np.array(["x", "yz"], dtype=object)),
    ],
)
def test_constant(attr, value, expected):
    check_op("Constant", [], reference=lambda: (expected,), outputs=1, **{attr: value})


def test_constant_errors():
    with pytest.raises(OperatorError, match="exactly one of value, .* must be set, got none"):
        run_op("Constant", [])
    with pytest.raises(OperatorError, match="got value_float, value_int"):
        run_op("Constant", [], value_int=1, value_float=2.0)


@pytest.mark.parametrize(
    "x",
    [
        rand(2, 3),
        np.arange(5, dtype=np.int64),
        np.array([[True], [False]]),
        np.array(["a", "b"], dtype=object),
        np.array(1.5, np.float32),
    ],
)
def test_identity(x):
    check_op("Identity", [x], reference=lambda x: (x.copy(),))
