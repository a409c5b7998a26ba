"""Depthwise convolution by flat rows: the same numbers as a direct per-tap reference (and
PyTorch where installed), and Conv takes it exactly where `use_depthwise` says."""

from __future__ import annotations

import numpy as np
import pytest

from netbrew.operators import conv as conv_module
from netbrew.operators.conv import conv_cpu
from netbrew.operators.conv_depthwise import depthwise_correlate, use_depthwise
from netbrew.operators.window import make_window


def direct_depthwise(x, w, b, pads, dilations):
    """Per-tap reference in float64: output channel m reads input channel m // (M / C)."""
    (top, left), (bottom, right) = pads[:2], pads[2:]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    m, _, kh, kw = w.shape
    src = np.repeat(xp, m // x.shape[1], axis=1)  # (N, M, Hp, Wp)
    dh, dw = dilations
    ho, wo = xp.shape[2] - (kh - 1) * dh, xp.shape[3] - (kw - 1) * dw
    y = np.zeros((x.shape[0], m, ho, wo))
    for i in range(kh):
        for j in range(kw):
            patch = src[:, :, i * dh : i * dh + ho, j * dw : j * dw + wo]
            y += patch * w[:, 0, i, j].reshape(1, m, 1, 1)
    return y if b is None else y + b.reshape(1, -1, 1, 1)


CASES = [
    # (N, C, H, W), multiplier, (kh, kw), pads [t, l, b, r], dilations
    ((1, 16, 14, 14), 1, (3, 3), [1, 1, 1, 1], (1, 1)),  # ShuffleNet's shape, smaller
    ((2, 6, 9, 7), 1, (3, 3), [1, 1, 1, 1], (1, 1)),  # batch 2, non-square
    ((1, 4, 10, 11), 2, (3, 3), [1, 1, 1, 1], (1, 1)),  # channel multiplier 2
    ((1, 5, 12, 9), 1, (5, 3), [2, 0, 1, 2], (1, 1)),  # asymmetric pads, 5x3 kernel
    ((1, 3, 11, 9), 3, (3, 3), [0, 0, 0, 0], (2, 1)),  # no padding, dilated rows
    ((1, 7, 7, 7), 1, (1, 3), [0, 1, 0, 1], (1, 3)),  # 1x3 kernel, dilated columns
    ((1, 8, 1, 6), 1, (3, 3), [1, 1, 1, 1], (1, 1)),  # a single input row
]


@pytest.mark.parametrize("x_shape, mult, kernel, pads, dilations", CASES)
@pytest.mark.parametrize("with_bias", [False, True])
def test_depthwise_matches_direct(x_shape, mult, kernel, pads, dilations, with_bias):
    rng = np.random.default_rng(0)
    c = x_shape[1]
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((c * mult, 1, *kernel)).astype(np.float32)
    b = rng.standard_normal(c * mult).astype(np.float32) if with_bias else None
    win = make_window(x.shape[2:], kernel, None, dilations, pads)
    assert use_depthwise(c, c * mult, win, c)
    got = depthwise_correlate(x, w, win, b)
    want = direct_depthwise(x, w, b, pads, dilations)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    (through_conv,) = conv_cpu(x, w, b, pads=pads, dilations=list(dilations), group=c)
    np.testing.assert_array_equal(through_conv, got)


def test_depthwise_reads_a_strided_input_in_float64():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 6, 10, 20))[:, :, :, ::2]  # not contiguous
    w = rng.standard_normal((6, 1, 3, 3))
    win = make_window(x.shape[2:], (3, 3), None, None, [1, 1, 1, 1])
    got = depthwise_correlate(x, w, win)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, direct_depthwise(x, w, None, [1] * 4, (1, 1)), atol=1e-12)
    # unpadded: the input itself is read in place of a padded copy
    win = make_window(x.shape[2:], (3, 3), None, None, None)
    got = depthwise_correlate(x, w, win)
    np.testing.assert_allclose(got, direct_depthwise(x, w, None, [0] * 4, (1, 1)), atol=1e-12)


def test_depthwise_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 12, 15, 13)).astype(np.float32)
    w = rng.standard_normal((24, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    (got,) = conv_cpu(x, w, b, pads=[1, 1, 1, 1], group=12)
    want = torch.nn.functional.conv2d(
        torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), padding=1, groups=12
    )
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "channels, out, strides, group, kernel, expected",
    [
        (32, 32, (1, 1), 32, (3, 3), True),
        (32, 64, (1, 1), 32, (3, 3), True),  # multiplier 2
        (32, 32, (2, 2), 32, (3, 3), False),  # strided
        (32, 32, (1, 1), 8, (3, 3), False),  # grouped, not depthwise
        (32, 32, (1, 1), 32, (1, 1), False),  # 1x1: a per-channel scale already
        (32, 32, (1, 1), 1, (3, 3), False),  # ungrouped
    ],
)
def test_use_depthwise_picks(channels, out, strides, group, kernel, expected):
    pads = [1, 1, 1, 1] if kernel[0] == 3 else None
    win = make_window((14, 14), kernel, strides, None, pads)
    assert use_depthwise(channels, out, win, group) is expected


def test_conv_takes_depthwise_path_where_chosen(spy):
    calls = spy(conv_module, "depthwise_correlate")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 16, 8, 8)).astype(np.float32)
    w = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
    conv_cpu(x, w, pads=[1, 1, 1, 1], group=16)
    conv_cpu(x, w, pads=[1, 1, 1, 1], group=16, strides=[2, 2])
    assert calls == [(16, 1, 3, 3)]


@pytest.mark.parametrize("block_bytes", [1, 3000, 1 << 20])
def test_channel_blocks_give_the_same_numbers(monkeypatch, block_bytes):
    """Columns above SPLIT_BYTES go a block of channels at a time: 1 byte means one
    channel per block, 3000 bytes two (1440 bytes of columns each): the last block holds one."""
    from netbrew.operators import conv_depthwise

    monkeypatch.setattr(conv_depthwise, "SPLIT_BYTES", 0)
    monkeypatch.setattr(conv_depthwise, "BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 7, 6, 5)).astype(np.float32)
    w = rng.standard_normal((14, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(14).astype(np.float32)
    win = make_window(x.shape[2:], (3, 3), None, None, [1, 1, 1, 1])
    got = depthwise_correlate(x, w, win, b)
    want = direct_depthwise(x, w, b, [1, 1, 1, 1], (1, 1))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
