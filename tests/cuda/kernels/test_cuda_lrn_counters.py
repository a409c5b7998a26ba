"""CUDA LRN, Iter and LearningRate against their NumPy kernels."""

import numpy as np
import pytest

from netbrew.testing import check_device, rand


@pytest.mark.parametrize("shape, size", [((2, 5, 3, 3), 3), ((1, 4, 7), 2), ((1, 1, 2, 2), 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_lrn(shape, size, dtype):
    tol = 1e-5 if dtype == np.float32 else 1e-2
    check_device("LRN", [rand(*shape).astype(dtype)], size=size, alpha=0.3, beta=0.75,
                 bias=2.0, atol=tol, rtol=tol)  # fmt: skip


def test_iter_and_learning_rate():
    check_device("Iter", [np.array([4], np.int64)])
    check_device("LearningRate", [np.array([7], np.int64)], base_lr=-0.1, policy="step",
                 stepsize=2, gamma=0.5)  # fmt: skip
