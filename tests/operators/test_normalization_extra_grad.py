"""Gradients of RMSNormalization, InstanceNormalization, GroupNormalization, LpNormalization,
MeanVarianceNormalization and LRN against central differences (and torch for LRN)."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand, run_op


@pytest.mark.parametrize(
    "shape, scale_shape, axis", [((3, 4), (4,), -1), ((2, 3, 4), (3, 4), 1), ((2, 3), (2, 3), 0)]
)
def test_rms_normalization_gradient(shape, scale_shape, axis):
    x, scale = rand(*shape, seed=1, low=-2, high=2), rand(*scale_shape, seed=2)
    check_gradient("RMSNormalization", [x, scale], axis=axis, epsilon=0.01)


@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 2, 2, 3)])
def test_instance_normalization_gradient(shape):
    x = rand(*shape, seed=1, low=-2, high=2)
    scale, b = rand(shape[1], seed=2), rand(shape[1], seed=3)
    check_gradient("InstanceNormalization", [x, scale, b], epsilon=0.01)


@pytest.mark.parametrize("shape, groups", [((2, 4, 3), 2), ((2, 6, 2, 2), 3), ((3, 2), 1)])
def test_group_normalization_gradient(shape, groups):
    x = rand(*shape, seed=1, low=-2, high=2)
    scale, bias = rand(shape[1], seed=2), rand(shape[1], seed=3)
    check_gradient("GroupNormalization", [x, scale, bias], num_groups=groups, epsilon=0.01)


@pytest.mark.parametrize("axis", [-1, 0])
@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization_gradient(axis, p):
    # Away from 0: |x| has a kink there.
    x = rand(3, 4, seed=1, low=0.2, high=1.0) * np.array([1, -1, 1, -1], np.float32)
    check_gradient("LpNormalization", [x], axis=axis, p=p)


def test_normalization_extra_gradient_ops():
    op = op_def("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)
    (grad,) = GRADIENTS["GroupNormalization"](op, ["dy"], ["dx", None, "db"])
    assert grad.type == "GroupNormalizationGradient"
    assert list(grad.input) == ["x", "s", "dy"] and list(grad.output) == ["dx", "", "db"]
    op = op_def("LpNormalization", ["x"], ["y"])
    (grad,) = GRADIENTS["LpNormalization"](op, ["dy"], ["dx"])
    assert grad.type == "LpNormalizationGradient" and list(grad.input) == ["x", "dy"]
    op = op_def("LRN", ["x"], ["y"], size=3)
    (grad,) = GRADIENTS["LRN"](op, ["dy"], ["dx"])
    assert grad.type == "LRNGradient" and list(grad.input) == ["x", "dy"]
    op = op_def("MeanVarianceNormalization", ["x"], ["y"], axes=[1])
    (grad,) = GRADIENTS["MeanVarianceNormalization"](op, ["dy"], ["dx"])
    assert grad.type == "MeanVarianceNormalizationGradient" and list(grad.input) == ["x", "dy"]


def test_normalization_extra_gradient_kernels():
    x, dy = rand(2, 3, 4, seed=1), rand(2, 3, 4, seed=2)
    scale = np.ones(3, np.float32)
    # InstanceNormalization is GroupNormalization with one channel per group.
    inst = run_op("InstanceNormalizationGradient", [x, scale, dy], outputs=3)
    group = run_op("GroupNormalizationGradient", [x, scale, dy], outputs=3, num_groups=3)
    for a, b in zip(inst, group):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(inst[2], dy.sum(axis=(0, 2)), rtol=1e-5)
    dx, dscale = run_op("RMSNormalizationGradient", [x, np.ones(4, np.float32), dy], outputs=2)
    assert dx.shape == x.shape and dscale.shape == (4,)
    (dx,) = run_op("LpNormalizationGradient", [np.zeros((2, 3), np.float32), dy[0, :2, :3]])
    np.testing.assert_array_equal(dx, 0)  # a zero norm passes no gradient


@pytest.mark.parametrize(
    "shape, axes",
    [
        ((2, 3, 2, 2), None),  # the default axes [0, 2, 3]
        ((3, 4), [1]),
        ((3, 4), [0, 1]),
        ((2, 3, 4), [-1]),
        ((2, 3, 4), [0, 2]),
        ((4, 2, 3), [2, 0]),
    ],
)
def test_mean_variance_normalization_gradient(shape, axes):
    attrs = {} if axes is None else {"axes": axes}
    check_gradient("MeanVarianceNormalization", [rand(*shape, seed=4, low=-2, high=2)], **attrs)


def test_mean_variance_normalization_gradient_of_a_constant_group():
    x = np.array([[1.0, 1.0, 1.0], [0.0, 1.0, 3.0]], np.float32)
    dy = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]], np.float32)
    (dx,) = run_op("MeanVarianceNormalizationGradient", [x, dy], axes=[1])
    assert np.all(np.isfinite(dx))
    np.testing.assert_allclose(dx[0], (dy[0] - 2.0) / 1e-9, rtol=1e-5)  # only the mean term
    np.testing.assert_allclose(dx[1], 0, atol=1e-6)  # a shift of X changes nothing
    with pytest.raises(OperatorError, match=r"MeanVarianceNormalizationGradient.*expected X's"):
        run_op("MeanVarianceNormalizationGradient", [x, dy[:1]], axes=[1])
    with pytest.raises(OperatorError, match="repeats a dim"):
        run_op("MeanVarianceNormalizationGradient", [x, dy], axes=[1, -1])


@pytest.mark.parametrize(
    "shape, size, alpha, beta, bias",
    [
        ((2, 5, 3), 3, 1e-4, 0.75, 1.0),  # the defaults, on a 1-D image
        ((1, 6, 2, 2), 2, 0.8, 0.6, 1.5),  # even size: the window reaches one more after
        ((2, 4, 2, 3), 5, 0.5, 0.75, 2.0),
        ((1, 3, 2), 7, 1.2, 1.3, 0.7),  # the window is wider than the channels
        ((2, 7), 4, 0.9, 0.5, 1.0),  # no spatial dims
        ((1, 5, 2, 2), 1, 2.0, 0.75, 1.0),
    ],
)
def test_lrn_gradient(shape, size, alpha, beta, bias):
    x = rand(*shape, seed=5, low=-2, high=2)
    check_gradient("LRN", [x], size=size, alpha=alpha, beta=beta, bias=bias)


@pytest.mark.parametrize("size", [3, 5])
def test_lrn_gradient_matches_torch(size):
    torch = pytest.importorskip("torch")
    x, dy = rand(2, 6, 3, 4, seed=6, dtype=np.float64), rand(2, 6, 3, 4, seed=7, dtype=np.float64)
    # alpha exact in float32, as NetDef arguments store floats
    attrs = dict(size=size, alpha=0.375, beta=0.75, bias=1.5)
    (y,) = run_op("LRN", [x], **attrs)
    (dx,) = run_op("LRNGradient", [x, dy], **attrs)
    t = torch.tensor(x, requires_grad=True)
    out = torch.nn.functional.local_response_norm(t, size, alpha=0.375, beta=0.75, k=1.5)
    out.backward(torch.tensor(dy))
    np.testing.assert_allclose(y, out.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(dx, t.grad.numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(OperatorError, match=r"LRNGradient.*expected X's"):
        run_op("LRNGradient", [x, dy[:1]], **attrs)
