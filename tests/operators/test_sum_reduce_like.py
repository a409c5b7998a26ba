"""SumReduceLike: sums a broadcast result back to the shape of the smaller operand."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op


@pytest.mark.parametrize(
    "big,small",
    [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 4), (3, 1)), ((2, 3, 4), (1, 3, 1)), ((2, 3), ())],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_reduce_like(big, small, dtype):
    a, b = rand(*big, dtype=dtype), rand(*small, dtype=dtype, seed=1)

    def reference(a, b):
        lead = a.ndim - b.ndim
        out = a.sum(axis=tuple(range(lead))) if lead else a
        axes = tuple(i for i, d in enumerate(b.shape) if d == 1 and out.shape[i] != 1)
        return (out.sum(axis=axes, keepdims=True).reshape(b.shape),)

    check_op("SumReduceLike", [a, b], reference)


def test_sum_reduce_like_rejects_non_broadcast_shape():
    with pytest.raises(OperatorError, match=r"shape \[3\] does not broadcast to \[2, 4\]"):
        run_op("SumReduceLike", [rand(2, 4), rand(3)])
