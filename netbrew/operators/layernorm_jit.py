"""numba kernels for LayerNormalization, forward and backward (DESIGN §8).

X is viewed as (R, D): D the elements of dims [axis, rank) that each row normalizes, R the
rows. Each row is one `prange` iteration and stays in cache: one pass sums it (float64,
shifted by its first value so the variance does not cancel), one writes Y. The backward
reads X and dY twice per row (the sums, then dX) and adds each row's dY * xhat into its
chunk's dScale partial, where the NumPy kernels make a full-size temporary per step.
The NumPy kernels in normalization.py and normalization_grad.py stay as the fallback and
the tests' oracle; `rows_view` says when these apply.

The sums are allowed to reassociate (fastmath "reassoc"), so that LLVM vectorizes them:
without it each row's sum is one serial chain of dependent adds, and the kernel measured
1.0x the NumPy one at BERT's shape.

Measured numba / NumPy, float32, axis -1 (interleaved in one process, medians; 2 cores
shared with other jobs, OMP_WAIT_POLICY=passive): forward 0.54x and backward 0.43x at the
BERT-base layer's (1, 128, 768); 0.23x and 0.22x at (32, 128, 768); 0.83x and 0.55x at a
small (64, 7, 13). Inside the bert_layer zoo model the two LayerNorms are 0.3% of a run,
below what its run-to-run noise resolves.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew import jit

try:  # a helper the kernels call; a plain function when numba is missing
    from numba.extending import register_jitable
except ImportError:

    def register_jitable(fn):
        return fn


STASHES = (1, 11)  # float32, float64: accumulating in float64 is at least as exact
CHUNKS = 8  # row chunks of the backward, each with its own dScale partial
# The row sums may be reassociated (so LLVM vectorizes them); NaN and inf keep their meaning.
REASSOC = {"reassoc", "contract"}


def rows_view(x: np.ndarray, axis: int, stash_type: int) -> np.ndarray | None:
    """X as (R, D) when a numba kernel should run, else None (NumPy path)."""
    if not jit.enabled() or x.dtype not in jit.FLOATS or stash_type not in STASHES or x.size == 0:
        return None
    if not x.flags.c_contiguous:
        return None
    return x.reshape(math.prod(x.shape[:axis]), -1)


def row_param(p: np.ndarray | None, x: np.ndarray, axis: int) -> np.ndarray | None:
    """Scale or B (which broadcast to X) as a contiguous (D,) row in X's dtype, or None when
    it varies along the dims before `axis` (the NumPy path handles that)."""
    if p is None:
        return None
    padded = (1,) * (x.ndim - p.ndim) + p.shape
    if any(s != 1 for s in padded[:axis]):
        return None
    row = np.broadcast_to(p.reshape(padded[axis:]), x.shape[axis:])
    return np.ascontiguousarray(row, dtype=x.dtype).reshape(-1)


@register_jitable
def row_stats(row, epsilon):
    """(mean, 1 / sqrt(var + epsilon)) of one row, biased var, float64 sums shifted by the
    row's first value (so the variance does not cancel)."""
    shift = np.float64(row[0])
    total = 0.0
    squares = 0.0
    for j in range(row.size):
        v = np.float64(row[j]) - shift
        total += v
        squares += v * v
    m = total / row.size
    return shift + m, 1.0 / math.sqrt(max(squares / row.size - m * m, 0.0) + epsilon)


@jit.kernel(fastmath=REASSOC)
def layer_norm_forward(x, scale, bias, has_bias, epsilon, y, mean, inv_std):
    """Per row r of x (R, D): mean[r], inv_std[r] = 1 / sqrt(var + epsilon) (biased var,
    float64) and y[r] = (x[r] - mean) * inv_std * scale (+ bias)."""
    rows, d = x.shape
    for r in jit.prange(rows):
        m, inv = row_stats(x[r], epsilon)
        mean[r] = m
        inv_std[r] = inv
        for j in range(d):
            v = (np.float64(x[r, j]) - m) * inv * scale[j]
            if has_bias:
                v += bias[j]
            y[r, j] = v


@jit.kernel(fastmath=REASSOC)
def layer_norm_backward(x, scale, dy, d_mean, d_inv, epsilon, dx, d_scale_parts):
    """Per row r of x (R, D), with xhat = (x - mean) * inv and g = dy * scale:
    dx[r] = inv * (g - mean(g) - xhat * mean(g * xhat)) + d_mean[r] / D
    - d_inv[r] * inv^2 * xhat / D (d_mean, d_inv of size 0 when absent; dx of size 0 when
    not wanted), and d_scale_parts[k] = sum of dy * xhat over the rows of chunk k."""
    rows, d = x.shape
    chunks = d_scale_parts.shape[0]
    for k in jit.prange(chunks):
        part = d_scale_parts[k]
        part[:] = 0.0
        for r in range(k * rows // chunks, (k + 1) * rows // chunks):
            m, inv = row_stats(x[r], epsilon)
            g_sum = 0.0
            gx_sum = 0.0
            for j in range(d):
                xhat = (np.float64(x[r, j]) - m) * inv
                g = np.float64(dy[r, j])
                part[j] += g * xhat
                g *= scale[j]
                g_sum += g
                gx_sum += g * xhat
            if dx.size == 0:
                continue
            g_mean = g_sum / d
            gx_mean = gx_sum / d
            extra = d_mean[r] / d if d_mean.size else 0.0
            inv_term = d_inv[r] * inv * inv / d if d_inv.size else 0.0
            for j in range(d):
                xhat = (np.float64(x[r, j]) - m) * inv
                g = np.float64(dy[r, j]) * scale[j]
                dx[r, j] = inv * (g - g_mean - xhat * gx_mean) + extra - inv_term * xhat
