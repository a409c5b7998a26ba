"""Sum, Mean, Max and Min over 1..N broadcast inputs against NumPy."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op

SHAPES = [[(3, 4)], [(3, 4), (3, 4)], [(2, 3, 4), (4,), (3, 1)], [(), (2, 1), (1, 5), (2, 5)]]


def inputs(shapes, dtype):
    return [
        rand(*s, dtype=np.float64, seed=i, low=-9, high=9).astype(dtype)
        for i, s in enumerate(shapes)
    ]


def fold(fn):
    def reference(*xs):
        out = np.broadcast_to(xs[0], np.broadcast_shapes(*(x.shape for x in xs))).copy()
        for x in xs[1:]:
            out = fn(out, x)
        return (out,)

    return reference


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", SHAPES)
def test_sum_mean(shapes, dtype):
    xs = inputs(shapes, dtype)
    check_op("Sum", xs, reference=fold(np.add))
    check_op("Mean", xs, reference=lambda *xs: (fold(np.add)(*xs)[0] / dtype(len(xs)),))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("op, fn", [("Max", np.maximum), ("Min", np.minimum)])
def test_max_min(op, fn, shapes, dtype):
    xs = inputs(shapes, dtype)
    check_op(op, xs, reference=fold(lambda a, b: np.where(fn(a, b) == a, a, b)))


def test_single_input_is_a_copy():
    x = rand(3)
    (out,) = run_op("Sum", [x])
    out[0] = 5.0
    assert x[0] != 5.0


def test_errors():
    with pytest.raises(OperatorError, match=r"'data_1' \[2, 2\] cannot be broadcast"):
        run_op("Max", [rand(3), rand(2, 2)])
    with pytest.raises(OperatorError, match="input 'data_2' has dtype float64, expected float32"):
        run_op("Sum", [rand(3), rand(3), rand(3, dtype=np.float64)])
    with pytest.raises(OperatorError, match="'data_0' has dtype int32, expected a float type"):
        run_op("Mean", [np.ones(3, np.int32)])
