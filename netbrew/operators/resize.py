"""Resize (ONNX opset 19): nearest, N-linear and N-cubic resampling of any axes.

Interpolation is separable, so the kernel resamples one axis at a time. For each resized
axis it maps every output index to a source coordinate (`source_coords`), turns the
coordinates into a few taps (input indices clamped to the edge, and their weights) and sums
`take(X, taps[:, k], axis) * weight[:, k]` over the taps k. Nearest mode is a single gather,
so it works for every dtype; linear and cubic compute in float64 (float32 for narrower float
inputs) and cast back, rounding and saturating for integer inputs.

Like onnxruntime and ONNX's shape inference, an output size computed from `scales` is
floor(in * scale) (the ROI of tf_crop_and_resize does not shrink it). Nearest mode ignores
antialias and exclude_outside (one tap: nothing to filter or renormalize), and
pytorch_half_pixel maps a length-1 output to coordinate 0, as the spec and onnxruntime do.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import kernel, no_gradient, schema

MODES = ("nearest", "linear", "cubic")
COORD_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_crop_and_resize",
)
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
POLICIES = ("stretch", "not_larger", "not_smaller")

schema(
    "Resize",
    inputs=["X", "roi?", "scales?", "sizes?"],
    attrs={
        "antialias": 0,
        "axes": None,
        "coordinate_transformation_mode": "half_pixel",
        "cubic_coeff_a": -0.75,
        "exclude_outside": 0,
        "extrapolation_value": 0.0,
        "keep_aspect_ratio_policy": "stretch",
        "mode": "nearest",
        "nearest_mode": "round_prefer_floor",
    },
    dtypes={0: "any", 1: "float", 2: "float", 3: "int"},
    doc="Y = X resampled along `axes` (default all) to sizes[i] or floor(in * scales[i]) "
    "(exactly one of scales, sizes); mode nearest|linear|cubic (nearest), "
    "coordinate_transformation_mode half_pixel|half_pixel_symmetric|pytorch_half_pixel|"
    "align_corners|asymmetric|tf_crop_and_resize (half_pixel), nearest_mode "
    "round_prefer_floor|round_prefer_ceil|floor|ceil, cubic_coeff_a=-0.75, exclude_outside=0, "
    "extrapolation_value=0, antialias=0, keep_aspect_ratio_policy stretch|not_larger|"
    "not_smaller; roi [starts, ends] only for tf_crop_and_resize; Y has X's dtype",
)
no_gradient(
    "Resize",
    "not implemented: the input gradient is the transpose of the per-axis interpolation "
    "(a scatter-add of the taps), which netbrew does not provide yet",
)


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise SchemaError(f"argument {name}={value!r} is not one of {', '.join(allowed)}")
    return value


def _given(a: np.ndarray | None) -> np.ndarray | None:
    """An optional 1-D input, None when omitted or empty."""
    if a is None or a.size == 0:
        return None
    return np.asarray(a).reshape(-1)


def _normalize_axes(axes, rank: int) -> list[int]:
    if axes is None:
        return list(range(rank))
    out = []
    for a in axes:
        if not -rank <= a < rank:
            raise SchemaError(
                f"argument axes={list(axes)}: axis {a} is out of range for rank {rank}"
            )
        out.append(int(a) % rank)
    if len(set(out)) != len(out):
        raise SchemaError(f"argument axes={list(axes)} repeats an axis")
    return out


def plan_sizes(shape, axes, scales, sizes, policy) -> tuple[list[int], list[float]]:
    """Output length and scale of each axis in `axes`."""
    want = len(axes)
    if (scales is None) == (sizes is None):
        raise SchemaError(
            "Resize takes exactly one of the inputs 'scales' and 'sizes' "
            f"(got {'both' if scales is not None else 'neither'})"
        )
    given = scales if scales is not None else sizes
    name = "scales" if scales is not None else "sizes"
    if given.size != want:
        raise ShapeError(
            f"input {name!r} has {given.size} values, expected {want} (one per axis in "
            f"{'axes' if want != len(shape) else 'X'})"
        )
    ins = [shape[a] for a in axes]
    if scales is not None:
        fs = [float(s) for s in scales]
        if any(not s > 0 for s in fs):
            raise SchemaError(f"input 'scales' must be > 0, got {fs}")
        return [math.floor(i * s) for i, s in zip(ins, fs)], fs
    outs = [int(s) for s in sizes]
    if any(o < 0 for o in outs):
        raise ShapeError(f"input 'sizes' must be >= 0, got {outs}")
    if any(i == 0 and o > 0 for i, o in zip(ins, outs)):
        raise ShapeError(f"cannot resize an empty axis of X {list(shape)} to sizes {outs}")
    fs = [o / i if i else 1.0 for i, o in zip(ins, outs)]
    if policy != "stretch":
        s = min(fs) if policy == "not_larger" else max(fs)
        fs = [s] * want
        outs = [int(s * i + 0.5) for i in ins]
    return outs, fs


def source_coords(mode: str, n_out: int, n_in: int, scale: float, roi) -> np.ndarray:
    """x_original (float64) of every output index along one axis.

    As in ONNX's reference and onnxruntime, `length_resized` in the formulas is the
    unrounded in * scale (it equals n_out when `sizes` is given).
    """
    y = np.arange(n_out, dtype=np.float64)
    length = scale * n_in
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / length)
        return offset + (y + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (y + 0.5) / scale - 0.5 if length > 1 else np.zeros(n_out)
    if mode == "align_corners":
        return y * (n_in - 1) / (length - 1) if length != 1 else np.zeros(n_out)
    if mode == "asymmetric":
        return y / scale
    start, end = roi
    if length != 1:
        return start * (n_in - 1) + y * (end - start) * (n_in - 1) / (length - 1)
    return np.full(n_out, 0.5 * (start + end) * (n_in - 1))


def nearest_index(x: np.ndarray, rule: str, n_in: int) -> np.ndarray:
    if rule == "round_prefer_floor":
        i = np.ceil(x - 0.5)
    elif rule == "round_prefer_ceil":
        i = np.floor(x + 0.5)
    elif rule == "floor":
        i = np.floor(x)
    else:
        i = np.ceil(x)
    return np.clip(i, 0, max(n_in - 1, 0)).astype(np.intp)


def cubic_kernel(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with parameter a (support |t| < 2)."""
    d = np.abs(t)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def taps(x, n_in, scale, mode, a, antialias, exclude_outside) -> tuple[np.ndarray, np.ndarray]:
    """(indices, weights), each (n_out, n_taps): the input samples behind each output."""
    support = 1.0 if mode == "linear" else 2.0
    stretch = min(scale, 1.0) if antialias else 1.0
    half = math.ceil(support / stretch)
    idx = np.floor(x)[:, None] + np.arange(1 - half, half + 1)[None, :]
    t = (idx - x[:, None]) * stretch
    w = np.clip(1 - np.abs(t), 0, 1) if mode == "linear" else cubic_kernel(t, a)
    if antialias:
        w /= w.sum(axis=1, keepdims=True)
    if exclude_outside:
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        total = w.sum(axis=1, keepdims=True)
        w /= np.where(total == 0, 1.0, total)
    return np.clip(idx, 0, n_in - 1).astype(np.intp), w


def _along(shape_len: int, axis: int, v: np.ndarray) -> np.ndarray:
    """v (a 1-D array) shaped to broadcast along `axis` of a rank-shape_len array."""
    return v.reshape((1,) * axis + (-1,) + (1,) * (shape_len - axis - 1))


@kernel("Resize")
def resize_cpu(
    x,
    roi=None,
    scales=None,
    sizes=None,
    *,
    antialias,
    axes,
    coordinate_transformation_mode,
    cubic_coeff_a,
    exclude_outside,
    extrapolation_value,
    keep_aspect_ratio_policy,
    mode,
    nearest_mode,
) -> tuple[np.ndarray]:
    mode = _choice("mode", mode, MODES)
    coord = _choice("coordinate_transformation_mode", coordinate_transformation_mode, COORD_MODES)
    rule = _choice("nearest_mode", nearest_mode, NEAREST_MODES)
    policy = _choice("keep_aspect_ratio_policy", keep_aspect_ratio_policy, POLICIES)
    axes = _normalize_axes(axes, x.ndim)
    outs, fs = plan_sizes(x.shape, axes, _given(scales), _given(sizes), policy)
    roi = _given(roi)
    if coord == "tf_crop_and_resize":
        if roi is None or roi.size != 2 * len(axes):
            got = "none" if roi is None else f"{roi.size} values"
            raise ShapeError(
                f"input 'roi' has {got}, expected {2 * len(axes)} ([starts, ends] for each of "
                f"{len(axes)} axes) with coordinate_transformation_mode=tf_crop_and_resize"
            )
        roi = roi.astype(np.float64)
    out_shape = list(x.shape)
    for a, o in zip(axes, outs):
        out_shape[a] = o
    check_numel(out_shape, "Resize output")

    interpolate = mode != "nearest"
    if interpolate and x.dtype.kind not in "iufb" and x.dtype.name != "bfloat16":
        raise SchemaError(f"input 'X' has dtype {x.dtype}; mode={mode!r} needs a numeric type")
    wide = x.dtype == np.float64 or x.dtype.kind in "iub"
    work = np.float64 if wide else np.float32
    y = x.astype(work) if interpolate else x
    outside = np.zeros(out_shape, dtype=bool) if coord == "tf_crop_and_resize" else None
    order = sorted(range(len(axes)), key=lambda i: outs[i] / max(x.shape[axes[i]], 1))
    for i in order:
        axis, n_out, n_in = axes[i], outs[i], x.shape[axes[i]]
        if n_out == 0 or n_in == 0:
            shape = list(y.shape)
            shape[axis] = n_out
            y = np.empty(shape, y.dtype)
            continue
        span = None if roi is None else (roi[i], roi[i + len(axes)])
        xo = source_coords(coord, n_out, n_in, fs[i], span)
        if outside is not None:
            outside |= _along(x.ndim, axis, (xo < 0) | (xo > n_in - 1))
        if n_out == n_in and np.array_equal(xo, np.arange(n_in)):
            continue  # identity along this axis
        if not interpolate:
            y = np.take(y, nearest_index(xo, rule, n_in), axis=axis)
            continue
        idx, w = taps(xo, n_in, fs[i], mode, cubic_coeff_a, antialias, exclude_outside)
        w = w.astype(work)
        acc = None
        for k in range(idx.shape[1]):
            term = np.take(y, idx[:, k], axis=axis) * _along(y.ndim, axis, w[:, k])
            acc = term if acc is None else np.add(acc, term, out=acc)
        y = acc
    if outside is not None and outside.any():
        y = np.where(outside, np.asarray(extrapolation_value).astype(y.dtype), y)
    return (_cast_back(y, x.dtype),)


def _cast_back(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if y.dtype == dtype:
        return y
    if dtype.kind == "b":
        return y != 0
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(np.rint(y), info.min, info.max).astype(dtype)
    return y.astype(dtype)
