"""Depthwise and two-channel-group convolutions through conv_numba's direct loop: the same
numbers as the NumPy path (im2col + GEMM, `jit.disabled()`) on awkward shapes, a float64
per-tap reference and PyTorch, and Conv takes the loop exactly where `use_direct` says."""

from __future__ import annotations

import numpy as np
import pytest

from netbrew import jit
from netbrew.operators import conv as conv_module
from netbrew.operators.conv import conv_cpu
from netbrew.operators.conv_numba import direct_correlate, use_direct
from netbrew.operators.window import make_window

needs_jit = pytest.mark.skipif(not jit.enabled(), reason="numba missing or NETBREW_JIT=0")


def direct_depthwise(x, w, b, pads, dilations, strides=(1, 1)):
    """Per-tap reference in float64 for group = C: output channel m reads input channel
    m // (M / C)."""
    (top, left), (bottom, right) = pads[:2], pads[2:]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    m, _, kh, kw = w.shape
    src = np.repeat(xp, m // x.shape[1], axis=1)  # (N, M, Hp, Wp)
    (dh, dw), (sh, sw) = dilations, strides
    ho = (xp.shape[2] - (kh - 1) * dh - 1) // sh + 1
    wo = (xp.shape[3] - (kw - 1) * dw - 1) // sw + 1
    y = np.zeros((x.shape[0], m, ho, wo))
    for i in range(kh):
        for j in range(kw):
            patch = src[:, :, i * dh : i * dh + (ho - 1) * sh + 1 : sh]
            patch = patch[:, :, :, j * dw : j * dw + (wo - 1) * sw + 1 : sw]
            y += patch * w[:, 0, i, j].reshape(1, m, 1, 1)
    return y if b is None else y + b.reshape(1, -1, 1, 1)


CASES = [
    # (N, C, H, W), multiplier, (kh, kw), pads [t, l, b, r], dilations, strides
    ((1, 16, 14, 14), 1, (3, 3), [1, 1, 1, 1], (1, 1), (1, 1)),  # ShuffleNet's, smaller
    ((1, 16, 15, 15), 1, (3, 3), [1, 1, 1, 1], (1, 1), (2, 2)),  # stride 2, odd size
    ((2, 6, 9, 7), 1, (3, 3), [1, 1, 1, 1], (1, 1), (1, 1)),  # batch 2, non-square
    ((1, 4, 10, 11), 2, (3, 3), [1, 1, 1, 1], (1, 1), (2, 1)),  # multiplier 2, stride 2x1
    ((1, 5, 12, 9), 1, (5, 3), [2, 0, 1, 2], (1, 1), (1, 3)),  # asymmetric pads, stride 3
    ((1, 3, 11, 9), 3, (3, 3), [0, 0, 0, 0], (2, 1), (1, 1)),  # no padding, dilated rows
    ((1, 7, 7, 7), 1, (1, 3), [0, 1, 0, 1], (1, 3), (1, 2)),  # 1x3, dilated columns
    ((1, 8, 1, 6), 1, (3, 3), [1, 1, 1, 1], (1, 1), (1, 1)),  # a single input row
    ((1, 4, 3, 3), 1, (3, 3), [3, 2, 4, 1], (2, 2), (2, 2)),  # windows wholly in padding
    ((1, 5, 13, 11), 1, (3, 3), [2, 1, 0, 1], (2, 1), (1, 2)),  # dilated rows, column stride 2
    ((2, 3, 30, 31), 1, (3, 3), [1, 1, 1, 1], (1, 1), (2, 2)),  # batch 2, odd width, stride 2
    ((1, 6, 5, 2), 1, (3, 3), [2, 2, 2, 2], (1, 1), (2, 2)),  # no window wholly inside
    ((1, 6, 6, 7), 1, (3, 3), [0, 0, 0, 0], (1, 1), (1, 1)),  # no padding: all inside
    ((1, 20, 9, 10), 1, (3, 3), [0, 2, 1, 0], (1, 1), (3, 3)),  # stride 3, uneven pads
    # stride 1, outputs >= 28 wide: conv_last's runs of whole pixels
    ((2, 8, 10, 30), 1, (3, 3), [1, 1, 1, 1], (1, 1), (1, 1)),  # a run spans the row
    ((1, 40, 6, 33), 1, (3, 3), [0, 2, 1, 0], (1, 1), (1, 1)),  # uneven pads, 12 pixels a run
    ((1, 600, 3, 29), 1, (3, 3), [1, 0, 1, 1], (1, 1), (1, 1)),  # wider than a run: 1 pixel
]


@pytest.mark.parametrize("x_shape, mult, kernel, pads, dilations, strides", CASES)
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize(
    "hwc_max, min_work",
    [(0, 0), (0, 10**12), (10**9, 0), (10**9, 10**12)],
    ids=["planes-parallel", "planes-serial", "hwc-parallel", "hwc-serial"],
)
@pytest.mark.parametrize("use_3x3", [True, False], ids=["3x3-loop", "general-loop"])
def test_depthwise_matches_numpy_path_and_reference(
    x_shape, mult, kernel, pads, dilations, strides, with_bias, hwc_max, min_work, use_3x3,
    monkeypatch,
):  # fmt: skip
    """The loops of conv_numba (channel planes) and conv_last (channels-last), the 3x3 ones
    and the general ones, each on one thread and on all of them."""
    from netbrew.operators import conv_last, conv_numba

    monkeypatch.setattr(conv_numba, "HWC_MAX_PIXELS", hwc_max)
    monkeypatch.setattr(conv_numba, "PARALLEL_MIN_WORK", min_work)
    monkeypatch.setattr(conv_last, "PARALLEL_MIN_WORK", min_work)
    monkeypatch.setattr(conv_numba, "USE_3X3", use_3x3)
    monkeypatch.setattr(conv_last, "USE_3X3", use_3x3)
    rng = np.random.default_rng(0)
    c = x_shape[1]
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((c * mult, 1, *kernel)).astype(np.float32)
    b = rng.standard_normal(c * mult).astype(np.float32) if with_bias else None
    attrs = dict(pads=pads, dilations=list(dilations), strides=list(strides), group=c)
    (got,) = conv_cpu(x, w, b, **attrs)
    with jit.disabled():
        (numpy_path,) = conv_cpu(x, w, b, **attrs)
    want = direct_depthwise(x, w, b, pads, dilations, strides)
    assert got.shape == want.shape == numpy_path.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, numpy_path, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@needs_jit
@pytest.mark.parametrize("strides", [(1, 1), (2, 2)])
def test_two_channel_groups_and_float64_match_numpy_path(strides):
    rng = np.random.default_rng(1)
    x = np.asfortranarray(
        rng.standard_normal((2, 8, 9, 10))
    )  # not C-order: the loop takes a contiguous copy
    w = rng.standard_normal((12, 2, 3, 3))  # 4 groups of 2 input, 3 output channels
    b = rng.standard_normal(12)
    attrs = dict(pads=[1, 0, 2, 1], strides=list(strides), group=4)
    win = make_window(x.shape[2:], (3, 3), strides, None, attrs["pads"])
    assert use_direct(8, 4, win)
    (got,) = conv_cpu(x, w, b, **attrs)
    with jit.disabled():
        (want,) = conv_cpu(x, w, b, **attrs)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@needs_jit
@pytest.mark.parametrize("clamp", [(0.0, np.inf), (0.0, 6.0), (-0.5, 0.25)])
def test_direct_applies_the_clamp_after_the_bias(clamp):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 6, 8, 8)).astype(np.float32) * 4
    w = rng.standard_normal((6, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    win = make_window(x.shape[2:], (3, 3), None, None, [1, 1, 1, 1])
    got = direct_correlate(x, w, win, b, clamp)
    want = np.clip(direct_correlate(x, w, win, b), *clamp)
    np.testing.assert_array_equal(got, want)
    assert got.max() <= clamp[1] and got.min() >= clamp[0]


def test_depthwise_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 12, 15, 13)).astype(np.float32)
    w = rng.standard_normal((24, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    (got,) = conv_cpu(x, w, b, pads=[1, 1, 1, 1], strides=[2, 2], group=12)
    want = torch.nn.functional.conv2d(
        torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), 2, 1, groups=12
    )
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "channels, strides, group, kernel, expected",
    [
        (32, (1, 1), 32, (3, 3), True),
        (32, (2, 2), 32, (3, 3), True),  # strided
        (32, (1, 1), 16, (3, 3), True),  # two channels a group
        (32, (1, 1), 8, (3, 3), False),  # four channels a group: GEMM
        (32, (1, 1), 32, (1, 1), False),  # 1x1: a per-channel scale already
        (32, (1, 1), 1, (3, 3), False),  # ungrouped
    ],
)
def test_use_direct_picks(channels, strides, group, kernel, expected):
    pads = [1, 1, 1, 1] if kernel[0] == 3 else None
    win = make_window((14, 14), kernel, strides, None, pads)
    assert use_direct(channels, group, win) is (expected and jit.enabled())
    with jit.disabled():
        assert not use_direct(channels, group, win)


def test_conv_takes_direct_path_only_with_the_jit_on(spy):
    calls = spy(conv_module, "direct_correlate")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 16, 8, 8)).astype(np.float32)
    w = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
    conv_cpu(x, w, pads=[1, 1, 1, 1], group=16, strides=[2, 2])
    with jit.disabled():
        conv_cpu(x, w, pads=[1, 1, 1, 1], group=16)
    assert calls == ([(16, 1, 3, 3)] if jit.enabled() else [])


@needs_jit
def test_direct_empty_batch():
    x = np.zeros((0, 4, 5, 5), np.float32)
    w = np.ones((4, 1, 3, 3), np.float32)
    got = direct_correlate(x, w, make_window(x.shape[2:], (3, 3), None, None, None))
    assert got.shape == (0, 4, 3, 3)


@needs_jit
@pytest.mark.parametrize("least", [0, 10**12], ids=["parallel", "serial"])
def test_epilogue_on_one_thread_and_on_all(least, monkeypatch):
    from netbrew.operators import conv_numba

    monkeypatch.setattr(conv_numba, "PARALLEL_MIN_ELEMENTS", least)
    rng = np.random.default_rng(3)
    y = rng.standard_normal((2, 5, 3, 7)).astype(np.float32)
    bias, residual = rng.standard_normal(5).astype(np.float32), rng.standard_normal(y.shape)
    residual = residual.astype(np.float32)
    want = np.clip(y + bias.reshape(1, 5, 1, 1) + residual, 0.0, 6.0)
    got = conv_numba.epilogue(y.copy(), bias, residual, (0.0, 6.0))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
