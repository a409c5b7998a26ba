"""Concat and Split against NumPy."""

import numpy as np
import pytest

from netbrew.errors import OperatorError, SchemaError
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


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shapes, axis",
    [
        ([(2, 3)], 0),
        ([(2, 3), (4, 3)], 0),
        ([(2, 3), (2, 1), (2, 0)], 1),
        ([(2, 3, 4), (2, 3, 2)], -1),
        ([(5,), (1,), (2,)], -1),
    ],
)
def test_concat(shapes, axis, dtype):
    inputs = [data(s, dtype, seed=i) for i, s in enumerate(shapes)]
    check_op("Concat", inputs, reference=lambda *xs: (np.concatenate(xs, axis=axis),), axis=axis)


def test_concat_errors():
    with pytest.raises(OperatorError, match=r"input 1 has shape \[3, 3\], expected \[2, 3\]"):
        run_op("Concat", [rand(2, 3), rand(3, 3)], axis=1)
    with pytest.raises(OperatorError, match="input 1 has dtype int64, expected float32"):
        run_op("Concat", [rand(2, 3), np.zeros((2, 3), np.int64)], axis=0)
    with pytest.raises(OperatorError, match=r"axis 2 is out of range \[-2, 1\]"):
        run_op("Concat", [rand(2, 3)], axis=2)
    with pytest.raises(SchemaError, match="required argument 'axis' is missing"):
        run_op("Concat", [rand(2, 3)])


def reference_split(x, sizes, axis):
    """The pieces of `x` with the given sizes along `axis`."""
    out, start = [], 0
    for size in sizes:
        index = [slice(None)] * x.ndim
        index[axis] = slice(start, start + size)
        out.append(x[tuple(index)])
        start += size
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, axis, sizes",
    [
        ((6, 2), 0, [2, 2, 2]),
        ((7, 2), 0, [3, 3, 1]),  # uneven: ceil(7/3) = 3, the last chunk smaller
        ((2, 4), 1, [2, 2, 0]),  # ceil(4/3) = 2 leaves an empty last chunk, as ONNX infers
        ((2, 3, 5), -1, [5]),
        ((2, 8), -1, [3, 3, 2]),
    ],
)
def test_split_equal_parts(shape, axis, sizes, dtype):
    x = data(shape, dtype)
    check_op("Split", [x], reference=lambda x: reference_split(x, sizes, axis), axis=axis)
    # The same through an explicit num_outputs.
    check_op(
        "Split",
        [x],
        reference=lambda x: reference_split(x, sizes, axis),
        axis=axis,
        num_outputs=len(sizes),
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, axis, sizes",
    [((6, 2), 0, [1, 5]), ((2, 7), 1, [2, 0, 4, 1]), ((3, 4, 5), -1, [5]), ((3, 4), -2, [2, 1])],
)
def test_split_sizes(shape, axis, sizes, dtype):
    x = data(shape, dtype)
    check_op(
        "Split",
        [x, np.array(sizes, dtype=np.int64)],
        reference=lambda x, s: reference_split(x, sizes, axis),
        axis=axis,
    )


def test_split_errors():
    with pytest.raises(OperatorError, match=r"size 5 into 4 chunks of ceil\(5/4\) = 2"):
        run_op("Split", [rand(5)], outputs=4)
    with pytest.raises(OperatorError, match=r"'split' has 2 entries \[2, 3\], expected 3"):
        run_op("Split", [rand(5), np.array([2, 3], np.int64)], outputs=3)
    with pytest.raises(OperatorError, match=r"must be non-negative and sum to 5"):
        run_op("Split", [rand(5), np.array([2, 2], np.int64)], outputs=2)
