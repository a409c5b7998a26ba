"""Channels-last im2col for 3x3 convs on mid-sized images (ResNet-50's strided ones).

NCHW im2col copies each window pixel into its column one output row at a time: C * 9 * Ho
runs of only Wo values (14 at 14x14), and numpy pays per run. With the image padded
channels-last, (Hp, Wp, C), the window of output pixel (oh, ow) is 3 runs of 3 * C values
(a kernel row's 3 pixels are adjacent, all channels each), so the columns (Ho * Wo, 9 * C)
are one copy of Ho * Wo * 3 long runs, at any stride. One GEMM with the weights laid out
(3, 3, C, M), made once by the winograd_convs pass, gives the output channels-last:
(N, M, Ho, Wo) as a view of (N, Ho, Wo, M) memory, which a following conv reads as a
transposed matrix at no cost.

Measured op by op inside ResNet-50 against NCHW im2col: 0.84x on its 256-channel 14x14
convs and 0.93x on its 28x28 stride-2 conv; `use_hwc` keeps the rest on im2col: at 7x7 the
GEMM's orientation runs slower (1.1x), and on its 56x56 stride-2 conv the channels-last
copy of the NCHW input costs more than it saves (1.1x). Results equal im2col's up to the
order of the sums. Stride-1 convs this size take Winograd F(2x2, 3x3) instead, where the
winograd_convs pass knows the image size (0.96x the time of this path on ResNet-50's 14x14
convs inside the model, 0.75-0.85x op by op on 14x14 to 28x28 ones).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from netbrew import jit
from netbrew.operators.conv_last import channels_last, finish
from netbrew.operators.window import Window, scratch
from netbrew.operators.winograd_tiles import padded_channels_last
from netbrew.operators.zeros import relu as relu_into

MIN_CHANNELS = 16
"""Narrower inputs make runs of 3 * C values too short to beat NCHW im2col."""
MIN_POSITIONS = 169
"""Outputs with fewer pixels than this (13x13) stay on im2col: the GEMM runs slower (at 7x7
1.1x)."""
MAX_PIXELS = 784
"""Inputs of strided convs with more pixels than this (28x28) stay on im2col: copying an
NCHW input channels-last costs more than the short runs save (ResNet-50's 56x56 stride-2
conv, 1.1x)."""
MAX_PIXELS_STRIDE_1 = 3136
"""...and of stride-1 convs, more than this (56x56). (squeezenet's expand convs, of the
channels-last output of a 1x1 conv, op by op against the im2col path, weights laid out
beforehand: 16 -> 64 channels at 55x55 0.93x, 32 -> 128 at 27x27 0.85x, 48 -> 192 and
64 -> 256 at 13x13 0.65x and 0.71x.)"""


def use_hwc(
    channels: int,
    out_channels: int,
    in_shape: tuple[int, ...],
    out_shape: tuple[int, ...],
    strides: tuple[int, ...] = (1, 1),
) -> bool:
    """Whether the channels-last path pays for a 3x3 conv with C -> M channels on an
    (H, W) image giving an (Ho, Wo) output at `strides`."""
    most = MAX_PIXELS_STRIDE_1 if tuple(strides) == (1, 1) else MAX_PIXELS
    return (
        min(channels, out_channels) >= MIN_CHANNELS
        and in_shape[0] * in_shape[1] <= most
        and out_shape[0] * out_shape[1] >= MIN_POSITIONS
    )


LAST_MIN_CHANNELS = 64
"""Channels on each side below which a conv met channels-last at run time (no laid-out
weights from the pass) keeps im2col."""

MAX_WEIGHT_BYTES = 1 << 20
"""Weights above this size are not laid out per call (`use_hwc_last`): the copy costs more
than the channels-last columns save (512x512 3x3: 4.6 ms)."""


def use_hwc_last(x: np.ndarray, w: np.ndarray, win: Window, group: int) -> bool:
    """Whether a conv of a channels-last x (a view handed on by a channels-last conv) takes
    `hwc_correlate` with its weights laid out on the spot: ungrouped, 2-D, undilated, not
    1x1, pads >= 0, at least LAST_MIN_CHANNELS on each side and weights of at most
    MAX_WEIGHT_BYTES. The columns then copy runs of 3 * C values straight from x's memory,
    where NCHW im2col gathers across it. (Op by op, 2 threads, the transform included:
    ResNet-50's 128-channel 56x56 stride-2 conv 1.56 against 2.06 ms.)"""
    return (
        group == 1
        and len(win.kernel) == 2
        and win.kernel != (1, 1)
        and win.dilations == (1, 1)
        and min(win.begin) >= 0
        and min(w.shape[:2]) >= LAST_MIN_CHANNELS
        and w.nbytes <= MAX_WEIGHT_BYTES
        and channels_last(x)
    )


def hwc_weights(w: np.ndarray) -> np.ndarray:
    """Weights w (M, C, kh, kw) laid out (kh, kw, C, M), the GEMM operand of `hwc_correlate`."""
    if w.ndim != 4:
        raise ValueError(f"hwc_weights: w has shape {list(w.shape)}, expected (M, C, kh, kw)")
    return np.ascontiguousarray(w.transpose(2, 3, 1, 0))


def hwc_matches(w: np.ndarray, u: np.ndarray, samples: int = 16) -> bool:
    """A cheap check that u is still `hwc_weights(w)` (so a weight fed after the pass ran is
    not paired with a stale layout): every tap of `samples` channel pairs spread over
    (M, C) compared exactly."""
    m, c = w.shape[:2]
    if u.shape != (*w.shape[2:], c, m):
        return False
    pick_m = np.linspace(0, m - 1, samples).astype(int)
    pick_c = np.linspace(0, c - 1, samples).astype(int)
    return bool(np.array_equal(u[:, :, pick_c, pick_m], w[pick_m, pick_c].transpose(1, 2, 0)))


def hwc_correlate(
    x: np.ndarray,
    u: np.ndarray,
    win: Window,
    bias: np.ndarray | None = None,
    relu: bool = False,
) -> np.ndarray:
    """The 2-D, ungrouped, undilated convolution of x (N, C, H, W), in any memory layout,
    with weights u (kh, kw, C, M) = hwc_weights(W) over the windows `win` (pads >= 0), plus
    `bias` (M,) and then Relu if asked: (N, M, Ho, Wo), channels-last in memory."""
    batch, channels, height, width = x.shape
    kh, kw, _, m = u.shape
    (sh, sw), (ho, wo) = win.strides, win.out
    top, left = win.begin
    hp, wp = (ho - 1) * sh + kh, (wo - 1) * sw + kw  # the padded rows and columns read
    x = x[:, :, : hp - top, : wp - left]  # rows and columns no window reaches
    y = np.empty((batch, ho, wo, m), x.dtype)
    cols = scratch("hwc_cols", (ho, wo, kh, kw, channels), x.dtype)
    for n in range(batch):
        image = padded_channels_last(x[n : n + 1], top, left, hp, wp)[0]  # (hp, wp, C)
        s_h, s_w, s_c = image.strides
        np.copyto(cols, as_strided(image, cols.shape, (sh * s_h, sw * s_w, s_h, s_w, s_c)))
        np.matmul(cols.reshape(ho * wo, -1), u.reshape(-1, m), out=y[n].reshape(-1, m))
    if jit.enabled() and x.dtype in jit.FLOATS:  # bias and Relu in one numba pass
        return finish(y, bias, None, (0.0 if relu else -np.inf, np.inf))
    if bias is not None:
        y += bias
    if relu:
        relu_into(y, out=y)
    return y.transpose(0, 3, 1, 2)
