"""CumSum, CumProd and ReverseSequence against loops."""

import numpy as np
import pytest
from ml_dtypes import bfloat16

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op


def scan_ref(combine, identity, exclusive, reverse):
    def ref(x, axis):
        a = int(axis) % x.ndim
        moved = np.moveaxis(x, a, -1)
        out = np.empty_like(moved)
        n = moved.shape[-1]
        for pos in np.ndindex(*moved.shape[:-1]):
            for j in range(n):
                span = range(j, n) if reverse else range(j + 1)
                acc = identity
                for i in span:
                    if not (exclusive and i == j):
                        acc = combine(acc, moved[pos][i])
                out[pos][j] = acc
        return (np.moveaxis(out, -1, a),)

    return ref


CASES = [((5,), 0), ((2, 3), 0), ((2, 3), 1), ((2, 3, 4), -1), ((2, 3, 4), np.int32(-2))]


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("shape, axis", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
def test_cumsum(shape, axis, exclusive, reverse, dtype):
    x = (rand(*shape) * 5).astype(dtype)
    axis_in = np.array(axis, np.asarray(axis).dtype if isinstance(axis, np.generic) else np.int64)
    check_op("CumSum", [x, axis_in], scan_ref(lambda a, b: a + b, 0, exclusive, reverse),
             exclusive=exclusive, reverse=reverse)  # fmt: skip


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("shape, axis", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_cumprod(shape, axis, exclusive, reverse, dtype):
    x = (rand(*shape, low=0.5, high=3)).astype(dtype)
    ref = scan_ref(lambda a, b: a * b, 1, exclusive, reverse)
    check_op("CumProd", [x, np.array(axis, np.int64)], ref, exclusive=exclusive, reverse=reverse)


def test_scan_bfloat16_and_errors():
    x = np.array([1.0, 2.0, 3.0], bfloat16)
    y = run_op("CumSum", [x, np.array(0, np.int64)])[0]
    assert y.dtype == bfloat16
    np.testing.assert_array_equal(y.astype(np.float32), [1, 3, 6])
    with pytest.raises(OperatorError, match="out of range"):
        run_op("CumSum", [rand(2, 3), np.array(2, np.int64)])
    with pytest.raises(OperatorError, match="scalar"):
        run_op("CumProd", [rand(2, 3), np.array([0, 1], np.int64)])


def test_cumprod_gradient_kernel():
    x = np.array([2.0, 3.0, 4.0], np.float32)
    y, dy = np.cumprod(x), np.ones(3, np.float32)
    # dsum(y)/dx = [1 + 3 + 12, 2 + 8, 6]
    check_op("CumProdGradient", [x, y, dy, np.array(0, np.int64)],
             lambda *_: (np.array([16.0, 10.0, 6.0], np.float32),))  # fmt: skip


def reverse_sequence_ref(batch_axis, time_axis):
    def ref(x, lens):
        out = x.copy()
        for b, n in enumerate(lens.tolist()):
            for t in range(n):
                dst = [slice(None)] * x.ndim
                src = [slice(None)] * x.ndim
                dst[batch_axis] = src[batch_axis] = b
                dst[time_axis], src[time_axis] = t, n - 1 - t
                out[tuple(dst)] = x[tuple(src)]
        return (out,)

    return ref


@pytest.mark.parametrize(
    "shape, lens, batch_axis, time_axis",
    [
        ((4, 4), (4, 3, 2, 1), 1, 0),
        ((4, 4), (1, 2, 3, 4), 0, 1),
        ((3, 2, 5), (0, 3), 1, 0),
        ((2, 5, 3), (5, 2), 0, 1),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_reverse_sequence(shape, lens, batch_axis, time_axis, dtype):
    x = np.arange(np.prod(shape)).reshape(shape).astype(dtype)
    check_op("ReverseSequence", [x, np.array(lens, np.int64)],
             reverse_sequence_ref(batch_axis, time_axis), batch_axis=batch_axis,
             time_axis=time_axis)  # fmt: skip


def test_reverse_sequence_errors():
    with pytest.raises(OperatorError, match="must lie in"):
        run_op("ReverseSequence", [rand(3, 2), np.array([4, 1], np.int64)])
    with pytest.raises(OperatorError, match="batch size"):
        run_op("ReverseSequence", [rand(3, 2), np.array([1], np.int64)])
