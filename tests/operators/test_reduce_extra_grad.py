"""Gradients of reduce_extra.py's reductions against central differences."""

import numpy as np
import pytest

from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, run_op

OPS = [
    "ReduceMin",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceProd",
    "ReduceSumSquare",
]
CASES = [
    ((3, 4), None, 1, 0),
    ((3, 4), [1], 1, 0),
    ((2, 3, 4), [0, 2], 0, 0),
    ((2, 3, 4), [-1], 1, 0),
    ((2, 3, 4), [], 1, 1),
    ((5,), [0], 0, 0),
]


def reduce_inputs(op, shape, axes):
    # Distinct values away from 0 (|x| and ReduceMin are not differentiable at ties or 0),
    # positive for ReduceLogSum, and near 1 so products stay well scaled.
    n = int(np.prod(shape))
    x = 0.5 + np.random.default_rng(0).permutation(n).reshape(shape) / n
    if op not in ("ReduceLogSum", "ReduceProd"):
        x = x * np.where(np.arange(n).reshape(shape) % 2, -1, 1)
    return [x] + ([] if axes is None else [np.array(axes, np.int64)])


@pytest.mark.parametrize("op_type", OPS)
@pytest.mark.parametrize("shape, axes, keepdims, noop", CASES)
def test_reduce_extra_gradient(op_type, shape, axes, keepdims, noop):
    inputs = reduce_inputs(op_type, shape, axes)
    check_gradient(op_type, inputs, wrt=0, keepdims=keepdims, noop_with_empty_axes=noop)


@pytest.mark.parametrize("op_type", OPS)
def test_reduce_extra_gradient_op(op_type):
    op = op_def(op_type, ["x", "axes"], ["y"], keepdims=0)
    (grad_op,) = GRADIENTS[op_type](op, ["dy"], ["dx", None])
    want = "ReduceMaxGradient" if op_type == "ReduceMin" else f"{op_type}Gradient"
    assert grad_op.type == want
    assert list(grad_op.input) == ["dy", "x", "y", "axes"]
    assert GRADIENTS[op_type](op, ["dy"], [None, None]) == []


def test_reduce_prod_gradient_with_zeros():
    x = np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0], [1.0, 2.0, 4.0]], np.float32)
    y, dy, axes = np.prod(x, axis=1), np.ones(3, np.float32), np.array([1])
    (dx,) = run_op("ReduceProdGradient", [dy, x, y, axes], keepdims=0)
    np.testing.assert_array_equal(dx, [[0, 6, 0], [0, 0, 0], [8, 4, 2]])


@pytest.mark.parametrize(
    "op, expected",
    [
        ("ReduceL1Gradient", [[1, -1, 0]]),
        ("ReduceL2Gradient", [[0.6, -0.8, 0]]),
        ("ReduceSumSquareGradient", [[6, -8, 0]]),
    ],
)
def test_reduce_extra_gradient_kernels(op, expected):
    x = np.array([[3.0, -4.0, 0.0]], np.float32)
    forward = {"ReduceL1Gradient": 7.0, "ReduceL2Gradient": 5.0, "ReduceSumSquareGradient": 25.0}
    y = np.array([[forward[op]]], np.float32)
    (dx,) = run_op(op, [np.ones((1, 1), np.float32), x, y])
    np.testing.assert_allclose(dx, expected, rtol=1e-6)
    assert dx.dtype == np.float32


def test_reduce_log_sum_gradients():
    x = np.array([[1.0, 3.0]])
    (dx,) = run_op("ReduceLogSumGradient", [np.ones((1, 1)), x, np.log([[4.0]])])
    np.testing.assert_allclose(dx, [[0.25, 0.25]])
    y = np.log(np.exp(x).sum(keepdims=True))
    (dx,) = run_op("ReduceLogSumExpGradient", [np.ones((1, 1)), x, y])
    np.testing.assert_allclose(dx, np.exp(x) / np.exp(x).sum())
