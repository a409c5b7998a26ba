"""Gradient of DeformConv to X, W, offset, B and mask.

    DeformConv(X, W, offset, B?, mask?) -> Y
        backward: DeformConvGradient(X, W, offset, dY, mask?) -> (dX, dW, doffset, dB, dmask)

The forward samples columns col (N, C, K, O) bilinearly and multiplies them by W per group,
so, with the columns recomputed as the forward does (deform_conv.sample_columns):
dW = dY col^T summed over the batch, dB = dY summed over all dims but the channel, and
dcol = W^T dY. dcol flows into the samples through the mask (dmask = dcol times the
unmasked samples, summed over each offset group's channels) and then through bilinear
sampling: grid_sample_grad.sample_gradient scatters it onto X and differentiates the
bilinear weights for doffset (a tap's index is fixed where its weight is positive; zero
padding makes the samples continuous at the image's edge).
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import SchemaError
from netbrew.netdef.net import op_def
from netbrew.operators.conv import check_grad_shape
from netbrew.operators.deform_conv import deform_geometry, sample_columns
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.grid_sample_grad import sample_gradient
from netbrew.operators.schema import SCHEMAS, gradient, kernel, schema

schema(
    "DeformConvGradient",
    inputs=["X", "W", "offset", "dY", "mask?"],
    outputs=["dX", "dW?", "doffset?", "dB?", "dmask?"],
    attrs=SCHEMAS["DeformConv"].attrs,  # the forward's attributes, copied by the maker
    dtypes="float",
    onnx=False,
    output_mask=True,
    doc="with col the masked bilinear samples (N, C, K, O) and dcol = W^T dY per group: dW = "
    "sum_n dY col^T, dB = sum of dY over N and O, dmask = sum over each offset group's "
    "channels of dcol * unmasked samples, and dX, doffset through the bilinear sampling of "
    "dcol * mask; X, W, offset, mask and attributes as DeformConv, dY like its Y",
)


@gradient("DeformConv")
def deform_conv_grad(op, g_out, g_in):
    wanted = [g or "" for g in g_in] + [""] * (5 - len(g_in))
    if not any(wanted):
        return []
    ins = [op.input[0], op.input[1], op.input[2], g_out[0]]
    if len(op.input) > 4 and op.input[4]:
        ins.append(op.input[4])
    return [op_def("DeformConvGradient", ins, wanted, **copy_attrs(op))]


def _through_samples(x, dcol, raw, coords, mask, geo, offset_group, want):
    """(dX, doffset, dmask) from dcol (N, C, K, O...) back through the mask and the
    bilinear sampling of each offset group; want: (dX, doffset, dmask) flags."""
    n, c = x.shape[:2]
    cg, out, k_count = c // offset_group, geo.out, geo.k_count
    dx = np.zeros(x.shape) if want[0] else None
    doff = np.zeros((n, offset_group, k_count, len(out), *out)) if want[1] else None
    dmask = np.zeros((n, offset_group, k_count, *out)) if want[2] else None
    if mask is not None:
        mask = mask.astype(np.float64).reshape(n, offset_group, 1, k_count, *out)
    for g in range(offset_group):
        group = slice(g * cg, (g + 1) * cg)
        dpart = dcol[:, group]
        if mask is not None:
            if dmask is not None:
                dmask[:, g] = np.einsum("nc...,nc...->n...", dpart, raw[g])
            dpart = dpart * mask[:, g]
        if dx is None and doff is None:
            continue
        dx_g, dcoords = sample_gradient(x[:, group], coords[g], dpart, want=want[:2])
        if dx is not None:
            dx[:, group] = dx_g
        if doff is not None:
            doff[:, g] = np.stack(dcoords, axis=2)  # (N, K, r, O...)
    return dx, doff, dmask


@kernel("DeformConvGradient")
def deform_conv_gradient_cpu(
    x: np.ndarray,
    w: np.ndarray,
    offset: np.ndarray,
    dy: np.ndarray,
    mask: np.ndarray | None = None,
    *,
    group: int,
    offset_group: int,
    output_mask: tuple[bool, ...],
    **attrs,
) -> tuple[np.ndarray | None, ...]:
    """`attrs`: dilations, kernel_shape, pads, strides (see deform_conv.deform_geometry)."""
    geo = deform_geometry(x, w, offset, None, mask, group=group, offset_group=offset_group, **attrs)
    want = tuple(output_mask) + (False,) * (5 - len(output_mask))
    if want[4] and mask is None:
        raise SchemaError("output 'dmask' is named but input 'mask' is absent")
    n, c, m = x.shape[0], x.shape[1], w.shape[0]
    check_grad_shape(dy, (n, m, *geo.out), "DeformConv's output Y")
    g = dy.astype(np.float64).reshape(n, group, m // group, -1)
    cols, raw, coords = sample_columns(x, offset, mask, geo, offset_group)
    d_w = d_b = None
    if want[1]:
        col = cols.reshape(n, group, (c // group) * geo.k_count, -1)
        d_w = np.matmul(g, col.swapaxes(-1, -2)).sum(axis=0).reshape(w.shape).astype(w.dtype)
    if want[3]:
        d_b = g.sum(axis=(0, 3)).reshape(m).astype(dy.dtype)
    dx = doff = dmask = None
    if want[0] or want[2] or want[4]:
        wm = w.astype(np.float64).reshape(group, m // group, -1)
        dcol = np.matmul(wm.transpose(0, 2, 1)[None], g).reshape(cols.shape)
        flags = (want[0], want[2], want[4])
        dx, doff, dmask = _through_samples(x, dcol, raw, coords, mask, geo, offset_group, flags)
    return (
        None if dx is None else dx.astype(x.dtype),
        d_w,
        None if doff is None else doff.reshape(offset.shape).astype(offset.dtype),
        d_b,
        None if dmask is None else dmask.reshape(mask.shape).astype(mask.dtype),
    )
