"""Gradients of GatherElements, GatherND, ScatterElements, ScatterND (every reduction) and
TensorScatter against central differences."""

import math

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
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


REDUCTIONS = ["none", "add", "mul", "max", "min"]


def distinct(*shape, seed=0, offset=0.0):
    """Values 0.1 apart (shifted by `offset`): no ties within one array, nor with another
    array drawn with a different offset, so max and min have no kinks nearby."""
    values = np.random.default_rng(seed).permutation(math.prod(shape)).reshape(shape)
    return values / 10.0 - 1 + offset


def ints(values):
    return np.array(values, np.int64)


@pytest.mark.parametrize(
    "shape, indices, axis",
    [
        ((3, 3), [[1, 0, 2], [0, 2, 1]], 0),
        ((3, 4), [[1, 3], [0, -4], [3, 2]], 1),
        ((4, 2), [[1, 1], [1, 0], [3, 1]], 0),  # repeats: several updates at one place
        ((2, 3, 2), [[[0, 1], [2, 2]], [[2, 0], [2, 1]]], -2),
    ],
)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_elements_gradient(shape, indices, axis, reduction):
    idx = ints(indices)
    data, updates = distinct(*shape, seed=1), distinct(*idx.shape, seed=2, offset=0.05)
    check_gradient(
        "ScatterElements", [data, idx, updates], axis=axis, reduction=reduction, wrt=[0, 2]
    )


@pytest.mark.parametrize(
    "shape, indices, updates_shape",
    [
        ((3, 2), [[0, 1], [2, 0], [1, 1]], (3,)),  # elements
        ((4, 3), [[2], [0]], (2, 3)),  # rows
        ((3, 2, 2), [[1, 0], [2, 1], [1, 0]], (3, 2)),  # repeats a slice
        ((2, 3), [[[1, 2], [0, 0]], [[-1, 0], [0, -3]]], (2, 2)),  # more index dims, repeats
        ((4,), [[1], [3], [1], [1]], (4,)),  # one place three times
    ],
)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_nd_gradient(shape, indices, updates_shape, reduction):
    data, updates = distinct(*shape, seed=3), distinct(*updates_shape, seed=4, offset=0.05)
    check_gradient("ScatterND", [data, ints(indices), updates], reduction=reduction, wrt=[0, 2])


@pytest.mark.parametrize("op_type", ["ScatterElements", "ScatterND"])
def test_scatter_mul_gradient_with_zero_updates(op_type):
    # Updates 0 at a place alone, twice at one place, and beside non-zero ones: the product
    # rule must not divide by them. The output is multilinear, so differences are exact.
    data = rand(5, seed=5, low=0.5, high=1.5)
    updates = np.array([0.0, 0.7, 0.0, 0.0, -1.3, 0.9], np.float32)
    places = [0, 1, 1, 2, 2, 3]
    idx = ints(places) if op_type == "ScatterElements" else ints(places).reshape(-1, 1)
    check_gradient(op_type, [data, idx, updates], reduction="mul", wrt=[0, 2])


@pytest.mark.parametrize(
    "reduction, expected",
    # [ddata[0], ddata[1], dupdates[0], dupdates[1], dupdates[2]]
    [("max", [0.5, 0, 0.5, 0.5, 0.5]), ("min", [0.5, 1, 0.5, 0, 0])],
)
def test_scatter_max_min_ties_split_equally(reduction, expected):
    # Place 0: data 2.0 ties update 2.0. Place 1: data 1.0, and updates 3.0 and 3.0 tie.
    data = np.array([2.0, 1.0], np.float32)
    updates = np.array([2.0, 3.0, 3.0], np.float32)
    dy = np.array([1.0, 1.0], np.float32)
    inputs = [dy, data, ints([0, 1, 1]), updates]
    ddata, dupdates = run_op("ScatterElementsGradient", inputs, outputs=2, reduction=reduction)
    np.testing.assert_array_equal(np.concatenate([ddata, dupdates]), expected)


def test_scatter_gradient_kernels_check_shapes_and_reduction():
    data, idx = rand(3), ints([0, 2])
    with pytest.raises(OperatorError, match=r"ScatterElementsGradient.*expected \[3\]"):
        run_op("ScatterElementsGradient", [rand(4), data, idx, rand(2)], outputs=2)
    with pytest.raises(OperatorError, match=r"ScatterNDGradient: input updates.*expected \[2\]"):
        run_op("ScatterNDGradient", [rand(3), data, idx.reshape(2, 1), rand(3)], outputs=2)
    with pytest.raises(OperatorError, match="reduction='sum'"):
        run_op("ScatterElementsGradient", [rand(3), data, idx, rand(2)], reduction="sum")
    # Only dupdates wanted: ddata's slot is left empty.
    (dupdates,) = run_op(
        "ScatterElementsGradient", [rand(3), data, idx, rand(2)], outputs=["", "du"]
    )
    assert dupdates.shape == (2,)


@pytest.mark.parametrize(
    "past_shape, seq, axis, mode, starts",
    [
        ((2, 5, 3), 2, -2, "linear", [0, 3]),
        ((2, 4, 3), 3, 1, "circular", [2, 3]),  # wraps around the end
        ((3, 2, 6, 2), 4, 2, "circular", [5, 0, 3]),
        ((2, 3, 4), 2, -1, "linear", None),  # write_indices omitted: from 0
        ((1, 4, 2), 4, 1, "linear", [0]),  # the whole cache
    ],
)
def test_tensor_scatter_gradient(past_shape, seq, axis, mode, starts):
    update_shape = list(past_shape)
    update_shape[axis] = seq
    inputs = [rand(*past_shape, seed=6), rand(*update_shape, seed=7)]
    inputs.append(None if starts is None else ints(starts))
    check_gradient("TensorScatter", inputs, axis=axis, mode=mode)


def test_scatter_makers():
    op = op_def("ScatterND", ["d", "i", "u"], ["y"], reduction="mul")
    (grad,) = GRADIENTS["ScatterND"](op, ["dy"], [None, None, "du"])
    assert grad.type == "ScatterNDGradient" and list(grad.output) == ["", "du"]
    assert list(grad.input) == ["dy", "d", "i", "u"]
    assert GRADIENTS["ScatterElements"](op, ["dy"], [None, "di", None]) == []
    op = op_def("TensorScatter", ["past", "upd", "w"], ["present"], axis=1)
    (grad,) = GRADIENTS["TensorScatter"](op, ["dp"], ["dpast", "dupd", None])
    assert grad.type == "TensorScatterGradient" and list(grad.input) == ["dp", "upd", "w"]
    (dpast, dupd) = run_op(
        "TensorScatterGradient",
        [np.arange(6, dtype=np.float32).reshape(1, 3, 2), np.zeros((1, 2, 2)), ints([2])],
        outputs=2,
        axis=1,
        mode="circular",
    )
    np.testing.assert_array_equal(dpast, [[[0, 0], [2, 3], [0, 0]]])
    np.testing.assert_array_equal(dupd, [[[4, 5], [0, 1]]])
