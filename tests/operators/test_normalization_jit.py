"""The numba BatchNormalization and LayerNormalization kernels against the NumPy kernels
(their oracle)."""

import numpy as np
import pytest

from netbrew import jit
from netbrew.operators.normalization import batch_normalization_cpu, layer_normalization_cpu
from netbrew.operators.normalization_grad import (
    batch_normalization_gradient_cpu,
    layer_normalization_gradient_cpu,
)

pytestmark = pytest.mark.skipif(not jit.enabled(), reason="numba is not installed or NETBREW_JIT=0")

SHAPES = [(2, 3, 5, 7), (1, 5, 3), (7, 4), (3, 2, 2, 3, 5), (1, 1, 1, 1)]


def _params(c, dtype, rng):
    scale, b = rng.uniform(0.5, 2, c).astype(dtype), rng.standard_normal(c).astype(dtype)
    mean, var = rng.standard_normal(c).astype(dtype), rng.uniform(0.2, 3, c).astype(dtype)
    return scale, b, mean, var


def _close(got, want, dtype, tol=None):
    tol = tol or (2e-5 if dtype == np.float32 else 1e-11)
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


# (X shape, axis, Scale shape, B shape or None)
LN_CASES = [
    ((1, 128, 768), -1, (768,), (768,)),
    ((3, 5, 7), -1, (7,), None),
    ((2, 3, 4, 5), 1, (3, 4, 5), (1, 4, 5)),
    ((2, 3, 4, 5), 2, (1, 5), (4, 1)),  # broadcast inside the normalized dims
    ((7, 1), 0, (7, 1), (1,)),
    ((4, 9), -2, (1, 9), None),
]


def _inputs(shape, scale_shape, b_shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 2 + 7).astype(dtype)  # an offset mean: shifted sums
    scale = rng.uniform(0.5, 2, scale_shape).astype(dtype)
    b = None if b_shape is None else rng.standard_normal(b_shape).astype(dtype)
    return rng, x, scale, b


@pytest.mark.parametrize("stash_type", [1, 11])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, axis, scale_shape, b_shape", LN_CASES)
def test_layer_normalization_matches_numpy(shape, axis, scale_shape, b_shape, dtype, stash_type):
    _, x, scale, b = _inputs(shape, scale_shape, b_shape, dtype, sum(shape))
    attrs = dict(axis=axis, epsilon=1e-3, stash_type=stash_type)
    got = layer_normalization_cpu(x, scale, b, **attrs)
    with jit.disabled():
        want = layer_normalization_cpu(x, scale, b, **attrs)
    # float64 X with float32 statistics: the NumPy oracle itself is float32-exact only
    _close(got, want, dtype, 3e-5 if stash_type == 1 or dtype == np.float32 else 1e-10)


@pytest.mark.parametrize("extra", [0, 1, 2])
@pytest.mark.parametrize("mask", [(True, True), (False, True), (True, False)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, axis, scale_shape, b_shape", LN_CASES)
def test_layer_normalization_gradient_matches_numpy(
    shape, axis, scale_shape, b_shape, dtype, mask, extra
):
    rng, x, scale, _ = _inputs(shape, scale_shape, b_shape, dtype, sum(shape) + 1)
    dy = rng.standard_normal(shape).astype(dtype)
    stats_shape = x.shape[: axis % x.ndim] + (1,) * (x.ndim - axis % x.ndim)
    stats = [rng.standard_normal(stats_shape).astype(dtype) for _ in range(extra)]
    attrs = dict(axis=axis, epsilon=1e-5, stash_type=11, output_mask=mask)
    got = layer_normalization_gradient_cpu(x, scale, dy, *stats, **attrs)
    with jit.disabled():
        want = layer_normalization_gradient_cpu(x, scale, dy, *stats, **attrs)
    _close(got, want, dtype, 1e-4 if dtype == np.float32 else None)


def test_params_varying_over_rows_and_strided_inputs_take_numpy_and_still_match():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    scale = rng.uniform(0.5, 2, (4, 6)).astype(np.float32)  # one scale per row: NumPy path
    xt = rng.standard_normal((6, 4)).astype(np.float32).T  # not C-contiguous: NumPy path
    for args in [(x, scale), (xt, scale[0])]:
        got = layer_normalization_cpu(*args, axis=1, epsilon=1e-5, stash_type=1)
        with jit.disabled():
            want = layer_normalization_cpu(*args, axis=1, epsilon=1e-5, stash_type=1)
        _close(got, want, np.float32)
