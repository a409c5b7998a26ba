"""Gradients of SpaceToDepth and DepthToSpace against central differences."""

import pytest

from netbrew.operators import GRADIENTS, NoGradient
from netbrew.testing import check_gradient, rand


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("shape, bs", [((1, 2, 4, 6), 2), ((2, 1, 3, 3), 3)])
def test_space_to_depth_gradient(shape, bs, mode):
    check_gradient("SpaceToDepth", [rand(*shape)], blocksize=bs, mode=mode)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("shape, bs", [((1, 8, 2, 3), 2), ((2, 9, 1, 2), 3)])
def test_depth_to_space_gradient(shape, bs, mode):
    check_gradient("DepthToSpace", [rand(*shape)], blocksize=bs, mode=mode)


def test_no_gradients():
    for name in ("CenterCropPad", "Col2Im"):
        assert isinstance(GRADIENTS[name], NoGradient)
