"""Flatten, Reshape, Transpose, Shape, Squeeze and Unsqueeze against NumPy."""

import math

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op

DTYPES = [np.float32, np.int64, np.bool_, object]


def data(shape, dtype, seed=0):
    """Values of `dtype`; object arrays hold strings."""
    values = np.asarray(rand(*shape, dtype=np.float64, seed=seed, low=-5, high=5))
    if dtype is object:
        return np.asarray(np.round(values).astype(int).astype(str), dtype=object)
    if dtype is np.bool_:
        return values > 0
    return values.astype(dtype)


def i64(*values):
    return np.array(values, dtype=np.int64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, axis",
    [((2, 3, 4), 1), ((2, 3, 4), 0), ((2, 3, 4), 3), ((2, 3, 4), -1), ((5,), 1), ((2, 0, 3), 2)],
)
def test_flatten(shape, axis, dtype):
    def reference(x):
        k = axis + x.ndim if axis < 0 else axis
        return (x.reshape(math.prod(x.shape[:k]), math.prod(x.shape[k:])),)

    check_op("Flatten", [data(shape, dtype)], reference=reference, axis=axis)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, target, want, allowzero",
    [
        ((2, 3, 4), [4, -1], (4, 6), 0),
        ((2, 3, 4), [0, -1], (2, 12), 0),
        ((2, 3, 4), [0, 0, 2, 2], (2, 3, 2, 2), 0),
        ((2, 3, 4), [-1], (24,), 0),
        ((1,), [], (), 0),
        ((0, 3), [3, 0], (3, 0), 1),
        ((0, 3), [-1, 3], (0, 3), 0),
    ],
)
def test_reshape(shape, target, want, allowzero, dtype):
    check_op(
        "Reshape",
        [data(shape, dtype), i64(*target)],
        reference=lambda x, s: (x.reshape(want),),
        allowzero=allowzero,
    )


@pytest.mark.parametrize(
    "target, allowzero, message",
    [
        ([4, -1], 0, "cannot infer the -1 dimension"),
        ([-1, -1], 0, "at most one dimension may be -1"),
        ([5, 5], 0, "holds 25 elements"),
        ([0, 0, 0, 6], 0, "copies a dim of data"),
        ([0, -1], 1, "cannot hold both 0 and -1"),
        ([-2, 3], 0, "must be >= -1"),
        ([], 0, "holds 1 elements"),
    ],
)
def test_reshape_errors(target, allowzero, message):
    with pytest.raises(OperatorError, match=message):
        run_op("Reshape", [rand(2, 3), i64(*target)], allowzero=allowzero)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, perm",
    [
        ((2, 3, 4), None),
        ((2, 3, 4), [1, 2, 0]),
        ((2, 3), [0, 1]),
        ((5,), None),
        ((2, 1, 3, 4), [3, 1, 0, 2]),
    ],
)
def test_transpose(shape, perm, dtype):
    check_op(
        "Transpose",
        [data(shape, dtype)],
        reference=lambda x: (np.transpose(x, perm),),
        perm=perm,
    )


def test_transpose_bad_perm():
    with pytest.raises(OperatorError, match=r"perm \[0, 0\] is not a permutation of 0..1"):
        run_op("Transpose", [rand(2, 3)], perm=[0, 0])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, start, end",
    [
        ((2, 3, 4), None, None),
        ((2, 3, 4), 1, None),
        ((2, 3, 4), -1, None),
        ((2, 3, 4), 0, -1),
        ((2, 3, 4), -10, 10),
        ((2, 3, 4), 2, 1),
        ((), None, None),
    ],
)
def test_shape(shape, start, end, dtype):
    def reference(x):
        rank = x.ndim
        lo = 0 if start is None else start
        hi = rank if end is None else end
        lo, hi = (min(max(v + rank if v < 0 else v, 0), rank) for v in (lo, hi))
        return (np.array(x.shape[lo:hi], dtype=np.int64),)

    check_op("Shape", [data(shape, dtype)], reference=reference, start=start, end=end)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, axes",
    [
        ((1, 3, 1, 2), None),
        ((1, 3, 1, 2), [0]),
        ((1, 3, 1, 2), [-2, 0]),
        ((1,), None),
        ((3, 4), []),
    ],
)
def test_squeeze(shape, axes, dtype):
    def reference(x, *rest):
        if axes is None:
            return (x.reshape([d for d in x.shape if d != 1]),)
        drop = {a % x.ndim for a in axes}
        return (x.reshape([d for i, d in enumerate(x.shape) if i not in drop]),)

    inputs = [data(shape, dtype)] + ([] if axes is None else [np.array(axes, dtype=np.int64)])
    check_op("Squeeze", inputs, reference=reference)


def test_squeeze_errors():
    with pytest.raises(OperatorError, match="has size 3 on axis 1, expected 1"):
        run_op("Squeeze", [rand(1, 3), i64(1)])
    with pytest.raises(OperatorError, match=r"axis 2 is out of range \[-2, 1\]"):
        run_op("Squeeze", [rand(1, 3), i64(2)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, axes, want",
    [
        ((3, 4), [0], (1, 3, 4)),
        ((3, 4), [-1], (3, 4, 1)),
        ((3, 4), [0, 3], (1, 3, 4, 1)),
        ((3, 4), [3, 0], (1, 3, 4, 1)),
        ((3, 4), [1, -2], (3, 1, 1, 4)),
        ((), [0], (1,)),
    ],
)
def test_unsqueeze(shape, axes, want, dtype):
    check_op(
        "Unsqueeze",
        [data(shape, dtype), np.array(axes, dtype=np.int64)],
        reference=lambda x, a: (x.reshape(want),),
    )


def test_unsqueeze_errors():
    with pytest.raises(OperatorError, match=r"axis 3 is out of range \[-3, 2\]"):
        run_op("Unsqueeze", [rand(2, 3), i64(3)])
    with pytest.raises(OperatorError, match="repeat an axis"):
        run_op("Unsqueeze", [rand(2, 3), i64(1, -3)])
