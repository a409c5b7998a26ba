"""Shift-and-add (kn2row) convolution: the same numbers as a direct per-tap reference, and
Conv takes it exactly where `use_shift` says."""

from __future__ import annotations

import numpy as np
import pytest

from netbrew.operators import conv as conv_module
from netbrew.operators.conv import conv_cpu
from netbrew.operators.conv_shift import shift_correlate, use_shift
from netbrew.operators.window import make_window


def direct_conv(x, w, b, pads, dilations):
    """Per-tap reference: pad with np.pad, then one einsum per kernel offset."""
    (top, left), (bottom, right) = pads[:2], pads[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    kh, kw = w.shape[2:]
    dh, dw = dilations
    ho = xp.shape[2] - (kh - 1) * dh
    wo = xp.shape[3] - (kw - 1) * dw
    y = np.zeros((x.shape[0], w.shape[0], ho, wo))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dh : i * dh + ho, j * dw : j * dw + wo]
            y += np.einsum("nchw,mc->nmhw", patch, w[:, :, i, j])
    return y if b is None else y + b.reshape(1, -1, 1, 1)


CASES = [
    # (N, C, H, W), (M, kh, kw), pads [t, l, b, r], dilations
    ((1, 128, 12, 12), (32, 3, 3), [1, 1, 1, 1], (1, 1)),
    ((2, 16, 9, 7), (8, 3, 3), [1, 1, 1, 1], (1, 1)),  # batch 2, non-square
    ((1, 12, 10, 11), (4, 5, 3), [2, 0, 1, 2], (1, 1)),  # asymmetric pads, 5x3 kernel
    ((1, 8, 11, 9), (4, 3, 3), [0, 0, 0, 0], (2, 1)),  # no padding, dilated rows
    ((1, 6, 7, 7), (3, 1, 3), [0, 1, 0, 1], (1, 3)),  # 1x3 kernel, dilated columns
]


@pytest.mark.parametrize("x_shape, w_shape, pads, dilations", CASES)
@pytest.mark.parametrize("with_bias", [False, True])
def test_shift_matches_direct(x_shape, w_shape, pads, dilations, with_bias):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(np.float32)
    m, kh, kw = w_shape
    w = rng.standard_normal((m, x_shape[1], kh, kw)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32) if with_bias else None
    win = make_window(x.shape[2:], w.shape[2:], None, dilations, pads)
    assert use_shift(x.shape[1], m, win, 1)
    got = shift_correlate(x, w, win, b)
    want = direct_conv(x.astype(np.float64), w.astype(np.float64), b, pads, dilations)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    (through_conv,) = conv_cpu(x, w, b, pads=pads, dilations=list(dilations))
    np.testing.assert_allclose(through_conv, got, rtol=1e-5, atol=1e-5)


def test_shift_reads_a_strided_input_and_float64():
    rng = np.random.default_rng(1)
    base = rng.standard_normal((1, 16, 10, 20))
    x = base[:, :, :, ::2]  # not contiguous
    w = rng.standard_normal((4, 16, 3, 3))
    win = make_window(x.shape[2:], w.shape[2:], None, None, [1, 1, 1, 1])
    got = shift_correlate(x, w, win)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, direct_conv(x, w, None, [1, 1, 1, 1], (1, 1)), atol=1e-10)


@pytest.mark.parametrize(
    "channels, out, strides, group, kernel, expected",
    [
        (128, 32, (1, 1), 1, (3, 3), True),
        (64, 32, (1, 1), 1, (3, 3), True),
        (64, 64, (1, 1), 1, (3, 3), False),  # M = C: im2col is as fast
        (128, 32, (2, 2), 1, (3, 3), False),  # strided
        (128, 32, (1, 1), 2, (3, 3), False),  # grouped
        (128, 32, (1, 1), 1, (1, 1), False),  # 1x1: a plain matmul already
    ],
)
def test_use_shift_picks(channels, out, strides, group, kernel, expected):
    win = make_window((14, 14), kernel, strides, None, [1, 1, 1, 1] if kernel[0] == 3 else None)
    assert use_shift(channels, out, win, group) is expected


def test_conv_takes_shift_path_where_chosen(spy):
    calls = spy(conv_module, "shift_correlate")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 32, 8, 8)).astype(np.float32)
    conv_cpu(x, rng.standard_normal((8, 32, 3, 3)).astype(np.float32), pads=[1, 1, 1, 1])
    conv_cpu(x, rng.standard_normal((32, 32, 3, 3)).astype(np.float32), pads=[1, 1, 1, 1])
    assert calls == [(8, 32, 3, 3)]
