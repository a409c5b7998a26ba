"""Gradient of Resize, to X and (for tf_crop_and_resize) to roi.

    Resize(X, roi?, scales?, sizes?) -> Y
        backward: ResizeGradient(X, dY, roi?, scales?, sizes?) -> (dX, droi?)

Every resized axis is a linear map of X (a sum of weighted gathers along that axis), so dX
is the transpose of those maps applied to dY in reverse order: each gather's transpose is a
scatter-add (`take_adjoint`), done with one sort and one `np.add.reduceat` per tap instead
of a loop over pixels. Outputs that tf_crop_and_resize replaces by extrapolation_value do
not depend on X and pass nothing back.

With tf_crop_and_resize the source coordinates are affine in roi, so roi has a gradient
through the derivative of the interpolation weights (as TensorFlow's crop_and_resize has
one for its boxes); nearest mode is piecewise constant in roi and gives it 0, and every
other coordinate mode ignores roi. `scales` and `sizes` get none: they set the output
shape (a step function of scales) and the sampling grid, geometry that is chosen rather
than learned, as PyTorch's interpolate treats scale_factor.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from netbrew.errors import SchemaError
from netbrew.netdef.net import op_def
from netbrew.operators.conv import check_grad_shape
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.resize import (
    AxisStep,
    ResizePlan,
    apply_step,
    plan_resize,
    resize_work_dtype,
    taps,
)
from netbrew.operators.schema import SCHEMAS, gradient, kernel, schema

schema(
    "ResizeGradient",
    inputs=["X", "dY", "roi?", "scales?", "sizes?"],
    outputs=["dX", "droi?"],
    attrs=SCHEMAS["Resize"].attrs,  # the forward's attributes, copied by the maker
    dtypes={0: "float", 1: "float", 2: "float", 3: "float", 4: "int"},
    onnx=False,
    output_mask=True,
    doc="dX = A_1^T ... A_n^T (dY, 0 where extrapolated), A_i the interpolation along each "
    "resized axis (a scatter-add of dY times the tap weights); droi (tf_crop_and_resize, "
    "linear or cubic; else 0) = sum(dY * dY/droi) through the weights' derivatives; X like "
    "Resize's X, dY like its Y; roi, scales, sizes and attributes as Resize",
)


@gradient("Resize")
def resize_grad(op, g_out, g_in):
    wanted = [g_in[0] or "", (g_in[1] or "") if len(g_in) > 1 else ""]
    if not any(wanted):
        return []
    if not wanted[1]:
        wanted.pop()
    ins = [op.input[0], g_out[0], *op.input[1:]]
    return [op_def("ResizeGradient", ins, wanted, **copy_attrs(op))]


def take_adjoint(g: np.ndarray, index: np.ndarray, n_in: int, axis: int) -> np.ndarray:
    """The transpose of `np.take(x, index, axis)` for x with n_in entries along `axis`:
    slices of g that took the same input index are summed into that index (0 elsewhere)."""
    order = None if np.all(index[1:] >= index[:-1]) else np.argsort(index, kind="stable")
    if order is not None:
        index, g = index[order], np.take(g, order, axis=axis)
    starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
    sums = np.add.reduceat(g, starts, axis=axis)
    shape = list(g.shape)
    shape[axis] = n_in
    out = np.zeros(shape, g.dtype)
    np.moveaxis(out, axis, 0)[index[starts]] = np.moveaxis(sums, axis, 0)
    return out


def step_adjoint(g: np.ndarray, step: AxisStep) -> np.ndarray:
    """The transpose of resize.apply_step: g (n_out along step.axis) -> n_in along it."""
    if step.n_out == 0 or step.n_in == 0:
        shape = list(g.shape)
        shape[step.axis] = step.n_in
        return np.zeros(shape, g.dtype)
    if step.index is None:
        return g
    if step.weight is None:
        return take_adjoint(g, step.index, step.n_in, step.axis)
    acc = None
    view = (1,) * step.axis + (-1,) + (1,) * (g.ndim - step.axis - 1)
    for k in range(step.index.shape[1]):
        w = step.weight[:, k].astype(g.dtype).reshape(view)
        term = take_adjoint(g * w, step.index[:, k], step.n_in, step.axis)
        acc = term if acc is None else np.add(acc, term, out=acc)
    return acc


def _roi_slopes(n_out: int, n_in: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """d x_original / d start and d x_original / d end of tf_crop_and_resize's coordinates
    (resize.source_coords) for every output index along one axis."""
    length = scale * n_in
    if length == 1:
        half = np.full(n_out, 0.5 * (n_in - 1))
        return half, half
    d_end = np.arange(n_out, dtype=np.float64) * (n_in - 1) / (length - 1)
    return (n_in - 1) - d_end, d_end


def _roi_gradient(x, g, plan: ResizePlan, attrs: dict, work: type) -> np.ndarray:
    """d sum(g * Y) / d roi: per axis, Y recomputed with that axis' weights replaced by
    their derivatives in the source coordinate, reduced against g to one value per
    output index, then chained through the coordinates' slopes in start and end."""
    n_axes = len(plan.axes)
    droi = np.zeros(2 * n_axes)
    xw = x.astype(work)
    for j, step in enumerate(plan.steps):
        if step.coords is None:
            continue  # an empty axis: nothing depends on roi
        i = plan.axes.index(step.axis)
        a, mode = attrs["cubic_coeff_a"], attrs["mode"]
        aa, ex = attrs["antialias"], attrs["exclude_outside"]
        idx, _, dw = taps(step.coords, step.n_in, plan.scales[i], mode, a, aa, ex, slopes=True)
        slope_step = dataclasses.replace(step, index=idx, weight=dw)
        z = xw
        for k, other in enumerate(plan.steps):
            z = apply_step(z, slope_step if k == j else other, work)
        others = tuple(a for a in range(z.ndim) if a != step.axis)
        per_output = (g * z).sum(axis=others, dtype=np.float64)
        d_start, d_end = _roi_slopes(step.n_out, step.n_in, plan.scales[i])
        droi[i], droi[i + n_axes] = per_output @ d_start, per_output @ d_end
    return droi


@kernel("ResizeGradient")
def resize_gradient_cpu(
    x: np.ndarray,
    dy: np.ndarray,
    roi: np.ndarray | None = None,
    scales: np.ndarray | None = None,
    sizes: np.ndarray | None = None,
    *,
    extrapolation_value: float,
    output_mask: tuple[bool, ...],
    **attrs,
) -> tuple[np.ndarray | None, ...]:
    """(dX, droi); `attrs` are Resize's (see resize.plan_resize). extrapolation_value is a
    constant: it reaches neither gradient."""
    plan = plan_resize(x.shape, roi, scales, sizes, **attrs)
    check_grad_shape(dy, plan.out_shape, "Resize's output Y")
    work = resize_work_dtype(x.dtype)
    g = dy.astype(work)
    if plan.outside is not None:
        g = np.where(plan.outside, work(0), g)
    dx = droi = None
    if output_mask[0]:
        h = g
        for step in reversed(plan.steps):
            h = step_adjoint(h, step)
        dx = h.astype(x.dtype, copy=False)
    if len(output_mask) > 1 and output_mask[1]:
        if roi is None:
            raise SchemaError("ResizeGradient: output 'droi' is named but input 'roi' is absent")
        droi = np.zeros(roi.shape, roi.dtype)
        tf_crop = attrs["coordinate_transformation_mode"] == "tf_crop_and_resize"
        if tf_crop and attrs["mode"] != "nearest":
            droi = _roi_gradient(x, g, plan, attrs, work).reshape(roi.shape).astype(roi.dtype)
    return dx, droi
