"""Gradients of ReduceSum, ReduceMean and ReduceMax against central differences."""

import numpy as np
import pytest

from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS, NoGradient
from netbrew.testing import check_gradient, run_op

CASES = [
    ((3, 4), None, 1, 0),
    ((3, 4), [1], 1, 0),
    ((3, 4), [0], 0, 0),
    ((2, 3, 4), [0, 2], 0, 0),
    ((2, 3, 4), [-1], 1, 0),
    ((2, 3, 4), [], 0, 0),
    ((2, 3, 4), [], 1, 1),
    ((5,), [0], 0, 0),
]


def reduce_inputs(shape, axes):
    # Distinct values, so ReduceMax has no ties and is differentiable.
    x = np.random.default_rng(0).permutation(int(np.prod(shape))).reshape(shape) / 7.0
    return [x.astype(np.float32)] + ([] if axes is None else [np.array(axes, np.int64)])


@pytest.mark.parametrize("op_type", ["ReduceSum", "ReduceMean", "ReduceMax"])
@pytest.mark.parametrize("shape, axes, keepdims, noop", CASES)
def test_reduce_gradient(op_type, shape, axes, keepdims, noop):
    inputs = reduce_inputs(shape, axes)
    check_gradient(op_type, inputs, wrt=0, keepdims=keepdims, noop_with_empty_axes=noop)


@pytest.mark.parametrize("op_type", ["ReduceSum", "ReduceMean", "ReduceMax"])
def test_reduce_gradient_op(op_type):
    op = op_def(op_type, ["x", "axes"], ["y"], keepdims=0)
    (grad_op,) = GRADIENTS[op_type](op, ["dy"], ["dx", None])
    assert grad_op.type == f"{op_type}Gradient"
    assert grad_op.input[0] == "dy" and grad_op.input[-1] == "axes"


def test_reduce_gradient_kernels():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]], np.float32)
    dy, axes = np.array([6.0, 3.0], np.float32), np.array([1])
    (dx,) = run_op("ReduceSumGradient", [dy, x, axes], keepdims=0)
    np.testing.assert_array_equal(dx, [[6, 6, 6], [3, 3, 3]])
    (dx,) = run_op("ReduceMeanGradient", [dy, x, axes], keepdims=0)
    np.testing.assert_array_equal(dx, [[2, 2, 2], [1, 1, 1]])
    # Tied maxima share the gradient equally.
    (dx,) = run_op("ReduceMaxGradient", [dy, x, np.array([3.0, 2.0], np.float32), axes], keepdims=0)
    np.testing.assert_array_equal(dx, [[0, 3, 3], [3, 0, 0]])
    assert dx.dtype == np.float32


def test_argmax_has_no_gradient():
    assert isinstance(GRADIENTS["ArgMax"], NoGradient)
