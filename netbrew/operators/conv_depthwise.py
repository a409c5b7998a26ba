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
    on ordinary convs the unused columns cost the GEMM more than the copy saves. Strided
    ones stay on im2col: through the stride phases, split once and then read as flat rows,
    they ran 0.5-1.2x im2col's time op by op with no rule that held across sizes (0.52x on
    96x112x112, 1.05x on 32x112x112, 1.2x on 112x56x56) and 1.15x inside ShuffleNet.)"""
    return (
        group == in_channels
        and out_channels % in_channels == 0
        and len(win.kernel) == 2
        and win.strides == (1, 1)
        and win.kernel != (1, 1)
    )


BLOCK_BYTES = 1 << 20
"""Columns per block of channels, where the whole image's exceed SPLIT_BYTES: each block is
copied, multiplied and cropped while it is in cache. (Measured inside ShuffleNet: its 28x28
depthwise convs, 4 MiB of columns, take 0.6-0.9x the time in 1 MiB blocks; its 14x14 and
7x7 ones, 1-2 MiB, lose more to the extra calls than they gain.)"""
SPLIT_BYTES = 3 << 20


def depthwise_correlate(
    x: np.ndarray, w: np.ndarray, win: Window, bias: np.ndarray | None = None
) -> np.ndarray:
    """The stride-1 depthwise convolution of x (N, C, H, W) with w (M, 1, kh, kw), M a
    multiple of C, plus `bias` (M,) if given: (N, M, Ho, Wo), by flat rows (see the module
    docstring), a block of channels at a time."""
    batch, channels = x.shape[:2]
    m = w.shape[0]
    mult = m // channels
    (kh, kw), (dh, dw), (ho, wo) = win.kernel, win.dilations, win.out
    xp = pad_to_windows(x, win)  # (N, C, Ho + span_h - 1, Wo + span_w - 1)
    if not xp.flags.c_contiguous:
        xp = np.ascontiguousarray(xp)
    hp, wp = xp.shape[2:]
    length = (ho - 1) * wp + wo  # flat positions from the first output pixel to the last
    item = xp.itemsize
    per_channel = kh * kw * length * item
    block = channels if channels * per_channel <= SPLIT_BYTES else BLOCK_BYTES // per_channel
    block = max(1, min(channels, block))
    cols = scratch("depthwise_cols", (batch, block, kh, kw, length), x.dtype)
    flat = scratch("depthwise_y", (batch, block, mult, length), x.dtype)
    y = np.empty((batch, m, ho, wo), x.dtype)
    weights = w.reshape(channels, mult, kh * kw)
    for start in range(0, channels, block):
        n = min(block, channels - start)
        taps = np.ndarray(
            (batch, n, kh, kw, length),
            xp.dtype,
            buffer=xp,
            offset=start * xp.strides[1],
            strides=(xp.strides[0], xp.strides[1], dh * wp * item, dw * item, item),
        )
        np.copyto(cols[:, :n], taps)
        np.matmul(
            weights[start : start + n],
            cols[:, :n].reshape(batch, n, kh * kw, length),
            out=flat[:, :n],
        )
        rows = np.ndarray(
            (batch, n * mult, ho, wo),
            x.dtype,
            buffer=flat,
            strides=(flat.strides[0], length * item, wp * item, item),
        )
        part = y[:, start * mult : (start + n) * mult]
        if bias is None:
            np.copyto(part, rows)
        else:
            np.add(rows, bias[start * mult : (start + n) * mult].reshape(-1, 1, 1), out=part)
    return y
