"""Gradients of GridSample (to X and to the grid) and AffineGrid (to theta).

    GridSample(X, grid) -> Y
        backward: GridSampleGradient(X, grid, dY) -> (dX, dgrid)
    AffineGrid(theta, size) -> grid
        backward: AffineGridGradient(theta, size, dgrid) -> dtheta

Y is a weighted sum of gathers of X, with taps and weights from grid_sample._axis_taps. dX
is the transpose: every tap's dY * weight is added at the tap's pixel with one
`np.bincount` per combination of per-dim taps (no loop over pixels). dgrid is dY times
the derivative of the weights in the sampling coordinate: each dim's weight slope (the
interpolation kernel's derivative, chained through border's clamp and reflection's
mirroring) times the other dims' weights, the gathered X summed over channels, then
scaled by d coordinate / d grid ((n - 1) / 2 with align_corners, else n / 2). Nearest
mode is piecewise constant in the grid, so dgrid is 0 there; the tap indices move only
where a weight is 0 (linear and cubic) and are treated as fixed.

`sample_gradient` is shared with DeformConvGradient, as `sample` is with DeformConv.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from netbrew.netdef.net import op_def
from netbrew.operators.conv import check_grad_shape
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.grid_sample import (
    _axis_taps,
    affine_points,
    affine_size,
    check_grid_sample,
    grid_coords,
)
from netbrew.operators.schema import gradient, kernel, schema

schema(
    "GridSampleGradient",
    inputs=["X", "grid", "dY"],
    outputs=["dX", "dgrid"],
    attrs={"align_corners": 0, "mode": "linear", "padding_mode": "zeros"},
    dtypes="float",
    onnx=False,
    output_mask=True,
    doc="dX[n, c, i] = sum over outputs o and taps at pixel i of dY[n, c, o] * weight; "
    "dgrid[n, o, r-1-d] = sum_c dY[n, c, o] * sum over taps of X[tap] * d weight / d grid_d "
    "(0 for nearest); X (N, C, D1..Dr), grid (N, O1..Or, r), dY (N, C, O1..Or); attributes "
    "as GridSample: align_corners=0, mode linear|nearest|cubic, padding_mode "
    "zeros|border|reflection",
)
schema(
    "AffineGridGradient",
    inputs=["theta", "size", "dgrid"],
    outputs=["dtheta"],
    attrs={"align_corners": 0},
    dtypes={0: "float", 1: "int", 2: "float"},
    onnx=False,
    doc="dtheta[n, j, k] = sum over points p of dgrid[n, p, j] * base[p, k], base[p] = "
    "(x, y[, z], 1) the point's normalized coordinates; theta (N, r, r+1), size as "
    "AffineGrid's, dgrid like its grid; align_corners=0",
)


@gradient("GridSample")
def grid_sample_grad(op, g_out, g_in):
    wanted = [g or "" for g in g_in[:2]]
    if not any(wanted):
        return []
    ins = [op.input[0], op.input[1], g_out[0]]
    return [op_def("GridSampleGradient", ins, wanted, **copy_attrs(op))]


@gradient("AffineGrid")
def affine_grid_grad(op, g_out, g_in):
    if not g_in[0]:
        return []  # size is an integer shape: no gradient
    ins = [op.input[0], op.input[1], g_out[0]]
    return [op_def("AffineGridGradient", ins, [g_in[0]], **copy_attrs(op))]


def _scatter(dx_flat, g, lin, w):
    """dx_flat (N*C*S,) += g (N, C, P) * w (N, P) at pixel lin (N, P) of each (n, c)."""
    n_batch, channels, _ = g.shape
    size = dx_flat.size // (n_batch * channels)
    rows = np.arange(n_batch * channels).reshape(n_batch, channels, 1) * size
    where = (rows + lin[:, None, :]).ravel()
    dx_flat += np.bincount(where, weights=(g * w[:, None, :]).ravel(), minlength=dx_flat.size)


def sample_gradient(
    x: np.ndarray,
    coords: list[np.ndarray],
    dy: np.ndarray,
    mode: str = "linear",
    padding: str = "zeros",
    align_corners: bool = True,
    want: tuple[bool, bool] = (True, True),
) -> tuple[np.ndarray | None, list[np.ndarray] | None]:
    """The gradients of grid_sample.sample(x, coords, ...) against dY (N, C, P...).

    Args:
        want: (dX wanted, d coords wanted).
    Returns:
        (dX in float64 like x or None, [d coords, float64 like each of coords] or None).
    """
    n_batch, channels, *spatial = x.shape
    point_shape = coords[0].shape
    g = dy.astype(np.float64, copy=False).reshape(n_batch, channels, -1)
    flat = x.reshape(n_batch, channels, -1)
    strides = np.cumprod([1, *spatial[::-1]])[:-1][::-1]
    per_dim = [
        _axis_taps(c.reshape(n_batch, -1), n, mode, padding, align_corners, slopes=True)
        for c, n in zip(coords, spatial)
    ]
    slopes = bool(want[1]) and mode != "nearest"
    dx = np.zeros(flat.size) if want[0] else None
    dcoords = [np.zeros(g.shape[::2]) for _ in spatial] if slopes else None
    ones = np.ones(g.shape[::2])
    for combo in itertools.product(*per_dim):
        lin = sum(idx * s for (idx, _, _), s in zip(combo, strides))
        ws = [ones if w is None else w for _, w, _ in combo]
        if dx is not None:
            _scatter(dx, g, lin, math.prod(ws))
        if slopes:
            vals = np.take_along_axis(flat, lin[:, None, :], axis=2)
            gv = np.einsum("ncp,ncp->np", g, vals)
            for d, (_, _, dw) in enumerate(combo):
                dcoords[d] += gv * math.prod(ws[:d] + [dw] + ws[d + 1 :])
    if want[1] and not slopes:
        dcoords = [np.zeros(g.shape[::2]) for _ in spatial]
    dx = None if dx is None else dx.reshape(x.shape)
    return dx, None if dcoords is None else [d.reshape(point_shape) for d in dcoords]


@kernel("GridSampleGradient")
def grid_sample_gradient_cpu(
    x: np.ndarray,
    grid: np.ndarray,
    dy: np.ndarray,
    *,
    align_corners: int,
    mode: str,
    padding_mode: str,
    output_mask: tuple[bool, ...],
) -> tuple[np.ndarray | None, np.ndarray | None]:
    out_shape = check_grid_sample(x, grid, mode, padding_mode, "GridSampleGradient")
    check_grad_shape(dy, out_shape, "GridSample's output Y")
    want = (output_mask[0], len(output_mask) > 1 and output_mask[1])
    if 0 in out_shape:
        dx = np.zeros_like(x) if want[0] else None
        return dx, np.zeros_like(grid) if want[1] else None
    coords, scale = grid_coords(x.shape[2:], grid, align_corners)
    dx, dcoords = sample_gradient(x, coords, dy, mode, padding_mode, bool(align_corners), want)
    dgrid = None
    if dcoords is not None:
        r = len(coords)
        dgrid = np.stack([dcoords[r - 1 - k] * scale[r - 1 - k] for k in range(r)], axis=-1)
        dgrid = dgrid.astype(grid.dtype, copy=False)
    return None if dx is None else dx.astype(x.dtype, copy=False), dgrid


@kernel("AffineGridGradient")
def affine_grid_gradient_cpu(
    theta: np.ndarray, size: np.ndarray, dgrid: np.ndarray, *, align_corners: int
) -> tuple[np.ndarray]:
    size = affine_size(theta.shape, size)
    spatial, r = size[2:], len(size) - 2
    check_grad_shape(dgrid, (size[0], *spatial, r), "AffineGrid's output grid", slot="dgrid")
    homo = affine_points(spatial, bool(align_corners))
    g = dgrid.astype(np.float64, copy=False).reshape(size[0], -1, r)
    return (np.einsum("npj,pk->njk", g, homo).astype(theta.dtype, copy=False),)
