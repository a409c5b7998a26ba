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

`sample` is shared with DeformConv, which samples bilinearly with zero padding. With
slopes=True, `_axis_taps` also gives each weight's derivative in the sampling coordinate,
for the gradients in grid_sample_grad.py.
"""

from __future__ import annotations

import itertools

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import kernel, schema

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


def reflect_slope(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """d reflect(x, lo, hi) / dx: 1 inside, -1 after an odd number of mirrorings, else 1."""
    span = hi - lo
    if span <= 0:
        return np.zeros_like(x)
    outside = (x < lo) | (x > hi)
    folds = np.floor(np.where(x < lo, lo - x, x - hi) / span)
    return np.where(outside & (folds % 2 == 0), -1.0, 1.0)


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    """Keys weights (a = -0.75) of the taps at floor-1 .. floor+2 for fraction t."""
    a = CUBIC_A

    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _cubic_slopes(t: np.ndarray) -> list[np.ndarray]:
    """d/dt of each of _cubic_weights(t)."""
    a = CUBIC_A

    def near(d):
        return (3 * (a + 2) * d - 2 * (a + 3)) * d

    def far(d):
        return (3 * a * d - 10 * a) * d + 8 * a

    return [far(t + 1), near(t), -near(1 - t), -far(2 - t)]


def _padding_slope(pos, lo, hi, padding):
    """d (padded position) / d pos: border clamps (0 outside [lo, hi]), reflection mirrors."""
    if padding == "border":
        return np.where((pos < lo) | (pos > hi), 0.0, 1.0)
    if padding == "reflection":
        return reflect_slope(pos, lo, hi)
    return np.ones_like(pos)


def _raw_taps(pos, mode, slopes):
    """[(index, weight, d weight / d pos)] before padding; weight None means 1, and the
    slope is None for nearest (piecewise constant) or when slopes is False."""
    if mode == "nearest":
        return [(np.trunc(pos), None, None)]
    base = np.floor(pos)
    t = pos - base
    if mode == "linear":
        one = np.ones_like(t) if slopes else None
        return [(base, 1 - t, None if one is None else -one), (base + 1, t, one)]
    dws = _cubic_slopes(t) if slopes else [None] * 4
    return [(base + k - 1, w, dw) for k, (w, dw) in enumerate(zip(_cubic_weights(t), dws))]


def _axis_taps(pos, n, mode, padding, align_corners, slopes=False):
    """[(index, weight)] for one spatial dim; weight None means 1. With slopes=True every
    tap is (index, weight, slope), slope = d weight / d pos (None for nearest)."""
    lo, hi = (0.0, n - 1.0) if align_corners else (-0.5, n - 0.5)
    if mode == "nearest":
        pos = np.rint(pos)
    chain = _padding_slope(pos, lo, hi, padding) if slopes and mode != "nearest" else None
    if padding == "border":
        pos = np.where((pos < lo) | (pos > hi), np.clip(pos, 0, n - 1), pos)
    elif padding == "reflection":
        pos = reflect(pos, lo, hi)
    out = []
    for idx, w, dw in _raw_taps(pos, mode, slopes):
        if padding == "zeros":
            inside = (idx >= 0) & (idx <= n - 1)
            w = inside.astype(np.float64) if w is None else np.where(inside, w, 0.0)
            dw = None if dw is None else np.where(inside, dw, 0.0)
        elif padding == "reflection":
            idx = np.trunc(reflect(idx, lo, hi))
        tap = (np.clip(idx, 0, n - 1).astype(np.intp), w)
        out.append(tap + (None if dw is None else dw * chain,) if slopes else tap)
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


def check_grid_sample(x, grid, mode, padding_mode, op: str = "GridSample") -> tuple[int, ...]:
    """Checks GridSample's attributes and shapes; returns Y's shape."""
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
    out_shape = check_numel((*x.shape[:2], *grid.shape[1:-1]), f"{op} output")
    if 0 not in out_shape and 0 in x.shape[2:]:
        raise ShapeError(f"input 'X' has an empty spatial dim: {list(x.shape)}")
    return out_shape


def grid_coords(spatial, grid, align_corners) -> tuple[list[np.ndarray], list[float]]:
    """Pixel coordinates (float64) of the grid along each spatial dim (grid lists x, y, z:
    the last dim first), and d coordinate / d grid value for each dim."""
    g = grid.astype(np.float64)
    r = len(spatial)
    coords, slopes = [], []
    for d, n in enumerate(spatial):
        v = g[..., r - 1 - d]
        coords.append((v + 1) / 2 * (n - 1) if align_corners else ((v + 1) * n - 1) / 2)
        slopes.append((n - 1) / 2 if align_corners else n / 2)
    return coords, slopes


@kernel("GridSample")
def grid_sample_cpu(x, grid, *, align_corners, mode, padding_mode) -> tuple[np.ndarray]:
    out_shape = check_grid_sample(x, grid, mode, padding_mode)
    if 0 in out_shape:
        return (np.zeros(out_shape, x.dtype),)
    if mode != "nearest" and x.dtype.kind not in "iufc" and x.dtype.name != "bfloat16":
        raise SchemaError(f"input 'X' has dtype {x.dtype}; mode={mode!r} needs a numeric type")
    coords, _ = grid_coords(x.shape[2:], grid, align_corners)
    y = sample(x, coords, mode, padding_mode, bool(align_corners))
    if y.dtype != x.dtype and x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        y = np.clip(np.rint(y), info.min, info.max)
    return (y.astype(x.dtype, copy=False),)


def base_coords(n: int, align_corners: bool) -> np.ndarray:
    if align_corners:
        return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(n)
    return (2 * np.arange(n, dtype=np.float64) + 1) / n - 1


def affine_size(theta_shape, size) -> list[int]:
    """AffineGrid's size input as a list, checked against theta's shape."""
    size = [int(s) for s in np.asarray(size).reshape(-1)]
    if len(size) not in (4, 5):
        raise ShapeError(f"input 'size' has {len(size)} values, expected 4 (N, C, H, W) or 5")
    r = len(size) - 2
    if tuple(theta_shape) != (size[0], r, r + 1):
        raise ShapeError(
            f"input 'theta' has shape {list(theta_shape)}, expected [{size[0]}, {r}, {r + 1}] "
            f"for size {size}"
        )
    return size


def affine_points(spatial, align_corners: bool) -> np.ndarray:
    """(P, r + 1): the homogeneous base coordinates (x, y[, z], 1) of every output point,
    row-major over (D,) H, W; AffineGrid's grid is these times theta transposed."""
    axes = [base_coords(n, bool(align_corners)) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # one array per spatial dim, D.., H, W order
    return np.stack([*mesh[::-1], np.ones(spatial)], axis=-1).reshape(-1, len(spatial) + 1)


@kernel("AffineGrid")
def affine_grid_cpu(theta, size, *, align_corners) -> tuple[np.ndarray]:
    size = affine_size(theta.shape, size)
    r = len(size) - 2
    spatial = size[2:]
    check_numel((size[0], *spatial, r), "AffineGrid output")
    homo = affine_points(spatial, bool(align_corners))
    grid = np.einsum("pk,njk->npj", homo, theta.astype(np.float64))
    return (grid.reshape(size[0], *spatial, r).astype(theta.dtype),)
