"""numba kernel for LRN (DESIGN §8).

X is viewed as (N, C, S), S the pixels, so each channel is a contiguous plane. The kernel
walks tiles of TILE pixels (one `prange` iteration per image and tile) and, for each
channel in turn, sums the squares of the channels in its window along the tile's
contiguous pixels, then writes Y = X * (bias + alpha / size * sum)^-beta. Every read and
write runs along contiguous pixels, so the loops vectorize, and the tile of the few
channels a window spans stays in cache. An earlier loop that walked the channels of one
pixel at a time (strided reads) measured 1.4-7x the NumPy kernel and was dropped.
A channels-last X (conv_hwc's outputs, as inception_v1's second LRN reads) has each
pixel's channels contiguous instead: `lrn_pixels` sums the window there by shifted adds.

The kernel covers beta = 0.75 (AlexNet, GoogLeNet, every LRN in the ONNX zoo), as
t^-0.75 = 1 / (sqrt(t) * sqrt(sqrt(t))): two square roots, which vectorize, where `**`
calls pow per pixel; with pow the loop measured 2.2x the NumPy kernel, so other betas stay
on NumPy. Python's error model (the default) tests every division for zero and keeps the
loop scalar (1.4x NumPy), hence error_model="numpy".

Measured numba / NumPy, float32, size 5 (interleaved in one process, medians; 2 cores
shared with other jobs): 0.42x on inception_v1's (1, 64, 55, 55) planes, 0.32x on its
channels-last (1, 192, 55, 55), 0.42x on (1, 192, 55, 55) planes.
"""

from __future__ import annotations

import numpy as np

from netbrew import jit

TILE = 512  # pixels per tile: a window of channels x TILE pixels stays in L1/L2
PIXEL_BLOCK = 64  # channels-last pixels per prange iteration (its buffers allocated once)


def lrn_views(x: np.ndarray) -> tuple[str, np.ndarray] | None:
    """("planes", X as (N, C, S)) for a C-contiguous X, ("pixels", X as (N * S, C)) for a
    channels-last one, or None where the NumPy kernel should run."""
    if not jit.enabled() or x.dtype not in jit.FLOATS or x.size == 0 or x.ndim < 2:
        return None
    if x.flags.c_contiguous:
        return "planes", x.reshape(x.shape[0], x.shape[1], -1)
    last = np.moveaxis(x, 1, -1)  # channels-last X (conv_hwc's outputs): C-contiguous here
    if last.flags.c_contiguous:
        return "pixels", last.reshape(-1, x.shape[1])
    return None


def lrn_075(
    x: np.ndarray, before: int, after: int, alpha_over_size: float, bias: float
) -> np.ndarray | None:
    """LRN with beta 0.75 by the numba kernel for X's layout, Y laid out like X; None where
    the NumPy kernel should run (see `lrn_views`)."""
    views = lrn_views(x)
    if views is None:
        return None
    layout, xv = views
    yv = np.empty(xv.shape, x.dtype)
    scalar = x.dtype.type
    run = lrn_planes if layout == "planes" else lrn_pixels
    run(xv, before, after, scalar(alpha_over_size), scalar(bias), yv)
    if layout == "planes":
        return yv.reshape(x.shape)
    return np.moveaxis(yv.reshape(x.shape[0], *x.shape[2:], x.shape[1]), -1, 1)  # as X


@jit.kernel(error_model="numpy")
def lrn_planes(x, before, after, alpha_over_size, bias, y):
    """y[n, c, s] = x[n, c, s] / (bias + alpha_over_size * sum of x[n, i, s]^2 over
    c - before <= i <= c + after inside [0, C))^0.75, for x and y (N, C, S); the sums in
    X's dtype, as the NumPy kernel's, and alpha_over_size, bias in X's dtype too."""
    batch, channels, size = x.shape
    tiles = (size + TILE - 1) // TILE
    for p in jit.prange(batch * tiles):
        n = p // tiles
        start = (p % tiles) * TILE
        stop = min(start + TILE, size)
        total = np.empty(stop - start, x.dtype)  # the window's sum of squares, per pixel
        for c in range(channels):
            total[:] = 0
            for i in range(max(c - before, 0), min(c + after, channels - 1) + 1):
                xi = x[n, i, start:stop]
                for j in range(total.size):
                    total[j] += xi[j] * xi[j]
            xc, yc = x[n, c, start:stop], y[n, c, start:stop]
            for j in range(total.size):
                root = np.sqrt(bias + alpha_over_size * total[j])
                yc[j] = xc[j] / (root * np.sqrt(root))  # t^-0.75: two roots, no pow


@jit.kernel(error_model="numpy")
def lrn_pixels(x, before, after, alpha_over_size, bias, y):
    """`lrn_planes` for channels-last x and y (P, C), P the pixels of all images: each
    pixel's channels are contiguous, and the window's sum is `before + after + 1` shifted
    adds of the squares along them."""
    pixels, channels = x.shape
    blocks = (pixels + PIXEL_BLOCK - 1) // PIXEL_BLOCK
    for b in jit.prange(blocks):
        squares = np.empty(channels, x.dtype)
        total = np.empty(channels, x.dtype)
        for p in range(b * PIXEL_BLOCK, min((b + 1) * PIXEL_BLOCK, pixels)):
            xp, yp = x[p], y[p]
            for c in range(channels):
                squares[c] = xp[c] * xp[c]
            total[:] = 0
            for shift in range(-min(before, channels - 1), min(after, channels - 1) + 1):
                lo, hi = max(0, -shift), min(channels, channels - shift)
                # channel c gathers channel c + shift; through slices, as a negative index
                # would have to wrap around (numba tests it, and the loop stays scalar)
                dst, src = total[lo:hi], squares[lo + shift : hi + shift]
                for c in range(hi - lo):
                    dst[c] += src[c]
            for c in range(channels):
                root = np.sqrt(bias + alpha_over_size * total[c])
                yp[c] = xp[c] / (root * np.sqrt(root))
