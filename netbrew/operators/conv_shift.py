"""Shift-and-add ("kn2row") 2-D convolution for stride-1 convs that narrow the channels.

im2col copies every input pixel once per kernel tap (9 times for a 3x3 kernel) and then runs
one GEMM. Where a conv has far fewer output than input channels (DenseNet's 128 -> 32 3x3
convs), that copy costs as much as the GEMM. kn2row skips it:

1. one GEMM of the taps' stacked weights (taps * M, C) against the padded image as it lies in
   memory, (C, Hp * Wp): Z[t * M + m, q] is tap t's contribution from flat pixel q;
2. output pixel (oh, ow) sits at flat position p = oh * Wp + ow, and tap t = (i, j) reads the
   pixel at p + i * dil_h * Wp + j * dil_w, so the output is the sum over taps of Z's row
   block t shifted left by that offset: taps additions over (M, positions) instead of a copy
   over (taps * C, positions).

The summed rows carry Wp - Wo extra columns per output row, dropped by the final copy (which
also adds the bias). With stride 1 every flat offset stays inside the padded image, so no
guard columns are needed.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from netbrew.operators.window import Window, pad_to_windows, scratch


def use_shift(in_channels: int, out_channels: int, win: Window, group: int) -> bool:
    """Whether `shift_correlate` beats im2col for this conv: 2-D, stride 1, ungrouped, a
    kernel larger than 1x1, and at most half as many output as input channels (measured on
    DenseNet's and ResNet's shapes: at M = C the two are even, above it im2col wins)."""
    return (
        group == 1
        and len(win.kernel) == 2
        and win.strides == (1, 1)
        and math.prod(win.kernel) > 1
        and 2 * out_channels <= in_channels
    )


def shift_correlate(
    x: np.ndarray, w: np.ndarray, win: Window, bias: np.ndarray | None = None
) -> np.ndarray:
    """The stride-1 2-D convolution of x (N, C, H, W) with w (M, C, kh, kw), plus `bias` (M,)
    if given: (N, M, Ho, Wo), computed by shift-and-add (see the module docstring)."""
    batch, channels = x.shape[:2]
    m = w.shape[0]
    (kh, kw), (dh, dw), (ho, wo) = win.kernel, win.dilations, win.out
    xp = np.ascontiguousarray(pad_to_windows(x, win))  # (N, C, Ho + span - 1, Wo + span - 1)
    hp, wp = xp.shape[2:]
    stacked = w.transpose(2, 3, 0, 1).reshape(kh * kw * m, channels)  # row block t: tap t
    offsets = [i * dh * wp + j * dw for i in range(kh) for j in range(kw)]
    length = (ho - 1) * wp + wo  # flat positions from the first output pixel to the last
    y = np.empty((batch, m, ho, wo), x.dtype)
    for n in range(batch):
        z = scratch("shift_z", (kh * kw, m, hp * wp), x.dtype)
        np.matmul(stacked, xp[n].reshape(channels, hp * wp), out=z.reshape(kh * kw * m, -1))
        acc = scratch("shift_acc", (m, ho * wp), x.dtype)[:, :length]
        np.add(z[0, :, offsets[0] :][:, :length], z[1, :, offsets[1] :][:, :length], out=acc)
        for t in range(2, kh * kw):
            acc += z[t, :, offsets[t] :][:, :length]
        item = acc.itemsize
        rows = as_strided(acc, (m, ho, wo), (acc.strides[0], wp * item, item), writeable=False)
        if bias is None:
            np.copyto(y[n], rows)
        else:
            np.add(rows, bias.reshape(m, 1, 1), out=y[n])
    return y
