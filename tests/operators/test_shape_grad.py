"""Gradients of the shape, Concat/Split and indexing ops against central differences."""

import numpy as np
import pytest

from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS, NoGradient
from netbrew.testing import check_gradient, rand, run_op


def ints(*values):
    return np.array(values, np.int64)


@pytest.mark.parametrize(
    "shape, axis", [((2, 3, 4), 1), ((2, 3, 4), 0), ((2, 3, 4), -1), ((5,), 1)]
)
def test_flatten_gradient(shape, axis):
    check_gradient("Flatten", [rand(*shape)], axis=axis)


@pytest.mark.parametrize(
    "shape, new_shape",
    [((2, 3, 4), (6, 4)), ((2, 3, 4), (-1,)), ((2, 3), (0, 3, 1)), ((0, 3), (3, 0))],
)
def test_reshape_gradient(shape, new_shape):
    check_gradient("Reshape", [rand(*shape), ints(*new_shape)], allowzero=int(0 in shape))


@pytest.mark.parametrize(
    "shape, perm", [((2, 3), None), ((2, 3, 4), [1, 2, 0]), ((2, 3, 4, 5), [3, 0, 2, 1])]
)
def test_transpose_gradient(shape, perm):
    check_gradient("Transpose", [rand(*shape)], perm=perm)


@pytest.mark.parametrize("shape, axes", [((1, 3, 1, 2), None), ((1, 3, 1, 2), [2]), ((2, 1), [-1])])
def test_squeeze_gradient(shape, axes):
    check_gradient("Squeeze", [rand(*shape)] + ([] if axes is None else [ints(*axes)]))


@pytest.mark.parametrize("shape, axes", [((3, 2), [0]), ((3, 2), [1, -1]), ((4,), [0, 2])])
def test_unsqueeze_gradient(shape, axes):
    check_gradient("Unsqueeze", [rand(*shape), ints(*axes)])


def test_reshape_back_gradient_ops():
    op = op_def("Flatten", ["x"], ["y"])
    ops = GRADIENTS["Flatten"](op, ["dy"], ["dx"])
    assert [o.type for o in ops] == ["Shape", "Reshape"]
    assert isinstance(GRADIENTS["Shape"], NoGradient)


@pytest.mark.parametrize(
    "shapes, axis",
    [
        ([(2, 3), (2, 1), (2, 4)], 1),
        ([(2, 3), (1, 3)], 0),
        ([(2, 3, 2), (2, 3, 1)], -1),
        ([(2, 1, 2), (2, 3, 2)], -2),
        ([(4,)], 0),
    ],
)
def test_concat_gradient(shapes, axis):
    check_gradient("Concat", [rand(*s, seed=i) for i, s in enumerate(shapes)], axis=axis)


def test_concat_gradient_some_inputs():
    check_gradient(
        "Concat", [rand(2, 3), rand(2, 2, seed=1), rand(2, 1, seed=2)], wrt=[0, 2], axis=1
    )


@pytest.mark.parametrize(
    "shape, split, axis, outputs",
    [
        ((6, 2), None, 0, 3),
        ((2, 7), [3, 4], 1, 2),
        ((2, 5, 3), [1, 0, 4], -2, 3),
        ((7,), None, 0, 3),
    ],
)
def test_split_gradient(shape, split, axis, outputs):
    inputs = [rand(*shape)] + ([] if split is None else [ints(*split)])
    check_gradient("Split", inputs, wrt=0, outputs=outputs, axis=axis)


@pytest.mark.parametrize("grad_outputs", [[0], [1, 2], [2]])
def test_split_gradient_missing_pieces(grad_outputs):
    check_gradient(
        "Split", [rand(2, 7), ints(2, 1, 4)], wrt=0, outputs=3, grad_outputs=grad_outputs, axis=1
    )


def test_split_gradient_ops():
    op = op_def("Split", ["x"], ["a", "b"], axis=1)
    assert [o.type for o in GRADIENTS["Split"](op, ["da", "db"], ["dx"])] == ["Concat"]
    (grad_op,) = GRADIENTS["Split"](op, [None, "db"], ["dx"])
    assert grad_op.type == "SplitGradient" and list(grad_op.input) == ["x", "", "", "db"]
    (dx,) = run_op("SplitGradient", [rand(2, 4), None, None, np.ones((2, 2), np.float32)], axis=1)
    np.testing.assert_array_equal(dx, [[0, 0, 1, 1], [0, 0, 1, 1]])


@pytest.mark.parametrize(
    "shape, starts, ends, axes, steps",
    [
        ((5, 4), [1, 0], [4, 3], None, None),
        ((5, 4), [-1], [-6], [0], [-2]),
        ((2, 6, 3), [0, 5], [10, 0], [2, 1], [1, -2]),
        ((6,), [1], [100], None, [2]),
    ],
)
def test_slice_gradient(shape, starts, ends, axes, steps):
    inputs = [rand(*shape), ints(*starts), ints(*ends)]
    inputs += [None if axes is None else ints(*axes)] if axes or steps else []
    inputs += [ints(*steps)] if steps else []
    check_gradient("Slice", inputs, wrt=0)


def test_slice_gradient_op():
    op = op_def("Slice", ["x", "starts", "ends"], ["y"])
    (grad_op,) = GRADIENTS["Slice"](op, ["dy"], ["dx", None, None])
    assert grad_op.type == "SliceGradient" and list(grad_op.input) == ["dy", "x", "starts", "ends"]
    (dx,) = run_op(
        "SliceGradient", [np.ones((1, 2), np.float32), rand(3, 3), ints(1, 1), ints(2, 3)]
    )
    np.testing.assert_array_equal(dx, [[0, 0, 0], [0, 1, 1], [0, 0, 0]])


@pytest.mark.parametrize(
    "shape, indices, axis",
    [
        ((5, 3), [0, 2, 2, -1], 0),
        ((2, 4, 3), [[1, 1], [3, -4]], 1),
        ((3, 4), 2, -1),
        ((4,), [3, 3, 3], 0),
    ],
)
def test_gather_gradient(shape, indices, axis):
    check_gradient("Gather", [rand(*shape), np.array(indices, np.int64)], axis=axis)


def test_gather_gradient_accumulates_repeats():
    dy = np.ones((3, 2), np.float32)
    (dx,) = run_op("GatherGradient", [dy, rand(4, 2), ints(1, 1, -1)], axis=0)
    np.testing.assert_array_equal(dx, [[0, 0], [2, 2], [0, 0], [1, 1]])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize(
    "shape, pads, axes",
    [((3, 4), [1, 2, 0, 3], None), ((2, 3, 4), [2, 1], [-1]), ((4, 5), [-1, 2, 1, -2], None)],
)
def test_pad_gradient(mode, shape, pads, axes):
    inputs = [rand(*shape), ints(*pads)]
    inputs += [None, ints(*axes)] if axes else []
    check_gradient("Pad", inputs, wrt=0, mode=mode)


@pytest.mark.parametrize("mode", ["reflect", "wrap", "edge"])
def test_pad_gradient_wider_than_data(mode):
    # Padding wider than the data copies elements several times; np.pad's repeated reflection.
    check_gradient("Pad", [rand(2, 3), ints(0, 5, 1, 7)], wrt=0, mode=mode)


def test_pad_gradient_constant_value():
    check_gradient("Pad", [rand(3, 4), ints(1, 0, 2, 1), np.array(0.5)], mode="constant")
    check_gradient("Pad", [rand(3, 4), ints(1, 0, 2, 1), np.array(0.5)], wrt=2, mode="edge")


def test_pad_gradient_op():
    op = op_def("Pad", ["x", "pads", "value"], ["y"], mode="constant")
    (grad_op,) = GRADIENTS["Pad"](op, ["dy"], [None, None, "dvalue"])
    assert grad_op.type == "PadGradient" and list(grad_op.output) == ["", "dvalue"]
