"""ReduceMean, ReduceSum, ReduceMax and ArgMax against NumPy references written here."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op

REFERENCES = {
    "ReduceMean": lambda x, axes, keep: np.mean(x.astype(np.float64), axis=axes, keepdims=keep),
    "ReduceSum": lambda x, axes, keep: np.sum(x.astype(np.float64), axis=axes, keepdims=keep),
    "ReduceMax": lambda x, axes, keep: np.max(x, axis=axes, keepdims=keep),
}


def ref_reduce(op, x, axes, keepdims=1, noop_with_empty_axes=0):
    if axes is None or len(axes) == 0:
        if noop_with_empty_axes:
            return (x,)
        axes = tuple(range(x.ndim))
    out = REFERENCES[op](x, tuple(int(a) for a in axes), bool(keepdims))
    return (np.asarray(out).astype(x.dtype),)


@pytest.mark.parametrize("op", sorted(REFERENCES))
@pytest.mark.parametrize(
    "shape, axes",
    [
        ((5,), None),
        ((3, 4), [0]),
        ((3, 4), [-1]),
        ((2, 3, 4), [0, 2]),
        ((2, 3, 4), []),
        ((2, 3, 4), [2, -3, 1]),
        ((), None),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("attrs", [{}, {"keepdims": 0}, {"noop_with_empty_axes": 1}])
def test_reduce(op, shape, axes, dtype, attrs):
    x = rand(*shape, seed=1, low=-10, high=10).astype(dtype)
    axes_in = None if axes is None else np.array(axes, dtype=np.int64)
    check_op(
        op,
        [x, axes_in],
        reference=lambda x, a: ref_reduce(op, x, a, **attrs),
        rtol=1e-5 if dtype != np.float32 else 1e-4,
        **attrs,
    )


@pytest.mark.parametrize(
    "op, dtype, expected",
    [
        ("ReduceMax", np.float32, -np.inf),
        ("ReduceMax", np.int32, np.iinfo(np.int32).min),
        ("ReduceMax", np.bool_, False),
        ("ReduceSum", np.float32, 0.0),
        ("ReduceMean", np.float64, np.nan),
    ],
)
def test_reduce_empty_set(op, dtype, expected):
    x = np.zeros((2, 0, 3), dtype=dtype)
    check_op(
        op,
        [x, np.array([1], np.int64)],
        reference=lambda x, a: (np.full((2, 1, 3), expected, dtype=dtype),),
    )


def test_reduce_float16_accumulates_in_float32():
    x = np.full(4096, 0.1, np.float16)
    (out,) = run_op("ReduceSum", [x])
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, [4096 * np.float32(np.float16(0.1))], rtol=1e-3)


def ref_argmax(x, axis=0, keepdims=1, select_last_index=0):
    if select_last_index:
        flipped = np.flip(x, axis=axis)
        index = x.shape[axis] - 1 - np.argmax(flipped, axis=axis)
    else:
        index = np.argmax(x, axis=axis)
    if keepdims:
        index = np.expand_dims(index, axis)
    return (np.asarray(index, dtype=np.int64),)


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("select_last_index", [0, 1])
def test_argmax(shape, axis, dtype, keepdims, select_last_index):
    x = rand(*shape, seed=2, low=0, high=3).astype(dtype)  # few values, so ties occur
    attrs = {"axis": axis, "keepdims": keepdims, "select_last_index": select_last_index}
    check_op("ArgMax", [x], reference=lambda x: ref_argmax(x, **attrs), **attrs)


@pytest.mark.parametrize(
    "op, inputs, attrs, match",
    [
        ("ReduceSum", [rand(2, 3), np.array([2])], {}, "axis 2 in input axes is out of range"),
        ("ReduceMean", [rand(2, 3), np.array([1, -1])], {}, "repeats a dimension"),
        ("ReduceMax", [rand(2, 3), np.array([0.5])], {}, "input 'axes' has dtype float64"),
        ("ArgMax", [rand(2, 3)], {"axis": -3}, "axis -3 in argument axis is out of range"),
        ("ArgMax", [np.zeros((2, 0))], {"axis": 1}, "empty along axis 1"),
    ],
)
def test_errors(op, inputs, attrs, match):
    with pytest.raises(OperatorError, match=match):
        run_op(op, inputs, **attrs)
