"""Gradients of SpaceToDepth, DepthToSpace, CenterCropPad and Col2Im against central
differences."""

import math

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand, run_op


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("shape, bs", [((1, 2, 4, 6), 2), ((2, 1, 3, 3), 3)])
def test_space_to_depth_gradient(shape, bs, mode):
    check_gradient("SpaceToDepth", [rand(*shape)], blocksize=bs, mode=mode)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("shape, bs", [((1, 8, 2, 3), 2), ((2, 9, 1, 2), 3)])
def test_depth_to_space_gradient(shape, bs, mode):
    check_gradient("DepthToSpace", [rand(*shape)], blocksize=bs, mode=mode)


@pytest.mark.parametrize(
    "shape, target, axes",
    [
        ((6, 5, 3), (3, 4, 3), None),  # crop, odd difference on axis 1
        ((3, 4, 2), (6, 7, 2), None),  # pad
        ((6, 3, 3), (3, 6, 3), None),  # crop one axis, pad another
        ((3, 6, 5), (4, 2), [1, 2]),
        ((6, 5, 3), (3, 8), [-3, -2]),
        ((5, 4), (5,), [0]),  # same size: the identity
    ],
)
def test_center_crop_pad_gradient(shape, target, axes):
    attrs = {} if axes is None else {"axes": axes}
    check_gradient("CenterCropPad", [rand(*shape), np.array(target, np.int64)], **attrs)


def test_center_crop_pad_maker_reads_input_shape_only():
    op = op_def("CenterCropPad", ["x", "s"], ["y"], axes=[1])
    ops = GRADIENTS["CenterCropPad"](op, ["dy"], ["dx", None])
    assert [o.type for o in ops] == ["Shape", "CenterCropPad"]
    assert list(ops[0].input) == ["x"] and not ops[1].arg  # all axes: the others match already
    assert GRADIENTS["CenterCropPad"](op, ["dy"], [None, "ds"]) == []


COL2IM_CASES = [
    (1, 1, [5, 5], [1, 5], [1, 1], [0, 0, 0, 0], [1, 1]),
    (2, 3, [5, 5], [2, 2], [1, 1], [0, 0, 0, 0], [1, 1]),
    (1, 2, [5, 5], [2, 2], [1, 1], [0, 0, 0, 0], [2, 2]),
    (1, 1, [6, 6], [2, 2], [2, 2], [0, 0, 0, 0], [1, 1]),
    (1, 1, [5, 5], [2, 2], [1, 1], [1, 0, 1, 2], [2, 1]),
    (1, 2, [3, 4, 5], [1, 2, 2], [1, 1, 1], [0] * 6, [1, 1, 2]),
    (2, 1, [7], [3], [2], [2, 1], [2]),
]


def col2im_blocks(image, block, dilations, pads, strides):
    nd = len(image)
    return math.prod(
        (image[d] + pads[d] + pads[d + nd] - dilations[d] * (block[d] - 1) - 1) // strides[d] + 1
        for d in range(nd)
    )


@pytest.mark.parametrize("n, c, image, block, dilations, pads, strides", COL2IM_CASES)
def test_col2im_gradient(n, c, image, block, dilations, pads, strides, path):
    x = rand(n, c * math.prod(block), col2im_blocks(image, block, dilations, pads, strides))
    inputs = [x, np.array(image, np.int64), np.array(block, np.int64)]
    check_gradient("Col2Im", inputs, dilations=dilations, pads=pads, strides=strides)


def test_col2im_gradient_reads_blocks_back():
    # 1-D image [0, 1, 2, 3], blocks of 2 with stride 2 and one pad each side: 3 blocks,
    # (pad, 0), (1, 2), (3, pad).
    dy = np.arange(4, dtype=np.float32).reshape(1, 1, 4)
    inputs = [dy, np.array([4], np.int64), np.array([2], np.int64)]
    (dx,) = run_op("Col2ImGradient", inputs, pads=[1, 1], strides=[2])
    np.testing.assert_array_equal(dx, [[[0, 1, 3], [0, 2, 0]]])
    with pytest.raises(OperatorError, match=r"Col2ImGradient.*expected \[N, C, \*image_shape\]"):
        run_op("Col2ImGradient", [dy, np.array([5], np.int64), np.array([2], np.int64)])
