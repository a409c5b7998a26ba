"""CUDA activations against their NumPy kernels."""

import numpy as np
import pytest

from netbrew.testing import check_device, rand


@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (3, 5), (2, 3, 257)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_relu(shape, dtype):
    check_device("Relu", [rand(*shape).astype(dtype)])


@pytest.mark.parametrize("shape", [(0,), (5,), (4, 33)])
def test_relu_gradient(shape):
    y = np.maximum(rand(*shape), 0)
    check_device("ReluGradient", [y, rand(*shape, seed=1)])
