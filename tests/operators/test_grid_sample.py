"""GridSample and AffineGrid against loop-based NumPy references (one output point at a time)."""

import itertools
import math

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op


def fold(v, lo, hi):
    """Mirror v into [lo, hi] by repeated reflection at the borders."""
    if hi == lo:
        return lo
    while v < lo or v > hi:
        v = 2 * lo - v if v < lo else 2 * hi - v
    return v


def keys(t, a=-0.75):
    t = abs(t)
    if t <= 1:
        return (a + 2) * t**3 - (a + 3) * t**2 + 1
    return a * t**3 - 5 * a * t**2 + 8 * a * t - 4 * a if t < 2 else 0.0


def grid_sample_ref(x, grid, mode="linear", padding_mode="zeros", align_corners=0):
    n_batch, channels, *dims = x.shape
    r = len(dims)
    out = np.zeros((n_batch, channels, *grid.shape[1:-1]))
    for n in range(n_batch):
        for o in np.ndindex(*grid.shape[1:-1]):
            taps_per_dim = []
            for d, size in enumerate(dims):
                g = float(grid[(n, *o, r - 1 - d)])
                p = (g + 1) / 2 * (size - 1) if align_corners else ((g + 1) * size - 1) / 2
                lo, hi = (0, size - 1) if align_corners else (-0.5, size - 0.5)
                if mode == "nearest":
                    p = float(np.rint(p))
                if padding_mode == "border" and not lo <= p <= hi:
                    p = min(max(p, 0), size - 1)
                if padding_mode == "reflection":
                    p = fold(p, lo, hi)
                if mode == "nearest":
                    taps = [(math.trunc(p), 1.0)]
                elif mode == "linear":
                    f = math.floor(p)
                    taps = [(f, 1 - (p - f)), (f + 1, p - f)]
                else:
                    f = math.floor(p)
                    taps = [(f + k, keys(p - f - k)) for k in (-1, 0, 1, 2)]
                fixed = []
                for i, w in taps:
                    if padding_mode == "zeros" and not 0 <= i < size:
                        w, i = 0.0, 0
                    elif padding_mode == "reflection":
                        i = math.trunc(fold(i, lo, hi))
                    fixed.append((min(max(i, 0), size - 1), w))
                taps_per_dim.append(fixed)
            for combo in itertools.product(*taps_per_dim):
                w = math.prod(t[1] for t in combo)
                out[(n, slice(None), *o)] += w * x[(n, slice(None), *(t[0] for t in combo))]
    return out.astype(x.dtype)


X2 = rand(2, 2, 4, 5, seed=3)
G2 = rand(2, 3, 4, 2, seed=4, low=-1.4, high=1.4)
X3 = rand(1, 2, 3, 4, 3, seed=5)
G3 = rand(1, 2, 3, 2, 3, seed=6, low=-1.3, high=1.3)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_2d(mode, padding_mode, align_corners):
    attrs = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    check_op("GridSample", [X2, G2], lambda x, g: (grid_sample_ref(x, g, **attrs),), **attrs)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_3d(mode, padding_mode):
    attrs = dict(mode=mode, padding_mode=padding_mode, align_corners=1)
    check_op("GridSample", [X3, G3], lambda x, g: (grid_sample_ref(x, g, **attrs),), **attrs)


def test_grid_sample_nearest_rounds_half_to_even_and_keeps_dtype():
    x = np.arange(5, dtype=np.int32).reshape(1, 1, 1, 5)
    # align_corners=1: x position = (g + 1) * 2 -> 0.5, 1.5, 2.5 round to 0, 2, 2
    grid = np.array([[[[-0.75, 0.0], [-0.25, 0.0], [0.25, 0.0]]]], np.float32)
    got = run_op("GridSample", [x, grid], mode="nearest", align_corners=1)[0]
    assert got.dtype == np.int32 and got.ravel().tolist() == [0, 2, 2]


def test_grid_sample_errors():
    with pytest.raises(OperatorError, match=r"'grid' has shape \[2, 3, 4, 3\], expected"):
        run_op("GridSample", [X2, rand(2, 3, 4, 3)])
    with pytest.raises(OperatorError, match="not one of zeros"):
        run_op("GridSample", [X2, G2], padding_mode="wrap")


def affine_grid_ref(theta, size, align_corners):
    n, _, *spatial = [int(s) for s in size]
    r = len(spatial)

    def base(i, count):
        if align_corners:
            return -1 + 2 * i / (count - 1) if count > 1 else 0.0
        return (2 * i + 1) / count - 1

    out = np.zeros((n, *spatial, r))
    for b in range(n):
        for idx in np.ndindex(*spatial):
            point = [base(i, c) for i, c in zip(idx, spatial)][::-1] + [1.0]  # x, y[, z], 1
            out[(b, *idx)] = theta[b].astype(np.float64) @ np.array(point)
    return out.astype(theta.dtype)


@pytest.mark.parametrize("size", [[2, 3, 4, 5], [2, 1, 3, 4, 2], [2, 3, 1, 4]])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_affine_grid(size, align_corners):
    r = len(size) - 2
    theta = rand(2, r, r + 1, seed=7)
    size = np.array(size, np.int64)
    check_op(
        "AffineGrid",
        [theta, size],
        lambda t, s: (affine_grid_ref(t, s, align_corners),),
        align_corners=align_corners,
    )


def test_affine_grid_feeds_grid_sample_identity():
    """The identity transform samples every pixel center exactly."""
    theta = np.array([[[1, 0, 0], [0, 1, 0]]], np.float32)
    x = rand(1, 2, 3, 4)
    grid = run_op("AffineGrid", [theta, np.array([1, 2, 3, 4])])[0]
    np.testing.assert_allclose(run_op("GridSample", [x, grid])[0], x, atol=1e-6)


def test_affine_grid_errors():
    with pytest.raises(OperatorError, match=r"'theta' has shape \[2, 2, 3\], expected \[2, 3, 4\]"):
        run_op("AffineGrid", [rand(2, 2, 3), np.array([2, 1, 3, 4, 5])])
