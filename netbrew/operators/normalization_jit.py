"""numba kernels for BatchNormalization, forward and backward (DESIGN §8).

X is viewed as (N, C, S), S the spatial pixels, and each channel is one `prange`
iteration. Training statistics are one pass of float64 sums of X - X[0, c, 0] (shifted, so
the variance does not cancel), then one pass writes Y; the backward adds one pass for
sum(dY) and sum(dY * (X - mean)) and one for dX, where the NumPy kernels make a full-size
temporary per step. The NumPy kernels in normalization.py and normalization_grad.py stay
as the fallback and the tests' oracle; `channels_view` says when these apply (float32 or
float64, C-contiguous X with at least one element).

Measured numba / NumPy (interleaved in one process, medians; 2 cores shared with other
jobs, OMP_WAIT_POLICY=passive): training forward 0.57x at (32, 64, 32, 32) and 0.59x at
(32, 128, 16, 16); backward 0.50x and 0.65x; inference forward 0.33-0.45x on densenet's
(1, 256, 28, 28) and (1, 512, 14, 14). With OpenMP's default (spinning) wait policy the
kernels alone measure 0.26-0.32x, but their idle threads then take the cores from
OpenBLAS: densenet121 as a whole ran 4-6x slower than with NETBREW_JIT=0.

Not kept: an LRN loop over channels (a running sum of squares per pixel) measured
1.4-7x the NumPy kernel on inception_v1's (1, 64, 56, 56) and (1, 192, 56, 56).
"""

from __future__ import annotations

import math

import numpy as np

from netbrew import jit


def channels_view(x: np.ndarray) -> np.ndarray | None:
    """X as (N, C, S) when a numba kernel should run, else None (NumPy path)."""
    if not jit.enabled() or x.dtype not in jit.FLOATS or x.ndim < 2 or x.size == 0:
        return None
    if not x.flags.c_contiguous:
        return None
    return x.reshape(x.shape[0], x.shape[1], math.prod(x.shape[2:]))


def channel_stats(xv, input_mean, input_var, training: bool) -> tuple[np.ndarray, np.ndarray]:
    """(mean, var) per channel in float64: the batch's (biased) statistics of xv (N, C, S)
    in training, else input_mean and input_var."""
    if not training:
        return input_mean.reshape(-1).astype(np.float64), input_var.reshape(-1).astype(np.float64)
    mean, var = np.empty(xv.shape[1]), np.empty(xv.shape[1])
    batch_stats(xv, mean, var)
    return mean, var


@jit.kernel
def batch_stats(x, mean, var):
    """mean[c], var[c] (biased) of x (N, C, S) over N and S, in float64."""
    batch, channels, size = x.shape
    count = batch * size
    for c in jit.prange(channels):
        shift = np.float64(x[0, c, 0])
        total = 0.0
        squares = 0.0
        for n in range(batch):
            for s in range(size):
                d = np.float64(x[n, c, s]) - shift
                total += d
                squares += d * d
        m = total / count
        mean[c] = shift + m
        var[c] = max(squares / count - m * m, 0.0)


@jit.kernel
def scale_shift(x, a, b, relu, y):
    """y[n, c, s] = x[n, c, s] * a[c] + b[c] (a, b in x's dtype), then max(., 0) if `relu`
    (a NaN stays NaN, as through Relu)."""
    batch, channels, size = x.shape
    for p in jit.prange(batch * channels):
        n, c = p // channels, p % channels
        ac, bc = a[c], b[c]
        for s in range(size):
            v = x[n, c, s] * ac + bc
            y[n, c, s] = 0.0 if relu and v < 0 else v


@jit.kernel
def batch_norm_backward(x, dy, mean, inv, gamma, training, dx, d_scale, d_bias):
    """d_bias[c] = sum(dy), d_scale[c] = sum(dy * xhat), xhat = (x - mean) * inv, and, when
    dx has elements, dx = gamma * inv * (dy - (d_bias + xhat * d_scale) / count) in
    training, dy * gamma * inv otherwise. Sums in float64."""
    batch, channels, size = x.shape
    count = batch * size
    for c in jit.prange(channels):
        m = mean[c]
        g_sum = 0.0
        gx_sum = 0.0
        for n in range(batch):
            for s in range(size):
                g = np.float64(dy[n, c, s])
                g_sum += g
                gx_sum += g * (np.float64(x[n, c, s]) - m)
        d_bias[c] = g_sum
        d_scale[c] = gx_sum * inv[c]
        if dx.size == 0:
            continue
        k = gamma[c] * inv[c]
        if training:
            # dx = k * (dy - d_bias / count - (x - mean) * inv * d_scale / count)
            a = k * inv[c] * d_scale[c] / count
            b = k * g_sum / count - a * m
            for n in range(batch):
                for s in range(size):
                    dx[n, c, s] = k * dy[n, c, s] - a * x[n, c, s] - b
        else:
            for n in range(batch):
                for s in range(size):
                    dx[n, c, s] = k * dy[n, c, s]
