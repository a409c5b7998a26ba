"""CUDA MaxPool, AveragePool, the global pools and their gradients against the NumPy kernels:
1-D, 2-D and 3-D windows, strides, pads, auto_pad, dilations, ceil_mode, count_include_pad,
Indices in either storage order, ties."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_device, rand, run_op

F16 = {"atol": 2e-3, "rtol": 2e-3}

# (X shape, attributes)
POOL_CASES = [
    ((2, 3, 9), {"kernel_shape": [3]}),  # 1-D
    ((2, 3, 10), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ((1, 1, 4), {"kernel_shape": [2], "pads": [3, 0]}),  # windows wholly in the padding
    ((2, 3, 7, 8), {"kernel_shape": [3, 3]}),  # 2-D, odd sizes
    ((2, 3, 7, 8), {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]}),
    ((1, 2, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    (
        (1, 2, 8, 7),
        {"kernel_shape": [2, 3], "strides": [3, 2], "pads": [1, 1, 0, 1], "ceil_mode": 1},
    ),  # fmt: skip
    ((1, 2, 9, 9), {"kernel_shape": [3, 2], "dilations": [2, 3], "pads": [1, 1, 1, 1]}),
    ((2, 2, 7, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((2, 2, 6, 7), {"kernel_shape": [2, 3], "auto_pad": "SAME_LOWER"}),
    ((2, 2, 6, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "VALID"}),
    ((2, 3, 6, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),  # windows tile X
    ((2, 3, 5, 5), {"kernel_shape": [5, 5]}),  # one window over the whole image
    ((1, 2, 5, 6, 4), {"kernel_shape": [2, 3, 2], "pads": [1, 0, 1, 0, 1, 1]}),  # 3-D
    ((2, 1, 4, 5, 6), {"kernel_shape": [2, 2, 3], "strides": [2, 1, 2], "ceil_mode": 1}),
]


def test_larger_images():
    """Many blocks per launch."""
    x = rand(4, 16, 65, 63)
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    check_device("MaxPool", [x], outputs=2, **attrs)
    check_device("AveragePool", [x], **attrs)
    y = run_op("MaxPool", [x], **attrs)[0]
    check_device("MaxPoolGradient", [x, y, rand(*y.shape, seed=1)], **attrs)
    check_device("AveragePoolGradient", [x, rand(*y.shape, seed=1)], atol=1e-5, rtol=1e-4,
                 **attrs)  # fmt: skip


def _ties(*shape, seed=0):
    """Values on a coarse grid, so that windows hold equal maxima."""
    return np.round(rand(*shape, seed=seed) * 2).astype(np.float32)


@pytest.mark.parametrize("shape,attrs", POOL_CASES)
def test_max_pool(shape, attrs):
    check_device("MaxPool", [rand(*shape)], **attrs)


@pytest.mark.parametrize("shape,attrs", POOL_CASES)
@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices(shape, attrs, storage_order):
    check_device("MaxPool", [_ties(*shape)], outputs=2, storage_order=storage_order, **attrs)


def test_max_pool_float16_and_nan():
    x = rand(2, 3, 6, 6, dtype=np.float16)
    check_device("MaxPool", [x], outputs=2, kernel_shape=[3, 3], pads=[1, 1, 1, 1], **F16)
    x = rand(1, 1, 4, 4)
    x[0, 0, 1, 2] = np.nan
    check_device("MaxPool", [x], outputs=2, kernel_shape=[2, 2])


def run_gpu(op_type, inputs, **attrs):
    """Runs the op on cuda:0 only (for its errors)."""
    run_op(op_type, inputs, device="cuda:0", **attrs)


def test_max_pool_errors():
    with pytest.raises(OperatorError, match=r"MaxPool failed on cuda:0: input X has 3 dims"):
        run_gpu("MaxPool", [rand(2, 3, 5)], kernel_shape=[2, 2])
    with pytest.raises(OperatorError, match="MaxPool: no CUDA kernel for dtype int32"):
        run_gpu("MaxPool", [np.ones((1, 1, 4, 4), np.int32)], kernel_shape=[2, 2])
    with pytest.raises(OperatorError, match="GlobalMaxPool: no CUDA kernel for dtype float64"):
        run_gpu("GlobalMaxPool", [np.ones((1, 1, 4, 4))])


@pytest.mark.parametrize("shape,attrs", POOL_CASES)
@pytest.mark.parametrize("include", [0, 1])
def test_average_pool(shape, attrs, include):
    check_device("AveragePool", [rand(*shape)], count_include_pad=include, **attrs)


def test_average_pool_float16():
    x = rand(2, 3, 7, 7, dtype=np.float16)
    check_device("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                 **F16)  # fmt: skip


GLOBAL_SHAPES = [(2, 3, 5, 4), (1, 2, 7), (2, 3, 2, 3, 4), (1, 2, 40, 41), (3, 1, 1, 1)]


@pytest.mark.parametrize("shape", GLOBAL_SHAPES)
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool(shape, op):
    check_device(op, [rand(*shape)])
    check_device(op, [rand(*shape, dtype=np.float16)], **F16)


@pytest.mark.parametrize("shape,attrs", POOL_CASES)
def test_max_pool_gradient(shape, attrs):
    x = _ties(*shape)
    y = run_op("MaxPool", [x], **attrs)[0]
    check_device("MaxPoolGradient", [x, y, rand(*y.shape, seed=1)], **attrs)


def test_max_pool_gradient_float16():
    x = rand(2, 2, 6, 6, dtype=np.float16)
    y = run_op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2])[0]
    dy = rand(*y.shape, seed=1, dtype=np.float16)
    check_device("MaxPoolGradient", [x, y, dy], kernel_shape=[3, 3], strides=[2, 2], **F16)


@pytest.mark.parametrize("shape,attrs", POOL_CASES)
@pytest.mark.parametrize("include", [0, 1])
def test_average_pool_gradient(shape, attrs, include):
    if not include and attrs.get("pads") == [3, 0]:
        pytest.skip("windows that count no pixel: the CPU's selection GEMM spreads 0 * inf")
    x = rand(*shape)
    y = run_op("AveragePool", [x], count_include_pad=include, **attrs)[0]
    dy = rand(*y.shape, seed=1)
    check_device("AveragePoolGradient", [x, dy], count_include_pad=include, atol=1e-5,
                 rtol=1e-4, **attrs)  # fmt: skip


@pytest.mark.parametrize("shape", GLOBAL_SHAPES)
def test_global_pool_gradients(shape):
    x = _ties(*shape)
    dy = rand(*shape[:2], *(1,) * (len(shape) - 2), seed=1)
    check_device("GlobalAveragePoolGradient", [x, dy])
    check_device("GlobalMaxPoolGradient", [x, dy])
    x16, dy16 = x.astype(np.float16), dy.astype(np.float16)
    check_device("GlobalMaxPoolGradient", [x16, dy16])
    check_device("GlobalAveragePoolGradient", [x16, dy16], **F16)


def test_global_max_pool_gradient_nan():
    x = rand(2, 2, 3, 3)
    x[0, 1, 2, 0] = x[0, 1, 0, 2] = np.nan  # the first NaN takes dY, as numpy.argmax says
    check_device("GlobalMaxPoolGradient", [x, rand(2, 2, 1, 1, seed=1)])
