"""Expand and Tile against NumPy references."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.operators import limits
from netbrew.testing import check_op, rand, run_op


def ints(*values):
    return np.array(values, np.int64)


def expand_ref(x, shape):
    ndim = max(x.ndim, len(shape))
    a = (1,) * (ndim - x.ndim) + x.shape
    b = (1,) * (ndim - len(shape)) + tuple(shape.tolist())
    out_shape = tuple(max(p, q) if min(p, q) != 0 else 0 for p, q in zip(a, b))
    return (np.broadcast_to(x.reshape(a), out_shape).copy(),)


@pytest.mark.parametrize(
    "shape, new_shape",
    [
        ((3, 1), (2, 1, 6)),
        ((3, 1), (3, 4)),
        ((3, 4), (1, 1)),
        ((1,), (2, 3)),
        ((), (2,)),
        ((2, 1, 3), (2, 4, 1)),
        ((1, 3), (0, 3)),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_expand(shape, new_shape, dtype):
    x = (rand(*shape) * 10).astype(dtype)
    check_op("Expand", [x, ints(*new_shape)], expand_ref)


def test_expand_errors(monkeypatch):
    with pytest.raises(OperatorError, match="does not broadcast"):
        run_op("Expand", [rand(3, 2), ints(4, 3)])
    monkeypatch.setattr(limits, "MAX_ELEMENTS", 10)
    with pytest.raises(OperatorError, match="over the limit"):
        run_op("Expand", [rand(3, 1), ints(3, 4)])


def tile_ref(x, repeats):
    out = x
    for axis, r in enumerate(repeats.tolist()):
        out = np.concatenate([out] * r, axis=axis) if r else out.take([], axis=axis)
    return (out,)


@pytest.mark.parametrize(
    "shape, repeats",
    [((2, 3), (1, 1)), ((2, 3), (3, 2)), ((4,), (3,)), ((2, 1, 3), (1, 4, 2)), ((2, 3), (0, 2))],
)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_tile(shape, repeats, dtype):
    check_op("Tile", [(rand(*shape) * 10).astype(dtype), ints(*repeats)], tile_ref)


def test_tile_errors():
    with pytest.raises(OperatorError, match="expected 2"):
        run_op("Tile", [rand(2, 3), ints(2)])
    with pytest.raises(OperatorError, match="negative"):
        run_op("Tile", [rand(2, 3), ints(2, -1)])


def test_tile_gradient_kernel():
    dy = rand(4, 6)

    def ref(dy, x, repeats):
        return (dy.reshape(2, 2, 2, 3).sum(axis=(0, 2)),)

    check_op("TileGradient", [dy, rand(2, 3), ints(2, 2)], ref)
    with pytest.raises(OperatorError, match="expected"):
        run_op("TileGradient", [rand(4, 5), rand(2, 3), ints(2, 2)])
