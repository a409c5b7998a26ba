"""The numba BatchNormalization kernels against the NumPy kernels (their oracle)."""

import numpy as np
import pytest

from netbrew import jit
from netbrew.operators.normalization import batch_normalization_cpu
from netbrew.operators.normalization_grad import batch_normalization_gradient_cpu

pytestmark = pytest.mark.skipif(not jit.enabled(), reason="numba is not installed or NETBREW_JIT=0")

SHAPES = [(2, 3, 5, 7), (1, 5, 3), (7, 4), (3, 2, 2, 3, 5), (1, 1, 1, 1)]


def _params(c, dtype, rng):
    scale, b = rng.uniform(0.5, 2, c).astype(dtype), rng.standard_normal(c).astype(dtype)
    mean, var = rng.standard_normal(c).astype(dtype), rng.uniform(0.2, 3, c).astype(dtype)
    return scale, b, mean, var


def _close(got, want, dtype):
    tol = 2e-5 if dtype == np.float32 else 1e-11
    for g, w in zip(got, want):
        if w is None:
            assert g is None
            continue
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


@pytest.mark.parametrize("training_mode", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_batch_normalization_matches_numpy(shape, dtype, training_mode):
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 3 + 10).astype(dtype)  # an offset mean: shifted sums
    scale, b, mean, var = _params(shape[1], dtype, rng)
    attrs = dict(epsilon=1e-3, momentum=0.8, training_mode=training_mode)
    got = batch_normalization_cpu(x, scale, b, mean, var, **attrs)
    with jit.disabled():
        want = batch_normalization_cpu(x, scale, b, mean, var, **attrs)
    _close(got, want, dtype)


@pytest.mark.parametrize("mask", [(True, True, True), (False, True, True), (True, False, False)])
@pytest.mark.parametrize("training_mode", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_batch_normalization_gradient_matches_numpy(shape, dtype, training_mode, mask):
    rng = np.random.default_rng(sum(shape) + 1)
    x = (rng.standard_normal(shape) * 2 - 5).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    scale, _, mean, var = _params(shape[1], dtype, rng)
    attrs = dict(epsilon=1e-5, training_mode=training_mode, output_mask=mask)
    got = batch_normalization_gradient_cpu(x, scale, dy, mean, var, **attrs)
    with jit.disabled():
        want = batch_normalization_gradient_cpu(x, scale, dy, mean, var, **attrs)
    _close(got, want, dtype)


def test_non_contiguous_and_half_inputs_take_numpy_and_still_match():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4, 5, 2)).astype(np.float32).transpose(0, 3, 1, 2)
    scale, b, mean, var = _params(2, np.float32, rng)
    got = batch_normalization_cpu(x, scale, b, mean, var, epsilon=1e-5, momentum=0.9,
                                  training_mode=1)  # fmt: skip
    with jit.disabled():
        want = batch_normalization_cpu(
            np.ascontiguousarray(x), scale, b, mean, var, epsilon=1e-5, momentum=0.9,
            training_mode=1,
        )  # fmt: skip
    _close(got, want, np.float32)
