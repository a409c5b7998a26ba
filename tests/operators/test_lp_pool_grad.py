"""Gradients of LpPool and MaxUnpool against central differences and torch autograd."""

import math

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand, run_op

POINTS = 40


def away_from_zero(*shape, seed=0):
    """Values with 0.2 <= |x| < 1: |x| (p = 1) has a kink at 0."""
    rng = np.random.default_rng(seed)
    return rng.uniform(0.2, 1.0, shape) * rng.choice([-1.0, 1.0], shape)


def distinct(*shape, seed=0):
    """Values spaced far more than the finite-difference step apart: no ties in a max."""
    return np.random.default_rng(seed).permutation(math.prod(shape)).reshape(shape) / 10.0 - 1


LP_CASES = {
    "1d": ((2, 2, 7), dict(kernel_shape=[3], strides=[2])),
    "1d_pads": ((1, 3, 6), dict(kernel_shape=[2], pads=[1, 2])),
    "2d_overlap": ((2, 2, 5, 5), dict(kernel_shape=[2, 2])),
    "2d_strides": ((1, 3, 6, 7), dict(kernel_shape=[3, 2], strides=[2, 3])),
    "2d_pads": ((1, 2, 5, 5), dict(kernel_shape=[3, 3], pads=[2, 1, 0, 2])),
    "2d_dilation": ((1, 1, 7, 6), dict(kernel_shape=[2, 2], dilations=[2, 2], pads=[1] * 4)),
    "2d_ceil": ((1, 2, 7, 8), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    "2d_same_upper": (
        (1, 2, 5, 6),
        dict(kernel_shape=[2, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
    ),
    "2d_same_lower": ((1, 2, 5, 5), dict(kernel_shape=[2, 2], auto_pad="SAME_LOWER")),
    "2d_valid": ((1, 2, 6, 5), dict(kernel_shape=[3, 2], strides=[2, 1], auto_pad="VALID")),
    "3d": ((1, 1, 3, 4, 4), dict(kernel_shape=[2, 2, 2], strides=[1, 2, 1])),
}


@pytest.mark.parametrize("case", list(LP_CASES))
@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pool_gradient(case, p, path):
    shape, attrs = LP_CASES[case]
    check_gradient("LpPool", [away_from_zero(*shape)], max_points=POINTS, p=p, **attrs)


def test_lp_pool_gradient_zero_window_passes_nothing():
    x = np.zeros((1, 1, 4), np.float32)
    x[0, 0, 3] = 2.0
    dy = np.ones((1, 1, 2), np.float32)
    (dx,) = run_op("LpPoolGradient", [x, dy], kernel_shape=[2], strides=[2])
    np.testing.assert_array_equal(dx, [[[0, 0, 0, 1]]])  # d|x|/dx at 2 is 1; the zero window 0
    assert dx.dtype == np.float32
    with pytest.raises(OperatorError, match=r"expected \[1, 1, 2\]"):
        run_op("LpPoolGradient", [x, np.ones((1, 1, 3), np.float32)], kernel_shape=[2], strides=[2])


@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("kernel, stride", [((2, 2), (2, 2)), ((3, 2), (1, 2))])
def test_lp_pool_gradient_matches_torch(p, kernel, stride):
    torch = pytest.importorskip("torch")
    # torch pools x^p, not |x|^p: positive inputs make the two the same op.
    x = np.abs(away_from_zero(2, 3, 6, 6, seed=4))
    y = run_op("LpPool", [x], kernel_shape=list(kernel), strides=list(stride), p=p)[0]
    dy = rand(*y.shape, seed=5, dtype=np.float64)
    (dx,) = run_op("LpPoolGradient", [x, dy], kernel_shape=list(kernel), strides=list(stride), p=p)
    t = torch.tensor(x, requires_grad=True)
    out = torch.nn.functional.lp_pool2d(t, p, kernel, stride=stride)
    np.testing.assert_allclose(out.detach().numpy(), y, rtol=1e-10)
    out.backward(torch.tensor(dy))
    np.testing.assert_allclose(dx, t.grad.numpy(), rtol=1e-10, atol=1e-12)


UNPOOL_CASES = {
    "2d_disjoint": ((2, 2, 4, 4), dict(kernel_shape=[2, 2], strides=[2, 2]), None),
    "1d": ((1, 2, 6), dict(kernel_shape=[3], strides=[3]), None),
    "2d_pads": ((1, 1, 5, 5), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), None),
    # overlapping windows: one max picked by two windows, so I repeats a position
    "2d_repeats": ((1, 2, 4, 4), dict(kernel_shape=[2, 2], strides=[1, 1]), None),
    "2d_output_shape": ((1, 1, 4, 4), dict(kernel_shape=[2, 2], strides=[2, 2]), [1, 1, 5, 6]),
}


@pytest.mark.parametrize("case", list(UNPOOL_CASES))
def test_max_unpool_gradient(case):
    shape, attrs, output_shape = UNPOOL_CASES[case]
    y, indices = run_op("MaxPool", [distinct(*shape, seed=2)], outputs=2, **attrs)
    inputs = [rand(*y.shape, seed=3), indices]
    if output_shape is not None:
        inputs.append(np.array(output_shape, np.int64))
    check_gradient("MaxUnpool", inputs, wrt=0, **attrs)


def test_max_unpool_gradient_of_a_repeated_index_goes_to_the_kept_write():
    x = np.array([[[1.0, 2.0, 3.0]]], np.float32)
    indices = np.array([[[1, 1, 0]]], np.int64)
    (out,) = run_op("MaxUnpool", [x, indices], kernel_shape=[1])
    np.testing.assert_array_equal(out, [[[3, 2, 0]]])
    dout = np.array([[[10.0, 20.0, 30.0]]], np.float32)
    (dx,) = run_op("MaxUnpoolGradient", [dout, x, indices], kernel_shape=[1])
    np.testing.assert_array_equal(dx, [[[0, 20, 10]]])
    with pytest.raises(OperatorError, match=r"MaxUnpoolGradient.*expected \[1, 1, 3\]"):
        run_op("MaxUnpoolGradient", [dout[..., :2], x, indices], kernel_shape=[1])


def test_max_unpool_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    source = torch.tensor(distinct(2, 3, 6, 6, seed=6))
    pooled, plane_idx = torch.nn.functional.max_pool2d(source, 2, 2, padding=1, return_indices=True)
    # torch indexes each (n, c) plane; ONNX the whole tensor (of the default shape, which
    # 6 x 6 is here)
    plane = 6 * 6
    offsets = (np.arange(2 * 3) * plane).reshape(2, 3, 1, 1)
    indices = plane_idx.numpy() + offsets
    dout = rand(2, 3, 6, 6, seed=7, dtype=np.float64)
    attrs = dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1])
    x = pooled.numpy()
    (dx,) = run_op("MaxUnpoolGradient", [dout, x, indices, np.array([2, 3, 6, 6])], **attrs)
    t = pooled.clone().requires_grad_(True)
    out = torch.nn.functional.max_unpool2d(t, plane_idx, 2, 2, padding=1, output_size=(6, 6))
    out.backward(torch.tensor(dout))
    np.testing.assert_array_equal(dx, t.grad.numpy())


def test_lp_pool_and_max_unpool_makers():
    op = op_def("MaxUnpool", ["x", "i", "s"], ["y"], kernel_shape=[2])
    (grad,) = GRADIENTS["MaxUnpool"](op, ["dy"], ["dx", None, None])
    assert grad.type == "MaxUnpoolGradient" and list(grad.input) == ["dy", "x", "i", "s"]
    assert GRADIENTS["MaxUnpool"](op, ["dy"], [None, "di", None]) == []
    op = op_def("LpPool", ["x"], ["y"], kernel_shape=[2], p=3)
    (grad,) = GRADIENTS["LpPool"](op, ["dy"], ["dx"])
    assert grad.type == "LpPoolGradient" and list(grad.input) == ["x", "dy"]
