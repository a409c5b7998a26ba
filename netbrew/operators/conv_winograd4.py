"""Winograd F(4x4, 3x3) convolution for stride-1 3x3 convs, in channels-last layout.

Each 4x4 block ("tile") of outputs needs a 6x6 patch d of the padded input: V = B^T d B,
U = G g G^T for the kernel g, the 36 products U * V are summed over input channels (36
GEMMs (tiles, C) x (C, M)) and Y = A^T (sum) A gives the 16 outputs. That is 36 multiplies
per tile and channel pair where the direct conv takes 144: 4x fewer FLOPs than im2col, and
the input transform writes 36/16 values per input pixel, not im2col's 9. The steps, all
GEMMs or single copies, are netbrew.operators.winograd_tiles's, which F(2x2) shares.

Rounding: the transforms scale by up to 8 (A), 5 (B) and 1/24 (G), so float32 results
differ from the exact conv by up to about 1e-5 of the output's largest value (measured on a
256-channel sum: 30x the direct conv's rounding error, 20x F(2x2)'s). That is well inside
the 1e-3 relative tolerance models are compared with, but it is why F(4x4) is an inference
pass and not what Conv itself runs.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.operators.winograd_tiles import (
    Tiling,
    corner_taps_match,
    kernel_transform,
    tiled_correlate,
)

F4 = Tiling(
    bt=np.array(
        [
            [4, 0, -5, 0, 1, 0],
            [0, -4, -4, 1, 1, 0],
            [0, 4, -4, -1, 1, 0],
            [0, -2, -1, 2, 1, 0],
            [0, 2, -1, -2, 1, 0],
            [0, 4, 0, -5, 0, 1],
        ],
        np.float64,
    ),
    g=np.array(
        [
            [1 / 4, 0, 0],
            [-1 / 6, -1 / 6, -1 / 6],
            [-1 / 6, 1 / 6, -1 / 6],
            [1 / 24, 1 / 12, 1 / 6],
            [1 / 24, -1 / 12, 1 / 6],
            [0, 0, 1],
        ]
    ),
    at=np.array(
        [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
        np.float64,
    ),
)

MIN_CHANNELS = 64
"""Convs narrower than this on either side stay on im2col (the 36 GEMMs get too thin)."""
MIN_TILES = 49
"""Images with fewer 4x4 output tiles than this (below about 28x28) stay on im2col."""
MIN_TILES_BATCHED = 16
"""The same for a batch of several images (below 16x16)."""
STRIP_ELEMENTS = 1 << 21
"""About how many values the 36 transformed blocks of one strip of tile rows hold; bigger
images go a strip at a time, which bounds the scratch memory (8 MiB of float32)."""


def use_winograd4(
    channels: int, out_channels: int, out_shape: tuple[int, ...], images: int = 1
) -> bool:
    """Whether F(4x4, 3x3) beats im2col for a stride-1 3x3 conv with this output (Ho, Wo)
    on `images` images: both channel counts at least MIN_CHANNELS and at least MIN_TILES
    tiles an image, or MIN_TILES_BATCHED where there are several images, which
    winograd_tiles transforms a few at a time. (Measured on ResNet-50's 56x56 and 28x28
    convs: 1.5-2x faster than im2col; at 14x14 the 36 GEMMs have 16 rows each and run at a
    third of BLAS's speed. ResNet-18's 128-channel 16x16 convs at batch 16, one thread:
    0.52x im2col's time, 0.82x F(2x2)'s; its 256-channel 8x8 ones 1.2x F(2x2)'s.)"""
    tiles = math.ceil(out_shape[0] / 4) * math.ceil(out_shape[1] / 4)
    least = MIN_TILES if images == 1 else MIN_TILES_BATCHED
    return min(channels, out_channels) >= MIN_CHANNELS and tiles >= least


def winograd4_weights(w: np.ndarray) -> np.ndarray:
    """The transformed kernel U (36, C, M) of 3x3 weights w (M, C, 3, 3): U[6b + a] is the
    (a, b) entry of G g G^T for every (input, output) channel pair. Computed in float64,
    returned in w's dtype."""
    return kernel_transform(w, F4, "winograd4_weights")


def transform4_matches(w: np.ndarray, u: np.ndarray, samples: int = 16) -> bool:
    """A cheap check that u is still w's F(4x4) transform: U's corner entries are w's corner
    taps times 1/16, 1/4, 1/4 and 1 (exact in binary floating point), compared at `samples`
    channel pairs spread over (M, C)."""
    corners = ((0, 0, 0, 1 / 16), (30, 0, 2, 1 / 4), (5, 2, 0, 1 / 4), (35, 2, 2, 1))
    return corner_taps_match(w, u.transpose(0, 2, 1), corners, samples)


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
    return tiled_correlate(x, u, pads, F4, STRIP_ELEMENTS, bias, relu)
