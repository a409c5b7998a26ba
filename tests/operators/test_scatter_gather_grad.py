"""Gradients of GatherElements and GatherND against central differences."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS, NoGradient
from netbrew.testing import check_gradient, check_op, rand, run_op


@pytest.mark.parametrize(
    "shape, indices, axis",
    [
        ((3, 3), [[0, 2, 0], [2, 2, -1]], 0),
        ((3, 4), [[1, 1], [0, -4], [3, 2]], 1),
        ((2, 3, 2), [[[0, 1], [1, 1]], [[2, 0], [0, 0]]], -2),
    ],
)
def test_gather_elements_gradient(shape, indices, axis):
    check_gradient("GatherElements", [rand(*shape), np.array(indices, np.int64)], axis=axis)


@pytest.mark.parametrize(
    "shape, indices, batch_dims",
    [
        ((3, 2), [[0, 0], [2, 1], [0, 0]], 0),
        ((3, 2, 2), [[1], [1], [-3]], 0),
        ((2, 3, 2), [[[1, 0], [1, 0]], [[2, 1], [0, 1]]], 1),
    ],
)
def test_gather_nd_gradient(shape, indices, batch_dims):
    check_gradient("GatherND", [rand(*shape), np.array(indices, np.int64)], batch_dims=batch_dims)


def test_gradient_kernels_accumulate():
    dy = np.ones((1, 3), np.float32)
    idx = np.array([[1, 1, 0]], np.int64)
    check_op("GatherElementsGradient", [dy, rand(2, 3), idx],
             lambda *_: (np.array([[0, 0, 1], [1, 1, 0]], np.float32),))  # fmt: skip
    idx = np.array([[1], [1], [0]], np.int64)
    check_op("GatherNDGradient", [np.ones((3, 2), np.float32), rand(2, 2), idx],
             lambda *_: (np.array([[1, 1], [2, 2]], np.float32),))  # fmt: skip
    with pytest.raises(OperatorError, match="expected"):
        run_op("GatherNDGradient", [np.ones((2, 2), np.float32), rand(2, 2), idx])


def test_gradient_registrations():
    op = op_def("GatherElements", ["x", "i"], ["y"], axis=1)
    (grad,) = GRADIENTS["GatherElements"](op, ["dy"], ["dx", None])
    assert grad.type == "GatherElementsGradient"
    for name in ("ScatterElements", "ScatterND", "TensorScatter"):
        assert isinstance(GRADIENTS[name], NoGradient)
