"""The numba MaxPool and AveragePool loops and the MaxPool gradient against the NumPy kernels
(their oracles) on awkward windows, in both layouts."""

import numpy as np
import pytest

from netbrew import jit
from netbrew.operators import pool_jit
from netbrew.operators.conv_last import channels_last
from netbrew.operators.pool import average_pool_cpu, max_pool_cpu
from netbrew.operators.pool_grad import max_pool_gradient_cpu
from netbrew.operators.window import make_window

pytestmark = pytest.mark.skipif(not jit.enabled(), reason="numba is not installed or NETBREW_JIT=0")

CASES = [
    ((2, 3, 7, 9), dict(kernel_shape=[3, 3])),
    ((2, 3, 11, 10), dict(kernel_shape=[3, 2], strides=[2, 3], pads=[1, 0, 2, 1])),
    ((1, 4, 9, 9), dict(kernel_shape=[2, 3], dilations=[2, 2], pads=[1, 1, 1, 1])),
    ((3, 2, 8, 7), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ((2, 2, 6, 5), dict(kernel_shape=[3, 3], strides=[2, 1], auto_pad="SAME_LOWER")),
    ((2, 3, 13), dict(kernel_shape=[4], strides=[3], pads=[2, 1])),
]

FORWARD_CASES = [
    *CASES,
    ((1, 5, 12, 12), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((2, 4, 9, 11), dict(kernel_shape=[3, 3], strides=[3, 3], pads=[0, 2, 1, 0], ceil_mode=1)),
    ((1, 3, 5, 5), dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2])),
]


def as_last(x):
    """x's values as an (N, C, H, W) view of channels-last memory."""
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, attrs", [c for c in FORWARD_CASES if len(c[0]) == 4])
def test_max_pool_numba_matches_numpy(shape, attrs, dtype):
    rng = np.random.default_rng(shape[-1])
    x = rng.standard_normal(shape).astype(dtype)
    with jit.disabled():
        want = max_pool_cpu(x, output_mask=(True, False), **attrs)[0]
    got = max_pool_cpu(as_last(x), output_mask=(True, False), **attrs)[0]
    assert got.dtype == want.dtype and got.shape == want.shape and channels_last(got)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, attrs", [c for c in FORWARD_CASES if len(c[0]) == 4])
def test_average_pool_numba_matches_numpy(shape, attrs, dtype, include_pad):
    rng = np.random.default_rng(shape[-1])
    x = rng.standard_normal(shape).astype(dtype)
    attrs = dict(attrs, count_include_pad=include_pad)
    with jit.disabled():
        want = average_pool_cpu(x, **attrs)[0]
    got = average_pool_cpu(as_last(x), **attrs)[0]
    assert got.dtype == want.dtype and got.shape == want.shape and channels_last(got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("parallel", [True, False])
def test_pool_numba_nan_wins_and_both_thread_modes(parallel, monkeypatch):
    monkeypatch.setattr(pool_jit, "PARALLEL_MIN_WORK", 0 if parallel else 1 << 40)
    x = np.arange(2 * 6 * 7 * 7, dtype=np.float32).reshape(2, 6, 7, 7) % 11
    x[1, 2, 3, 4] = np.nan
    attrs = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    with jit.disabled():
        want_max = max_pool_cpu(x, output_mask=(True, False), **attrs)[0]
        want_mean = average_pool_cpu(x, **attrs)[0]
    assert np.isnan(want_max).sum() == 2  # windows (1, 2) and (2, 2)
    np.testing.assert_array_equal(
        max_pool_cpu(as_last(x), output_mask=(True, False), **attrs)[0], want_max
    )
    np.testing.assert_allclose(average_pool_cpu(as_last(x), **attrs)[0], want_mean, rtol=1e-6)


def test_pool_numba_leaves_other_cases_to_numpy():
    x = np.ones((1, 2, 6, 6), np.float32)  # C-ordered: NumPy's separable steps
    win = make_window(x.shape[2:], [3, 3], None, None, None, "NOTSET")
    assert pool_jit.pool(x, win, True, None) is None
    x = np.ones((1, 2, 4, 4, 4), np.float32)  # 3-D windows
    win = make_window(x.shape[2:], [2, 2, 2], None, None, None, "NOTSET")
    assert pool_jit.pool(x, win, True, None) is None
    half = np.ones((1, 2, 4, 4), np.float16)
    win = make_window(half.shape[2:], [2, 2], None, None, None, "NOTSET")
    assert pool_jit.pool(half, win, True, None) is None
    assert max_pool_cpu(half, output_mask=(True, False), kernel_shape=[2, 2])[0].dtype == np.float16


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
    # the NaN made the max of every window holding it, and those windows' dY go to it
    assert got[0, 1, 2, 3] == np.isnan(y[0, 1]).sum() > 0


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


@pytest.mark.parametrize("parallel", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(64, 16, 8, 8), (3, 5, 6, 10), (1, 1, 2, 2)])
def test_max_pool_2x2_tiles_match_numpy(shape, dtype, parallel, monkeypatch):
    monkeypatch.setattr(pool_jit, "PARALLEL_MIN_WORK", 0 if parallel else 1 << 40)
    rng = np.random.default_rng(shape[-1])
    x = rng.integers(-2, 3, shape).astype(dtype)  # ties in most windows
    x.flat[rng.integers(0, x.size, 3)] = np.nan
    attrs = dict(kernel_shape=[2, 2], strides=[2, 2])
    win = make_window(x.shape[2:], [2, 2], [2, 2], None, None, "NOTSET")
    assert pool_jit.tiles_2x2(x, win)
    with jit.disabled():
        want = max_pool_cpu(x, output_mask=(True, False), **attrs)[0]
    got = max_pool_cpu(x, output_mask=(True, False), **attrs)[0]
    assert got.dtype == want.dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)
    dy = rng.standard_normal(want.shape).astype(dtype)
    with jit.disabled():
        want_dx = max_pool_gradient_cpu(x, want, dy, **attrs)[0]
    got_dx = max_pool_gradient_cpu(x, want, dy, **attrs)[0]
    assert got_dx.dtype == want_dx.dtype
    np.testing.assert_array_equal(got_dx, want_dx)
    assert np.count_nonzero(got_dx) == np.count_nonzero(dy)  # one pixel per window


def test_max_pool_2x2_leaves_windows_that_do_not_tile():
    x = np.ones((1, 2, 5, 4), np.float32)
    win = make_window(x.shape[2:], [2, 2], [2, 2], None, None, "NOTSET")  # a row left over
    assert not pool_jit.tiles_2x2(x, win)
    x = np.ones((1, 2, 4, 4), np.float32)
    assert not pool_jit.tiles_2x2(x[:, :, ::-1], win)  # not C-ordered
    padded = make_window(x.shape[2:], [2, 2], [2, 2], None, [1, 1, 1, 1], "NOTSET")
    assert not pool_jit.tiles_2x2(x, padded)
    assert not pool_jit.tiles_2x2(x.astype(np.float16), win)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    attrs = dict(kernel_shape=[2, 2], strides=[2, 2])
    y = max_pool_cpu(x, output_mask=(True, False), **attrs)[0]
    dy = rng.standard_normal(y.shape).astype(np.float32)
    with jit.disabled():
        want = max_pool_gradient_cpu(x, y, dy, **attrs)[0]
    np.testing.assert_array_equal(max_pool_gradient_cpu(x, y, dy, **attrs)[0], want)


def test_max_pool_2x2_gradient_of_a_y_not_pooled_from_x_goes_nowhere():
    """Where no pixel of a window equals Y (a Y that X did not give), the 2x2 loop drops
    dY, as its oracle (pool_grad's NumPy path for tiling windows) does."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4, 6)).astype(np.float32)
    attrs = dict(kernel_shape=[2, 2], strides=[2, 2])
    y = max_pool_cpu(x, output_mask=(True, False), **attrs)[0]
    y[0, 1, 1, 2] += 1.0  # matches no pixel of its window
    dy = rng.standard_normal(y.shape).astype(np.float32)
    got = max_pool_gradient_cpu(x, y, dy, **attrs)[0]
    with jit.disabled():
        want = max_pool_gradient_cpu(x, y, dy, **attrs)[0]
    np.testing.assert_array_equal(got, want)
    assert not got[0, 1, 2:4, 4:6].any()
