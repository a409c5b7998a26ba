"""Gradient of Resize (to X, and to roi with tf_crop_and_resize) against central
differences, and against PyTorch's F.interpolate autograd."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.operators.resize_grad import take_adjoint
from netbrew.testing import check_gradient, rand, run_op

X = rand(2, 3, 5, 4, seed=1)
COORDS = [
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
UP_DOWN = np.array([1, 1, 1.7, 0.6], np.float32)
# Away from the kinks of the linear weights: no source coordinate lands on a whole pixel.
ROI = np.array([0.13, 0.21, 0.81, 0.74], np.float32)
SIZES = np.array([7, 3], np.int64)


@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("nearest_mode", NEAREST)
def test_nearest_gradient(coord, nearest_mode):
    check_gradient(
        "Resize", [X, None, UP_DOWN], wrt=0, mode="nearest",
        coordinate_transformation_mode=coord, nearest_mode=nearest_mode,
    )  # fmt: skip


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("coord", COORDS)
def test_interpolating_gradient(mode, coord):
    check_gradient(
        "Resize", [X, None, UP_DOWN], wrt=0, mode=mode, coordinate_transformation_mode=coord
    )


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("antialias", [0, 1])
@pytest.mark.parametrize("exclude_outside", [0, 1])
@pytest.mark.parametrize("sizes", [[3, 2], [8, 7]], ids=["down", "up"])
def test_antialias_and_exclude_outside_gradient(mode, antialias, exclude_outside, sizes):
    check_gradient(
        "Resize", [X, None, None, np.array(sizes, np.int64)], wrt=0, mode=mode,
        antialias=antialias, exclude_outside=exclude_outside, axes=[2, 3],
    )  # fmt: skip


@pytest.mark.parametrize("a", [-0.5, -0.75])
def test_cubic_coeff_gradient(a):
    check_gradient(
        "Resize", [X, None, UP_DOWN], wrt=0, mode="cubic", cubic_coeff_a=a, exclude_outside=1
    )


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize("axes", [[3, 1], [-1], None], ids=["two", "last", "all"])
def test_axes_and_aspect_policy_gradient(policy, axes):
    sizes = {None: [3, 4, 7, 3], "two": [3, 2], "last": [6]}
    key = None if axes is None else ("last" if len(axes) == 1 else "two")
    check_gradient(
        "Resize", [X, None, None, np.array(sizes[key], np.int64)], wrt=0, mode="linear",
        axes=axes, keep_aspect_ratio_policy=policy,
    )  # fmt: skip


@pytest.mark.parametrize("shape", [(7,), (2, 3, 4, 3, 2)])
def test_other_ranks_gradient(shape):
    x = rand(*shape, seed=2)
    scales = np.full(len(shape), 1.6, np.float32)
    check_gradient("Resize", [x, None, scales], wrt=0, mode="cubic")


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("antialias", [0, 1])
@pytest.mark.parametrize("exclude_outside", [0, 1])
@pytest.mark.parametrize("sizes", [[7, 3], [3, 2]], ids=["up", "down"])
def test_crop_and_resize_roi_gradient(mode, antialias, exclude_outside, sizes):
    check_gradient(
        "Resize", [X, ROI, None, np.array(sizes, np.int64)], wrt=[0, 1], mode=mode,
        coordinate_transformation_mode="tf_crop_and_resize", axes=[2, 3],
        antialias=antialias, exclude_outside=exclude_outside,
    )  # fmt: skip


@pytest.mark.parametrize(
    "roi", [[-0.2, 0.21, 0.87, 1.3], [0.81, 0.74, 0.13, 0.21]], ids=["extrapolated", "flipped"]
)
def test_crop_and_resize_extrapolated_and_flipped_roi_gradient(roi):
    # Extrapolated outputs are a constant: neither X nor roi gets anything through them.
    # A flipped box (start > end) reads X backwards: take_adjoint sorts the indices.
    check_gradient(
        "Resize", [X, np.array(roi, np.float32), None, SIZES], wrt=[0, 1], mode="linear",
        coordinate_transformation_mode="tf_crop_and_resize", axes=[2, 3],
        extrapolation_value=2.0,
    )  # fmt: skip


def test_crop_and_resize_single_output_roi_gradient():
    # One output per axis samples the box's center: both ends move it by half as much.
    check_gradient(
        "Resize", [X, ROI, None, np.array([1, 1], np.int64)], wrt=[0, 1], mode="cubic",
        coordinate_transformation_mode="tf_crop_and_resize", axes=[2, 3],
    )  # fmt: skip


@pytest.mark.parametrize(
    "mode, coord", [("nearest", "tf_crop_and_resize"), ("linear", "half_pixel")]
)
def test_roi_gradient_is_zero_where_roi_does_not_move_the_samples(mode, coord):
    roi = ROI if coord == "tf_crop_and_resize" else np.zeros(4, np.float32)
    dx, droi = run_op(
        "ResizeGradient", [X, rand(2, 3, 7, 3, seed=5), roi, None, SIZES], outputs=2,
        mode=mode, coordinate_transformation_mode=coord, axes=[2, 3],
    )  # fmt: skip
    assert dx.shape == X.shape and droi.dtype == roi.dtype
    np.testing.assert_array_equal(droi, np.zeros_like(roi))
    check_gradient(
        "Resize", [X, roi, None, SIZES], wrt=1, mode=mode, coordinate_transformation_mode=coord,
        axes=[2, 3],
    )  # fmt: skip


def test_gradient_keeps_float32():
    (dx,) = run_op("ResizeGradient", [X, rand(2, 3, 8, 2), None, UP_DOWN], mode="linear")
    assert dx.dtype == np.float32 and dx.shape == X.shape


def test_gradient_op_wiring():
    op = op_def("Resize", ["x", "", "s"], ["y"], mode="cubic")
    (grad,) = GRADIENTS["Resize"](op, ["dy"], ["dx", None, None])
    assert grad.type == "ResizeGradient"
    assert list(grad.input) == ["x", "dy", "", "s"] and list(grad.output) == ["dx"]
    op = op_def("Resize", ["x", "r", "", "n"], ["y"], coordinate_transformation_mode="x")
    (grad,) = GRADIENTS["Resize"](op, ["dy"], [None, "dr", None, None])
    assert list(grad.output) == ["", "dr"]
    assert GRADIENTS["Resize"](op, ["dy"], [None, None, "ds", None]) == []


def test_gradient_errors():
    with pytest.raises(OperatorError, match="expected \\[2, 3, 8, 2\\]"):
        run_op("ResizeGradient", [X, rand(2, 3, 8, 3), None, UP_DOWN], mode="linear")
    with pytest.raises(OperatorError, match="'roi' is absent"):
        run_op("ResizeGradient", [X, rand(2, 3, 8, 2), None, UP_DOWN], outputs=["dx", "dr"])


@pytest.mark.parametrize("seed", [0, 1])
def test_take_adjoint_matches_add_at(seed):
    rng = np.random.default_rng(seed)
    index = rng.integers(0, 5, size=9)
    g = rng.normal(size=(2, 9, 3))
    want = np.zeros((2, 5, 3))
    np.add.at(want, (slice(None), index), g)
    np.testing.assert_allclose(take_adjoint(g, index, 5, 1), want, rtol=1e-12)


@pytest.mark.parametrize(
    "mode, torch_mode, coord, align",
    [
        ("nearest", "nearest", "asymmetric", None),
        ("linear", "bilinear", "pytorch_half_pixel", False),
        ("linear", "bilinear", "align_corners", True),
        ("cubic", "bicubic", "pytorch_half_pixel", False),
        ("cubic", "bicubic", "align_corners", True),
    ],
)
def test_matches_torch_interpolate(mode, torch_mode, coord, align):
    torch = pytest.importorskip("torch")
    x, dy = rand(2, 3, 5, 4, seed=3, dtype=np.float64), rand(2, 3, 9, 3, seed=4, dtype=np.float64)
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.nn.functional.interpolate(xt, size=(9, 3), mode=torch_mode, align_corners=align)
    yt.backward(torch.tensor(dy))
    (dx,) = run_op(
        "ResizeGradient", [x, dy, None, None, np.array([9, 3], np.int64)], mode=mode, axes=[2, 3],
        coordinate_transformation_mode=coord, nearest_mode="floor",
    )  # fmt: skip
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-10, atol=1e-12)
