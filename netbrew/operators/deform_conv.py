"""DeformConv (opset 22): N-d deformable convolution (v1 offsets, v2 with a modulation mask).

Every kernel tap k of every output position o samples X bilinearly (zero outside the image)
at o * strides - pads_begin + k * dilations + offset[k, o], multiplies by mask[k, o], and the
resulting columns (N, C, K, O) meet W in one grouped matmul. Sampling is grid_sample.sample
in pixel coordinates. `deform_geometry` and `sample_columns` are shared with
DeformConvGradient (deform_conv_grad.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.grid_sample import sample
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import kernel, schema

schema(
    "DeformConv",
    inputs=["X", "W", "offset", "B?", "mask?"],
    outputs=["Y"],
    attrs={
        "dilations": None,
        "group": 1,
        "kernel_shape": None,
        "offset_group": 1,
        "pads": None,
        "strides": None,
    },
    dtypes="float",
    doc="Y[n, m, o] = B[m] + sum_{c in group of m, k} W[m, c, k] * mask[n, g, k, o] * "
    "bilinear(X[n, c], o*strides - pads_begin + k*dilations + offset[n, g, k, :, o]) with g "
    "the offset group of c (zero outside X); X (N, C, D1..Dr), W (M, C/group, k1..kr), "
    "offset (N, offset_group*K*r, O1..Or) with K = prod(k), mask (N, offset_group*K, O1..Or) "
    "(default 1), B (M,) -> Y (N, M, O1..Or); dilations=1, group=1, kernel_shape=W.shape[2:], "
    "offset_group=1, pads=0, strides=1",
)


def _ints(value, default: list[int], name: str, length: int) -> list[int]:
    out = list(default) if value is None else [int(v) for v in value]
    if len(out) != length:
        raise SchemaError(f"argument {name}={out} has {len(out)} values, expected {length}")
    return out


def _check_channels(x, w, offset, b, mask, group, offset_group, k_count, r, out):
    n, c = x.shape[:2]
    m = w.shape[0]
    if group < 1 or offset_group < 1:
        raise SchemaError(f"group={group} and offset_group={offset_group} must be >= 1")
    if c != w.shape[1] * group or m % group:
        raise ShapeError(
            f"input X has C={c} channels and W has shape {list(w.shape)}: expected "
            f"C = group * W.shape[1] = {group * w.shape[1]} and M={m} divisible by group={group}"
        )
    if c % offset_group:
        raise ShapeError(f"C={c} channels do not divide into offset_group={offset_group}")
    want = (n, offset_group * k_count * r, *out)
    if offset.shape != want:
        raise ShapeError(
            f"input 'offset' has shape {list(offset.shape)}, expected {list(want)} "
            f"(N, offset_group*prod(kernel_shape)*{r}, output dims)"
        )
    if mask is not None and mask.shape != (n, offset_group * k_count, *out):
        raise ShapeError(
            f"input 'mask' has shape {list(mask.shape)}, expected "
            f"{[n, offset_group * k_count, *out]} (N, offset_group*prod(kernel_shape), output dims)"
        )
    if b is not None and b.shape != (m,):
        raise ShapeError(f"input 'B' has shape {list(b.shape)}, expected [{m}]")


@dataclass(frozen=True)
class DeformGeometry:
    """DeformConv's checked shapes: r spatial dims, the kernel, dilations, strides, pads
    (begins then ends) and output dims, and K = prod(kernel)."""

    kernel: list[int]
    dilations: list[int]
    strides: list[int]
    pads: list[int]
    out: list[int]
    k_count: int

    def coords(self, off: np.ndarray, g: int) -> list[np.ndarray]:
        """Pixel coordinates (N, K, O1..Or) of every tap of offset group g, one array per
        spatial dim; off is the offset input as (N, offset_group, K, r, O1..Or) float64."""
        r = len(self.kernel)
        taps = np.stack(np.meshgrid(*[np.arange(k) for k in self.kernel], indexing="ij"), -1)
        taps = taps.reshape(-1, r)
        coords = []
        for d in range(r):
            base = np.arange(self.out[d]) * self.strides[d] - self.pads[d]
            base = base.reshape((1,) * (d + 1) + (-1,) + (1,) * (r - d - 1))
            tap = (taps[:, d] * self.dilations[d]).reshape((1, -1) + (1,) * r)
            coords.append(base + tap + off[:, g, :, d])  # (N, K, O1..Or)
        return coords


def deform_geometry(
    x, w, offset, b, mask, *, dilations, group, kernel_shape, offset_group, pads, strides
) -> DeformGeometry:
    """Checks DeformConv's inputs and attributes (shared with DeformConvGradient)."""
    if x.ndim < 3 or w.ndim != x.ndim:
        raise ShapeError(
            f"inputs X {list(x.shape)} and W {list(w.shape)} must have the same rank >= 3 "
            "((N, C, D1..Dr) and (M, C/group, k1..kr))"
        )
    r = x.ndim - 2
    ks = list(w.shape[2:])
    if kernel_shape is not None and [int(v) for v in kernel_shape] != ks:
        raise ShapeError(f"argument kernel_shape={list(kernel_shape)} does not match W {ks}")
    dil = _ints(dilations, [1] * r, "dilations", r)
    st = _ints(strides, [1] * r, "strides", r)
    pd = _ints(pads, [0] * (2 * r), "pads", 2 * r)
    spatial = x.shape[2:]
    out = [
        (spatial[d] + pd[d] + pd[d + r] - (ks[d] - 1) * dil[d] - 1) // st[d] + 1 for d in range(r)
    ]
    if any(o < 1 for o in out):
        raise ShapeError(
            f"output dims {out} from X {list(x.shape)}, kernel {ks}, pads {pd}, strides {st}, "
            f"dilations {dil} must be >= 1"
        )
    k_count = math.prod(ks)
    _check_channels(x, w, offset, b, mask, group, offset_group, k_count, r, out)
    n, c, m = x.shape[0], x.shape[1], w.shape[0]
    check_numel((n, m, *out), "DeformConv output")
    check_numel((n, c, k_count, *out), "DeformConv columns")
    return DeformGeometry(ks, dil, st, pd, out, k_count)


def sample_columns(x, offset, mask, geo: DeformGeometry, offset_group: int):
    """The sampled columns (N, C, K, O1..Or) in float64, each group of C / offset_group
    channels at its offset group's tap coordinates, times the mask when given. Also
    returns the unmasked samples and the coordinates of each offset group."""
    n, c, out, k_count = x.shape[0], x.shape[1], geo.out, geo.k_count
    off = offset.astype(np.float64).reshape(n, offset_group, k_count, len(out), *out)
    cg = c // offset_group
    cols, raw, coords = [], [], []
    for g in range(offset_group):
        coords.append(geo.coords(off, g))
        part = sample(x[:, g * cg : (g + 1) * cg], coords[-1], "linear", "zeros", True)
        raw.append(part)
        if mask is not None:
            part = part * mask.reshape(n, offset_group, 1, k_count, *out)[:, g]
        cols.append(part)  # (N, cg, K, O...)
    return np.concatenate(cols, axis=1), raw, coords


@kernel("DeformConv")
def deform_conv_cpu(
    x: np.ndarray,
    w: np.ndarray,
    offset: np.ndarray,
    b: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    *,
    group: int,
    offset_group: int,
    **attrs,
) -> tuple[np.ndarray]:
    """`attrs`: dilations, kernel_shape, pads, strides (see deform_geometry)."""
    geo = deform_geometry(x, w, offset, b, mask, group=group, offset_group=offset_group, **attrs)
    n, c, m = x.shape[0], x.shape[1], w.shape[0]
    cols, _, _ = sample_columns(x, offset, mask, geo, offset_group)
    col = cols.reshape(n, group, (c // group) * geo.k_count, -1)
    wm = w.astype(np.float64).reshape(group, m // group, -1)
    y = np.matmul(wm[None], col).reshape(n, m, *geo.out)
    if b is not None:
        y += b.astype(np.float64).reshape((m,) + (1,) * len(geo.out))
    return (y.astype(x.dtype),)
