"""LpPool and MaxUnpool against loop references written here (gradients: test_lp_pool_grad.py)."""

import itertools

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op


def ref_lp_pool(x, kernel_shape, p=2, strides=None, pads=None, dilations=None):
    n = len(kernel_shape)
    strides = strides or [1] * n
    dilations = dilations or [1] * n
    pads = pads or [0] * (2 * n)
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(pads[i], pads[n + i]) for i in range(n)])
    span = [(k - 1) * d + 1 for k, d in zip(kernel_shape, dilations)]
    out_shape = [(xp.shape[2 + i] - span[i]) // strides[i] + 1 for i in range(n)]
    y = np.zeros(x.shape[:2] + tuple(out_shape))
    for o in itertools.product(*(range(s) for s in out_shape)):
        window = tuple(
            slice(o[i] * strides[i], o[i] * strides[i] + span[i], dilations[i]) for i in range(n)
        )
        patch = np.abs(xp[(..., *window)]) ** p
        y[(..., *o)] = patch.sum(axis=tuple(range(2, 2 + n))) ** (1 / p)
    return (y.astype(x.dtype),)


@pytest.mark.parametrize(
    "shape, attrs",
    [
        ((1, 2, 6), {"kernel_shape": [2], "p": 3}),
        ((2, 2, 5, 5), {"kernel_shape": [2, 2]}),
        ((1, 3, 6, 7), {"kernel_shape": [3, 2], "p": 4, "strides": [2, 3]}),
        ((1, 2, 5, 5), {"kernel_shape": [3, 3], "p": 1, "pads": [2, 1, 0, 2]}),
        ((1, 1, 6, 6), {"kernel_shape": [2, 2], "dilations": [2, 2]}),
        ((1, 1, 3, 4, 4), {"kernel_shape": [2, 2, 2], "p": 3}),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lp_pool(shape, attrs, dtype):
    x = rand(*shape, seed=1, low=-2, high=2).astype(dtype)
    check_op("LpPool", [x], lambda x: ref_lp_pool(x, **attrs), rtol=1e-5, **attrs)


def test_lp_pool_same_upper():
    x = rand(1, 1, 5, 5, seed=2)
    (y,) = run_op("LpPool", [x], kernel_shape=[2, 2], auto_pad="SAME_UPPER")
    (want,) = ref_lp_pool(x, [2, 2], pads=[0, 0, 1, 1])
    np.testing.assert_allclose(y, want, rtol=1e-5)


def ref_max_unpool(x, indices, shape):
    out = np.zeros(int(np.prod(shape)), x.dtype)
    out[indices.reshape(-1)] = x.reshape(-1)
    return out.reshape(shape)


@pytest.mark.parametrize(
    "shape, attrs",
    [
        ((2, 3, 4, 4), {"kernel_shape": [2, 2], "strides": [2, 2]}),
        ((1, 2, 6), {"kernel_shape": [3], "strides": [3]}),
        ((1, 1, 5, 5), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ],
)
def test_max_unpool_inverts_max_pool(shape, attrs):
    x = rand(*shape, seed=3)
    y, indices = run_op("MaxPool", [x], outputs=2, **attrs)
    check_op("MaxUnpool", [y, indices], lambda y, i: (ref_max_unpool(y, i, x.shape),), **attrs)


def test_max_unpool_output_shape():
    x = np.array([[[[5, 6], [7, 8]]]], np.float32)
    indices = np.array([[[[5, 7], [13, 15]]]], np.int64)
    (y,) = run_op(
        "MaxUnpool", [x, indices, np.array([1, 1, 5, 5])], kernel_shape=[2, 2], strides=[2, 2]
    )
    want = np.zeros((1, 1, 5, 5), np.float32)
    want[0, 0, 1, 1], want[0, 0, 1, 3], want[0, 0, 3, 1], want[0, 0, 3, 3] = 5, 6, 7, 8
    np.testing.assert_array_equal(y, want)


def test_lp_pool_errors():
    with pytest.raises(OperatorError, match="expected 4"):
        run_op("LpPool", [rand(1, 2, 3)], kernel_shape=[2, 2])
    with pytest.raises(OperatorError, match="out of range"):
        run_op("MaxUnpool", [rand(1, 1, 2), np.array([[[0, 9]]])], kernel_shape=[2], strides=[2])
    with pytest.raises(OperatorError, match="outside output_shape"):
        run_op(
            "MaxUnpool",
            [rand(1, 1, 2), np.array([[[0, 3]]]), np.array([1, 1, 3])],
            kernel_shape=[2],
            strides=[2],
        )
