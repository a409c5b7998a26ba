"""The channels-last Winograd engine that F(2x2, 3x3) and F(4x4, 3x3) share.

A Winograd F(t x t, 3x3) conv covers the output with t x t tiles; tile (r, s) needs the
p x p patch d (p = t + 2) of the padded input at (t r, t s). With V = B^T d B for each
patch and U = G g G^T for each 3x3 kernel g (made once, by the winograd_convs pass), the
p^2 products U * V summed over input channels are p^2 GEMMs (tiles, C) x (C, M), and
Y = A^T (sum) A gives the tile's t x t outputs.

Every step is a GEMM or one copy, so numpy spends its time in BLAS, not in per-row loops:

1. the padded image goes channels-last, (Hp, Wp, C), in the same copy that pads it;
2. rows: B^T (p, p) times each tile row's p image rows, (p, Wp * C) read in place;
3. columns: one copy gathers the p columns of every tile, then B^T times all of them;
4. the p^2 GEMMs with U (p^2, C, M), a product a thread over the cores where
   blas_pool.batched_matmul takes them (OpenBLAS runs each small one on one thread);
5. A^T (t, p) over the patch columns, then over the patch rows: t^2 outputs per tile;
6. one copy puts each tile's t x t block in place, adding the bias; where the JIT is on,
   a numba loop (`_place_tiles`) does it with the Relu in the same pass (op by op 0.91-1.0x
   the time of the copy and a Relu pass; VGG-19 0.95x, ResNet-50 0.985x in the model).

The output is channels-last too: (N, M, Ho, Wo) as a view of (N, Ho, Wo, M) memory. numpy's
elementwise ops keep that layout, and a following 1x1 conv reads it as a transposed matrix
without a copy (BLAS takes either orientation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from netbrew import blas_pool, jit
from netbrew.operators.conv_last import bias_vector
from netbrew.operators.window import scratch
from netbrew.operators.zeros import relu as relu_into


@dataclass(frozen=True)
class Tiling:
    """One Winograd F(t x t, 3x3): t = `size` outputs a tile side, from p = t + 2 inputs.

    Attributes:
        bt: B^T (p, p), the input transform.
        g: G (p, 3), the kernel transform.
        at: A^T (t, p), the output transform.
    """

    bt: np.ndarray
    g: np.ndarray
    at: np.ndarray

    @property
    def size(self) -> int:
        return self.at.shape[0]

    @property
    def patch(self) -> int:
        return self.bt.shape[0]


def kernel_transform(w: np.ndarray, tiling: Tiling, caller: str) -> np.ndarray:
    """U (p^2, C, M) for 3x3 weights w (M, C, 3, 3): U[p b + a][c, m] is entry (a, b) of
    G g G^T for g = w[m, c], the order the input transform leaves its p^2 blocks in.
    Computed in float64, returned in w's dtype: by `transform_loop` where the JIT is on
    (a training step transforms its weights at every call: 512 x 512 channels took 62 ms
    for F(2x2) and 140 ms for F(4x4) through einsum, the loop ~100x less), else einsum."""
    if w.ndim != 4 or w.shape[2:] != (3, 3):
        raise ValueError(f"{caller}: expected weights (M, C, 3, 3), got {w.shape}")
    g = tiling.g
    if jit.enabled() and w.dtype in jit.FLOATS:
        u = np.empty((g.shape[0] ** 2, w.shape[1], w.shape[0]), w.dtype)
        transform_loop.pick(w.size, 1 << 16)(np.ascontiguousarray(w), g, u)
        return u
    u = np.einsum("ai,mcij,bj->bacm", g, w.astype(np.float64), g)
    return np.ascontiguousarray(u.reshape(-1, *u.shape[2:]).astype(w.dtype))


@jit.kernel
def transform_loop(w, g, u):
    """u[p b + a, c, m] = sum over i, j of g[a, i] w[m, c, i, j] g[b, j], in float64."""
    outputs, channels = w.shape[0], w.shape[1]
    p = g.shape[0]
    for c in jit.prange(channels):
        half = np.empty((p, 3))
        for m in range(outputs):
            for a in range(p):
                for j in range(3):
                    half[a, j] = (
                        g[a, 0] * np.float64(w[m, c, 0, j])
                        + g[a, 1] * np.float64(w[m, c, 1, j])
                        + g[a, 2] * np.float64(w[m, c, 2, j])
                    )
            for b in range(p):
                for a in range(p):
                    u[p * b + a, c, m] = (
                        half[a, 0] * g[b, 0] + half[a, 1] * g[b, 1] + half[a, 2] * g[b, 2]
                    )


def corner_taps_match(w: np.ndarray, u_mc: np.ndarray, corners, samples: int) -> bool:
    """Whether u_mc[k, m, c] == w[m, c, i, j] * scale for every (k, i, j, scale) in
    `corners`, at `samples` channel pairs (m, c) spread over w's (M, C): the stale-weight
    check of both Winograd transforms, u_mc being U viewed as (taps, M, C)."""
    m, c = w.shape[:2]
    flat = np.linspace(0, m * c - 1, min(samples, m * c)).astype(np.intp)
    rows, cols = np.divmod(flat, c)
    return all(
        np.array_equal(u_mc[k, rows, cols], (w[rows, cols, i, j] * scale).astype(u_mc.dtype))
        for k, i, j, scale in corners
    )


BLOCK_PRODUCTS = 1024
"""Small images go several at a time, until a step has about this many tiles times p^2
(F(2x2): 64 tiles, F(4x4): 29): enough rows for the p^2 GEMMs, few enough that the
step's blocks stay in cache. (ResNet-18 at batch 16, one thread: F(2x2) on 256 channels
at 8x8, 16 tiles an image, 0.89x the time of one image a step; F(4x4) on 128 channels at
16x16, 16 tiles, 1.0x; at 64 tiles a step 1.15x; a step of 256 tiles ran the 64-channel
32x32 F(4x4) conv 1.2x slower than one image.)"""


def tiled_correlate(
    x: np.ndarray,
    u: np.ndarray,
    pads: tuple[int, int, int, int],
    tiling: Tiling,
    strip_elements: int,
    bias: np.ndarray | None = None,
    relu: bool = False,
) -> np.ndarray:
    """The stride-1 3x3 convolution of x (N, C, H, W), in any memory layout, whose
    transformed weights are u (p^2, C, M) = kernel_transform(W, tiling), with pads (top,
    left, bottom, right) >= 0, plus `bias` (M,) and then Relu if asked: (N, M, Ho, Wo),
    channels-last in memory. Each step's p^2 transformed blocks hold about
    `strip_elements` values: a big image goes a strip of tile rows at a time, small images
    several whole images at a time, so the p^2 GEMMs stay tall (ResNet-18's 8x8 convs
    have 16 tiles an image)."""
    batch, channels, height, width = x.shape
    m, t, p = u.shape[2], tiling.size, tiling.patch
    top, left, bottom, right = pads
    ho, wo = height + top + bottom - 2, width + left + right - 2
    th, tw = -(-ho // t), -(-wo // t)  # tile rows and columns
    hp, wp = t * th + 2, t * tw + 2  # the padded image every tile's patch lies in
    bt, at = tiling.bt.astype(x.dtype), tiling.at.astype(x.dtype)
    y = np.empty((batch, ho, wo, m), x.dtype)
    rows = max(1, strip_elements // (p * p * tw * max(channels, m)))
    per_step = -(-BLOCK_PRODUCTS // (p * p * th * tw))
    step = max(1, min(batch, rows // th, per_step))  # whole images a step
    for n in range(0, batch, step):
        images = padded_channels_last(x[n : n + step], top, left, hp, wp)
        for r0 in range(0, th, rows):
            r1 = min(th, r0 + rows)
            block = _transform_input(images, r0, r1 - r0, tw, bt)
            prods = scratch("wino_m", (p * p, block.shape[1], m), x.dtype)
            blas_pool.matmul(block, u, prods)
            _write_outputs(prods, y[n : n + step], r0, r1, tw, at, bias, relu)
    return y.transpose(0, 3, 1, 2)


PLACE_TILES_JIT = True
"""Whether the output tiles go into Y by `_place_tiles` (bias and Relu in the same pass)
where the JIT takes the dtype."""


def padded_channels_last(x: np.ndarray, top: int, left: int, hp: int, wp: int) -> np.ndarray:
    """Images x (G, C, H, W) zero-padded to (hp, wp) with x at (top, left), channels-last:
    (G, hp, wp, C), in a scratch buffer."""
    images, channels, height, width = x.shape
    out = scratch("wino_p", (images, hp, wp, channels), x.dtype)
    out[:, :top] = 0
    out[:, top + height :] = 0
    out[:, top : top + height, :left] = 0
    out[:, top : top + height, left + width :] = 0
    out[:, top : top + height, left : left + width] = x.transpose(0, 2, 3, 1)
    return out


def _transform_input(images, r0: int, rows: int, tw: int, bt: np.ndarray):
    """B^T d B for the tiles in tile rows r0 .. r0 + rows of each padded channels-last
    image (G, hp, wp, C): (p^2, G * rows * tw, C), entry p b + a of each tile's
    transformed patch."""
    p = bt.shape[0]
    t = p - 2  # a tile's outputs per side
    count, _, wp, channels = images.shape
    step = images.strides[1]
    patch_rows = as_strided(
        images[:, t * r0 :],
        (count, rows, p, wp * channels),
        (images.strides[0], t * step, step, images.itemsize),
    )
    rows *= count  # tile rows of all the images from here on
    t1 = scratch("wino_t1", (rows, p, wp, channels), images.dtype)
    np.matmul(bt, patch_rows, out=t1.reshape(count, -1, p, wp * channels))  # [r, a, x, c]
    if channels >= COLUMNS_JIT_MIN_CHANNELS and jit.enabled() and t1.dtype in jit.FLOATS:
        block = scratch("wino_v", (p * p, rows * tw, channels), images.dtype)
        _transform_columns(t1, bt, block, tw)
        return block
    s_r, s_a, s_x, s_c = t1.strides
    patch_cols = as_strided(t1, (p, p, rows, tw, channels), (s_x, s_a, s_r, t * s_x, s_c))
    gathered = scratch("wino_d", (p, p * rows * tw * channels), images.dtype)
    np.copyto(gathered.reshape(patch_cols.shape), patch_cols)  # [j, a, r, s, c]
    block = scratch("wino_v", (p, p * rows * tw * channels), images.dtype)
    np.matmul(bt, gathered, out=block)  # [b, a, r, s, c]
    return block.reshape(p * p, rows * tw, channels)


def _write_outputs(prods, y, r0: int, r1: int, tw: int, at: np.ndarray, bias, relu: bool) -> None:
    """A^T (sum) A for the tile rows r0 .. r1 of each image into y (G, Ho, Wo, M), plus the
    bias, then Relu if asked: output pixel (t r + i, t s + j) is entry (i, j) of tile
    (r, s). Where the JIT takes the dtype, `_place_tiles` puts the tiles in place with the
    bias and Relu in the same pass; else one copy adds the bias and a pass takes the Relu."""
    count, ho, wo, m = y.shape
    t, p = at.shape
    rows = r1 - r0
    half = scratch("wino_o1", (t, p * count * rows * tw * m), prods.dtype)
    np.matmul(at, prods.reshape(p, -1), out=half)  # [j, a, tiles, m]
    tiles = scratch("wino_o2", (t, t, count * rows * tw * m), prods.dtype)
    np.matmul(at, half.reshape(t, p, -1), out=tiles)  # [j, i, tiles, m]
    if PLACE_TILES_JIT and jit.enabled() and y.dtype in jit.FLOATS:
        lo, hi = y.dtype.type(0 if relu else -np.inf), y.dtype.type(np.inf)
        kernel = _place_tiles.pick(tiles.size, 1 << 19)
        kernel(tiles.reshape(t, t, -1, m), y, r0, rows, tw, bias_vector(bias, m, y.dtype), lo, hi)
        return
    src = tiles.reshape(t, t, count, rows, tw, m).transpose(2, 3, 1, 4, 0, 5)  # [g, r, i, s, j, m]
    exact = t * r1 <= ho and t * tw == wo
    if exact:
        dest = y[:, t * r0 : t * r1].reshape(src.shape)
    else:
        dest = scratch("wino_out", src.shape, y.dtype)
    if bias is None:
        np.copyto(dest, src)
    else:
        np.add(src, bias, out=dest)
    height = min(t * r1, ho) - t * r0
    if not exact:
        y[:, t * r0 : t * r0 + height] = dest.reshape(count, t * rows, t * tw, m)[:, :height, :wo]
    if relu:
        written = y[:, t * r0 : t * r0 + height]
        relu_into(written, out=written)


@jit.kernel
def _place_tiles(tiles, y, r0, rows, tw, bias, lo, hi):
    """y[g, t (r0 + r) + i, t s + j] = clamp(tiles[j, i, (g rows + r) tw + s] + bias): each
    output pixel one run along the channels, pixels past the image's edge dropped."""
    count, ho, wo, m = y.shape
    t = tiles.shape[0]
    for job in jit.prange(count * rows):
        g, r = job // rows, job % rows
        top = t * (r0 + r)
        for s in range(tw):
            tile = job * tw + s
            for i in range(min(t, ho - top)):
                for j in range(min(t, wo - t * s)):
                    src = tiles[j, i, tile]
                    out = y[g, top + i, t * s + j]
                    for k in range(m):
                        out[k] = jit.clamp(src[k] + bias[k], lo, hi)


COLUMNS_JIT_MIN_CHANNELS = 128
"""Channels from which the input transform's column step runs `_transform_columns`. (Op by
op, paired with the gather copy and GEMM: 128 channels at 28x28 F(4x4) 0.73x, 256 at
14x14 0.80-0.86x, 512 at 7x7 0.73x; 64 channels 1.04-1.06x, whose runs are too short.)"""


@jit.kernel(parallel=False)
def _transform_columns(t1, bt, block, tw):
    """block[p b + a, r tw + s, c] = sum over j of B^T[b, j] t1[r, a, t s + j, c]: the
    column step of B^T d B for every tile, read from the row-transformed image rows t1
    (rows, p, wp, C) in place, the zero coefficients skipped; one thread (a parallel loop ran
    no faster: the GEMMs beside it hold the other core)."""
    rows, p, _, channels = t1.shape
    t = p - 2
    for r in range(rows):
        for s in range(tw):
            tile = r * tw + s
            for a in range(p):
                patch = t1[r, a, t * s : t * s + p]  # the tile's p columns of row a
                for b in range(p):
                    out = block[p * b + a, tile]
                    first = True
                    for j in range(p):
                        coef = bt[b, j]
                        if coef == 0:
                            continue
                        column = patch[j]
                        if first:
                            for k in range(channels):
                                out[k] = coef * column[k]
                            first = False
                        else:
                            for k in range(channels):
                                out[k] += coef * column[k]
                    if first:
                        for k in range(channels):
                            out[k] = 0
