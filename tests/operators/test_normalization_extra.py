"""RMSNormalization, InstanceNormalization, GroupNormalization, LpNormalization,
MeanVarianceNormalization and LRN against NumPy references written here."""

import math

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op


def ref_rms(x, scale, axis=-1, epsilon=1e-5):
    axes = tuple(range(axis % x.ndim, x.ndim))
    x64 = x.astype(np.float64)
    rms = np.sqrt(np.mean(x64**2, axis=axes, keepdims=True) + epsilon)
    return ((x64 / rms * scale).astype(scale.dtype),)


def ref_group(x, scale, bias, groups, epsilon=1e-5):
    n, c = x.shape[:2]
    xg = x.astype(np.float64).reshape(n, groups, -1)
    mean, var = xg.mean(axis=2, keepdims=True), xg.var(axis=2, keepdims=True)
    norm = ((xg - mean) / np.sqrt(var + epsilon)).reshape(x.shape)
    shape = (c,) + (1,) * (x.ndim - 2)
    return ((norm * scale.reshape(shape) + bias.reshape(shape)).astype(x.dtype),)


def ref_lp(x, axis=-1, p=2):
    norm = np.sum(np.abs(x.astype(np.float64)) ** p, axis=axis, keepdims=True) ** (1 / p)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.where(norm == 0, 0, x / norm).astype(x.dtype),)


def ref_mvn(x, axes=(0, 2, 3)):
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=tuple(axes), keepdims=True)
    std = np.sqrt(((x64 - mean) ** 2).mean(axis=tuple(axes), keepdims=True))
    return (((x64 - mean) / (std + 1e-9)).astype(x.dtype),)


def ref_lrn(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    out = np.empty(x.shape, np.float64)
    c = x.shape[1]
    for i in range(c):
        lo, hi = max(0, i - (size - 1) // 2), min(c - 1, i + math.ceil((size - 1) / 2))
        square_sum = np.sum(x[:, lo : hi + 1].astype(np.float64) ** 2, axis=1)
        out[:, i] = x[:, i] / (bias + alpha / size * square_sum) ** beta
    return (out.astype(x.dtype),)


@pytest.mark.parametrize(
    "shape, scale_shape, axis",
    [((3, 4), (4,), -1), ((3, 4), (3, 4), 0), ((2, 3, 4), (3, 4), -2), ((2, 3, 4), (1, 4), 1)],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_rms_normalization(shape, scale_shape, axis, dtype):
    x, scale = rand(*shape, seed=1, low=-2, high=2), rand(*scale_shape, seed=2)
    x, scale = x.astype(dtype), scale.astype(dtype)
    tol = 2e-3 if dtype == np.float16 else 1e-5
    check_op(
        "RMSNormalization",
        [x, scale],
        lambda x, s: ref_rms(x, s, axis, 0.1),
        axis=axis,
        epsilon=0.1,
        atol=tol,
        rtol=tol,
    )


@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 2, 3, 4), (2, 4, 2, 2, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_instance_normalization(shape, dtype):
    x = rand(*shape, seed=1, low=-3, high=3).astype(dtype)
    scale, b = rand(shape[1], seed=2).astype(dtype), rand(shape[1], seed=3).astype(dtype)
    check_op(
        "InstanceNormalization",
        [x, scale, b],
        lambda x, s, b: ref_group(x, s, b, x.shape[1], 0.01),
        epsilon=0.01,
        atol=1e-5,
    )


@pytest.mark.parametrize("shape, groups", [((3, 4, 2, 2), 2), ((2, 6, 5), 3), ((2, 4), 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_group_normalization(shape, groups, dtype):
    x = rand(*shape, seed=1, low=-3, high=3).astype(dtype)
    scale, bias = rand(shape[1], seed=2).astype(dtype), rand(shape[1], seed=3).astype(dtype)
    check_op(
        "GroupNormalization",
        [x, scale, bias],
        lambda x, s, b: ref_group(x, s, b, groups),
        num_groups=groups,
        atol=1e-5,
    )


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization(axis, p):
    x = rand(2, 3, 4, seed=1)
    x[0, 0] = 0  # a zero norm along the last axis gives 0, not NaN
    check_op("LpNormalization", [x], lambda x: ref_lp(x, axis, p), axis=axis, p=p)


@pytest.mark.parametrize("axes", [None, [1], [0, 1, 2, 3]])
def test_mean_variance_normalization(axes):
    x = rand(3, 3, 2, 2, seed=1)
    attrs = {} if axes is None else {"axes": axes}
    ref_axes = (0, 2, 3) if axes is None else axes
    check_op("MeanVarianceNormalization", [x], lambda x: ref_mvn(x, ref_axes), **attrs)


@pytest.mark.parametrize(
    "shape, attrs",
    [
        ((2, 5, 3, 3), {"size": 3}),
        ((2, 5, 3, 3), {"size": 4, "alpha": 2e-4, "beta": 0.5, "bias": 2.0}),
        ((1, 3, 4), {"size": 7, "alpha": 0.5}),
        ((2, 4), {"size": 1, "alpha": 1.0}),
    ],
)
def test_lrn(shape, attrs):
    x = rand(*shape, seed=1, low=-3, high=3)
    check_op("LRN", [x], lambda x: ref_lrn(x, **attrs), **attrs)


def test_normalization_extra_errors():
    with pytest.raises(OperatorError, match="num_groups=3"):
        run_op("GroupNormalization", [rand(2, 4, 3), rand(4), rand(4)], num_groups=3)
    with pytest.raises(OperatorError, match="expected \\(4,\\)"):
        run_op("InstanceNormalization", [rand(2, 4, 3), rand(3), rand(4)])
    with pytest.raises(OperatorError, match="p=3"):
        run_op("LpNormalization", [rand(2, 3)], p=3)
    with pytest.raises(OperatorError, match="does not broadcast"):
        run_op("RMSNormalization", [rand(2, 3), rand(2)])
    with pytest.raises(OperatorError, match="stash_type"):
        run_op("RMSNormalization", [rand(2, 3), rand(3)], stash_type=7)
