"""Softmax and LogSoftmax against NumPy written out in float64."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op


def softmax64(x, axis):
    e = np.exp(x.astype(np.float64) - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax64(x, axis):
    s = x.astype(np.float64) - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "shape, axis", [((5,), -1), ((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4, 5), -3)]
)
@pytest.mark.parametrize("scale", [1.0, 500.0])  # large logits must not overflow
def test_softmax(shape, axis, dtype, scale):
    x = rand(*shape, dtype=dtype) * dtype(scale)
    check_op("Softmax", [x], axis=axis, reference=lambda x: (softmax64(x, axis).astype(dtype),))
    check_op(
        "LogSoftmax",
        [x],
        axis=axis,
        atol=1e-4,
        reference=lambda x: (log_softmax64(x, axis).astype(dtype),),
    )


def test_default_axis_is_last():
    x = rand(2, 3)
    check_op("Softmax", [x], reference=lambda x: (softmax64(x, -1).astype(np.float32),))


def test_errors():
    with pytest.raises(OperatorError, match="'axis' is 2, out of range .* 2 dims"):
        run_op("Softmax", [rand(2, 3)], axis=2)
    with pytest.raises(OperatorError, match="expected a float type"):
        run_op("LogSoftmax", [np.ones(3, np.int64)])
