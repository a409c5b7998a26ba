"""Gradients of Trilu, Range and OneHot against central differences."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand, run_op


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 3)])
@pytest.mark.parametrize("k", [None, 1, -1])
@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_gradient(shape, k, upper):
    inputs = [rand(*shape)] + ([] if k is None else [np.array(k, np.int64)])
    check_gradient("Trilu", inputs, upper=upper)


@pytest.mark.parametrize(
    "start, limit, delta",
    [(0.3, 5.1, 0.7), (2.0, -3.3, -0.45), (-1.2, 0.9, 0.25), (1.5, 1.0, 1.0)],
)
@pytest.mark.parametrize("wrt", [0, 2, [0, 2]])
def test_range_gradient(start, limit, delta, wrt):
    # (limit - start) / delta stays well away from an integer: the length is fixed nearby.
    inputs = [np.array(v, np.float32) for v in (start, limit, delta)]
    check_gradient("Range", inputs, wrt=wrt)


def test_range_gradient_skips_limit():
    op = op_def("Range", ["s", "l", "d"], ["y"])
    (grad,) = GRADIENTS["Range"](op, ["dy"], ["ds", "dl", "dd"])
    assert grad.type == "RangeGradient" and list(grad.output) == ["ds", "dd"]
    assert GRADIENTS["Range"](op, ["dy"], [None, "dl", None]) == []
    dy = np.array([1.0, 2.0, 3.0], np.float32)
    ds, dd = run_op("RangeGradient", [dy, np.array([0.5], np.float32), np.array(2.0)], outputs=2)
    assert ds.shape == (1,) and dd.shape == () and ds.dtype == dy.dtype
    np.testing.assert_array_equal([ds[0], dd], [6.0, 8.0])


@pytest.mark.parametrize(
    "indices, depth, axis",
    [
        (np.array([0, 2, 1, 2]), 3, -1),
        (np.array([[1, -1], [0, 3]]), 4, 0),
        (np.array([[1, 5], [-2, 0]]), 3, 1),  # 5 is out of range: all off
        (np.array([[0.7, 2.2, -1.0]], np.float32), 3, -1),  # float indices are truncated
        (np.array(4), 5, 0),
    ],
)
@pytest.mark.parametrize("values_shape", [(2,), (1, 2)])
def test_one_hot_gradient(indices, depth, axis, values_shape):
    values = np.array([-0.4, 1.3], np.float32).reshape(values_shape)
    check_gradient("OneHot", [indices, np.array(depth), values], wrt=2, axis=axis)


def test_one_hot_gradient_kernel():
    dy = np.arange(6, dtype=np.float32).reshape(2, 3)
    (dv,) = run_op("OneHotGradient", [dy, np.array([1, 0]), np.array(3), np.zeros((1, 2))])
    assert dv.shape == (1, 2) and dv.dtype == np.float32
    np.testing.assert_array_equal(dv, [[0 + 2 + 4 + 5, 1 + 3]])
    with pytest.raises(OperatorError, match=r"OneHotGradient.*expected \[2, 4\]"):
        run_op("OneHotGradient", [dy, np.array([1, 0]), np.array(4), np.zeros(2)])
    op = op_def("OneHot", ["i", "d", "v"], ["y"])
    assert GRADIENTS["OneHot"](op, ["dy"], ["di", None, None]) == []
