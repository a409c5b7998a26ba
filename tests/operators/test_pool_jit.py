"""The numba MaxPool gradient against the NumPy kernel (its oracle) on awkward windows."""

import numpy as np
import pytest

from netbrew import jit
from netbrew.operators.pool import max_pool_cpu
from netbrew.operators.pool_grad import max_pool_gradient_cpu

pytestmark = pytest.mark.skipif(not jit.enabled(), reason="numba is not installed or NETBREW_JIT=0")

CASES = [
    ((2, 3, 7, 9), dict(kernel_shape=[3, 3])),
    ((2, 3, 11, 10), dict(kernel_shape=[3, 2], strides=[2, 3], pads=[1, 0, 2, 1])),
    ((1, 4, 9, 9), dict(kernel_shape=[2, 3], dilations=[2, 2], pads=[1, 1, 1, 1])),
    ((3, 2, 8, 7), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ((2, 2, 6, 5), dict(kernel_shape=[3, 3], strides=[2, 1], auto_pad="SAME_LOWER")),
    ((2, 3, 13), dict(kernel_shape=[4], strides=[3], pads=[2, 1])),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, attrs", CASES)
def test_max_pool_gradient_numba_matches_numpy(shape, attrs, dtype):
    rng = np.random.default_rng(len(shape) + shape[-1])
    # few distinct values, so that windows hold ties and the first max must be chosen
    x = rng.integers(-3, 4, shape).astype(dtype)
    y = max_pool_cpu(x, output_mask=(True, False), **attrs)[0]
    dy = rng.standard_normal(y.shape).astype(dtype)
    got = max_pool_gradient_cpu(x, y, dy, **attrs)[0]
    with jit.disabled():
        want = max_pool_gradient_cpu(x, y, dy, **attrs)[0]
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_max_pool_gradient_numba_nan_max_goes_where_numpy_puts_it():
    x = np.arange(2 * 3 * 6 * 6, dtype=np.float32).reshape(2, 3, 6, 6)
    x[0, 1, 2, 3] = np.nan
    attrs = dict(kernel_shape=[3, 3], strides=[1, 2], pads=[1, 1, 1, 1])
    y = max_pool_cpu(x, output_mask=(True, False), **attrs)[0]
    dy = np.ones_like(y)
    got = max_pool_gradient_cpu(x, y, dy, **attrs)[0]
    with jit.disabled():
        want = max_pool_gradient_cpu(x, y, dy, **attrs)[0]
    np.testing.assert_array_equal(got, want)


def test_max_pool_gradient_numba_noncontiguous_input():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 2, 10, 9)).astype(np.float32).transpose(1, 0, 2, 3)
    attrs = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y = max_pool_cpu(x, output_mask=(True, False), **attrs)[0]
    dy = rng.standard_normal(y.shape).astype(np.float32)
    got = max_pool_gradient_cpu(x, y, dy, **attrs)[0]
    with jit.disabled():
        want = max_pool_gradient_cpu(x, y, dy, **attrs)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)
