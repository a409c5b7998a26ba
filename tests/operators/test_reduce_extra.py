"""ReduceMin, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceProd and
ReduceSumSquare against NumPy references written here."""

import ml_dtypes
import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op


def _lse(x, axis, keepdims):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


REFERENCES = {
    "ReduceMin": lambda x, a, k: np.min(x, axis=a, keepdims=k),
    "ReduceL1": lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
    "ReduceL2": lambda x, a, k: np.sqrt(
        np.sum(np.square(x.astype(np.float64)), axis=a, keepdims=k)
    ),
    "ReduceLogSum": lambda x, a, k: np.log(np.sum(x.astype(np.float64), axis=a, keepdims=k)),
    "ReduceLogSumExp": lambda x, a, k: _lse(x.astype(np.float64), a, k),
    "ReduceProd": lambda x, a, k: np.prod(x, axis=a, keepdims=k),
    "ReduceSumSquare": lambda x, a, k: np.sum(np.square(x), axis=a, keepdims=k),
}
FLOAT_ONLY = {"ReduceLogSum", "ReduceLogSumExp"}


def ref_reduce(op, x, axes, keepdims=1, noop_with_empty_axes=0):
    if axes is None or len(axes) == 0:
        axes = () if noop_with_empty_axes else tuple(range(x.ndim))
    out = REFERENCES[op](x, tuple(int(a) for a in axes), bool(keepdims))
    return (np.asarray(out).astype(x.dtype),)


OP_DTYPES = [
    (op, dtype)
    for op in sorted(REFERENCES)
    for dtype in (np.float32, np.float64, np.int32)
    if op not in FLOAT_ONLY or dtype != np.int32
]


@pytest.mark.parametrize("op, dtype", OP_DTYPES)
@pytest.mark.parametrize(
    "shape, axes",
    [((5,), None), ((3, 4), [0]), ((3, 4), [-1]), ((2, 3, 4), [0, 2]), ((2, 3, 4), []), ((), None)],
)
@pytest.mark.parametrize("attrs", [{}, {"keepdims": 0}, {"noop_with_empty_axes": 1}])
def test_reduce_extra(op, shape, axes, dtype, attrs):
    low = 0.5 if op in FLOAT_ONLY else -3
    x = rand(*shape, seed=1, low=low, high=3).astype(dtype)
    axes_in = None if axes is None else np.array(axes, dtype=np.int64)
    check_op(
        op,
        [x, axes_in],
        reference=lambda x, a: ref_reduce(op, x, a, **attrs),
        rtol=1e-4,
        **attrs,
    )


@pytest.mark.parametrize(
    "op, dtype, expected",
    [
        ("ReduceMin", np.float32, np.inf),
        ("ReduceMin", np.int32, np.iinfo(np.int32).max),
        ("ReduceMin", np.bool_, True),
        ("ReduceL1", np.float32, 0.0),
        ("ReduceL2", np.int64, 0),
        ("ReduceLogSum", np.float32, -np.inf),
        ("ReduceLogSumExp", np.float64, -np.inf),
        ("ReduceProd", np.float32, 1.0),
        ("ReduceSumSquare", np.float32, 0.0),
    ],
)
def test_reduce_extra_empty_set(op, dtype, expected):
    x = np.zeros((2, 0, 4), dtype)
    (y,) = run_op(op, [x, np.array([1])])
    assert y.shape == (2, 1, 4) and y.dtype == dtype
    np.testing.assert_array_equal(y, np.full((2, 1, 4), expected, dtype))


def test_reduce_min_bool_and_bfloat16():
    x = np.array([[True, False], [True, True]])
    (y,) = run_op("ReduceMin", [x, np.array([1])], keepdims=0)
    np.testing.assert_array_equal(y, [False, True])
    xb = np.array([[1.5, -2.0], [3.0, 4.0]], ml_dtypes.bfloat16)
    (y,) = run_op("ReduceSumSquare", [xb], keepdims=0)
    assert y.dtype == ml_dtypes.bfloat16 and float(y) == 31.25


def test_reduce_log_sum_exp_is_stable():
    x = np.array([[1000.0, 1000.0], [-np.inf, -np.inf]], np.float32)
    (y,) = run_op("ReduceLogSumExp", [x, np.array([1])], keepdims=0)
    np.testing.assert_allclose(y, [1000 + np.log(2), -np.inf])


def test_reduce_extra_errors():
    with pytest.raises(OperatorError, match="out of range"):
        run_op("ReduceProd", [rand(2, 3), np.array([2])])
    with pytest.raises(OperatorError, match="bool"):
        run_op("ReduceL1", [np.ones((2, 2), bool)])
    with pytest.raises(OperatorError, match="float type"):
        run_op("ReduceLogSum", [np.ones((2, 2), np.int32)])
