"""Gradient of RoiAlign to X against central differences. torchvision is not installed,
so there is no torch comparison; RoiAlign is linear in X (avg) or positively homogeneous
(max), so sum(Y * dY) == sum(X * dX) checks every element of dX at once as well."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand, run_op

X = rand(2, 3, 9, 8, seed=1)
# Boxes in general position: inside, across the top-left edge, past the bottom-right edge,
# and a degenerate one (no samples with sampling_ratio=0 and half_pixel).
ROIS = np.array(
    [
        [0.3, 0.7, 5.2, 6.9],
        [1.1, 2.3, 7.4, 4.6],
        [-1.3, -0.6, 3.2, 2.1],
        [2.2, 0.4, 9.7, 10.6],
        [3.0, 3.0, 3.0, 3.0],
    ],
    np.float32,
)
BATCH = np.array([0, 1, 1, 0, 1], np.int64)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("coord", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("sampling_ratio", [0, 1, 2])
@pytest.mark.parametrize("spatial_scale", [1.0, 0.625])
def test_roi_align_gradient(mode, coord, sampling_ratio, spatial_scale):
    # Max switches taps where two weighted values tie: a small step stays off those kinks.
    check_gradient(
        "RoiAlign", [X, ROIS, BATCH], wrt=0, mode=mode, coordinate_transformation_mode=coord,
        sampling_ratio=sampling_ratio, spatial_scale=spatial_scale, output_height=3,
        output_width=2, max_points=120, eps=1e-6,
    )  # fmt: skip


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("out_hw", [(1, 1), (4, 3)])
def test_roi_align_gradient_is_the_adjoint(mode, out_hw):
    x = rand(2, 3, 9, 8, seed=2, dtype=np.float64)
    attrs = dict(mode=mode, output_height=out_hw[0], output_width=out_hw[1])
    (y,) = run_op("RoiAlign", [x, ROIS, BATCH], **attrs)
    dy = rand(*y.shape, seed=3, dtype=np.float64)
    (dx,) = run_op("RoiAlignGradient", [x, ROIS, BATCH, dy], **attrs)
    assert dx.shape == x.shape and dx.dtype == x.dtype
    np.testing.assert_allclose(np.sum(y * dy), np.sum(x * dx), rtol=1e-12)


def test_roi_align_gradient_keeps_dtype_and_skips_empty_rois():
    dy = rand(1, 3, 2, 2, seed=4)
    (dx,) = run_op("RoiAlignGradient", [X, ROIS[4:], BATCH[4:], dy], output_height=2,
                   output_width=2)  # fmt: skip
    assert dx.dtype == np.float32 and not dx.any()


def test_roi_align_gradient_errors():
    with pytest.raises(OperatorError, match="expected \\[5, 3, 2, 2\\]"):
        run_op("RoiAlignGradient", [X, ROIS, BATCH, rand(5, 3, 2, 3)], output_height=2,
               output_width=2)  # fmt: skip
    with pytest.raises(OperatorError, match="mode='min'"):
        run_op("RoiAlignGradient", [X, ROIS, BATCH, rand(5, 3, 1, 1)], mode="min")


def test_gradient_op_wiring():
    op = op_def("RoiAlign", ["x", "r", "b"], ["y"], mode="max", output_height=7)
    (grad,) = GRADIENTS["RoiAlign"](op, ["dy"], ["dx", "dr", None])
    assert grad.type == "RoiAlignGradient" and list(grad.input) == ["x", "r", "b", "dy"]
    assert list(grad.output) == ["dx"]
    assert GRADIENTS["RoiAlign"](op, ["dy"], [None, "dr", None]) == []
