"""GridSample (opset 22) and AffineGrid (opset 20): sampling X at normalized grid positions.

GridSample works for any number r of spatial dims. Each spatial dim d gets its source
coordinate from grid[..., r-1-d] (the grid lists x, y, z: the last dim first), and from it
a few taps (indices and weights: 1 for nearest, 2 for linear, 4 for cubic). The taps of all
dims are combined into flat indices and weights, and the output is the weighted sum of
`take_along_axis` gathers. Out-of-range handling follows ONNX's reference: "border" and
"reflection" first move a coordinate that lies outside [lo, hi] (lo, hi = 0, n-1 with
align_corners, else -0.5, n-0.5) back inside, then every tap index is clamped (border),
reflected (reflection) or weighted 0 when outside [0, n) (zeros). Nearest rounds half to
even before the padding step, as PyTorch does.

`sample` is shared with DeformConv, which samples bilinearly with zero padding.
"""

from __future__ import annotations

import itertools

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import kernel, no_gradient, schema

schema(
    "GridSample",
    inputs=["X", "grid"],
    outputs=["Y"],
    attrs={"align_corners": 0, "mode": "linear", "padding_mode": "zeros"},
    dtypes={0: "any", 1: "float"},
    doc="Y[n, c, o1..or] = interpolate(X[n, c], grid[n, o1..or, :]); X (N, C, D1..Dr), grid "
    "(N, O1..Or, r) with normalized (x, y[, z]) in [-1, 1] -> Y (N, C, O1..Or), X's dtype; "
    "mode linear|nearest|cubic (linear), padding_mode zeros|border|reflection (zeros), "
    "align_corners=0 (-1 and 1 are pixel centers of the corners when 1, their outer edges "
    "when 0)",
)
schema(
    "AffineGrid",
    inputs=["theta", "size"],
    outputs=["grid"],
    attrs={"align_corners": 0},
    dtypes={0: "float", 1: "int"},
    doc="grid[n, h, w, :] = theta[n] @ (x_w, y_h, 1) for size (N, C, H, W) and theta "
    "(N, 2, 3), or grid[n, d, h, w, :] = theta[n] @ (x_w, y_h, z_d, 1) for size "
    "(N, C, D, H, W) and theta (N, 3, 4); x_i = (2i + 1) / W - 1, or linspace(-1, 1, W) "
    "with align_corners=1 (0 when W == 1); grid has theta's dtype",
)
no_gradient(
    "GridSample",
    "not implemented: gradients with respect to X (a scatter-add of the taps) and to the "
    "grid (derivatives of the interpolation weights) are not provided",
)
no_gradient(
    "AffineGrid",
    "not implemented: the gradient of theta (grid gradient times the base coordinates, "
    "summed over positions) is not provided",
)

MODES = ("linear", "nearest", "cubic")
PADDINGS = ("zeros", "border", "reflection")
CUBIC_A = -0.75


def reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Folds coordinates outside [lo, hi] back inside by repeated mirroring at lo and hi."""
    span = hi - lo
    if span <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    dx = np.where(below, lo - x, x - hi)
    n = np.floor(dx / span)
    r = dx - n * span
    even = n % 2 == 0
    from_lo, from_hi = lo + r, hi - r
    folded = np.where(below, np.where(even, from_lo, from_hi), np.where(even, from_hi, from_lo))
    return np.where(below | above, folded, x)


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    """Keys weights (a = -0.75) of the taps at floor-1 .. floor+2 for fraction t."""
    a = CUBIC_A

    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _axis_taps(pos, n, mode, padding, align_corners):
    """[(index, weight)] for one spatial dim; weight None means 1."""
    lo, hi = (0.0, n - 1.0) if align_corners else (-0.5, n - 0.5)
    if mode == "nearest":
        pos = np.rint(pos)
    if padding == "border":
        pos = np.where((pos < lo) | (pos > hi), np.clip(pos, 0, n - 1), pos)
    elif padding == "reflection":
        pos = reflect(pos, lo, hi)
    if mode == "nearest":
        raw = [(np.trunc(pos), None)]
    else:
        base = np.floor(pos)
        t = pos - base
        if mode == "linear":
            raw = [(base, 1 - t), (base + 1, t)]
        else:
            raw = [(base + k - 1, w) for k, w in enumerate(_cubic_weights(t))]
    out = []
    for idx, w in raw:
        if padding == "zeros":
            inside = (idx >= 0) & (idx <= n - 1)
            w = inside.astype(np.float64) if w is None else np.where(inside, w, 0.0)
        elif padding == "reflection":
            idx = np.trunc(reflect(idx, lo, hi))
        out.append((np.clip(idx, 0, n - 1).astype(np.intp), w))
    return out


def sample(x, coords, mode="linear", padding="zeros", align_corners=True):
    """Samples X (N, C, D1..Dr) at pixel coordinates.

    Args:
        coords: r arrays of shape (N, P...), the source coordinate along each spatial dim
            in pixels (align_corners=True) or in GridSample's unaligned pixel frame.
    Returns:
        (N, C, P...) in float64 (the gathered X dtype for nearest mode).
    """
    n_batch, channels, *spatial = x.shape
    out_shape = coords[0].shape[1:]
    flat = x.reshape(n_batch, channels, -1)
    strides = np.cumprod([1, *spatial[::-1]])[:-1][::-1]
    per_dim = [
        _axis_taps(c.reshape(n_batch, -1), n, mode, padding, align_corners)
        for c, n in zip(coords, spatial)
    ]
    acc = None
    for combo in itertools.product(*per_dim):
        lin = sum(idx * s for (idx, _), s in zip(combo, strides))
        ws = [w for _, w in combo if w is not None]
        vals = np.take_along_axis(flat, lin[:, None, :], axis=2)
        if mode == "nearest":
            inside = np.logical_and.reduce([w > 0 for w in ws]) if ws else None
            zero = np.zeros((), x.dtype)
            acc = vals if inside is None else np.where(inside[:, None, :], vals, zero)
            continue
        w = ws[0]
        for extra in ws[1:]:
            w = w * extra
        term = vals * w[:, None, :]
        acc = term if acc is None else np.add(acc, term, out=acc)
    return acc.reshape(n_batch, channels, *out_shape)


def _choice(name, value, allowed):
    if value not in allowed:
        raise SchemaError(f"argument {name}={value!r} is not one of {', '.join(allowed)}")


@kernel("GridSample")
def grid_sample_cpu(x, grid, *, align_corners, mode, padding_mode) -> tuple[np.ndarray]:
    _choice("mode", mode, MODES)
    _choice("padding_mode", padding_mode, PADDINGS)
    r = x.ndim - 2
    if r < 1:
        raise ShapeError(f"input 'X' has shape {list(x.shape)}, expected (N, C, D1, ..., Dr)")
    if grid.ndim != r + 2 or grid.shape[0] != x.shape[0] or grid.shape[-1] != r:
        raise ShapeError(
            f"input 'grid' has shape {list(grid.shape)}, expected ({x.shape[0]}, O1, ..., O{r}, "
            f"{r}) for X of shape {list(x.shape)}"
        )
    out_shape = check_numel((*x.shape[:2], *grid.shape[1:-1]), "GridSample output")
    if 0 in out_shape:
        return (np.zeros(out_shape, x.dtype),)
    if 0 in x.shape[2:]:
        raise ShapeError(f"input 'X' has an empty spatial dim: {list(x.shape)}")
    if mode != "nearest" and x.dtype.kind not in "iufc" and x.dtype.name != "bfloat16":
        raise SchemaError(f"input 'X' has dtype {x.dtype}; mode={mode!r} needs a numeric type")
    g = grid.astype(np.float64)
    coords = []
    for d, n in enumerate(x.shape[2:]):
        v = g[..., r - 1 - d]
        coords.append((v + 1) / 2 * (n - 1) if align_corners else ((v + 1) * n - 1) / 2)
    y = sample(x, coords, mode, padding_mode, bool(align_corners))
    if y.dtype != x.dtype and x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        y = np.clip(np.rint(y), info.min, info.max)
    return (y.astype(x.dtype, copy=False),)


def base_coords(n: int, align_corners: bool) -> np.ndarray:
    if align_corners:
        return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(n)
    return (2 * np.arange(n, dtype=np.float64) + 1) / n - 1


@kernel("AffineGrid")
def affine_grid_cpu(theta, size, *, align_corners) -> tuple[np.ndarray]:
    size = [int(s) for s in np.asarray(size).reshape(-1)]
    if len(size) not in (4, 5):
        raise ShapeError(f"input 'size' has {len(size)} values, expected 4 (N, C, H, W) or 5")
    r = len(size) - 2
    if theta.shape != (size[0], r, r + 1):
        raise ShapeError(
            f"input 'theta' has shape {list(theta.shape)}, expected [{size[0]}, {r}, {r + 1}] "
            f"for size {size}"
        )
    spatial = size[2:]
    check_numel((size[0], *spatial, r), "AffineGrid output")
    axes = [base_coords(n, bool(align_corners)) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # one array per spatial dim, D.., H, W order
    homo = np.stack([*mesh[::-1], np.ones(spatial)], axis=-1).reshape(-1, r + 1)
    grid = np.einsum("pk,njk->npj", homo, theta.astype(np.float64))
    return (grid.reshape(size[0], *spatial, r).astype(theta.dtype),)
