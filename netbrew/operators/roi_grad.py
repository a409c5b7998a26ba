"""Gradient of RoiAlign to X.

    RoiAlign(X, rois, batch_indices) -> Y
        backward: RoiAlignGradient(X, rois, batch_indices, dY) -> dX

Each bin of Y pools bilinear samples of X, and each sample reads four pixels (its taps)
with weights wy * wx. With mode avg, dX receives dY / count * wy * wx at each of the four
taps of every sample of the bin; with mode max, the bin's value is the largest weighted
tap value (onnxruntime's max), so dY * weight goes to that one tap only (the first in
(corner, sample) order on ties). Samples outside the image have weight 0 and pass
nothing back. The taps come from roi.RoiPlan, as in the forward, and are scattered with
one `np.add.at` per corner over flat (pixel, channel) indices.

rois and batch_indices get no gradient: batch_indices are integers, and the ROI boxes
are treated as given (they come from a proposal stage that is not trained through
RoiAlign, as in torchvision's roi_align, which returns no gradient for its boxes).
"""

from __future__ import annotations

import numpy as np

from netbrew.netdef.net import op_def
from netbrew.operators.conv import check_grad_shape
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.roi import plan_roi_align
from netbrew.operators.schema import SCHEMAS, gradient, kernel, schema

schema(
    "RoiAlignGradient",
    inputs=["X", "rois", "batch_indices", "dY"],
    outputs=["dX"],
    attrs=SCHEMAS["RoiAlign"].attrs,  # the forward's attributes, copied by the maker
    dtypes={0: "float", 1: "float", 2: "int", 3: "float"},
    onnx=False,
    doc="dX[b, c, h, w] = sum over the bins of the ROIs r of batch b of dY[r, c, bin] * "
    "(wy * wx / count, over the samples whose bilinear taps include (h, w); max: only the "
    "tap holding the bin's max); X (N, C, H, W), rois (R, 4), batch_indices (R,), dY "
    "(R, C, output_height, output_width); attributes as RoiAlign",
)


@gradient("RoiAlign")
def roi_align_grad(op, g_out, g_in):
    if not g_in[0]:
        return []  # rois and batch_indices get none (see the module docstring)
    ins = [op.input[0], op.input[1], op.input[2], g_out[0]]
    return [op_def("RoiAlignGradient", ins, [g_in[0]], **copy_attrs(op))]


def _pixels(batch, yi, xi, hw):
    """Flat (n, h, w) indices (R, oh, gh, ow, gw) of the taps yi (R, oh, gh), xi (R, ow, gw)."""
    height, width = hw
    b = batch[:, None, None, None, None]
    return (b * height + yi[:, :, :, None, None]) * width + xi[:, None, None, :, :]


def _weights(wy, wx):
    return wy[:, :, :, None, None] * wx[:, None, None, :, :]


def _avg_scatter(dxt, batch, taps, dy, count, hw):
    """dxt (N*H*W, C) += dY / count * weight at every tap of every sample.
    dy: (R, oh, ow, C)."""
    (ys, wys), (xs, wxs) = taps
    g = dy[:, :, None, :, None, :] / count
    for yi, wy in zip(ys, wys):
        for xi, wx in zip(xs, wxs):
            values = g * _weights(wy, wx)[..., None]
            np.add.at(dxt, _pixels(batch, yi, xi, hw).ravel(), values.reshape(-1, dxt.shape[1]))


def _max_scatter(dxt, xw, batch, taps, dy, hw):
    """dxt (N*H*W, C) += dY * weight at the tap whose weighted value is each bin's max, with
    the forward's values (xw in its working dtype). dy: (R, oh, ow, C)."""
    (ys, wys), (xs, wxs) = taps
    b = batch[:, None, None, None, None]
    terms, pixels, weights = [], [], []
    for yi, wy in zip(ys, wys):
        for xi, wx in zip(xs, wxs):
            w = _weights(wy, wx)
            vals = xw[b, :, yi[:, :, :, None, None], xi[:, None, None, :, :]]  # (R,oh,gh,ow,gw,C)
            terms.append(vals * w.astype(xw.dtype)[..., None])
            pixels.append(_pixels(batch, yi, xi, hw))
            weights.append(w)
    n_roi, oh, gh, ow, gw, channels = terms[0].shape
    stacked = np.stack(terms).transpose(1, 2, 4, 6, 0, 3, 5).reshape(n_roi, oh, ow, channels, -1)
    corner, gi, gj = np.unravel_index(stacked.argmax(axis=-1), (len(terms), gh, gw))
    r, i, j = np.ogrid[:n_roi, :oh, :ow]
    r, i, j = r[..., None], i[..., None], j[..., None]  # broadcast against (R, oh, ow, C)
    pick = np.stack(pixels)[corner, r, i, gi, j, gj]
    weight = np.stack(weights)[corner, r, i, gi, j, gj]
    flat = dxt.reshape(-1)
    np.add.at(flat, (pick * channels + np.arange(channels)).ravel(), (dy * weight).ravel())


@kernel("RoiAlignGradient")
def roi_align_gradient_cpu(
    x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, dy: np.ndarray, **attrs
) -> tuple[np.ndarray]:
    """Attributes as RoiAlign's (see roi.plan_roi_align)."""
    plan = plan_roi_align(x.shape, rois, batch_indices, **attrs)
    check_grad_shape(dy, plan.shape, "RoiAlign's output Y")
    n_batch, channels, *hw = x.shape
    dxt = np.zeros((n_batch * hw[0] * hw[1], channels))
    work = np.result_type(x.dtype, np.float32).type
    xw = x.astype(work, copy=False)
    g = dy.astype(np.float64).transpose(0, 2, 3, 1)  # (R, oh, ow, C)
    for m, grid in plan.chunks(channels):
        taps = plan.taps(m, grid, hw)
        if attrs["mode"] == "avg":
            _avg_scatter(dxt, plan.batch[m], taps, g[m], grid[0] * grid[1], hw)
        else:
            _max_scatter(dxt, xw, plan.batch[m], taps, g[m], hw)
    dx = dxt.reshape(n_batch, hw[0], hw[1], channels).transpose(0, 3, 1, 2)
    return (np.ascontiguousarray(dx, dtype=x.dtype),)
