"""ConstantOfShape, Size, Range, EyeLike, OneHot and Trilu against NumPy references."""

import math

import numpy as np
import pytest
from ml_dtypes import bfloat16

from netbrew.errors import OperatorError
from netbrew.netdef.dtypes import onnx_np_dtype
from netbrew.operators import limits
from netbrew.testing import check_op, rand, run_op


def ints(*values):
    return np.array(values, np.int64)


@pytest.mark.parametrize(
    "shape, value",
    [
        ((2, 3), None),
        ((4,), np.array([7], np.int32)),
        ((0, 2), np.array([1.5], np.float64)),
        ((), np.array([True])),
    ],
)
def test_constant_of_shape(shape, value):
    def ref(s):
        v = np.zeros(1, np.float32) if value is None else value
        return (np.full(tuple(s.tolist()), v[0], v.dtype),)

    attrs = {} if value is None else {"value": value}
    check_op("ConstantOfShape", [np.array(shape, np.int64)], ref, **attrs)


def test_constant_of_shape_limit(monkeypatch):
    monkeypatch.setattr(limits, "MAX_ELEMENTS", 100)
    with pytest.raises(OperatorError, match="over the limit"):
        run_op("ConstantOfShape", [ints(20, 20)])


@pytest.mark.parametrize("shape", [(3, 4, 5), (), (0, 7)])
def test_size(shape):
    check_op("Size", [rand(*shape)], lambda x: (np.array(x.size, np.int64),))


def range_ref(start, limit, delta):
    n = max(math.ceil((float(limit) - float(start)) / float(delta)), 0)
    vals = [float(start) + i * float(delta) for i in range(n)]
    return (np.array(vals, np.float64).astype(start.dtype),)


INT_RANGES = [(3, 9, 3), (10, 4, -2), (0, 10, 3), (2, 2, 1), (5, 1, 1)]
FLOAT_RANGES = [(1.0, 5.0, 0.5), (5.0, 1.0, -0.7), (1.0, 3.0, 0.25), (0.0, 1.0, 0.3)]


@pytest.mark.parametrize(
    "start, limit, delta, dtype",
    [(*r, t) for r in INT_RANGES for t in (np.int16, np.int32, np.int64)]
    + [(*r, t) for r in INT_RANGES + FLOAT_RANGES for t in (np.float16, np.float32, np.float64)],
)
def test_range(start, limit, delta, dtype):
    args = [np.array(v, dtype) for v in (start, limit, delta)]
    check_op("Range", args, range_ref)


def test_range_bfloat16_and_errors():
    args = [np.array(v, bfloat16) for v in (1.0, 4.0, 0.5)]
    check_op("Range", args, range_ref, atol=1e-2)
    with pytest.raises(OperatorError, match="delta"):
        run_op("Range", [np.array(v, np.int64) for v in (0, 3, 0)])
    with pytest.raises(OperatorError, match="one dtype"):
        run_op("Range", [np.array(0, np.int64), np.array(3, np.int32), np.array(1, np.int64)])


@pytest.mark.parametrize("shape, k", [((3, 3), 0), ((3, 5), 2), ((4, 2), -1), ((2, 2), 5)])
@pytest.mark.parametrize("dtype", [None, "INT32", "DOUBLE"])
def test_eye_like(shape, k, dtype):
    x = rand(*shape)

    def ref(x):
        out_dtype = x.dtype if dtype is None else onnx_np_dtype(dtype)
        y = np.zeros(x.shape, out_dtype)
        for i in range(x.shape[0]):
            if 0 <= i + k < x.shape[1]:
                y[i, i + k] = 1
        return (y,)

    attrs = {"k": k} if dtype is None else {"k": k, "dtype": dtype}
    check_op("EyeLike", [x], ref, **attrs)


def test_eye_like_needs_2d():
    with pytest.raises(OperatorError, match="expected 2-D"):
        run_op("EyeLike", [rand(2, 2, 2)])


def one_hot_ref(axis):
    def ref(indices, depth, values):
        d = int(depth.reshape(-1)[0])
        rank = indices.ndim
        a = axis % (rank + 1)
        out = np.full(indices.shape + (d,), values[0], values.dtype)
        for pos in np.ndindex(*indices.shape):
            i = int(indices[pos])
            i = i + d if i < 0 else i
            if 0 <= i < d:
                out[pos + (i,)] = values[1]
        return (np.moveaxis(out, -1, a),)

    return ref


@pytest.mark.parametrize(
    "indices, axis",
    [
        (ints(0, 3, -1, 7, -8), -1),
        (ints(0, 3, -1, 7, -8), 0),
        (ints(0, 3, -1, 7, -8), -2),
        (np.array([[1, 9], [-3, 2]], np.int32), 1),
        (np.array([[1, 9], [-3, 2]], np.int32), -3),
        (np.array([[1, 9], [-3, 2]], np.int32), 2),
        (np.array([1.0, 2.7], np.float32), 0),
    ],
)
def test_one_hot(indices, axis):
    depth = np.array(5.0, np.float32) if indices.dtype == np.int32 else ints(5)
    values = np.array([2.0, 7.0], np.float32)
    check_op("OneHot", [indices, depth, values], one_hot_ref(axis), axis=axis)


def test_one_hot_bad_values():
    with pytest.raises(OperatorError, match="2 elements"):
        run_op("OneHot", [ints(1), ints(3), np.array([1, 2, 3], np.float32)])


def trilu_ref(k, upper):
    def ref(x, *_):
        out = np.zeros_like(x)
        for pos in np.ndindex(*x.shape):
            i, j = pos[-2:]
            if (j - i >= k) if upper else (j - i <= k):
                out[pos] = x[pos]
        return (out,)

    return ref


@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 3), (1, 5), (5, 1)])
@pytest.mark.parametrize("k", [None, 0, 1, -2, 7, -7])
@pytest.mark.parametrize("upper", [0, 1])
def test_trilu(shape, k, upper):
    inputs = [rand(*shape, low=1, high=2)] + ([] if k is None else [ints(k)])
    check_op("Trilu", inputs, trilu_ref(k or 0, upper), upper=upper)


def test_trilu_bool_and_rank():
    x = np.ones((3, 3), bool)
    check_op("Trilu", [x], trilu_ref(0, 1))
    with pytest.raises(OperatorError, match="rank >= 2"):
        run_op("Trilu", [rand(4)])
