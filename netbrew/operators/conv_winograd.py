"""Winograd F(2x2, 3x3) convolution for stride-1 3x3 convs (Lavin and Gray, 2015), and the
ConvWinograd / ConvWinogradRelu ops that run it, F(4x4, 3x3) or the channels-last im2col.

Each 2x2 block ("tile") of outputs needs a 4x4 patch of the padded input. The patch d goes
to V = B^T d B and the kernel g to U = G g G^T (both 4x4), the 16 products U * V are summed
over input channels, which is 16 GEMMs (tiles, C) x (C, M), and Y = A^T (sum) A gives the
2x2 outputs. That is 16 multiplies per tile and channel pair where the direct conv takes 36:
2.25x fewer FLOPs. The steps, all GEMMs or single copies over a channels-last image, are
netbrew.operators.winograd_tiles's, which F(4x4) shares; the output is channels-last.

The weights' transform U (`winograd_weights`, (16, C, M)) is made once, by the
`winograd_convs` pass, and handed to the ConvWinograd op beside the weights W: the op runs
as Conv on W where the Winograd path does not pay, and exports as a plain Conv on W. Where
the pass knows the image size and the larger-tile F(4x4, 3x3) pays there
(conv_winograd4.use_winograd4), U is that transform instead, (36, C, M), and the op runs
conv_winograd4; the op tells the two apart by U's shape. The gradient is Conv's in X, W and
B (netbrew.operators.fused_grad); U, derived from W by the pass, gets none.

Rounding: the transforms add and subtract (and halve, in U), so results differ from the
direct conv by a few ulps of the sum of |products| (measured 7e-7 of the output's largest
value on a 256-channel float32 sum).
"""

from __future__ import annotations

import numpy as np

from netbrew.operators import conv
from netbrew.operators.conv_hwc import hwc_correlate, hwc_matches
from netbrew.operators.conv_winograd4 import transform4_matches, use_winograd4, winograd4_correlate
from netbrew.operators.fused import relu_in_place
from netbrew.operators.schema import get_schema, kernel, schema
from netbrew.operators.window import make_window
from netbrew.operators.winograd_tiles import (
    Tiling,
    corner_taps_match,
    kernel_transform,
    tiled_correlate,
)

F2 = Tiling(
    bt=np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64),
    g=np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]]),
    at=np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64),
)

MIN_CHANNELS = 64
"""Convs narrower than this on either side never take the Winograd path (`use_winograd`),
so the winograd_convs pass leaves them as they are."""
MIN_TILES = 49
"""Outputs with fewer full 2x2 tiles than this (below 14x14) stay on im2col: the 16 GEMMs
get too thin."""
MIN_TILES_BATCHED = 16
"""The same for a batch of at least 4 images (below 8x8)."""
STRIP_ELEMENTS = 1 << 21
"""About how many values the 16 transformed blocks of one strip of tile rows hold; bigger
images go a strip at a time, which bounds the scratch memory (8 MiB of float32)."""

for _fused in ("ConvWinograd", "ConvWinogradRelu"):
    _conv = get_schema("Conv")
    schema(
        _fused,
        inputs=["X", "W", "U", "B?"],
        outputs=["Y"],
        attrs=dict(_conv.attrs),
        dtypes={0: "float", 1: "float", 2: "float", 3: "float"},
        onnx=False,
        doc="Conv(X, W, B)"
        + (" then Relu" if _fused.endswith("Relu") else "")
        + ", where U is W's Winograd transform: winograd_weights(W) (16, C, M) for "
        "F(2x2, 3x3) or winograd4_weights(W) (36, C, M) for F(4x4, 3x3), where stride-1 3x3 "
        "convs on large enough images run through U (see conv_winograd, conv_winograd4), or "
        "hwc_weights(W) (kh, kw, C, M), W laid out for a channels-last im2col (conv_hwc); "
        "the rest run as Conv does. Made by the winograd_convs pass; exported as Conv; "
        "gradient: Conv's in X, W and B (U, derived from W, gets none)",
    )


def use_winograd(
    channels: int, out_channels: int, out_shape: tuple[int, ...], images: int = 1
) -> bool:
    """Whether F(2x2, 3x3) beats im2col for a stride-1 3x3 conv with this output (Ho, Wo)
    on `images` images: both channel counts at least MIN_CHANNELS and at least MIN_TILES
    full tiles an image, or MIN_TILES_BATCHED where there are at least 4 images, which
    winograd_tiles transforms a few at a time. (Measured op by op: 0.75-0.85x the time of
    the best non-Winograd path on 14x14 to 28x28 convs of 64 to 512 channels, 0.74-0.9x on
    bigger images; at 7x7 (16 tiles) 1.03-1.08x. An odd output's last row and column of
    tiles are half empty: squeezenet's 13x13 convs, 49 tiles with 36 full, ran the whole
    model 1.06x slower on Winograd. ResNet-18's 256-channel 8x8 convs at batch 16, one
    thread, four images a step: 0.81x im2col's time; its 512-channel 4x4 ones 1.25x.)"""
    tiles = (out_shape[0] // 2) * (out_shape[1] // 2)
    least = MIN_TILES if images < 4 else MIN_TILES_BATCHED
    return min(channels, out_channels) >= MIN_CHANNELS and tiles >= least


def transform_matches(w: np.ndarray, u: np.ndarray, samples: int = 16) -> bool:
    """A cheap check that u is still w's transform (so a weight fed after the pass ran is
    not paired with a stale U): U's corner entries are w's corner taps exactly, compared at
    `samples` channel pairs spread over (M, C)."""
    corners = ((0, 0, 0, 1), (12, 0, 2, 1), (3, 2, 0, 1), (15, 2, 2, 1))
    return corner_taps_match(w, u.transpose(0, 2, 1), corners, samples)


def plain_3x3(w_shape: tuple[int, ...], attrs: dict) -> bool:
    """Whether a Conv with weights of this shape and these attributes is a 2-D, ungrouped,
    stride-1, undilated 3x3 conv, the kind the Winograd path computes."""
    return (
        len(w_shape) == 4
        and tuple(w_shape[2:]) == (3, 3)
        and list(attrs.get("kernel_shape") or (3, 3)) == [3, 3]
        and attrs.get("group", 1) == 1
        and all(v == 1 for v in attrs.get("strides") or ())
        and all(v == 1 for v in attrs.get("dilations") or ())
    )


def winograd_pads(x_shape: tuple[int, ...], w_shape: tuple[int, ...], attrs: dict):
    """((top, left, bottom, right) pads, (Ho, Wo)) of a `plain_3x3` Conv on a 4-D input
    that crops nothing, else None."""
    if len(x_shape) != 4 or not plain_3x3(w_shape, attrs):
        return None
    win = make_window(
        x_shape[2:], (3, 3), None, None, attrs.get("pads"), attrs.get("auto_pad", "NOTSET")
    )
    if min(win.begin + win.end) < 0:
        return None
    return (win.begin[0], win.begin[1], win.end[0], win.end[1]), win.out


def _winograd_kernel(relu: bool):
    def run(x, w, u, b=None, **attrs):
        if (
            x.dtype == u.dtype
            and x.dtype in (np.float32, np.float64)
            and x.ndim == w.ndim
            and x.shape[1] == w.shape[1]
            and (b is None or b.shape == w.shape[:1])
        ):
            bias = None if b is None else b.astype(x.dtype, copy=False)
            y = _through_u(x, w, u, bias, attrs, relu)
            if y is not None:
                return (y,)
        (y,) = conv.conv_cpu(x, w, b, **attrs)
        return (relu_in_place(y) if relu else y,)

    return run


def _through_u(x, w, u, bias, attrs: dict, relu: bool) -> np.ndarray | None:
    """ConvWinograd(X, W, U, B)'s result by the path U is for: F(4x4), F(2x2) or, for U =
    hwc_weights(W), the channels-last im2col; None where that path does not apply (stale
    U, or an image or attributes it does not take), and the op runs as Conv."""
    if u.ndim == 4:  # hwc_weights(W)
        if not (
            w.dtype == x.dtype
            and attrs.get("group", 1) == 1
            and all(v == 1 for v in attrs.get("dilations") or ())
            and hwc_matches(w, u)
        ):
            return None
        strides, pads = attrs.get("strides"), attrs.get("pads")
        auto_pad = attrs.get("auto_pad", "NOTSET")
        win = make_window(x.shape[2:], w.shape[2:], strides, None, pads, auto_pad)
        return None if min(win.begin) < 0 else hwc_correlate(x, u, win, bias, relu)
    found = winograd_pads(x.shape, w.shape, attrs)
    if found is None:
        return None
    if (
        u.shape == (36, *w.shape[1::-1])
        and use_winograd4(w.shape[1], w.shape[0], found[1])
        and transform4_matches(w, u)
    ):
        return winograd4_correlate(x, u, found[0], bias, relu)
    if (
        u.shape == (16, *w.shape[1::-1])
        and use_winograd(w.shape[1], w.shape[0], found[1])
        and transform_matches(w, u)
    ):
        return winograd_correlate(x, u, found[0], bias, relu)
    return None


kernel("ConvWinograd")(_winograd_kernel(False))
kernel("ConvWinogradRelu")(_winograd_kernel(True))


def winograd_weights(w: np.ndarray) -> np.ndarray:
    """The transformed kernel U (16, C, M) of 3x3 weights w (M, C, 3, 3): U[4b + a] is the
    (a, b) entry of G g G^T for every (input, output) channel pair. Computed in float64,
    returned in w's dtype."""
    return kernel_transform(w, F2, "winograd_weights")


def winograd_correlate(
    x: np.ndarray,
    u: np.ndarray,
    pads: tuple[int, int, int, int],
    bias: np.ndarray | None = None,
    relu: bool = False,
) -> np.ndarray:
    """The stride-1 3x3 convolution of x (N, C, H, W), in any memory layout, whose F(2x2)
    transformed weights are u (16, C, M), with pads (top, left, bottom, right) >= 0, plus
    `bias` (M,) and then Relu if asked: (N, M, Ho, Wo), channels-last in memory."""
    return tiled_correlate(x, u, pads, F2, STRIP_ELEMENTS, bias, relu)
