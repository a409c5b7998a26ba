"""numba kernel for the MaxPool gradient over overlapping windows (DESIGN §8).

Each (n, c) plane is one `prange` iteration, so the planes spread over the cores and the
windows of one plane (the only ones that overlap) stay on one thread: dX is scattered
without races. A window reads its pixels in place, skipping the padding, so no padded copy
is made. The NumPy kernel in pool_grad.py stays as the fallback and as the tests' oracle;
`plane_window` says when this kernel applies (float32/float64, one or two spatial axes;
1-D pools run as 1 x W images).

Measured against the NumPy path, interleaved in one process (2 cores shared with other
jobs, so ratios of medians, numba / NumPy): MaxPoolGradient 3x3 windows 0.4-0.6x on
inception/squeezenet-sized planes (64x112x112 s2, 480x28x28 s1 pad 1, 96x109x109 s2) and
0.4x at (32, 64, 32, 32) 3x3 s2 pad 1; parallel=False measured 0.5-0.7x. Windows that tile
the input (2x2 stride 2, the demo's) keep NumPy's strided path, which this loop lost to (1.6x).

Loops that lost and were not kept (same measurements): MaxPool and AveragePool forward
(3-25x slower than window.window_reduce's separable, vectorised taps, parallel or not),
AveragePoolGradient (0.2-3x, no steady gain over col2im) and GlobalAveragePool (NumPy's
reduction takes 35-150 us; a parallel launch alone costs more).
"""

from __future__ import annotations

import numpy as np

from netbrew import jit
from netbrew.operators.window import Window


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
    row-major kernel order, that equals y[n, c, i, j]; where none does (a NaN max), at the
    window's first pixel if it lies inside x, as the NumPy kernel routes it."""
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
                            if 0 <= s < width and x[n, c, r, s] == want:
                                dx[n, c, r, s] += dy[n, c, i, j]
                                found = True
                                break
                    if found:
                        break
                r, s = i * sh - ph, j * sw - pw
                if not found and 0 <= r < height and 0 <= s < width:
                    dx[n, c, r, s] += dy[n, c, i, j]
