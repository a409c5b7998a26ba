"""Depthwise 2-D convolution (group = input channels) at stride 1, through flat rows.

im2col copies each window pixel into its column one output row at a time, so a depthwise
conv on a small image pays numpy's per-row cost C * K * Ho times, for rows of only Wo values;
its GEMM, one (M/C, K) x (K, positions) product per channel, costs less than that copy.

Flat rows: in the padded image (C, Hp, Wp), laid out flat, output pixel (oh, ow) sits at
p = oh * Wp + ow and kernel tap (i, j) reads p + i * dil_h * Wp + j * dil_w. So tap t's
column of every output pixel is one contiguous run of the flat image, and the columns are
C * K long copies instead of C * K * Ho short ones. Each run carries Wp - Wo values per
output row that no output uses; the final copy (which also adds the bias) drops them.
With stride 1 every run stays inside the padded image.
"""

from __future__ import annotations

import numpy as np

from netbrew.operators.window import Window, pad_to_windows, scratch


def use_depthwise(in_channels: int, out_channels: int, win: Window, group: int) -> bool:
    """Whether `depthwise_correlate` computes this conv: 2-D, stride 1, one group per input
    channel (any channel multiplier M / C), a kernel larger than 1x1. (Measured against
    im2col inside ShuffleNet: 1.2-1.4x faster on its 28x28, 14x14 and 7x7 depthwise convs;
    on ordinary convs the unused columns cost the GEMM more than the copy saves.)"""
    return (
        group == in_channels
        and out_channels % in_channels == 0
        and len(win.kernel) == 2
        and win.strides == (1, 1)
        and win.kernel != (1, 1)
    )


def depthwise_correlate(
    x: np.ndarray, w: np.ndarray, win: Window, bias: np.ndarray | None = None
) -> np.ndarray:
    """The stride-1 depthwise convolution of x (N, C, H, W) with w (M, 1, kh, kw), M a
    multiple of C, plus `bias` (M,) if given: (N, M, Ho, Wo), by flat rows (see the module
    docstring)."""
    batch, channels = x.shape[:2]
    m = w.shape[0]
    (kh, kw), (dh, dw), (ho, wo) = win.kernel, win.dilations, win.out
    xp = pad_to_windows(x, win)  # (N, C, Ho + span_h - 1, Wo + span_w - 1)
    if not xp.flags.c_contiguous:
        xp = np.ascontiguousarray(xp)
    hp, wp = xp.shape[2:]
    length = (ho - 1) * wp + wo  # flat positions from the first output pixel to the last
    item = xp.itemsize
    taps = np.ndarray(
        (batch, channels, kh, kw, length),
        xp.dtype,
        buffer=xp,
        strides=(xp.strides[0], xp.strides[1], dh * wp * item, dw * item, item),
    )
    cols = scratch("depthwise_cols", (batch, channels, kh, kw, length), x.dtype)
    np.copyto(cols, taps)
    flat = scratch("depthwise_y", (batch, channels, m // channels, length), x.dtype)
    np.matmul(
        w.reshape(channels, m // channels, kh * kw),
        cols.reshape(batch, channels, kh * kw, length),
        out=flat,
    )
    rows = np.ndarray(
        (batch, m, ho, wo),
        x.dtype,
        buffer=flat,
        strides=(flat.strides[0], length * item, wp * item, item),
    )
    y = np.empty((batch, m, ho, wo), x.dtype)
    if bias is None:
        np.copyto(y, rows)
    else:
        np.add(rows, bias.reshape(m, 1, 1), out=y)
    return y
