"""Equal, Less, Greater and Where against NumPy."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op

SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((), (2, 3))]


def data(shape, dtype, seed):
    # few distinct values, so that equal pairs occur
    return np.round(rand(*shape, dtype=np.float64, seed=seed, low=-2, high=2)).astype(dtype)


COMPARISONS = [
    ("Equal", lambda a, b: a == b),
    ("Less", lambda a, b: a < b),
    ("Greater", lambda a, b: a > b),
]
NUMERIC = [np.float32, np.float64, np.int32, np.int64]


@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize(
    "op, fn, dtype",
    [(op, fn, d) for op, fn in COMPARISONS for d in NUMERIC] + [(*COMPARISONS[0], np.bool_)],
)
def test_compare(op, fn, dtype, shapes):
    a, b = data(shapes[0], dtype, 0), data(shapes[1], dtype, 1)
    check_op(op, [a, b], reference=lambda a, b: (np.asarray(fn(a, b), dtype=bool),))


def test_equal_strings():
    a, b = np.array(["a", "b", "c"]), np.array(["a", "x", "c"])
    check_op("Equal", [a, b], reference=lambda a, b: (np.array([True, False, True]),))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize(
    "shapes", [((3, 4), (3, 4), (3, 4)), ((3, 4), (4,), (3, 1)), ((1, 4), (2, 1, 1), ())]
)
def test_where(shapes, dtype):
    cond = rand(*shapes[0], seed=2) > 0
    x, y = data(shapes[1], dtype, 0), data(shapes[2], dtype, 1)

    def reference(c, x, y):
        c, x, y = np.broadcast_arrays(c, x, y)
        out = y.copy()
        out[c] = x[c]
        return (out,)

    check_op("Where", [cond, x, y], reference=reference)


def test_errors():
    with pytest.raises(OperatorError, match=r"'A' \[3\] and 'B' \[2\] cannot be broadcast"):
        run_op("Less", [rand(3), rand(2)])
    with pytest.raises(OperatorError, match="input 'B' has dtype int64, expected float32"):
        run_op("Equal", [rand(3), np.arange(3)])
    with pytest.raises(OperatorError, match="'condition' has dtype float32, expected a bool"):
        run_op("Where", [rand(3), rand(3), rand(3)])
    with pytest.raises(OperatorError, match="input 'Y' has dtype float64, expected float32"):
        run_op("Where", [rand(3) > 0, rand(3), rand(3, dtype=np.float64)])
