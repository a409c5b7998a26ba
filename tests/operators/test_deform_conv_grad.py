"""Gradient of DeformConv (to X, W, offset, B and mask) against central differences, and
against ConvGradient where zero offsets and a unit mask make DeformConv a plain Conv.
torchvision (deform_conv2d) is not installed, so there is no torch comparison."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand, run_op


def offsets(shape, seed):
    """Whole pixels plus a fraction in [0.2, 0.4]: every sample lies off the pixel grid,
    where the bilinear weights have kinks."""
    rng = np.random.default_rng(seed)
    return (rng.integers(-2, 2, shape) + rng.uniform(0.2, 0.4, shape)).astype(np.float32)


X = rand(2, 4, 5, 6, seed=1)
W = rand(6, 2, 2, 3, seed=2)  # group 2: 4 input channels, 2 per group
OUT = (4, 4)


@pytest.mark.parametrize("offset_group", [1, 2])
@pytest.mark.parametrize("with_bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("with_mask", [False, True], ids=["v1", "v2_mask"])
def test_deform_conv_gradient(offset_group, with_bias, with_mask):
    k = 2 * 3
    off = offsets((2, offset_group * k * 2, *OUT), 4)
    b = rand(6, seed=3) if with_bias else None
    mask = rand(2, offset_group * k, *OUT, seed=5) if with_mask else None
    inputs = [X, W, off, b, mask] if with_mask else [X, W, off, b]
    check_gradient("DeformConv", inputs, group=2, offset_group=offset_group)


@pytest.mark.parametrize(
    "strides, pads, dilations",
    [([2, 2], [1, 0, 2, 1], [1, 2]), ([1, 2], [0, 1, 1, 0], [2, 1])],
)
def test_deform_conv_gradient_strides_pads_dilations(strides, pads, dilations):
    x, w = rand(2, 4, 7, 6, seed=1), rand(4, 4, 3, 2, seed=2)
    out = [
        (n + p0 + p1 - (k - 1) * d - 1) // s + 1
        for n, p0, p1, k, d, s in zip((7, 6), pads[:2], pads[2:], (3, 2), dilations, strides)
    ]
    off = offsets((2, 6 * 2, *out), 6)
    check_gradient(
        "DeformConv", [x, w, off, rand(4, seed=9), rand(2, 6, *out, seed=8)], strides=strides,
        pads=pads, dilations=dilations,
    )  # fmt: skip


@pytest.mark.parametrize(
    "x_shape, w_shape, out", [((1, 2, 4, 3, 5), (3, 2, 2, 1, 2), (3, 3, 4)),
                              ((2, 3, 6), (2, 3, 3), (4,))], ids=["3d", "1d"],
)  # fmt: skip
def test_deform_conv_gradient_other_ranks(x_shape, w_shape, out):
    k, r = int(np.prod(w_shape[2:])), len(out)
    off = offsets((x_shape[0], k * r, *out), 4)
    mask = rand(x_shape[0], k, *out, seed=7)
    check_gradient(
        "DeformConv", [rand(*x_shape, seed=1), rand(*w_shape, seed=2), off, rand(w_shape[0]), mask]
    )


@pytest.mark.parametrize("group", [1, 2])
def test_zero_offsets_match_conv_gradient(group):
    x, w = rand(2, 4, 5, 6, seed=1, dtype=np.float64), rand(6, 4 // group, 3, 2, seed=2)
    w = w.astype(np.float64)
    dy = rand(2, 6, 3, 5, seed=3, dtype=np.float64)
    off, mask = np.zeros((2, 6 * 2, 3, 5)), np.ones((2, 6, 3, 5))
    dx, dw, doff, db, dmask = run_op(
        "DeformConvGradient", [x, w, off, dy, mask], outputs=5, group=group
    )
    want = run_op("ConvGradient", [x, w, dy], outputs=3, group=group)
    for got, expected in zip((dx, dw, db), want):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    # With mask 1 and Y linear in mask, sum(dmask * mask) = sum((Y - B) * dY).
    (y,) = run_op("DeformConv", [x, w, off, None, mask], group=group)
    np.testing.assert_allclose(np.sum(dmask), np.sum(y * dy), rtol=1e-12)
    assert doff.shape == off.shape and dmask.shape == mask.shape


def test_deform_conv_gradient_of_some_inputs():
    off, mask, dy = offsets((2, 12, *OUT), 4), rand(2, 6, *OUT, seed=5), rand(2, 6, *OUT)
    full = run_op("DeformConvGradient", [X, W, off, dy, mask], outputs=5, group=2)
    for k in range(5):
        names = [f"d{i}" if i == k else "" for i in range(5)]
        (got,) = run_op("DeformConvGradient", [X, W, off, dy, mask], outputs=names, group=2)
        np.testing.assert_array_equal(got, full[k])
        assert got.dtype == np.float32


def test_deform_conv_gradient_errors():
    off, dy = offsets((2, 12, *OUT), 4), rand(2, 6, *OUT)
    with pytest.raises(OperatorError, match="'mask' is absent"):
        run_op("DeformConvGradient", [X, W, off, dy], outputs=["", "", "", "", "dm"], group=2)
    with pytest.raises(OperatorError, match="expected \\[2, 6, 4, 4\\]"):
        run_op("DeformConvGradient", [X, W, off, rand(2, 6, 4, 3)], outputs=4, group=2)


def test_gradient_op_wiring():
    op = op_def("DeformConv", ["x", "w", "o", "", "m"], ["y"], group=2, strides=[2, 2])
    (grad,) = GRADIENTS["DeformConv"](op, ["dy"], ["dx", None, "do", "", "dm"])
    assert grad.type == "DeformConvGradient"
    assert list(grad.input) == ["x", "w", "o", "dy", "m"]
    assert list(grad.output) == ["dx", "", "do", "", "dm"]
    op = op_def("DeformConv", ["x", "w", "o", "b"], ["y"])
    (grad,) = GRADIENTS["DeformConv"](op, ["dy"], [None, "dw", None, "db"])
    assert list(grad.input) == ["x", "w", "o", "dy"]
    assert list(grad.output) == ["", "dw", "", "db", ""]
    assert GRADIENTS["DeformConv"](op, ["dy"], [None, None, None, None]) == []
