"""The numba ReluGradient pass against the NumPy kernel (its oracle): NaNs, signed zeros,
both thread modes, and the cases left to NumPy."""

import numpy as np
import pytest

from netbrew import jit
from netbrew.operators import activations_jit
from netbrew.testing import run_op

pytestmark = pytest.mark.skipif(not jit.enabled(), reason="numba missing or NETBREW_JIT=0")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("parallel", [True, False])
def test_relu_gradient_matches_numpy(dtype, parallel, monkeypatch):
    monkeypatch.setattr(activations_jit, "PARALLEL_MIN_ELEMENTS", 0 if parallel else 1 << 40)
    rng = np.random.default_rng(0)
    y = np.maximum(rng.standard_normal((3, 4, 5, 6)), 0).astype(dtype)
    dy = rng.standard_normal(y.shape).astype(dtype)
    y.flat[:3] = [np.nan, -0.0, 1.0]
    dy.flat[:4] = [1.0, -2.0, np.nan, -0.0]
    with jit.disabled():
        (want,) = run_op("ReluGradient", [y, dy])
    assert activations_jit.relu_gradient(y, dy) is not None
    (got,) = run_op("ReluGradient", [y, dy])
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got).tolist() == np.signbit(want).tolist()


def test_relu_gradient_leaves_other_layouts_to_numpy():
    y = np.ones((4, 6), np.float32)
    assert activations_jit.relu_gradient(y.T, y.T) is None
    assert activations_jit.relu_gradient(y, y.astype(np.float64)) is None
    (got,) = run_op("ReluGradient", [y.T, -y.T])
    np.testing.assert_array_equal(got, -y.T)
