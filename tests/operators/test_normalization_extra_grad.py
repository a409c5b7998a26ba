"""Gradients of RMSNormalization, InstanceNormalization, GroupNormalization and
LpNormalization against central differences."""

import numpy as np
import pytest

from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS, NoGradient
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
    for name in ("MeanVarianceNormalization", "LRN"):
        assert isinstance(GRADIENTS[name], NoGradient)


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
