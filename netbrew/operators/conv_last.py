"""Channels-last convolutions: depthwise and pointwise (1x1) convs whose images are (N, H, W, C)
in memory, handed between ops as (N, C, H, W) views of that memory.

A depthwise conv on a small image computes channels-last: each output pixel's taps are
multiply-adds along the channels, one contiguous run each, which vectorise. Its output
stays channels-last (the NCHW-shaped view `y.transpose(0, 3, 1, 2)`), and the ops that
follow in MobileNet-class blocks read it in place: a 1x1 conv is the GEMM
(H W, C) x (C, M) of the channels-last image, with its bias, residual and clamp applied in
one pass along the channels (`pointwise`), and a depthwise conv needs no transpose. So once
one block goes channels-last the rest of the chain stays there, and the transposes that a
per-op channels-last kernel pays on each side vanish. Any other op reads the view as the
NCHW array it is (NumPy follows the strides; a kernel that wants C order copies it).

Measured op by op (2 threads, fastest of 60 runs), the channels-last depthwise 3x3 against
the channel-plane loop (conv_numba._depthwise3x3) on NCHW memory: 192 channels at 28x28
0.094 against 0.19 ms, 144 at 56x56 stride 2 0.11 against 0.56, 384 at 14x14 0.073 against
0.25, 960 at 7x7 0.040 against 0.28; the plane loop stays ahead on wide images reached in
NCHW, where transposing the input first costs more (32 channels at 112x112: 0.22 against
0.37 + 0.15 ms).
"""

from __future__ import annotations

import numpy as np

from netbrew import jit
from netbrew.operators.window import Window, im2col

PARALLEL_MIN_ELEMENTS = 1 << 19
"""Outputs below which the epilogue runs on one thread (as conv_numba's)."""


def bias_vector(bias: np.ndarray | None, m: int, dtype: np.dtype) -> np.ndarray:
    """The (M,) bias a numba epilogue adds: `bias` contiguous in `dtype`, or zeros."""
    return np.zeros(m, dtype) if bias is None else np.ascontiguousarray(bias, dtype)


def channels_last(x: np.ndarray) -> bool:
    """Whether x (N, C, H, W) is a view of C-ordered (N, H, W, C) memory and not also
    C-ordered itself (a 1x1 image is both: it counts as NCHW)."""
    return x.ndim == 4 and not x.flags.c_contiguous and x.transpose(0, 2, 3, 1).flags.c_contiguous


def to_last(x: np.ndarray) -> np.ndarray:
    """x (N, C, H, W) as C-ordered (N, H, W, C): no copy where x is channels-last."""
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1))


@jit.kernel
def _depthwise(x, w, bias, y, sh, sw, dh, dw, top, left, lo, hi):
    """The depthwise conv (one channel a group, multiplier 1) channels-last: x (N, H, W, C),
    w (kh, kw, C), y (N, Ho, Wo, C), y = clamp(bias + the taps inside x), pixel by pixel."""
    batch, ho, wo = y.shape[0], y.shape[1], y.shape[2]
    for noh in jit.prange(batch * ho):
        n = noh // ho
        oh = noh % ho
        for ow in range(wo):
            _pixel(x, w, bias, y[n, oh, ow], n, oh, ow, sh, sw, dh, dw, top, left, lo, hi)


@jit.kernel
def _depthwise3x3(x, w, bias, y, sh, sw, top, left, lo, hi, per):
    """`_depthwise` for undilated 3x3 windows: each output row's three input rows are fixed
    once (a zero row for padding), and every pixel whose window lies inside the row sums
    its nine taps for all channels in one vectorised loop, one store per value (the
    per-tap loop stores the partial sums nine times). The columns at the edges go pixel
    by pixel. Op by op, one thread: 0.6-0.85x `_depthwise`'s time on MobileNetV2's and
    ShuffleNet's shapes, 0.28x on 32 channels at 112x112.

    With `per` > 0 (stride 1 only), the inner pixels go in runs of `per` whole pixels
    instead: a run is one loop, the nine weights and the bias repeated to its length once
    per call, so the loop is long however few the channels (per pixel it runs C values at
    a time: 32 at MobileNetV2's 112x112). Every source run is a slice indexed by the loop
    variable alone (an index such as q + channels would be checked for wrapping below
    zero, which keeps a loop scalar). One thread, op by op, paired with the per-pixel loop:
    32 channels at 112x112 0.69x, 96 at 56x56 0.80x, 144 at 56x56 0.86x, 136-192 at 28x28
    0.93-0.96x; at 7x7 1.08x, which RUNS_MIN_WIDTH keeps per pixel."""
    batch, height, width, channels = x.shape
    ho, wo = y.shape[1], y.shape[2]
    rows = x.reshape(batch, height, width * channels)
    outs = y.reshape(batch, ho, wo * channels)
    zero = np.zeros(width * channels, x.dtype)
    w00, w01, w02 = w[0, 0], w[0, 1], w[0, 2]
    w10, w11, w12 = w[1, 0], w[1, 1], w[1, 2]
    w20, w21, w22 = w[2, 0], w[2, 1], w[2, 2]
    taps = np.empty((10, per * channels), x.dtype)  # the nine weights and the bias, repeated
    for p in range(per):
        for k in range(channels):
            for t in range(9):
                taps[t, p * channels + k] = w[t // 3, t % 3, k]
            taps[9, p * channels + k] = bias[k]
    t0, t1, t2, t3, t4 = taps[0], taps[1], taps[2], taps[3], taps[4]
    t5, t6, t7, t8, tb = taps[5], taps[6], taps[7], taps[8], taps[9]
    first = min(wo, (left + sw - 1) // sw)  # the first column whose window starts inside x
    last = max(first, min(wo, (width - 3 + left) // sw + 1))  # past the last one inside
    for noh in jit.prange(batch * ho):
        n = noh // ho
        oh = noh % ho
        r = oh * sh - top
        s0 = rows[n, r] if 0 <= r < height else zero
        s1 = rows[n, r + 1] if 0 <= r + 1 < height else zero
        s2 = rows[n, r + 2] if 0 <= r + 2 < height else zero
        for ow in range(first, last, max(per, 1)):
            if per > 0:  # a run of whole pixels at stride 1
                size = min(per, last - ow) * channels
                at, src = ow * channels, (ow - left) * channels
                mid, end = src + channels, src + 2 * channels
                a0, a1, a2 = s0[src : src + size], s0[mid : mid + size], s0[end : end + size]
                b0, b1, b2 = s1[src : src + size], s1[mid : mid + size], s1[end : end + size]
                c0, c1, c2 = s2[src : src + size], s2[mid : mid + size], s2[end : end + size]
                run = outs[n, oh, at : at + size]
                for q in range(size):
                    v = tb[q] + t0[q] * a0[q] + t1[q] * a1[q] + t2[q] * a2[q]
                    v += t3[q] * b0[q] + t4[q] * b1[q] + t5[q] * b2[q]
                    v += t6[q] * c0[q] + t7[q] * c1[q] + t8[q] * c2[q]
                    run[q] = jit.clamp(v, lo, hi)
                continue
            at = (ow * sw - left) * channels
            a, b, c = s0[at:], s1[at:], s2[at:]
            out = y[n, oh, ow]
            for k in range(channels):
                k1, k2 = k + channels, k + 2 * channels
                v = bias[k] + w00[k] * a[k] + w01[k] * a[k1] + w02[k] * a[k2]
                v += w10[k] * b[k] + w11[k] * b[k1] + w12[k] * b[k2]
                v += w20[k] * c[k] + w21[k] * c[k1] + w22[k] * c[k2]
                out[k] = jit.clamp(v, lo, hi)
        for ow in range(first):
            _pixel(x, w, bias, y[n, oh, ow], n, oh, ow, sh, sw, 1, 1, top, left, lo, hi)
        for ow in range(last, wo):
            _pixel(x, w, bias, y[n, oh, ow], n, oh, ow, sh, sw, 1, 1, top, left, lo, hi)


TILE_SPAN = 512
"""Values of an output row that one run of `_depthwise3x3` covers (whole pixels, at
least one): long enough that a loop's set-up and remainder are small against it, short
enough that the repeated weights (10 x TILE_SPAN) stay in L1."""

RUNS_MIN_WIDTH = 28
"""Output widths from which stride-1 3x3 depthwise convs go in runs of whole pixels."""


@jit.helper
def _pixel(x, w, bias, out, n, oh, ow, sh, sw, dh, dw, top, left, lo, hi):
    """out (C,) = clamp(bias + the taps of output pixel (oh, ow) that lie inside x), each
    tap one multiply-add along the channels' contiguous run."""
    height, width, channels = x.shape[1], x.shape[2], x.shape[3]
    for c in range(channels):
        out[c] = bias[c]
    for i in range(w.shape[0]):
        ih = oh * sh - top + i * dh
        if ih < 0 or ih >= height:
            continue
        for j in range(w.shape[1]):
            iw = ow * sw - left + j * dw
            if iw < 0 or iw >= width:
                continue
            src = x[n, ih, iw]
            tap = w[i, j]
            for c in range(channels):
                out[c] += tap[c] * src[c]
    for c in range(channels):
        out[c] = jit.clamp(out[c], lo, hi)


USE_3X3 = True
"""Whether undilated 3x3 windows take `_depthwise3x3` (tests turn it off to run the general
loop)."""

PARALLEL_MIN_WORK = 1 << 21
"""Multiply-adds below which the depthwise loop runs on one thread. (Op by op, two threads
against one: 192 channels at 28x28 stride 2, 0.34M, 70 against 40 us; 384 at 14x14, 0.68M,
89 against 73 us; 192 at 28x28, 1.35M, 94 against 154 us.)"""


def depthwise(
    x: np.ndarray, w: np.ndarray, bias: np.ndarray, win: Window, clamp: tuple[float, float]
) -> np.ndarray:
    """The depthwise conv of x (N, C, H, W), any layout, with w (C, 1, kh, kw): clamp(bias +
    the windows), as an (N, C, Ho, Wo) view of channels-last memory."""
    batch, channels = x.shape[:2]
    y = np.empty((batch, *win.out, channels), x.dtype)
    work = y.size * w.shape[2] * w.shape[3]
    operands = (
        to_last(x),
        np.ascontiguousarray(w[:, 0].transpose(1, 2, 0)),
        np.ascontiguousarray(bias, x.dtype),
        y,
    )
    lo, hi = x.dtype.type(clamp[0]), x.dtype.type(clamp[1])
    plain = win.kernel == (3, 3) and win.dilations == (1, 1) and USE_3X3
    runs = win.strides == (1, 1) and win.out[1] >= RUNS_MIN_WIDTH and min(win.begin) >= 0
    per = max(1, TILE_SPAN // channels) if runs else 0  # pixels a run; 0: pixel by pixel
    if plain:
        kernel = _depthwise3x3.pick(work, PARALLEL_MIN_WORK)
        kernel(*operands, *win.strides, *win.begin, lo, hi, per)
    else:
        kernel = _depthwise.pick(work, PARALLEL_MIN_WORK)
        kernel(*operands, *win.strides, *win.dilations, *win.begin, lo, hi)
    return y.transpose(0, 3, 1, 2)


def is_pointwise(win: Window) -> bool:
    """Whether the conv is 2-D, 1x1 and unpadded: one GEMM per group (over every
    `strides`-th pixel)."""
    return win.kernel == (1, 1) and win.begin == (0, 0) and win.end == (0, 0)


def _pixels(x: np.ndarray, win: Window) -> np.ndarray:
    """The pixels of x (N, C, H, W) that a 1x1 conv over `win` reads, as a view: every
    pixel, or every `strides`-th one (ResNet's downsampling convs)."""
    if win.strides == (1, 1):
        return x
    (sh, sw), (ho, wo) = win.strides, win.out
    return x[:, :, : (ho - 1) * sh + 1 : sh, : (wo - 1) * sw + 1 : sw]


MIN_GROUP_CHANNELS = 16
"""Input and output channels per group below which a grouped 1x1 conv leaves this path:
its GEMMs get too narrow (a depthwise 1x1 conv would be one per channel)."""


def use_pointwise(
    x: np.ndarray, w: np.ndarray, win: Window, group: int, least: int = MIN_GROUP_CHANNELS
) -> bool:
    """Whether `pointwise` computes this conv: the JIT is on, x is channels-last and the
    conv is `is_pointwise`, ungrouped or with at least `least` input and output channels
    a group."""
    wide = group == 1 or min(w.shape[0] // group, w.shape[1]) >= least
    return (
        jit.enabled() and x.dtype in jit.FLOATS and channels_last(x) and is_pointwise(win) and wide
    )


def pointwise(
    x: np.ndarray,
    w: np.ndarray,
    win: Window,
    bias: np.ndarray | None,
    residual: np.ndarray | None,
    clamp: tuple[float, float],
    group: int = 1,
) -> np.ndarray:
    """The `is_pointwise` conv over `win` of channels-last x (N, C, H, W) with w (M,
    C/group, 1, 1): clamp(x w^T + bias + residual) as an (N, M, Ho, Wo) view of
    channels-last memory; the residual (N, M, Ho, Wo), any layout. Group g's GEMM reads its
    channels' columns of the (N H W, C) image and writes its block of the output's
    (N Ho Wo, M) rows in place: strided matrices that BLAS takes as they are. A strided
    conv first copies the pixels it reads, runs of C values. Small, wide ungrouped convs
    (NCHW_MAX_PIXELS, NCHW_MIN_WEIGHTS) answer C-ordered instead."""
    batch = x.shape[0]
    turned = (
        win.out[0] * win.out[1] <= NCHW_MAX_PIXELS and w.shape[0] * w.shape[1] >= NCHW_MIN_WEIGHTS
    )
    if group == 1 and turned:
        return _pointwise_nchw(x, w, win, bias, residual, clamp)
    y = np.empty((batch, *win.out, w.shape[0]), x.dtype)
    pointwise_rows(x, w, win, group, y.reshape(batch * win.out[0] * win.out[1], -1))
    return finish(y, bias, residual, clamp)


NCHW_MAX_PIXELS = 196
"""Ungrouped outputs of at most this many pixels (14x14) come out C-ordered from
`pointwise`: with few rows the GEMM runs faster turned, W (M, C) times the image's (C, H W)
view. (OpenBLAS, 2 threads: (49, 2048) x (2048, 512) 0.85 ms channels-last, 0.59 ms
turned; (196, 1024) x (1024, 256) 0.61 against 0.52. ResNet-50 in-process: 77.4 -> 74.0
ms. Grouped convs stay channels-last: ShuffleNet's chain would break, 6.9 -> 7.9 ms.)"""


NCHW_MIN_WEIGHTS = 1 << 18
"""...and only with at least this many weights (C * M, ResNet-50's 256 x 1024 and up):
MobileNetV2's narrower 1x1 convs feed depthwise convs, which want channels-last input
(turning them too made it 1.07x slower)."""


def _pointwise_nchw(x, w, win, bias, residual, clamp) -> np.ndarray:
    """`pointwise` (ungrouped) with its GEMM turned: the output C-ordered (N, M, Ho, Wo)."""
    from netbrew.operators.conv_numba import epilogue  # conv_numba imports this module

    batch, m = x.shape[0], w.shape[0]
    image = to_last(_pixels(x, win)).reshape(batch, -1, x.shape[1])  # (N, P, C)
    y = np.empty((batch, m, *win.out), x.dtype)
    np.matmul(w.reshape(m, -1), image.transpose(0, 2, 1), out=y.reshape(batch, m, -1))
    return epilogue(y, bias, residual, clamp)


def pointwise_rows(x: np.ndarray, w: np.ndarray, win: Window, group: int, out: np.ndarray) -> None:
    """`pointwise`'s GEMMs alone: x (N, C, H, W) channels-last, w (M, C/group, 1, 1), into
    out (N Ho Wo, M), group by group."""
    rows, m = out.shape
    image = to_last(_pixels(x, win)).reshape(rows, group, -1).transpose(1, 0, 2)  # (G, rows, C/G)
    blocks = out.reshape(rows, group, m // group).transpose(1, 0, 2)  # (G, N H W, M/G)
    np.matmul(image, w.reshape(group, m // group, -1).transpose(0, 2, 1), out=blocks)


def columns(
    x: np.ndarray,
    w: np.ndarray,
    win: Window,
    bias: np.ndarray | None,
    clamp: tuple[float, float],
) -> np.ndarray:
    """The ungrouped 2-D conv of x (N, C, H, W), any layout, with w (M, C, kh, kw) by
    im2col, the GEMM turned to give its output channels-last: clamp(conv + bias) as an
    (N, M, Ho, Wo) view of channels-last memory. (The same multiply-adds as the C-ordered
    GEMM; the fuse_conv_epilogue pass asks for it where depthwise convs read the output.)"""
    batch, m = x.shape[0], w.shape[0]
    y = np.empty((batch, *win.out, m), x.dtype)
    flat = y.reshape(batch, -1, m)
    w_t = w.reshape(m, -1).T
    x = np.ascontiguousarray(x)
    for n in range(batch):
        cols = im2col(x[n : n + 1], win, 1)  # (1, 1, C * kh * kw, Ho * Wo), scratch
        np.matmul(cols[0, 0].T, w_t, out=flat[n])
    return finish(y, bias, None, clamp)


def finish(
    y: np.ndarray,
    bias: np.ndarray | None,
    residual: np.ndarray | None,
    clamp: tuple[float, float],
) -> np.ndarray:
    """clamp(y + bias + residual) in place over y (N, H, W, M), channels-last; returned as
    its (N, M, H, W) view."""
    m = y.shape[-1]
    flat = y.reshape(-1, m)
    b = bias_vector(bias, m, y.dtype)
    res = flat if residual is None else to_last(residual).reshape(flat.shape)
    kernel = _epilogue.pick(y.size, PARALLEL_MIN_ELEMENTS)
    kernel(flat, b, res, residual is not None, y.dtype.type(clamp[0]), y.dtype.type(clamp[1]))
    return y.transpose(0, 3, 1, 2)


@jit.kernel
def _epilogue(y, bias, residual, has_residual, lo, hi):
    """y[r, m] = clamp(y[r, m] + bias[m] + residual[r, m]), in place; the residual only
    where `has_residual`."""
    rows, channels = y.shape
    for r in jit.prange(rows):
        row = y[r]
        res = residual[r]
        for m in range(channels):
            v = row[m] + bias[m]
            if has_residual:
                v += res[m]
            row[m] = jit.clamp(v, lo, hi)
