"""Pooling gradients against central differences, and MaxPool's tie rule against Indices."""

import math

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand, run_op

POINTS = 30


def distinct(*shape, seed=0):
    """Values spaced far more than the finite-difference step apart: no ties in a max."""
    return np.random.default_rng(seed).permutation(math.prod(shape)).reshape(shape) / 10.0


# (X shape, attrs): overlapping and disjoint windows, padding, ceil_mode, auto_pad, every rank.
CASES = {
    "1d_overlap_pads": ((2, 3, 9), dict(kernel_shape=[3], strides=[2], pads=[1, 2])),
    "2d_overlap": ((2, 2, 5, 6), dict(kernel_shape=[3, 2])),
    "2d_disjoint": ((2, 3, 6, 4), dict(kernel_shape=[2, 2], strides=[2, 2])),
    "2d_disjoint_pads": ((1, 2, 5, 5), dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1] * 4)),
    "2d_stride_asymmetric_pads": (
        (2, 2, 7, 6),
        dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1]),
    ),
    "2d_dilation": ((1, 2, 8, 7), dict(kernel_shape=[2, 3], dilations=[2, 2], pads=[1] * 4)),
    "2d_ceil": ((1, 3, 7, 8), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    "2d_ceil_pads": (
        (1, 2, 6, 5),
        dict(kernel_shape=[2, 3], strides=[2, 3], pads=[1, 0, 1, 1], ceil_mode=1),
    ),
    "2d_same_upper": (
        (1, 2, 7, 8),
        dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
    ),
    "2d_same_lower": (
        (1, 2, 7, 8),
        dict(kernel_shape=[2, 2], strides=[2, 3], auto_pad="SAME_LOWER"),
    ),
    "2d_valid": ((2, 2, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 2], auto_pad="VALID")),
    "3d": (
        (1, 2, 4, 5, 4),
        dict(kernel_shape=[2, 3, 2], strides=[1, 2, 2], pads=[0, 1, 1, 1, 0, 0]),
    ),
    "3d_ceil_dilation": (
        (1, 1, 6, 5, 5),
        dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2], dilations=[1, 2, 1], ceil_mode=1),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_max_pool_gradient(case, path):
    shape, attrs = CASES[case]
    check_gradient("MaxPool", [distinct(*shape)], max_points=POINTS, **attrs)


@pytest.mark.parametrize("include_pad", [0, 1], ids=["exclude_pad", "include_pad"])
@pytest.mark.parametrize("case", list(CASES))
def test_average_pool_gradient(case, include_pad, path):
    shape, attrs = CASES[case]
    check_gradient(
        "AveragePool", [rand(*shape)], max_points=POINTS, count_include_pad=include_pad, **attrs
    )


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 2, 4, 3), (1, 2, 3, 2, 4)])
@pytest.mark.parametrize("op_type", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool_gradient(op_type, shape):
    check_gradient(op_type, [distinct(*shape)], max_points=POINTS)


@pytest.mark.parametrize(
    "case", ["1d_overlap_pads", "2d_overlap", "2d_disjoint", "2d_disjoint_pads", "2d_ceil", "3d"]
)
def test_max_pool_gradient_follows_indices_on_ties(case, path):
    """With many ties (ReLU zeros, small integers) dY goes to the pixel Indices names."""
    shape, attrs = CASES[case]
    x = np.maximum(np.random.default_rng(3).integers(-2, 3, size=shape), 0).astype(np.float32)
    y, indices = run_op("MaxPool", [x], outputs=2, **attrs)
    dy = rand(*y.shape, seed=4)
    (dx,) = run_op("MaxPoolGradient", [x, y, dy], **attrs)
    want = np.zeros(x.size, np.float64)
    np.add.at(want, indices.ravel(), dy.ravel())
    np.testing.assert_allclose(dx.ravel(), want, rtol=1e-6, atol=1e-6)
    assert dx.dtype == np.float32


def test_max_pool_gradient_ignores_indices_output():
    """Only Y carries a gradient; with none for Y the maker emits nothing."""
    maker = GRADIENTS["MaxPool"]
    op = op_def("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2], storage_order=1)
    (grad,) = maker(op, ["y_grad", None], ["x_grad"])
    assert grad.type == "MaxPoolGradient"
    assert list(grad.input) == ["x", "y", "y_grad"]
    assert all(arg.name != "storage_order" for arg in grad.arg)
    assert maker(op, [None, None], ["x_grad"]) == []
    check_gradient("MaxPool", [distinct(1, 2, 4, 4)], outputs=2, kernel_shape=[2, 2])


@pytest.mark.parametrize(
    "op_type, makes",
    [
        ("AveragePool", "AveragePoolGradient"),
        ("GlobalAveragePool", "GlobalAveragePoolGradient"),
        ("GlobalMaxPool", "GlobalMaxPoolGradient"),
    ],
)
def test_makers_read_x_and_dy(op_type, makes):
    op = op_def(
        op_type, ["x"], ["y"], **({"kernel_shape": [2]} if op_type == "AveragePool" else {})
    )
    (grad,) = GRADIENTS[op_type](op, ["y_grad"], ["x_grad"])
    assert grad.type == makes
    assert list(grad.input) == ["x", "y_grad"] and list(grad.output) == ["x_grad"]


@pytest.mark.parametrize(
    "op_type, inputs, attrs",
    [
        ("MaxPoolGradient", [(1, 2, 4, 4), (1, 2, 2, 2), (1, 2, 3, 2)], dict(kernel_shape=[2, 2])),
        ("AveragePoolGradient", [(1, 2, 4, 4), (1, 2, 3, 2)], dict(kernel_shape=[2, 2])),
        ("GlobalAveragePoolGradient", [(1, 2, 4, 4), (1, 2, 3, 2)], {}),
        ("GlobalMaxPoolGradient", [(1, 2, 4, 4), (1, 2, 3, 2)], {}),
    ],
)
def test_gradient_rejects_wrong_dy_shape(op_type, inputs, attrs):
    with pytest.raises(OperatorError, match=r"input dY has shape \[1, 2, 3, 2\], expected"):
        run_op(op_type, [rand(*s) for s in inputs], **attrs)
