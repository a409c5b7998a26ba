"""Winograd F(4x4, 3x3) convolution for stride-1 3x3 convs, in channels-last layout.

Each 4x4 block ("tile") of outputs needs a 6x6 patch d of the padded input: V = B^T d B,
U = G g G^T for the kernel g, the 36 products U * V are summed over input channels (36
GEMMs (tiles, C) x (C, M)) and Y = A^T (sum) A gives the 16 outputs. That is 36 multiplies
per tile and channel pair where the direct conv takes 144: 4x fewer FLOPs than im2col, and
the input transform writes 36/16 values per input pixel, not im2col's 9.

Every step is a GEMM or one copy, so numpy spends its time in BLAS, not in per-row loops:

1. the padded image goes channels-last, (Hp, Wp, C), in the same copy that pads it;
2. rows: B^T (6, 6) times each tile row's 6 image rows, (6, Wp * C) read in place;
3. columns: one copy gathers the 6 columns of every tile, then B^T times all of them;
4. the 36 GEMMs with U (36, C, M), made once by the winograd_convs pass;
5. A^T (4, 6) over the patch columns, then over the patch rows: 16 outputs per tile;
6. one copy puts each tile's 4x4 block in place, adding the bias.

The output is channels-last too: (N, M, Ho, Wo) as a view of (N, Ho, Wo, M) memory. numpy's
elementwise ops keep that layout, and a following 1x1 conv reads it as a transposed matrix
without a copy (BLAS takes either orientation).

Rounding: the transforms scale by up to 8 (A), 5 (B) and 1/24 (G), so float32 results
differ from the exact conv by up to about 1e-5 of the output's largest value (measured on a
256-channel sum: 30x the direct conv's rounding error, 20x F(2x2)'s). That is well inside
the 1e-3 relative tolerance models are compared with, but it is why F(4x4) is an inference
pass and not what Conv itself runs.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from netbrew.operators.window import scratch
from netbrew.operators.zeros import relu as relu_into

_BT = np.array(
    [
        [4, 0, -5, 0, 1, 0],
        [0, -4, -4, 1, 1, 0],
        [0, 4, -4, -1, 1, 0],
        [0, -2, -1, 2, 1, 0],
        [0, 2, -1, -2, 1, 0],
        [0, 4, 0, -5, 0, 1],
    ],
    np.float64,
)
_G = np.array(
    [
        [1 / 4, 0, 0],
        [-1 / 6, -1 / 6, -1 / 6],
        [-1 / 6, 1 / 6, -1 / 6],
        [1 / 24, 1 / 12, 1 / 6],
        [1 / 24, -1 / 12, 1 / 6],
        [0, 0, 1],
    ]
)
_AT = np.array(
    [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
    np.float64,
)

MIN_CHANNELS = 64
"""Convs narrower than this on either side stay on im2col (the 36 GEMMs get too thin)."""
MIN_TILES = 49
"""Images with fewer 4x4 output tiles than this (below about 28x28) stay on im2col."""
STRIP_ELEMENTS = 1 << 21
"""About how many values the 36 transformed blocks of one strip of tile rows hold; bigger
images go a strip at a time, which bounds the scratch memory (8 MiB of float32)."""


def use_winograd4(channels: int, out_channels: int, out_shape: tuple[int, ...]) -> bool:
    """Whether F(4x4, 3x3) beats im2col for a stride-1 3x3 conv with this output (Ho, Wo):
    both channel counts at least MIN_CHANNELS and at least MIN_TILES tiles. (Measured on
    ResNet-50's 56x56 and 28x28 convs: 1.5-2x faster than im2col; at 14x14 the 36 GEMMs
    have 16 rows each and run at a third of BLAS's speed.)"""
    tiles = math.ceil(out_shape[0] / 4) * math.ceil(out_shape[1] / 4)
    return min(channels, out_channels) >= MIN_CHANNELS and tiles >= MIN_TILES


def winograd4_weights(w: np.ndarray) -> np.ndarray:
    """The transformed kernel U (36, C, M) of 3x3 weights w (M, C, 3, 3): U[6b + a] is the
    (a, b) entry of G g G^T for every (input, output) channel pair. Computed in float64,
    returned in w's dtype."""
    return kernel_transform(w, _G, "ai,mcij,bj->bacm", "winograd4_weights")


def kernel_transform(w: np.ndarray, g: np.ndarray, subscripts: str, caller: str) -> np.ndarray:
    """G g G^T for every 3x3 kernel g of w (M, C, 3, 3), laid out by the einsum `subscripts`
    (G, w, G -> two transform axes, then two channel axes), the transform axes flattened.
    Computed in float64, returned in w's dtype."""
    if w.ndim != 4 or w.shape[2:] != (3, 3):
        raise ValueError(f"{caller}: expected weights (M, C, 3, 3), got {w.shape}")
    u = np.einsum(subscripts, g, w.astype(np.float64), g)
    return np.ascontiguousarray(u.reshape(-1, *u.shape[2:]).astype(w.dtype))


def transform4_matches(w: np.ndarray, u: np.ndarray, samples: int = 16) -> bool:
    """A cheap check that u is still w's F(4x4) transform: U's corner entries are w's corner
    taps times 1/16, 1/4, 1/4 and 1 (exact in binary floating point), compared at `samples`
    channel pairs spread over (M, C)."""
    corners = ((0, 0, 0, 1 / 16), (30, 0, 2, 1 / 4), (5, 2, 0, 1 / 4), (35, 2, 2, 1))
    return corner_taps_match(w, u.transpose(0, 2, 1), corners, samples)


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


def winograd4_correlate(
    x: np.ndarray,
    u: np.ndarray,
    pads: tuple[int, int, int, int],
    bias: np.ndarray | None = None,
    relu: bool = False,
) -> np.ndarray:
    """The stride-1 3x3 convolution of x (N, C, H, W), in any memory layout, whose F(4x4)
    transformed weights are u (36, C, M), with pads (top, left, bottom, right) >= 0, plus
    `bias` (M,) and then Relu if asked: (N, M, Ho, Wo), channels-last in memory."""
    batch, channels, height, width = x.shape
    m = u.shape[2]
    top, left, bottom, right = pads
    ho, wo = height + top + bottom - 2, width + left + right - 2
    th, tw = -(-ho // 4), -(-wo // 4)  # tile rows and columns
    hp, wp = 4 * th + 2, 4 * tw + 2  # the padded image every tile's patch lies in
    bt, at = _BT.astype(x.dtype), _AT.astype(x.dtype)
    y = np.empty((batch, ho, wo, m), x.dtype)
    rows = max(1, min(th, STRIP_ELEMENTS // (36 * tw * max(channels, m))))
    for n in range(batch):
        image = padded_channels_last(x[n], top, left, hp, wp)
        for r0 in range(0, th, rows):
            r1 = min(th, r0 + rows)
            block = _transform_input(image, r0, r1 - r0, tw, bt)  # (36, tiles, C)
            prods = scratch("wino4_m", (36, block.shape[1], m), x.dtype)
            np.matmul(block, u, out=prods)
            _write_outputs(prods, y[n], r0, r1, tw, at, bias)
    if relu:
        relu_into(y, out=y)
    return y.transpose(0, 3, 1, 2)


def padded_channels_last(x: np.ndarray, top: int, left: int, hp: int, wp: int) -> np.ndarray:
    """x (C, H, W) zero-padded to (hp, wp) with x at (top, left), channels-last: (hp, wp, C)."""
    channels, height, width = x.shape
    out = scratch("wino4_p", (hp, wp, channels), x.dtype)
    out[:top] = 0
    out[top + height :] = 0
    out[top : top + height, :left] = 0
    out[top : top + height, left + width :] = 0
    out[top : top + height, left : left + width] = x.transpose(1, 2, 0)
    return out


def _transform_input(image: np.ndarray, r0: int, rows: int, tw: int, bt: np.ndarray):
    """B^T d B for the tiles in tile rows r0 .. r0 + rows of the padded channels-last image
    (hp, wp, C): (36, rows * tw, C), entry 6b + a of each tile's transformed patch."""
    wp, channels = image.shape[1:]
    step = image.strides[0]
    patch_rows = as_strided(
        image[4 * r0 :], (rows, 6, wp * channels), (4 * step, step, image.itemsize)
    )
    t1 = scratch("wino4_t1", (rows, 6, wp, channels), image.dtype)
    np.matmul(bt, patch_rows, out=t1.reshape(rows, 6, wp * channels))  # [r, a, x, c]
    s_r, s_a, s_x, s_c = t1.strides
    patch_cols = as_strided(t1, (6, 6, rows, tw, channels), (s_x, s_a, s_r, 4 * s_x, s_c))
    gathered = scratch("wino4_d", (6, 6 * rows * tw * channels), image.dtype)
    np.copyto(gathered.reshape(patch_cols.shape), patch_cols)  # [j, a, r, s, c]
    block = scratch("wino4_v", (6, 6 * rows * tw * channels), image.dtype)
    np.matmul(bt, gathered, out=block)  # [b, a, r, s, c]
    return block.reshape(36, rows * tw, channels)


def _write_outputs(prods, y, r0: int, r1: int, tw: int, at: np.ndarray, bias) -> None:
    """A^T (sum) A for the tile rows r0 .. r1 into y (Ho, Wo, M), plus the bias: output pixel
    (4r + p, 4s + q) is entry (p, q) of tile (r, s)."""
    ho, wo, m = y.shape
    rows = r1 - r0
    half = scratch("wino4_o1", (4, 6 * rows * tw * m), prods.dtype)
    np.matmul(at, prods.reshape(6, -1), out=half)  # [q, a, tiles, m]
    tiles = scratch("wino4_o2", (4, 4, rows * tw * m), prods.dtype)
    np.matmul(at, half.reshape(4, 6, -1), out=tiles)  # [q, p, tiles, m]
    src = tiles.reshape(4, 4, rows, tw, m).transpose(2, 1, 3, 0, 4)  # [r, p, s, q, m]
    exact = 4 * r1 <= ho and 4 * tw == wo
    if exact:
        dest = y[4 * r0 : 4 * r1].reshape(src.shape)
    else:
        dest = scratch("wino4_out", src.shape, y.dtype)
    if bias is None:
        np.copyto(dest, src)
    else:
        np.add(src, bias, out=dest)
    if not exact:
        height = min(4 * r1, ho) - 4 * r0
        y[4 * r0 : 4 * r0 + height] = dest.reshape(4 * rows, 4 * tw, m)[:height, :wo]
