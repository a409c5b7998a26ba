"""Convolution as im2col + GEMM over chunks of the batch, their columns kept in cache.

Conv's forward, input gradient and weight gradient each pair one GEMM with a copy between
images and columns: im2col before the forward and the weight gradient's GEMM, col2im after
the input gradient's. Over a whole batch those columns are large (ResNet-18's 64-channel
32x32 3x3 convs at batch 32: 75 MB), so each call page-faulted in a fresh array (20-80 ms on
this VM), and the GEMM read back from memory what the copy had just written. Here the batch
goes in chunks whose columns fill about CHUNK_BYTES: one scratch buffer, reused from chunk
to chunk and call to call, that the GEMM reads while it is still in cache.

- `correlate_columns`: window.im2col of a chunk, one batched GEMM into Y.
- `scatter_columns`: W^T times a chunk of dY into columns, window_grad.col2im into dX.
- `weight_grad_columns`: window.batch_columns of a chunk, columns that span the chunk's
  images, so the GEMM's reduction is long even where an image has few positions
  (ResNet-18's 4x4 convs: 16).

numba loops for the copies were tried and lost (one image or chunk, one thread, ResNet-18's
3x3 convs at 32x32 down to 4x4): a plain gather took 1.9-5.5x window.im2col's time (whose
strided copy and, on small images, selection GEMM are at memory speed), and a plain col2im
0.75-4x window_grad.col2im's.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np

from netbrew.operators.window import Window, _is_identity, batch_columns, im2col, scratch
from netbrew.operators.window_grad import col2im

CHUNK_BYTES = 1 << 22
"""Columns per chunk, in bytes: about L2-sized, so the GEMM reads them from cache. (ResNet-18's
ten conv shapes at batch 32, one thread, CPU time against the whole-batch path: forward,
input and weight gradients 0.95x, 0.91x and 0.92x in sum, 0.76-0.88x on the 64-channel
32x32 convs and 0.81-0.96x at 16x16, even from 8x8 down; 1 MiB and 16 MiB chunks within
2% of 4 MiB.)"""


WEIGHT_GRAD_CHUNK_BYTES = 1 << 24
"""Columns per chunk of the weight gradient, whose GEMM sums over the chunk's images: a
longer sum runs faster than the columns' trip to memory costs. (ResNet-18 at batch 32, op by
op, 16 MiB against 4 MiB: 0.87x on its 64-channel 32x32 convs, 0.89x on the 512-channel 4x4
ones, 1.0x on the rest; its whole step, 12 paired rounds: 0.89x in the machine's slow
phase, 1.0x in its fast one.)"""


def chunks(batch: int, per_image: int, budget: int | None = None) -> Iterator[tuple[int, int]]:
    """(start, stop) ranges over the batch, each holding about `budget` (CHUNK_BYTES) bytes
    of columns."""
    step = max(1, (CHUNK_BYTES if budget is None else budget) // max(per_image, 1))
    for start in range(0, batch, step):
        yield start, min(batch, start + step)


def correlate_columns(
    x: np.ndarray, w: np.ndarray, win: Window, group: int, bias: np.ndarray | None
) -> np.ndarray:
    """Conv's forward by im2col + GEMM a chunk at a time: (N, M, O1..On). Ungrouped convs
    of a batch with small outputs and enough channels take `_spanning_forward` instead."""
    batch, m = x.shape[0], w.shape[0]
    positions = math.prod(win.out)
    if group == 1 and batch > 1 and spans(x.shape[1], m, positions):
        return _spanning_forward(x, w, win, bias)
    y = np.empty((batch, m, positions), x.dtype)
    w_g = w.reshape(group, m // group, -1)
    per_image = x.shape[1] * math.prod(win.kernel) * positions * x.itemsize
    for start, stop in chunks(batch, per_image):
        cols = im2col(x[start:stop], win, group)  # (N_c, G, C/G * K, P), scratch
        np.matmul(w_g, cols, out=y[start:stop].reshape(stop - start, group, -1, positions))
        if bias is not None:
            y[start:stop] += bias.reshape(m, 1)
    return y.reshape(batch, m, *win.out)


SPAN_MAX_POSITIONS = 256
"""Output pixels per image up to which a batched forward multiplies one GEMM over the
chunk's images (`_spanning_forward`)."""

SPAN_MIN_CHANNELS = 64
"""Channels, the fewer of in and out, from which a forward takes `_spanning_forward` and
conv.scatter_images the flipped conv's spanning GEMM. With fewer, the per-image GEMMs and
col2im cost less than the spanning columns and their copy back into the images' layout.
(Batch 64, 2 cores, op by op, channels in -> out at image size. Forward, per image against
spanning: 16 -> 32 at 4x4 (LeNet's conv2) 0.4-0.8x, 1 -> 16 at 8x8 (its conv1) 0.86-0.9x,
8 -> 16 at 8x8 0.5-0.7x, 32 -> 64 at 4x4 0.65-1.0x. Input gradient, col2im against the
flipped conv: 16 -> 32 at 4x4 0.55-0.6x, 8 -> 16 and 16 -> 16 at 8x8 0.4x and 0.76x,
32 -> 16 at 4x4 1.05x; 64 -> 64 and 64 -> 128 at 8x8 1.4-1.75x, 128 -> 256 at 4x4 1.0x.)"""


def spans(channels: int, out_channels: int, positions: int) -> bool:
    """Whether a batched conv with these channels and output pixels per image multiplies
    one GEMM spanning the images (SPAN_MAX_POSITIONS, SPAN_MIN_CHANNELS)."""
    return min(channels, out_channels) >= SPAN_MIN_CHANNELS and positions <= SPAN_MAX_POSITIONS


def _spanning_forward(
    x: np.ndarray, w: np.ndarray, win: Window, bias: np.ndarray | None
) -> np.ndarray:
    """The ungrouped forward as one GEMM per chunk whose columns span the chunk's images
    (window.batch_columns, as the weight gradient uses): W laid out (M, K * C) times
    (K * C, N_c * P), then the (M, N_c, P) result copied into Y's images. Per-image GEMMs
    are only P columns wide (64 at 8x8, 16 at 4x4), which OpenBLAS runs slowly. (ResNet-18
    at batch 32, op by op: 0.62x the per-image time on its 256-channel 8x8 convs and on
    its 128->256 stride-2 one, 0.78x on its 64->128 stride-2 one, 0.91x on the 512-channel
    4x4 convs.)"""
    batch, m = x.shape[0], w.shape[0]
    c, k, positions = x.shape[1], math.prod(win.kernel), math.prod(win.out)
    w_kc = np.ascontiguousarray(w.reshape(m, c, k).transpose(0, 2, 1)).reshape(m, k * c)
    y = np.empty((batch, m, positions), x.dtype)
    for start, stop in chunks(batch, c * k * positions * x.itemsize):
        cols = batch_columns(x[start:stop], win).reshape(k * c, -1)  # rows (tap, channel)
        part = scratch("conv_span", (m, (stop - start) * positions), x.dtype)
        np.matmul(w_kc, cols, out=part)
        np.copyto(y[start:stop], part.reshape(m, stop - start, positions).transpose(1, 0, 2))
    if bias is not None:
        y += bias.reshape(m, 1)
    return y.reshape(batch, m, *win.out)


def scatter_columns(
    dy: np.ndarray, w: np.ndarray, win: Window, group: int, out_shape: Sequence[int]
) -> np.ndarray:
    """The adjoint of `correlate_columns` in x: dY (N, M, O1..On) -> (N, C, *out_shape),
    W^T times a chunk of dY into columns, then col2im."""
    batch, m = dy.shape[:2]
    channels, positions = w.shape[1] * group, math.prod(win.out)
    w_t = w.reshape(group, m // group, -1).transpose(0, 2, 1)  # (G, C/G * K, M/G)
    dy = dy.reshape(batch, group, m // group, positions)
    dx = np.empty((batch, channels, *out_shape), dy.dtype)
    if _is_identity(dx, win):  # 1x1, stride 1, no padding: the columns are dX
        np.matmul(w_t, dy, out=dx.reshape(batch, group, -1, positions))
        return dx
    per_image = channels * math.prod(win.kernel) * positions * dy.itemsize
    parts = list(chunks(batch, per_image))
    for start, stop in parts:
        shape = (stop - start, group, w_t.shape[1], positions)
        cols = np.matmul(w_t, dy[start:stop], out=scratch("conv_cols", shape, dy.dtype))
        cols = cols.reshape(stop - start, channels, *win.kernel, *win.out)
        if len(parts) == 1:  # col2im's new array is dX
            return col2im(cols, win, out_shape)
        dx[start:stop] = col2im(cols, win, out_shape)
    return dx


COLUMNS_FIRST_BELOW = 256
"""Output channels per group below which the weight gradient's GEMM is columns times dY's
rows transposed, not dY's rows times the columns transposed (see weight_grad_columns)."""


def weight_grad_columns(dy: np.ndarray, x: np.ndarray, win: Window, group: int) -> np.ndarray:
    """The adjoint of `correlate_columns` in w: dY (N, M, O1..On), X (N, C, D1..Dn) ->
    (M, C/group, k1..kn), C-ordered. Per chunk, one GEMM per group between dY's rows (M/G,
    N_c * P) and columns (K * C/G, N_c * P) that span the chunk's images
    (window.batch_columns), summed over the chunks; then the small result is turned to
    (M, channel, tap).

    The GEMM's order: with fewer than COLUMNS_FIRST_BELOW output channels per group, the
    columns times the rows transposed, giving (tap, channel, M/G): OpenBLAS runs it at 1.24x
    the speed of the other order at 64 channels, 1.12x at 128, 1.0x at 256, one thread
    each; with 512 channels on 4x4 images, rows times the columns transposed, giving (M/G,
    tap, channel), is 1.5x faster. (Either beats a transposed dW that the optimizer's
    passes then copied: 0.68x on ResNet-18's 512-channel 4x4 convs, 0.36x on its 3-channel
    stem.)"""
    batch, m = dy.shape[:2]
    c, k, positions = x.shape[1] // group, math.prod(win.kernel), math.prod(win.out)
    dy = dy.reshape(batch, group, m // group, positions)
    columns_first = m // group < COLUMNS_FIRST_BELOW
    shape = (group, k * c, m // group) if columns_first else (group, m // group, k * c)
    dw = np.empty(shape, dy.dtype)
    part = None
    per_image = group * c * k * positions * x.itemsize
    for start, stop in chunks(batch, per_image, WEIGHT_GRAD_CHUNK_BYTES):
        cols = batch_columns(x[start:stop], win).reshape(k, group, c, -1)
        cols = cols.transpose(1, 0, 2, 3).reshape(group, k * c, -1)  # no copy if G = 1
        rows = scratch("conv_dy", (group, m // group, stop - start, positions), dy.dtype)
        np.copyto(rows, dy[start:stop].transpose(1, 2, 0, 3))
        rows = rows.reshape(group, m // group, -1)
        out = dw if part is None else part  # the first chunk writes dW, the rest add to it
        if columns_first:
            np.matmul(cols, rows.transpose(0, 2, 1), out=out)
        else:
            np.matmul(rows, cols.transpose(0, 2, 1), out=out)
        if part is None:
            part = np.empty_like(dw)
        else:
            dw += part
    if columns_first:
        dw = dw.reshape(group, k, c, m // group).transpose(0, 3, 2, 1)
    else:
        dw = dw.reshape(group, m // group, k, c).transpose(0, 1, 3, 2)
    return np.ascontiguousarray(dw).reshape(m, c, *win.kernel)
