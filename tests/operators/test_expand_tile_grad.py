"""Gradients of Expand and Tile against central differences."""

import numpy as np
import pytest

from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand


def ints(*values):
    return np.array(values, np.int64)


@pytest.mark.parametrize(
    "shape, new_shape",
    [((3, 1), (2, 1, 6)), ((3, 4), (1, 1)), ((2, 1, 3), (2, 4, 1)), ((1,), (3,))],
)
def test_expand_gradient(shape, new_shape):
    check_gradient("Expand", [rand(*shape), ints(*new_shape)])


@pytest.mark.parametrize(
    "shape, repeats", [((2, 3), (1, 1)), ((2, 3), (3, 2)), ((2, 1, 3), (1, 4, 2))]
)
def test_tile_gradient(shape, repeats):
    check_gradient("Tile", [rand(*shape), ints(*repeats)])


def test_gradient_op_types():
    expand = GRADIENTS["Expand"](op_def("Expand", ["x", "s"], ["y"]), ["dy"], ["dx", None])
    tile = GRADIENTS["Tile"](op_def("Tile", ["x", "r"], ["y"]), ["dy"], ["dx", None])
    assert [o.type for o in expand] == ["SumReduceLike"]
    assert [o.type for o in tile] == ["TileGradient"]
