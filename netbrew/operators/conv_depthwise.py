"""Depthwise 2-D convolution (group = input channels) through flat rows, at any stride.

im2col copies each window pixel into its column one output row at a time, so a depthwise
conv on a small image pays numpy's per-row cost C * K * Ho times, for rows of only Wo values;
its GEMM, one (M/C, K) x (K, positions) product per channel, costs less than that copy.

Flat rows: split the padded image into its stride phases, phase (a, b) holding padded pixels
(sh * q + a, sw * r + b) as a (Hq, Wq) image laid out flat (at stride 1 the one phase is the
padded image itself). Output pixel (oh, ow) sits at p = oh * Wq + ow, and kernel tap (i, j)
reads phase (dh * i % sh, dw * j % sw) at p + (dh * i // sh) * Wq + dw * j // sw. So tap t's
column of every output pixel is one contiguous run of a flat phase, and the columns are
C * K long copies instead of C * K * Ho short ones. Each run carries Wq - Wo values per
output row that no output uses; the final copy (which also adds the bias) drops them.
"""

from __future__ import annotations

import numpy as np

from netbrew.operators.window import Window, pad_to_windows, scratch


def use_depthwise(in_channels: int, out_channels: int, win: Window, group: int) -> bool:
    """Whether `depthwise_correlate` computes this conv: 2-D, one group per input channel
    (any channel multiplier M / C), a kernel larger than 1x1. (Measured against im2col: 1.2-1.4x
    faster on ShuffleNet's stride-1 28x28, 14x14 and 7x7 depthwise convs; at stride 2 as fast
    on its 56x56 to 14x14 inputs, 1.5x on a 96-channel 112x112 one (MobileNet's); on ordinary
    convs the unused columns cost the GEMM more than the copy saves.)"""
    return (
        group == in_channels
        and out_channels % in_channels == 0
        and len(win.kernel) == 2
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
    """The depthwise convolution of x (N, C, H, W) with w (M, 1, kh, kw), M a multiple of C,
    plus `bias` (M,) if given: (N, M, Ho, Wo), by flat rows (see the module docstring), a
    block of channels at a time."""
    batch, channels = x.shape[:2]
    m = w.shape[0]
    mult = m // channels
    (kh, kw), (dh, dw), (sh, sw), (ho, wo) = win.kernel, win.dilations, win.strides, win.out
    phases = _phases(x, win)  # (N, C, sh * sw, Hq * Wq)
    wq = wo + dw * (kw - 1) // sw
    length = (ho - 1) * wq + wo  # flat positions from the first output pixel to the last
    taps = [
        ((dh * i % sh) * sw + dw * j % sw, (dh * i // sh) * wq + dw * j // sw)
        for i in range(kh)
        for j in range(kw)
    ]  # (phase, offset) of each tap's run
    item = phases.itemsize
    per_channel = kh * kw * length * item
    block = channels if channels * per_channel <= SPLIT_BYTES else BLOCK_BYTES // per_channel
    block = max(1, min(channels, block))
    cols = scratch("depthwise_cols", (batch, block, kh * kw, length), x.dtype)
    flat = scratch("depthwise_y", (batch, block, mult, length), x.dtype)
    y = np.empty((batch, m, ho, wo), x.dtype)
    weights = w.reshape(channels, mult, kh * kw)
    for start in range(0, channels, block):
        n = min(block, channels - start)
        if (sh, sw) == (1, 1):  # the taps' runs are evenly spaced: one copy of them all
            view = np.ndarray(
                (batch, n, kh, kw, length),
                x.dtype,
                buffer=phases,
                offset=start * phases.strides[1],
                strides=(*phases.strides[:2], dh * wq * item, dw * item, item),
            )
            np.copyto(cols[:, :n].reshape(view.shape), view)
        else:
            for t, (phase, offset) in enumerate(taps):
                run = phases[:, start : start + n, phase, offset : offset + length]
                np.copyto(cols[:, :n, t], run)
        np.matmul(weights[start : start + n], cols[:, :n], out=flat[:, :n])
        rows = np.ndarray(
            (batch, n * mult, ho, wo),
            x.dtype,
            buffer=flat,
            strides=(flat.strides[0], length * item, wq * item, item),
        )
        part = y[:, start * mult : (start + n) * mult]
        if bias is None:
            np.copyto(part, rows)
        else:
            np.add(rows, bias[start * mult : (start + n) * mult].reshape(-1, 1, 1), out=part)
    return y


def _phases(x: np.ndarray, win: Window) -> np.ndarray:
    """The padded image's stride phases, (N, C, sh * sw, Hq * Wq): [..., a * sw + b, q * Wq
    + r] is padded pixel (sh * q + a, sw * r + b), zero outside x. At stride 1, the padded
    image (x itself where nothing is padded or cropped)."""
    (kh, kw), (dh, dw), (sh, sw), (ho, wo) = win.kernel, win.dilations, win.strides, win.out
    if (sh, sw) == (1, 1):
        xp = pad_to_windows(x, win)  # (N, C, Ho + span_h - 1, Wo + span_w - 1)
        if not xp.flags.c_contiguous:
            xp = np.ascontiguousarray(xp)
        return xp.reshape(*xp.shape[:2], 1, -1)
    batch, channels, height, width = x.shape
    hq, wq = ho + dh * (kh - 1) // sh, wo + dw * (kw - 1) // sw
    out = scratch("depthwise_phases", (batch, channels, sh, sw, hq, wq), x.dtype)
    (top, left) = win.begin
    for a in range(sh):
        i0, q0, nq = _phase_span(a, top, sh, height, hq)
        for b in range(sw):
            j0, r0, nr = _phase_span(b, left, sw, width, wq)
            p = out[:, :, a, b]
            if nq <= 0 or nr <= 0:
                p[...] = 0
                continue
            p[:, :, :q0] = 0
            p[:, :, q0 + nq :] = 0
            p[:, :, q0 : q0 + nq, :r0] = 0
            p[:, :, q0 : q0 + nq, r0 + nr :] = 0
            p[:, :, q0 : q0 + nq, r0 : r0 + nr] = x[
                :, :, i0 : i0 + sh * nq : sh, j0 : j0 + sw * nr : sw
            ]
    return out.reshape(batch, channels, sh * sw, hq * wq)


def _phase_span(phase: int, pad: int, stride: int, size: int, count: int):
    """For one axis: the first input index i0 that lands in `phase` (padded index i0 + pad
    = stride * q0 + phase, i0 >= 0), that q0, and how many of the phase's `count` places
    from q0 on hold input (<= 0: none)."""
    i0 = max(0, -pad)
    i0 += (phase - pad - i0) % stride
    q0 = (i0 + pad - phase) // stride
    return i0, q0, min(len(range(i0, size, stride)), count - q0)
