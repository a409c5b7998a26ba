"""CUDA Softmax, LogSoftmax and their gradients against their NumPy kernels."""

import numpy as np
import pytest

from netbrew.testing import check_device, rand, run_op

# (shape, axis): 1, 7 and 257 along the axis, inner dims (axis not last), both launch modes
# (a block per row for long rows with inner 1 or short inner, a thread per row otherwise).
CASES = [
    ((0,), 0),
    ((3, 0), 1),
    ((0, 5), -1),
    ((1,), 0),
    ((7,), 0),
    ((3, 257), -1),
    ((3, 257), 1),
    ((257, 3), 0),
    ((2, 257, 3), 1),
    ((2, 3, 40), 1),
    ((2, 70, 40), 1),
    ((4, 1), 1),
    ((2, 3, 4, 5), 2),
    ((5, 1100), 1),
    ((2, 5000), 0),
]
TOL = {
    np.float32: {"atol": 1e-6, "rtol": 1e-5},
    np.float16: {"atol": 2e-3, "rtol": 1e-2},
    np.float64: {"atol": 1e-12, "rtol": 1e-10},
}


def logits(shape, dtype=np.float32, seed=0):
    return (rand(*shape, seed=seed) * 4).astype(dtype)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape, axis", CASES)
def test_softmax(op, shape, axis):
    check_device(op, [logits(shape)], axis=axis, **TOL[np.float32])


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("dtype", [np.float16, np.float64])
@pytest.mark.parametrize("shape, axis", [((7,), 0), ((3, 257), -1), ((257, 3), 0)])
def test_softmax_dtypes(op, dtype, shape, axis):
    check_device(op, [logits(shape, dtype)], axis=axis, **TOL[dtype])


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_large_and_infinite(op):
    x = logits((4, 50)) * 1000
    x[1, 3] = -np.inf
    x[2, :] = -np.inf  # a row of -inf: NaN, as the NumPy kernel
    x[3, 7] = np.inf
    check_device(op, [x], axis=1)


@pytest.mark.parametrize("op", ["SoftmaxGradient", "LogSoftmaxGradient"])
@pytest.mark.parametrize("shape, axis", CASES)
def test_softmax_gradient(op, shape, axis):
    (y,) = run_op(op.removesuffix("Gradient"), [logits(shape)], axis=axis)
    dy = rand(*shape, seed=1)
    check_device(op, [y, dy], axis=axis, **TOL[np.float32])


@pytest.mark.parametrize("op", ["SoftmaxGradient", "LogSoftmaxGradient"])
@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_softmax_gradient_dtypes(op, dtype):
    (y,) = run_op(op.removesuffix("Gradient"), [logits((3, 257), dtype)], axis=1)
    dy = rand(3, 257, seed=1).astype(dtype)
    check_device(op, [y, dy], axis=1, **TOL[dtype])
