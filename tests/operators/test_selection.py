"""NonZero, Compress, Unique, TopK and ArgMin against NumPy references."""

import numpy as np
import pytest
from ml_dtypes import bfloat16

from netbrew.errors import OperatorError
from netbrew.operators import GRADIENTS, NoGradient
from netbrew.testing import check_op, rand, run_op


def ints(*values):
    return np.array(values, np.int64)


def nonzero_ref(x):
    found = [pos for pos in np.ndindex(*x.shape) if x[pos] != 0]
    return (np.array(found, np.int64).reshape(len(found), x.ndim).T,)


@pytest.mark.parametrize(
    "x",
    [
        np.array([[1, 0], [1, 1]], np.int32),
        np.array([0.0, 0.5, -1.0, 0.0], np.float32),
        np.array([[[True, False], [False, True]]]),
        np.zeros((2, 3), np.float32),
    ],
)
def test_non_zero(x):
    check_op("NonZero", [x], nonzero_ref)


def test_non_zero_scalar():
    np.testing.assert_array_equal(run_op("NonZero", [np.array(3.0)])[0], [[0]])
    assert run_op("NonZero", [np.array(0)])[0].shape == (1, 0)


@pytest.mark.parametrize(
    "shape, condition, axis",
    [
        ((3, 2), [0, 1, 1], 0),
        ((3, 2), [0, 1], 1),
        ((3, 2), [True, False, True, True], None),
        ((3, 2), [1], -2),
        ((2, 3, 4), [1, 0, 1, 1], -1),
    ],
)
def test_compress(shape, condition, axis):
    cond = np.array(condition, bool)

    def ref(x, c):
        flat = x.reshape(-1) if axis is None else x
        a = 0 if axis is None else axis % x.ndim
        keep = [i for i in range(flat.shape[a]) if i < c.size and c[i]]
        return (flat.take(keep, axis=a),)

    check_op("Compress", [rand(*shape), cond], ref, **({} if axis is None else {"axis": axis}))


def test_compress_long_condition():
    with pytest.raises(OperatorError, match="more than"):
        run_op("Compress", [rand(2), np.array([0, 0, 1], bool)], axis=0)


def unique_ref(axis, sort):
    def ref(x):
        a = 0 if axis is None else axis % x.ndim
        items = x.reshape(-1) if axis is None else np.moveaxis(x, a, 0)
        keys = [items[i].tobytes() for i in range(len(items))]
        first = {}
        for i, key in enumerate(keys):
            first.setdefault(key, i)
        order = list(first.values())
        if sort:
            order.sort(key=lambda i: tuple(np.asarray(items[i], np.float64).reshape(-1)))
        where = {keys[i]: n for n, i in enumerate(order)}
        y = np.take(x.reshape(-1) if axis is None else x, order, axis=a)
        inverse = [where[k] for k in keys]
        counts = [keys.count(keys[i]) for i in order]
        return y, ints(*order), ints(*inverse), ints(*counts)

    return ref


@pytest.mark.parametrize(
    "x, axis",
    [
        (np.array([2, 1, 1, 3, 4, 3], np.int64), None),
        (np.array([[1, 3], [2, 3]], np.float32), None),
        (np.array([[1, 0, 0], [1, 0, 0], [2, 3, 4]], np.int32), 0),
        (
            np.array(
                [[[1, 1], [0, 1], [2, 1], [0, 1]], [[1, 1], [0, 1], [2, 1], [0, 1]]], np.float32
            ),
            1,
        ),
        (np.array([[1, 0, 0], [1, 0, 0], [2, 3, 4]], np.int32), -1),
        (np.array([5.0], np.float32), None),
    ],
)
@pytest.mark.parametrize("sort", [0, 1])
def test_unique(x, axis, sort):
    attrs = {"sorted": sort} | ({} if axis is None else {"axis": axis})
    check_op("Unique", [x], unique_ref(axis, sort), **attrs)


def test_unique_bfloat16_and_one_output():
    x = np.array([2.0, -1.0, 2.0, 0.5], bfloat16)
    y = run_op("Unique", [x])[0]
    assert y.dtype == bfloat16
    np.testing.assert_array_equal(y.astype(np.float32), [-1.0, 0.5, 2.0])


def top_k_ref(k, axis, largest):
    def ref(x, _):
        a = axis % x.ndim
        moved = np.moveaxis(x, a, -1)
        values = np.empty(moved.shape[:-1] + (k,), x.dtype)
        index = np.empty(moved.shape[:-1] + (k,), np.int64)
        for pos in np.ndindex(*moved.shape[:-1]):
            row = moved[pos].tolist()
            order = sorted(range(len(row)), key=lambda i: (-row[i] if largest else row[i], i))
            index[pos] = order[:k]
            values[pos] = [row[i] for i in order[:k]]
        return np.moveaxis(values, -1, a), np.moveaxis(index, -1, a)

    return ref


@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize(
    "x, k, axis",
    [
        (rand(3, 4), 3, -1),
        (rand(3, 4), 2, 0),
        (np.array([[0, 1, 1, 0, 2], [3, 3, 1, 3, 0]], np.int32), 3, 1),
        (np.array([5, 1, 9, 1, 5], np.uint64), 4, 0),
        (rand(2, 3, 4), 0, 1),
        (np.array([1.0, 1.0, 1.0], np.float64), 2, 0),
    ],
)
def test_top_k(x, k, axis, largest):
    check_op("TopK", [x, ints(k)], top_k_ref(k, axis, largest), axis=axis, largest=largest)


def test_top_k_bad_k():
    with pytest.raises(OperatorError, match="out of range"):
        run_op("TopK", [rand(3), ints(4)], outputs=2)


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize(
    "x, axis",
    [
        (np.array([[2, 1], [1, 1], [2, 1]], np.float32), 0),
        (np.array([[2, 1, 1], [3, 0, 0]], np.int32), 1),
        (rand(2, 3, 4), -1),
        (np.array([[4, 4, 4]], np.uint8), -1),
    ],
)
def test_argmin(x, axis, last, keepdims):
    def ref(x):
        a = axis % x.ndim
        moved = np.moveaxis(x, a, -1)
        out = np.empty(moved.shape[:-1], np.int64)
        for pos in np.ndindex(*moved.shape[:-1]):
            row = moved[pos].tolist()
            hits = [i for i, v in enumerate(row) if v == min(row)]
            out[pos] = hits[-1] if last else hits[0]
        return (np.expand_dims(out, a) if keepdims else out,)

    check_op("ArgMin", [x], ref, axis=axis, keepdims=keepdims, select_last_index=last)


def test_argmin_empty_axis_and_no_gradients():
    with pytest.raises(OperatorError, match="empty"):
        run_op("ArgMin", [rand(0, 3)])
    for name in ("NonZero", "ArgMin"):
        assert isinstance(GRADIENTS[name], NoGradient)
