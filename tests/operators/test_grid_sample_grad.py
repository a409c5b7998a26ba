"""Gradients of GridSample (to X and grid) and AffineGrid (to theta) against central
differences, and against PyTorch's F.grid_sample and F.affine_grid autograd."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand, run_op

MODES = ["linear", "nearest", "cubic"]
PADDINGS = ["zeros", "border", "reflection"]


def kink_free_grid(spatial, out, n, align_corners, seed=0, reach=2):
    """A grid whose pixel coordinates have fractions in [0.2, 0.4]: away from the whole
    pixels where the linear and cubic taps switch, from nearest's rounding at .5, and from
    the padding's edges, and reaching `reach` pixels outside X to exercise the padding."""
    rng = np.random.default_rng(seed)
    r = len(spatial)
    cols = []
    for k in range(r):  # grid lists x, y, z: the last spatial dim first
        size = spatial[r - 1 - k]
        p = rng.integers(-reach, size + reach, (n, *out)) + rng.uniform(0.2, 0.4, (n, *out))
        cols.append(2 * p / (size - 1) - 1 if align_corners else (2 * p + 1) / size - 1)
    return np.stack(cols, -1).astype(np.float32)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("padding_mode", PADDINGS)
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_2d_gradient(mode, padding_mode, align_corners):
    x, grid = rand(2, 3, 5, 4, seed=1), kink_free_grid((5, 4), (3, 4), 2, align_corners)
    check_gradient(
        "GridSample", [x, grid], mode=mode, padding_mode=padding_mode, align_corners=align_corners
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("padding_mode", PADDINGS)
@pytest.mark.parametrize("spatial, out", [((4, 3, 5), (2, 3, 2)), ((6,), (7,))], ids=["3d", "1d"])
def test_grid_sample_nd_gradient(mode, padding_mode, spatial, out):
    x, grid = rand(1, 2, *spatial, seed=1), kink_free_grid(spatial, out, 1, 0, seed=3)
    check_gradient("GridSample", [x, grid], mode=mode, padding_mode=padding_mode)


def test_nearest_grid_gradient_is_zero():
    x, grid = rand(2, 3, 5, 4, seed=1), kink_free_grid((5, 4), (3, 4), 2, 0)
    dx, dgrid = run_op("GridSampleGradient", [x, grid, rand(2, 3, 3, 4)], outputs=2,
                       mode="nearest")  # fmt: skip
    assert dgrid.dtype == np.float32 and not dgrid.any() and dx.any()


def test_grid_sample_gradient_of_one_input():
    x, grid, dy = rand(2, 3, 5, 4, seed=1), kink_free_grid((5, 4), (3, 4), 2, 0), rand(2, 3, 3, 4)
    both = run_op("GridSampleGradient", [x, grid, dy], outputs=2, mode="cubic")
    (dx,) = run_op("GridSampleGradient", [x, grid, dy], outputs=["dx", ""], mode="cubic")
    (dgrid,) = run_op("GridSampleGradient", [x, grid, dy], outputs=["", "dg"], mode="cubic")
    np.testing.assert_array_equal(dx, both[0])
    np.testing.assert_array_equal(dgrid, both[1])


def test_grid_sample_empty_output_gradient():
    x, grid = rand(1, 2, 3, 3), np.zeros((1, 0, 4, 2), np.float32)
    dx, dgrid = run_op("GridSampleGradient", [x, grid, np.zeros((1, 2, 0, 4))], outputs=2)
    assert not dx.any() and dx.shape == x.shape and dgrid.shape == grid.shape


def test_grid_sample_gradient_errors():
    x, grid = rand(1, 2, 3, 3), rand(1, 2, 2, 2)
    with pytest.raises(OperatorError, match="expected \\[1, 2, 2, 2\\]"):
        run_op("GridSampleGradient", [x, grid, rand(1, 2, 2, 3)], outputs=2)
    with pytest.raises(OperatorError, match="padding_mode='wrap'"):
        run_op("GridSampleGradient", [x, grid, rand(1, 2, 2, 2)], outputs=2, padding_mode="wrap")


@pytest.mark.parametrize(
    "size", [(2, 3, 4, 5), (1, 2, 3, 4, 2), (2, 1, 1, 3)], ids=["2d", "3d", "unit"]
)
@pytest.mark.parametrize("align_corners", [0, 1])
def test_affine_grid_gradient(size, align_corners):
    r = len(size) - 2
    theta = rand(size[0], r, r + 1, seed=1)
    check_gradient(
        "AffineGrid", [theta, np.array(size, np.int64)], wrt=0, align_corners=align_corners
    )


def test_affine_grid_gradient_errors():
    theta, size = rand(2, 2, 3), np.array([2, 1, 3, 4], np.int64)
    with pytest.raises(OperatorError, match="expected \\[2, 3, 4, 2\\]"):
        run_op("AffineGridGradient", [theta, size, rand(2, 4, 3, 2)])
    with pytest.raises(OperatorError, match="theta"):
        run_op("AffineGridGradient", [rand(2, 3, 4), size, rand(2, 3, 4, 2)])


def test_gradient_op_wiring():
    op = op_def("GridSample", ["x", "g"], ["y"], mode="cubic", padding_mode="border")
    (grad,) = GRADIENTS["GridSample"](op, ["dy"], [None, "dg"])
    assert grad.type == "GridSampleGradient" and list(grad.input) == ["x", "g", "dy"]
    assert list(grad.output) == ["", "dg"]
    op = op_def("AffineGrid", ["t", "s"], ["g"], align_corners=1)
    (grad,) = GRADIENTS["AffineGrid"](op, ["dg"], ["dt", None])
    assert grad.type == "AffineGridGradient" and list(grad.output) == ["dt"]
    assert GRADIENTS["AffineGrid"](op, ["dg"], [None, "ds"]) == []


# Torch's bicubic pads each tap rather than the sampling position, so with border padding
# its forward differs from ONNX's; every other combination agrees.
TORCH_CASES = [
    (mode, padding, align)
    for mode in MODES
    for padding in PADDINGS
    for align in (0, 1)
    if not (mode == "cubic" and padding == "border")
]


@pytest.mark.parametrize("mode, padding_mode, align_corners", TORCH_CASES)
def test_grid_sample_matches_torch(mode, padding_mode, align_corners):
    torch = pytest.importorskip("torch")
    x = rand(2, 3, 5, 4, seed=1, dtype=np.float64)
    grid = kink_free_grid((5, 4), (3, 4), 2, align_corners).astype(np.float64)
    dy = rand(2, 3, 3, 4, seed=5, dtype=np.float64)
    xt, gt = torch.tensor(x, requires_grad=True), torch.tensor(grid, requires_grad=True)
    torch_mode = {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode)
    yt = torch.nn.functional.grid_sample(
        xt, gt, mode=torch_mode, padding_mode=padding_mode, align_corners=bool(align_corners)
    )
    yt.backward(torch.tensor(dy))
    dx, dgrid = run_op(
        "GridSampleGradient", [x, grid, dy], outputs=2, mode=mode, padding_mode=padding_mode,
        align_corners=align_corners,
    )  # fmt: skip
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dgrid, gt.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (1, 2, 3, 4, 2)], ids=["2d", "3d"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_affine_grid_matches_torch(size, align_corners):
    torch = pytest.importorskip("torch")
    r = len(size) - 2
    theta = rand(size[0], r, r + 1, seed=1, dtype=np.float64)
    dgrid = rand(size[0], *size[2:], r, seed=2, dtype=np.float64)
    tt = torch.tensor(theta, requires_grad=True)
    torch.nn.functional.affine_grid(tt, size, align_corners=bool(align_corners)).backward(
        torch.tensor(dgrid)
    )
    (dtheta,) = run_op(
        "AffineGridGradient", [theta, np.array(size, np.int64), dgrid], align_corners=align_corners
    )
    np.testing.assert_allclose(dtheta, tt.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_spatial_transformer_trains_through_autodiff():
    # AffineGrid -> GridSample -> a weighted sum, differentiated by add_gradient_ops, against
    # the same chain in torch: the makers wire theta's and X's gradients end to end.
    torch = pytest.importorskip("torch")
    from netbrew.executor import Workspace
    from netbrew.netdef import Net
    from netbrew.netdef.autodiff import add_gradient_ops

    x, r = rand(2, 3, 5, 4, seed=1), rand(2, 3, 6, 7, seed=2)
    theta = np.array(
        [[[0.9, 0.1, 0.05], [-0.2, 1.1, 0.1]], [[1.2, 0.0, -0.1], [0.1, 0.8, 0.2]]], np.float32
    )
    net = Net("stn")
    net.AffineGrid(["theta", "size"], "grid", align_corners=0)
    net.GridSample(["x", "grid"], "y", mode="cubic", padding_mode="reflection")
    net.Mul(["y", "r"], "yr")
    net.ReduceSum(["yr"], "loss", keepdims=0)
    grads = add_gradient_ops(net, ["loss"], wrt=["x", "theta"])
    ws = Workspace()
    feeds = {"x": x, "theta": theta, "r": r, "size": np.array([2, 3, 6, 7], np.int64)}
    for name, value in feeds.items():
        ws.feed_blob(name, value)
    ws.run_net_once(net)
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    tt = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
    grid = torch.nn.functional.affine_grid(tt, (2, 3, 6, 7), align_corners=False)
    yt = torch.nn.functional.grid_sample(
        xt, grid, mode="bicubic", padding_mode="reflection", align_corners=False
    )
    (yt * torch.tensor(r, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(ws.fetch_blob(grads["x"]), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(grads["theta"]), tt.grad.numpy(), rtol=1e-4)
