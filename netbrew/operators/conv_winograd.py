"""Winograd F(2x2, 3x3) convolution for stride-1 3x3 convs (Lavin and Gray, 2015).

Each 2x2 block ("tile") of outputs needs a 4x4 patch of the padded input. The patch d goes
to V = B^T d B and the kernel g to U = G g G^T (both 4x4), the 16 products U * V are summed
over input channels, which is 16 GEMMs (M, C) x (C, tiles), and Y = A^T (sum) A gives the
2x2 outputs. That is 16 multiplies per tile and channel pair where the direct conv takes 36:
2.25x fewer FLOPs, and the input transform writes 4 values per input pixel, not im2col's 9.

The weights' transform U (`winograd_weights`) is made once, by the `winograd_convs` pass,
and handed to the ConvWinograd op beside the weights W: the op runs as Conv on W where the
Winograd path does not pay, and exports as a plain Conv on W. Where the pass knows the
image size and the larger-tile F(4x4, 3x3) pays there (conv_winograd4.use_winograd4), U is
that transform instead, (36, C, M), and the op runs conv_winograd4; the op tells the two
apart by U's shape.

Layout. The padded input is split into its four (row parity, column parity) phases, each
(C, Hq, Wq) flattened to (C, Hq * Wq): tile (r, s) then reads its 4 patch rows from the
phases' flat positions r * Wq + s and r * Wq + s + Wq, and its patch columns at offsets 0 and
1 from there, so the transforms are whole-array adds over long contiguous runs. Big images
go a strip of tile rows at a time, which bounds the scratch blocks. Each strip carries one
unused tile column per row (s = Wq - 1), dropped when the outputs are written.

Rounding: the transforms add and subtract (and halve, in U), so results differ from the
direct conv by a few ulps of the sum of |products| (measured 8e-7 relative in float32).
"""

from __future__ import annotations

import numpy as np

from netbrew.operators import conv
from netbrew.operators.conv_hwc import hwc_correlate, hwc_matches
from netbrew.operators.conv_winograd4 import (
    corner_taps_match,
    kernel_transform,
    transform4_matches,
    use_winograd4,
    winograd4_correlate,
)
from netbrew.operators.fused import relu_in_place
from netbrew.operators.schema import get_schema, kernel, no_gradient, schema
from netbrew.operators.window import make_window, scratch
from netbrew.operators.zeros import relu as relu_into

_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])

MIN_CHANNELS = 64
"""Convs narrower than this on either side never take the Winograd path (`use_winograd`),
so the winograd_convs pass leaves them as they are."""

STRIP_ELEMENTS = 1 << 20
"""About how many values each strip's 16 transformed blocks hold (4 MiB of float32)."""
STRIP_MIN_TILES = 4096
"""Strips hold at least this many tiles: narrower GEMMs run below BLAS's peak (measured:
whole 56x56 images beat strips of 256 or 1024 tiles), so only big images are split."""

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
        + ", where U is W's Winograd transform: winograd_weights(W) (16, M, C) for "
        "F(2x2, 3x3) or winograd4_weights(W) (36, C, M) for F(4x4, 3x3), where stride-1 3x3 "
        "convs on large enough images run through U (see conv_winograd, conv_winograd4), or "
        "hwc_weights(W) (kh, kw, C, M), W laid out for a channels-last im2col (conv_hwc); "
        "the rest run as Conv does. Made by the winograd_convs pass; exported as Conv",
    )
    no_gradient(_fused, "inference-only op made by the winograd_convs pass")


def use_winograd(channels: int, out_channels: int, out_shape: tuple[int, ...]) -> bool:
    """Whether the Winograd path beats im2col for a stride-1 3x3 conv with this output
    (Ho, Wo). Measured op by op inside whole models: it pays once the 16 GEMMs are big,
    C * M * tiles >= 2^23 (every VGG-19 conv but the first: 1.23x faster in all), and not
    on ResNet-50's or Inception's (C * M * tiles up to 4.8M, even or up to 1.3x slower)."""
    tiles = ((out_shape[0] + 1) // 2) * ((out_shape[1] + 1) // 2)
    narrow = min(channels, out_channels)
    return narrow >= MIN_CHANNELS and channels * out_channels * tiles >= 1 << 23


def transform_matches(w: np.ndarray, u: np.ndarray, samples: int = 16) -> bool:
    """A cheap check that u is still w's transform (so a weight fed after the pass ran is
    not paired with a stale U): U's corner entries are w's corner taps exactly, compared at
    `samples` channel pairs spread over (M, C)."""
    corners = ((0, 0, 0, 1), (3, 0, 2, 1), (12, 2, 0, 1), (15, 2, 2, 1))
    return corner_taps_match(w, u, corners, samples)


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
        u.shape == (16, *w.shape[:2])
        and use_winograd(w.shape[1], w.shape[0], found[1])
        and transform_matches(w, u)
    ):
        return winograd_correlate(x, u, found[0], bias, relu)
    return None


kernel("ConvWinograd")(_winograd_kernel(False))
kernel("ConvWinogradRelu")(_winograd_kernel(True))


def winograd_weights(w: np.ndarray) -> np.ndarray:
    """The transformed kernel U (16, M, C) of 3x3 weights w (M, C, 3, 3): U[4i + j] is the
    (i, j) entry of G g G^T for every (output, input) channel pair. Computed in float64,
    returned in w's dtype."""
    return kernel_transform(w, _G, "ia,mcab,jb->ijmc", "winograd_weights")


def winograd_correlate(
    x: np.ndarray,
    u: np.ndarray,
    pads: tuple[int, int, int, int],
    bias: np.ndarray | None = None,
    relu: bool = False,
) -> np.ndarray:
    """The stride-1 3x3 convolution of x (N, C, H, W) whose transformed weights are u
    (16, M, C), with pads (top, left, bottom, right) >= 0, plus `bias` (M,) and then Relu
    if asked: (N, M, H + top + bottom - 2, W + left + right - 2)."""
    batch, channels, height, width = x.shape
    m = u.shape[1]
    top, left, bottom, right = pads
    ho, wo = height + top + bottom - 2, width + left + right - 2
    th, tw = (ho + 1) // 2, (wo + 1) // 2  # tile rows and columns
    hq, wq = th + 2, tw + 1  # phase rows (one spare for the last strip's reads) and columns
    y = np.empty((batch, m, ho, wo), x.dtype)
    rows = max(-(-STRIP_MIN_TILES // wq), STRIP_ELEMENTS // (16 * max(channels, m) * wq))
    rows = min(th, rows)
    for n in range(batch):
        phases = _phases(x[n], top, left, hq, wq)
        for r0 in range(0, th, rows):
            r1 = min(th, r0 + rows)
            block = _transform_input(phases, r0 * wq, (r1 - r0) * wq, wq)
            prods = np.matmul(u, block, out=scratch("wino_m", (16, m, block.shape[2]), x.dtype))
            _write_outputs(prods, y[n], r0, r1, wq, bias, relu)
    return y


def _phases(x: np.ndarray, top: int, left: int, hq: int, wq: int) -> np.ndarray:
    """The padded image's four phases, (2, 2, C, Hq * Wq): [a, b, c, q * Wq + s] is padded
    pixel (2q + a, 2s + b) of channel c, zero outside x."""
    channels, height, width = x.shape
    out = scratch("wino_phases", (2, 2, channels, hq, wq), x.dtype)
    for a in (0, 1):
        i0 = (a - top) % 2  # first input row that lands in row phase a
        q0, nq = (i0 + top - a) // 2, len(range(i0, height, 2))
        for b in (0, 1):
            j0 = (b - left) % 2
            s0, ns = (j0 + left - b) // 2, len(range(j0, width, 2))
            p = out[a, b]
            p[:, :q0] = 0
            p[:, q0 + nq :] = 0
            p[:, q0 : q0 + nq, :s0] = 0
            p[:, q0 : q0 + nq, s0 + ns :] = 0
            p[:, q0 : q0 + nq, s0 : s0 + ns] = x[:, i0::2, j0::2]
    return out.reshape(2, 2, channels, hq * wq)


def _transform_input(phases: np.ndarray, start: int, length: int, wq: int) -> np.ndarray:
    """B^T d B for the tiles at flat positions start .. start + length: (16, C, length)."""
    channels = phases.shape[2]
    dtype = phases.dtype
    # Rows: d0..d3 are phase rows (0, r), (1, r), (0, r + 1), (1, r + 1); one extra column
    # for the column step's + 1 reads.
    rows = scratch("wino_rows", (4, 2, channels, length + 1), dtype)
    for b in (0, 1):
        lo, hi = start, start + length + 1
        d0, d1 = phases[0, b, :, lo:hi], phases[1, b, :, lo:hi]
        d2, d3 = phases[0, b, :, lo + wq : hi + wq], phases[1, b, :, lo + wq : hi + wq]
        np.subtract(d0, d2, out=rows[0, b])
        np.add(d1, d2, out=rows[1, b])
        np.subtract(d2, d1, out=rows[2, b])
        np.subtract(d1, d3, out=rows[3, b])
    block = scratch("wino_v", (4, 4, channels, length), dtype)
    for i in range(4):
        e0, e1 = rows[i, 0, :, :length], rows[i, 1, :, :length]
        e2, e3 = rows[i, 0, :, 1:], rows[i, 1, :, 1:]
        np.subtract(e0, e2, out=block[i, 0])
        np.add(e1, e2, out=block[i, 1])
        np.subtract(e2, e1, out=block[i, 2])
        np.subtract(e1, e3, out=block[i, 3])
    return block.reshape(16, channels, length)


def _write_outputs(
    prods: np.ndarray,
    y: np.ndarray,
    r0: int,
    r1: int,
    wq: int,
    bias: np.ndarray | None,
    relu: bool,
) -> None:
    """A^T (sum) A for the strip of tile rows r0..r1, into y (M, Ho, Wo) with its bias and
    Relu: output pixel (2r + a, 2s + b) is entry (a, b) of tile (r, s)."""
    m, length = prods.shape[1:]
    ho, wo = y.shape[1:]
    p = prods.reshape(4, 4, m, length)
    half = scratch("wino_t", (2, 4, m, length), prods.dtype)
    for j in range(4):
        np.add(p[0, j], p[1, j], out=half[0, j])
        half[0, j] += p[2, j]
        np.subtract(p[1, j], p[2, j], out=half[1, j])
        half[1, j] -= p[3, j]
    tile = scratch("wino_out", (m, length), prods.dtype)
    for a in (0, 1):
        t = half[a]
        n_rows = len(range(2 * r0 + a, min(2 * r1, ho), 2))
        for b in (0, 1):
            if b == 0:
                np.add(t[0], t[1], out=tile)
                tile += t[2]
            else:
                np.subtract(t[1], t[2], out=tile)
                tile -= t[3]
            if bias is not None:
                tile += bias.reshape(m, 1)
            if relu:
                relu_into(tile, out=tile)
            n_cols = len(range(b, wo, 2))
            src = tile.reshape(m, r1 - r0, wq)[:, :n_rows, :n_cols]
            y[:, 2 * r0 + a : 2 * r0 + a + 2 * n_rows : 2, b::2] = src
