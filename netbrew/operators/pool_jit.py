"""numba kernels for MaxPool and AveragePool of channels-last images, and for the MaxPool
gradient over overlapping windows (DESIGN §8).

Forward (`pool`): an input that is a channels-last view (conv_last's depthwise and 1x1
convs hand those on) pools channels-last, each tap one vectorised run along the channels,
and answers channels-last too, so the chain stays in that layout. Inside ShuffleNet its
three 3x3 stride-2 AveragePools took 0.27 against 0.51 ms (window.window_reduce over the
same views). Other C-ordered inputs keep the NumPy kernel: a plane-by-plane numba loop for
any window (rows reduced into a buffer, then columns, all vectorised) ran 0.5-0.7x NumPy's
time op by op, but inside squeezenet and ShuffleNet it ran as slow or slower (squeezenet's
128x55x55 and 256x27x27 MaxPools 0.47 and 0.34 ms against 0.41 and 0.25), and transposing a
C-ordered input to pool channels-last costs more than it saves.

2x2 stride-2 max pools that tile a C-ordered input (LeNet's, VGG's) take `max_pool_2x2`
and `max_pool_2x2_gradient`, loops written for that one window: the kernel and stride are
constants there, so each output is four loads and three selects. Against the paths they
replace, 2 cores: forward 0.2-0.25x op by op on LeNet's 64x16x8x8 and 64x32x4x4 pools,
0.05-0.07x on a 64x224x224 (VGG's first; a numba loop for any window, its sizes passed in,
ran 0.85x); gradient 0.4-0.85x op by op on LeNet's, 0.2x and 0.15x on 64x224x224 and
256x56x56 against max_pool_grad_2d. LeNet's training step, in-process A/B: 1.80 against
2.02 ms.

Gradient of other windows: each (n, c) plane is one `prange` iteration, so the planes spread
over the cores and the windows of one plane (the only ones that overlap) stay on one
thread: dX is scattered without races. A window reads its pixels in place, skipping the
padding, so no padded copy is made. Measured against the NumPy path, interleaved in one
process (2 cores shared with other jobs, so ratios of medians, numba / NumPy):
MaxPoolGradient 3x3 windows 0.4-0.6x on inception/squeezenet-sized planes (64x112x112 s2,
480x28x28 s1 pad 1, 96x109x109 s2) and 0.4x at (32, 64, 32, 32) 3x3 s2 pad 1;
parallel=False measured 0.5-0.7x. AveragePoolGradient (0.2-3x, no steady gain over col2im)
and GlobalAveragePool (NumPy's reduction takes 35-150 us; a parallel launch alone costs
more) stay NumPy.

The NumPy kernels in pool.py and pool_grad.py stay as the fallback and as the tests'
oracle; `plane_window` says when the gradient kernel applies (float32/float64, one or two
spatial axes; 1-D pools run as 1 x W images).
"""

from __future__ import annotations

import numpy as np

from netbrew import jit
from netbrew.operators.conv_last import channels_last
from netbrew.operators.window import Window, tiles


def plane_window(x: np.ndarray, win: Window) -> tuple[np.ndarray, tuple[int, ...]] | None:
    """(x viewed as (N, C, H, W), the window as (kh, kw, sh, sw, dh, dw, ph, pw, oh, ow))
    when a numba kernel should run; None for the NumPy path (JIT off, other dtypes, 3-D)."""
    if not jit.enabled() or x.dtype not in jit.FLOATS or len(win.kernel) not in (1, 2):
        return None
    if len(win.kernel) == 1:
        x = x[:, :, None, :]
        win = Window(
            (1, *win.kernel),
            (1, *win.strides),
            (1, *win.dilations),
            (0, *win.begin),
            (0, *win.end),
            (1, *win.out),
        )
    dims = (*win.kernel, *win.strides, *win.dilations, *win.begin, *win.out)
    return x, dims


@jit.kernel
def max_pool_grad_2d(x, y, dy, kh, kw, sh, sw, dh, dw, ph, pw, dx):
    """dx = 0, then each dy[n, c, i, j] added at the first pixel of window (i, j), in
    row-major kernel order, that equals y[n, c, i, j] (is NaN where that is NaN); where none
    does (a y not pooled from x), at the window's first pixel if it lies inside x, as the
    NumPy kernel routes it."""
    batch, channels, height, width = x.shape
    oh, ow = dy.shape[2], dy.shape[3]
    for p in jit.prange(batch * channels):
        n, c = p // channels, p % channels
        for r in range(height):
            for s in range(width):
                dx[n, c, r, s] = 0.0
        for i in range(oh):
            for j in range(ow):
                want = y[n, c, i, j]
                found = False
                for a in range(kh):
                    r = i * sh + a * dh - ph
                    if 0 <= r < height:
                        for b in range(kw):
                            s = j * sw + b * dw - pw
                            if 0 <= s < width and _is_max(x[n, c, r, s], want):
                                dx[n, c, r, s] += dy[n, c, i, j]
                                found = True
                                break
                    if found:
                        break
                r, s = i * sh - ph, j * sw - pw
                if not found and 0 <= r < height and 0 <= s < width:
                    dx[n, c, r, s] += dy[n, c, i, j]


PARALLEL_MIN_WORK = 1 << 17
"""Window taps (outputs times window size) below which a pool runs on one thread."""


def pool(x: np.ndarray, win: Window, is_max: bool, counts: np.ndarray | None) -> np.ndarray | None:
    """MaxPool (`is_max`) or AveragePool of a channels-last x (N, C, H, W) over `win`, the
    sums divided by `counts` (the window sizes (Ho, Wo), pool.window_counts), as an (N, C,
    Ho, Wo) view of channels-last memory; None where the NumPy kernel must run (JIT off,
    other dtypes, other layouts and ranks)."""
    if not (jit.enabled() and x.dtype in jit.FLOATS and channels_last(x) and len(win.kernel) == 2):
        return None
    batch, channels = x.shape[:2]
    (kh, kw), (oh, ow) = win.kernel, win.out
    if is_max:  # the kernel reads no divisor
        divisor = np.ones((1, 1), x.dtype)
    else:
        divisor = (np.ones((oh, ow)) if counts is None else counts).astype(x.dtype)
    y = np.empty((batch, oh, ow, channels), x.dtype)
    kernel = _pool_last.pick(y.size * kh * kw, PARALLEL_MIN_WORK)
    kernel(
        x.transpose(0, 2, 3, 1),
        y,
        *win.kernel,
        *win.strides,
        *win.dilations,
        *win.begin,
        is_max,
        divisor,
    )
    return y.transpose(0, 3, 1, 2)


@jit.kernel
def _pool_last(x, y, kh, kw, sh, sw, dh, dw, top, left, is_max, counts):
    """Max or mean pooling channels-last: x (N, H, W, C), y (N, Ho, Wo, C); each tap one run
    along the channels. Padding is skipped: max never sees it, the mean divides by `counts`
    (Ho, Wo). A NaN wins a max, as in np.maximum."""
    batch, height, width, channels = x.shape
    ho, wo = y.shape[1], y.shape[2]
    init = -np.inf if is_max else 0.0
    for noh in jit.prange(batch * ho):
        n = noh // ho
        oh = noh % ho
        for ow in range(wo):
            out = y[n, oh, ow]
            out[:] = init
            for i in range(kh):
                ih = oh * sh - top + i * dh
                if ih < 0 or ih >= height:
                    continue
                for j in range(kw):
                    iw = ow * sw - left + j * dw
                    if iw < 0 or iw >= width:
                        continue
                    src = x[n, ih, iw]
                    if is_max:
                        for c in range(channels):
                            v, o = src[c], out[c]
                            out[c] = v if v > o or v != v else o
                    else:
                        for c in range(channels):
                            out[c] += src[c]
            if not is_max:
                out /= counts[oh, ow]


def tiles_2x2(x: np.ndarray, win: Window) -> bool:
    """Whether `max_pool_2x2` and `max_pool_2x2_gradient` take this pool: the JIT is on, x
    is a C-ordered float32/float64 (N, C, H, W), and its 2x2 windows tile it
    (window.tiles)."""
    return (
        jit.enabled()
        and x.dtype in jit.FLOATS
        and x.flags.c_contiguous
        and win.kernel == (2, 2)
        and tiles(win, x.shape[2:])
    )


def max_pool_2x2(x: np.ndarray) -> np.ndarray:
    """MaxPool of x (N, C, H, W) over the 2x2 stride-2 windows that tile it (`tiles_2x2`):
    (N, C, H/2, W/2). A NaN wins, as in np.maximum."""
    batch, channels, height, width = x.shape
    y = np.empty((batch, channels, height // 2, width // 2), x.dtype)
    rows = y.reshape(-1, width // 2)
    kernel = _max_2x2.pick(y.size * 4, PARALLEL_MIN_WORK)
    kernel(x.reshape(len(rows), 2, width), rows)
    return y


@jit.kernel
def _max_2x2(x, y):
    """y[r, j] = the max of x[r, 0:2, 2j:2j+2]: x (R, 2, 2 Wo) holds the pairs of input rows
    that the output rows (R, Wo) pool; NaN wins."""
    rows, wo = y.shape
    for r in jit.prange(rows):
        for j in range(wo):
            a, b = x[r, 0, 2 * j], x[r, 0, 2 * j + 1]
            c, d = x[r, 1, 2 * j], x[r, 1, 2 * j + 1]
            a = a if a >= b or a != a else b
            c = c if c >= d or c != c else d
            y[r, j] = a if a >= c or a != a else c


def max_pool_2x2_gradient(x: np.ndarray, y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """MaxPoolGradient over the windows of `max_pool_2x2`: each dY goes to the first pixel
    of its window, in row-major order, that equals Y (or is NaN where Y is; nowhere where
    none does, a Y not pooled from X), as pool_grad's NumPy path for tiling windows does.
    y and dy (N, C, H/2, W/2) in x's dtype."""
    batch, channels, height, width = x.shape
    dx = np.empty(x.shape, x.dtype)
    rows = (batch * channels * height) // 2
    kernel = _max_2x2_gradient.pick(y.size * 4, PARALLEL_MIN_WORK)
    kernel(
        x.reshape(rows, 2, width),
        np.ascontiguousarray(y).reshape(rows, -1),
        np.ascontiguousarray(dy).reshape(rows, -1),
        dx.reshape(rows, 2, width),
    )
    return dx


@jit.kernel
def _max_2x2_gradient(x, y, dy, dx):
    """dx = 0, then dy[r, j] at the first of x[r, 0, 2j], x[r, 0, 2j + 1], x[r, 1, 2j],
    x[r, 1, 2j + 1] that is the max y[r, j] (`_is_max`), else nowhere (layouts as in
    `_max_2x2`). The offset is picked by selects from the last to the first."""
    rows, wo = y.shape
    for r in jit.prange(rows):
        dx[r] = 0.0
        for j in range(wo):
            m = y[r, j]
            k = 3 if _is_max(x[r, 1, 2 * j + 1], m) else 4
            k = 2 if _is_max(x[r, 1, 2 * j], m) else k
            k = 1 if _is_max(x[r, 0, 2 * j + 1], m) else k
            k = 0 if _is_max(x[r, 0, 2 * j], m) else k
            if k < 4:
                dx[r, k >> 1, 2 * j + (k & 1)] = dy[r, j]


@jit.helper
def _is_max(v, m):
    """Whether pixel value v is the window max m: equal, or both NaN (no branches)."""
    return (v == m) | ((v != v) & (m != m))
