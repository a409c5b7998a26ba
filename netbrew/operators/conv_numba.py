"""numba kernels for convolutions: the direct grouped conv and the fused epilogue.

- `direct_correlate`: a 2-D grouped conv as plain loops, one long multiply-add loop per
  kernel tap, for convs whose groups hold one or two input channels: depthwise convs
  (ShuffleNet, MobileNetV2) above all, where im2col plus a (M/C, K) x (K, positions) GEMM
  per channel spends its time copying. Any stride, padding, dilation and channel
  multiplier; bias and a clamp (Relu, Clip) are applied in the final crop. Measured inside
  ShuffleNet against the NumPy paths it replaced (flat rows at stride 1, im2col at stride
  2): 0.55-0.76x the time on the stride-1 28x28 and 14x14 convs, 0.81-0.86x at 7x7, 0.6-0.83x
  on the stride-2 ones.
- `epilogue`: bias, then a residual, then a clamp, in one pass over a GEMM's output
  (N, M, P), where NumPy takes one pass each.

A clamp is (lo, hi): Relu is (0, inf), Relu6 / Clip(0, 6) is (0, 6), none is (-inf, inf).
A NaN stays NaN, as through np.maximum / np.minimum.

Each kernel has its NumPy twin, the path taken with the JIT off (NETBREW_JIT=0, numba
missing, `jit.disabled()`) and the oracle its tests compare with.
"""

from __future__ import annotations

import numpy as np

from netbrew import jit
from netbrew.operators.conv_last import bias_vector, channels_last, depthwise
from netbrew.operators.window import Window

NO_CLAMP = (-np.inf, np.inf)
RELU = (0.0, np.inf)

PARALLEL = True
"""Whether the kernels spread their channels over the cores. They do, now that OpenMP's
threads wait passively (netbrew.jit): through Predictor(*import_model(path)), 2 threads,
interleaved rounds of the same process, parallel against serial kernels: the torch-exported
MobileNetV2 0.65x the time (medians; fastest runs 0.66x), ShuffleNet 1.00x (0.98x).
(Before that fix, OpenMP's spinning threads and OpenBLAS's busy-waiting idle worker took
each other's cores: inside ShuffleNet a `prange` over the channels ran its 14x14 and 56x56
depthwise convs 2.5-20x slower than on one thread.)"""

CHUNKS = 16
"""Pieces the direct conv splits its (image, group) pairs into, each allocating its scratch
once: a few per core, so the cores share the work evenly."""

MAX_GROUP_CHANNELS = 2
"""Groups with more input channels than this stay on im2col + GEMM (`use_direct`): the
direct loop does C/group * K multiply-adds per output with no reuse, and a GEMM's blocking
wins once the reduction is long enough. (Measured op by op on 3x3 convs, 128 channels at
28x28, against im2col + GEMM: 0.72x the time at 1 and 2 channels a group, 1.03x at 4, 1.5x
at 8.)"""


def use_direct(in_channels: int, group: int, win: Window) -> bool:
    """Whether `direct_correlate` computes this conv: the JIT is on, the conv is 2-D, grouped
    with at most MAX_GROUP_CHANNELS input channels a group, and not 1x1."""
    return (
        jit.enabled()
        and len(win.kernel) == 2
        and group > 1
        and in_channels // group <= MAX_GROUP_CHANNELS
        and win.kernel != (1, 1)
    )


@jit.kernel(parallel=PARALLEL)
def _direct_conv2d(x, w, bias, y, sh, sw, dh, dw, top, left, lo, hi):
    """y[n, m] = clamp(bias[m] + sum over c in m's group and taps (i, j) of
    w[m, c, i, j] * x[n, c, oh * sh - top + i * dh, ow * sw - left + j * dw]), taps that
    fall outside x counting as zero.

    Each input channel is first split into its sh * sw stride phases, phase (a, b) holding
    the padded input's pixels (r * sh + a, q * sw + b) as a (hq, wq) plane laid out flat.
    Tap (i, j) of every output pixel (oh, ow) then reads phase ((i dh) % sh, (j dw) % sw)
    at (oh + (i dh) // sh, ow + (j dw) // sw): flat position oh * wq + ow plus one offset
    per tap. So a tap is one long unit-stride loop over all outputs (vectorised), into an
    accumulator with wq - wo unused values per row that the final crop drops."""
    batch, channels, height, width = x.shape
    out_channels, group_channels, kh, kw = w.shape
    ho, wo = y.shape[2], y.shape[3]
    per_group = out_channels // (channels // group_channels)
    hq = ho + (kh - 1) * dh // sh  # the rows and columns of a phase that taps reach
    wq = wo + (kw - 1) * dw // sw
    length = (ho - 1) * wq + wo  # flat positions from the first output to the last
    groups = channels // group_channels
    total = batch * groups
    chunks = min(total, CHUNKS)  # scratch is allocated once a chunk, not once a channel
    for chunk in jit.prange(chunks):
        phases = np.empty((group_channels, sh, sw, hq * wq), x.dtype)
        acc = np.empty(length, x.dtype)
        for ng in range(chunk * total // chunks, (chunk + 1) * total // chunks):
            n = ng // groups
            first = (ng % groups) * group_channels
            for c in range(group_channels):
                plane = x[n, first + c]
                for a in range(sh):
                    for b in range(sw):
                        # the columns q whose pixel q * sw + b - left lies inside the row
                        q0 = min(wq, max(0, (left - b + sw - 1) // sw))
                        q1 = max(q0, min(wq, (width + left - b + sw - 1) // sw))
                        for r in range(hq):
                            row = phases[c, a, b, r * wq : (r + 1) * wq]
                            ih = r * sh + a - top
                            if ih < 0 or ih >= height:
                                row[:] = 0
                                continue
                            row[:q0] = 0
                            if q1 > q0:  # a slice copy: no index wrap-around test per pixel
                                base = q0 * sw + b - left
                                stop = base + (q1 - q0 - 1) * sw + 1
                                row[q0:q1] = plane[ih, base:stop:sw]
                            row[q1:] = 0
            for m in range((ng % groups) * per_group, (ng % groups + 1) * per_group):
                acc[:] = 0
                for c in range(group_channels):
                    for i in range(kh):
                        for j in range(kw):
                            tap = w[m, c, i, j]
                            off = (i * dh // sh) * wq + j * dw // sw
                            src = phases[c, i * dh % sh, j * dw % sw, off : off + length]
                            for p in range(length):
                                acc[p] += tap * src[p]
                out = y[n, m]
                bm = bias[m]
                for oh in range(ho):
                    for ow in range(wo):
                        v = acc[oh * wq + ow] + bm
                        v = jit.clamp(v, lo, hi)
                        out[oh, ow] = v


@jit.kernel(parallel=PARALLEL)
def _depthwise3x3(x, w, bias, y, sh, sw, dh, top, left, lo, hi):
    """The 3x3 depthwise conv (multiplier 1) with column stride 1 or 2 and column dilation 1:
    x (N, C, H, W), w (C, 9), y (N, C, Ho, Wo); any row stride and row dilation.

    Each channel is first copied, zero-padded, into its sw column phases (phase b holds the
    padded columns q * sw + b). Output row oh reads padded rows oh * sh + i * dh (i < 3),
    and all nine taps of its pixels are summed in one pass along the row, which LLVM
    vectorises: at stride 1 tap (i, j) reads row i at ow + j; at stride 2 taps 0 and 2 read
    the even phase at ow and ow + 1, tap 1 the odd phase at ow. (The general loop above
    makes nine passes over an accumulator instead, each a load and a store per pixel.)"""
    batch, channels, height, width = x.shape
    ho, wo = y.shape[2], y.shape[3]
    hp = (ho - 1) * sh + 2 * dh + 1  # the padded rows that windows reach
    wq = wo + 2 // sw  # the columns of a phase that taps reach
    size = hp * wq
    total = batch * channels
    chunks = min(total, CHUNKS)
    for chunk in jit.prange(chunks):
        ph = np.empty(sw * size, x.dtype)
        for nc in range(chunk * total // chunks, (chunk + 1) * total // chunks):
            n = nc // channels
            c = nc % channels
            for b in range(sw):
                # the columns q whose pixel q * sw + b - left lies inside the row
                q0 = min(wq, max(0, (left - b + sw - 1) // sw))
                q1 = max(q0, min(wq, (width + left - b + sw - 1) // sw))
                for r in range(hp):
                    dst = ph[b * size + r * wq : b * size + (r + 1) * wq]
                    ih = r - top
                    if ih < 0 or ih >= height:
                        for q in range(wq):
                            dst[q] = 0
                        continue
                    for q in range(q0):
                        dst[q] = 0
                    src = x[n, c, ih, q0 * sw + b - left :]
                    for q in range(q1 - q0):
                        dst[q0 + q] = src[q * sw]
                    for q in range(q1, wq):
                        dst[q] = 0
            k = w[c]
            w0, w1, w2, w3, w4, w5, w6, w7, w8 = (
                k[0],
                k[1],
                k[2],
                k[3],
                k[4],
                k[5],
                k[6],
                k[7],
                k[8],
            )
            bc = bias[c]
            for oh in range(ho):
                r0 = oh * sh * wq
                r1 = r0 + dh * wq
                r2 = r1 + dh * wq
                out = y[n, c, oh]
                a0 = ph[r0 : r0 + wq]
                a1 = ph[r1 : r1 + wq]
                a2 = ph[r2 : r2 + wq]
                if sw == 1:
                    for ow in range(wo):
                        v = (
                            bc
                            + w0 * a0[ow]
                            + w1 * a0[ow + 1]
                            + w2 * a0[ow + 2]
                            + w3 * a1[ow]
                            + w4 * a1[ow + 1]
                            + w5 * a1[ow + 2]
                            + w6 * a2[ow]
                            + w7 * a2[ow + 1]
                            + w8 * a2[ow + 2]
                        )
                        out[ow] = jit.clamp(v, lo, hi)
                else:
                    d0 = ph[size + r0 : size + r0 + wq]
                    d1 = ph[size + r1 : size + r1 + wq]
                    d2 = ph[size + r2 : size + r2 + wq]
                    for ow in range(wo):
                        v = (
                            bc
                            + w0 * a0[ow]
                            + w1 * d0[ow]
                            + w2 * a0[ow + 1]
                            + w3 * a1[ow]
                            + w4 * d1[ow]
                            + w5 * a1[ow + 1]
                            + w6 * a2[ow]
                            + w7 * d2[ow]
                            + w8 * a2[ow + 1]
                        )
                        out[ow] = jit.clamp(v, lo, hi)


def use_3x3(w: np.ndarray, channels: int, win: Window) -> bool:
    """Whether `_depthwise3x3` computes this depthwise conv."""
    return (
        USE_3X3
        and w.shape[0] == channels
        and w.shape[1:] == (1, 3, 3)
        and win.strides[1] in (1, 2)
        and win.dilations[1] == 1
    )


USE_3X3 = True
"""Whether 3x3 depthwise convs too large for the channels-last loop take `_depthwise3x3`
(tests turn it off to reach the general loop)."""


HWC_MAX_PIXELS = 28 * 28
"""Depthwise convs (multiplier 1) with at most this many output pixels, or with a
channels-last input, go channels-last (conv_last.depthwise) and leave their output so; the
rest take the channel-plane loops, which beat transposing a large NCHW input first."""

PARALLEL_MIN_WORK = 1 << 20
"""Multiply-adds below which a kernel runs on one thread (`Kernel.serial`): waking OpenMP's
passive threads costs tens of microseconds. (Depthwise 3x3, op by op, two threads against
one: 544 channels at 7x7, 0.24M multiply-adds, 92 against 55 us; 480 at 14x14, 0.85M, 194
against 167 us; 96 at 56x56, 2.7M, 645 against 1186 us.)"""


PARALLEL_MIN_ELEMENTS = 1 << 19
"""Outputs below which the epilogue runs on one thread. (Op by op, two threads against one:
240 x 28 x 28 68 against 49 us, 64 x 56 x 56 76 against 52 us, 256 x 56 x 56 152 against
191 us, 96 x 112 x 112 195 against 283 us.)"""


def direct_correlate(
    x: np.ndarray,
    w: np.ndarray,
    win: Window,
    bias: np.ndarray | None = None,
    clamp: tuple[float, float] = NO_CLAMP,
) -> np.ndarray:
    """The 2-D grouped convolution of x (N, C, H, W) with w (M, C/group, kh, kw) over the
    windows `win`, plus `bias` (M,) if given, clamped to `clamp`: (N, M, Ho, Wo), C-order,
    or channels-last where `HWC_MAX_PIXELS` says. The group count is C / w.shape[1]."""
    batch, m = x.shape[0], w.shape[0]
    y = np.empty((batch, m, *win.out), x.dtype)
    if y.size == 0:
        return y
    b = bias_vector(bias, m, x.dtype)
    lo, hi = clamp
    work = y.size * w[0].size
    if w.shape[1] == 1 and m == x.shape[1]:
        if channels_last(x) or win.out[0] * win.out[1] <= HWC_MAX_PIXELS:
            return depthwise(x, w, b, win, clamp)
    if use_3x3(w, x.shape[1], win):
        _depthwise3x3.pick(work, PARALLEL_MIN_WORK)(
            np.ascontiguousarray(x),
            np.ascontiguousarray(w).reshape(m, 9),
            b,
            y,
            *win.strides,
            win.dilations[0],
            *win.begin,
            x.dtype.type(lo),
            x.dtype.type(hi),
        )
        return y
    _direct_conv2d.pick(work, PARALLEL_MIN_WORK)(
        np.ascontiguousarray(x),
        np.ascontiguousarray(w),
        b,
        y,
        *win.strides,
        *win.dilations,
        *win.begin,
        float(lo),
        float(hi),
    )
    return y


@jit.kernel(parallel=PARALLEL)
def _epilogue(y, bias, residual, has_residual, lo, hi):
    """y[n, m, p] = clamp(y[n, m, p] + bias[m] + residual[n, m, p]), in place; the residual
    only where `has_residual`."""
    batch, channels, positions = y.shape
    for nm in jit.prange(batch * channels):
        n = nm // channels
        m = nm % channels
        row = y[n, m]
        res = residual[n, m]
        b = bias[m]
        for p in range(positions):
            v = row[p] + b
            if has_residual:
                v += res[p]
            row[p] = jit.clamp(v, lo, hi)


def epilogue(
    y: np.ndarray,
    bias: np.ndarray | None,
    residual: np.ndarray | None,
    clamp: tuple[float, float] = NO_CLAMP,
) -> np.ndarray:
    """clamp(y + bias (per channel) + residual), in one pass over y (N, M, ...), which must be
    C-ordered, in place; residual has y's shape. Returns y."""
    if y.size == 0:  # an empty batch (or map): nothing to add to
        return y
    batch, m = y.shape[:2]
    flat = y.reshape(batch, m, -1)
    b = bias_vector(bias, m, y.dtype)
    res = flat if residual is None else np.ascontiguousarray(residual).reshape(flat.shape)
    kernel = _epilogue.pick(y.size, PARALLEL_MIN_ELEMENTS)
    kernel(flat, b, res, residual is not None, float(clamp[0]), float(clamp[1]))
    return y
