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

`plan_resize` computes every axis' taps once for the kernel and for ResizeGradient
(resize_grad.py), which applies their transposes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import kernel, schema

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


def kernel_slope(t: np.ndarray, mode: str, a: float) -> np.ndarray:
    """d/dt of the linear (tent) or cubic kernel at t (0 outside the support)."""
    d, sign = np.abs(t), np.sign(t)
    if mode == "linear":
        return np.where(d < 1, -sign, 0.0)
    near = (3 * (a + 2) * d - 2 * (a + 3)) * d
    far = (3 * a * d - 10 * a) * d + 8 * a
    return sign * np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _normalized(w, dw, total):
    """w / total and, when dw is given, its derivative (dw - (w / total) * sum(dw)) / total."""
    w = w / total
    if dw is not None:
        dw = (dw - w * dw.sum(axis=1, keepdims=True)) / total
    return w, dw


def taps(x, n_in, scale, mode, a, antialias, exclude_outside, slopes=False) -> tuple:
    """(indices, weights), each (n_out, n_taps): the input samples behind each output.

    With slopes=True a third array follows: d weights / d x, the derivative of each weight
    with respect to the output's source coordinate (for the gradient of tf_crop_and_resize's
    roi); the indices do not move with x except where a weight is 0.
    """
    support = 1.0 if mode == "linear" else 2.0
    stretch = min(scale, 1.0) if antialias else 1.0
    half = math.ceil(support / stretch)
    idx = np.floor(x)[:, None] + np.arange(1 - half, half + 1)[None, :]
    t = (idx - x[:, None]) * stretch
    w = np.clip(1 - np.abs(t), 0, 1) if mode == "linear" else cubic_kernel(t, a)
    dw = -stretch * kernel_slope(t, mode, a) if slopes else None  # dt/dx = -stretch
    if antialias:
        w, dw = _normalized(w, dw, w.sum(axis=1, keepdims=True))
    if exclude_outside:
        inside = (idx >= 0) & (idx < n_in)
        w = np.where(inside, w, 0.0)
        dw = None if dw is None else np.where(inside, dw, 0.0)
        total = w.sum(axis=1, keepdims=True)
        w, dw = _normalized(w, dw, np.where(total == 0, 1.0, total))
    index = np.clip(idx, 0, n_in - 1).astype(np.intp)
    return (index, w, dw) if slopes else (index, w)


def _along(shape_len: int, axis: int, v: np.ndarray) -> np.ndarray:
    """v (a 1-D array) shaped to broadcast along `axis` of a rank-shape_len array."""
    return v.reshape((1,) * axis + (-1,) + (1,) * (shape_len - axis - 1))


@dataclass(frozen=True)
class AxisStep:
    """How one axis is resampled: `index` and `weight` are (n_out, taps) for linear and
    cubic, `index` is (n_out,) and `weight` None for nearest, both None when the axis is
    left as is (identity) or emptied (n_out or n_in is 0)."""

    axis: int
    n_in: int
    n_out: int
    coords: np.ndarray | None
    index: np.ndarray | None
    weight: np.ndarray | None


@dataclass(frozen=True)
class ResizePlan:
    """Y's shape, the per-axis steps in the order they run, and the mask of outputs
    replaced by extrapolation_value (tf_crop_and_resize only, else None)."""

    out_shape: tuple[int, ...]
    steps: list[AxisStep]
    outside: np.ndarray | None
    scales: list[float]
    axes: list[int]


def plan_resize(
    shape: tuple[int, ...],
    roi: np.ndarray | None,
    scales: np.ndarray | None,
    sizes: np.ndarray | None,
    *,
    antialias: int,
    axes,
    coordinate_transformation_mode: str,
    cubic_coeff_a: float,
    exclude_outside: int,
    keep_aspect_ratio_policy: str,
    mode: str,
    nearest_mode: str,
    **_,
) -> ResizePlan:
    """Checks Resize's inputs and attributes and computes the taps of every resized axis
    (shared by the forward kernel and ResizeGradient)."""
    mode = _choice("mode", mode, MODES)
    coord = _choice("coordinate_transformation_mode", coordinate_transformation_mode, COORD_MODES)
    rule = _choice("nearest_mode", nearest_mode, NEAREST_MODES)
    policy = _choice("keep_aspect_ratio_policy", keep_aspect_ratio_policy, POLICIES)
    axes = _normalize_axes(axes, len(shape))
    outs, fs = plan_sizes(shape, axes, _given(scales), _given(sizes), policy)
    roi = check_roi(_given(roi), coord, len(axes))
    out_shape = list(shape)
    for a, o in zip(axes, outs):
        out_shape[a] = o
    check_numel(out_shape, "Resize output")
    outside = np.zeros(out_shape, dtype=bool) if coord == "tf_crop_and_resize" else None
    steps = []
    for i in sorted(range(len(axes)), key=lambda i: outs[i] / max(shape[axes[i]], 1)):
        axis, n_out, n_in = axes[i], outs[i], shape[axes[i]]
        if n_out == 0 or n_in == 0:
            steps.append(AxisStep(axis, n_in, n_out, None, None, None))
            continue
        span = None if roi is None else (roi[i], roi[i + len(axes)])
        xo = source_coords(coord, n_out, n_in, fs[i], span)
        if outside is not None:
            outside |= _along(len(shape), axis, (xo < 0) | (xo > n_in - 1))
        if n_out == n_in and np.array_equal(xo, np.arange(n_in)):
            steps.append(AxisStep(axis, n_in, n_out, xo, None, None))  # identity
        elif mode == "nearest":
            steps.append(AxisStep(axis, n_in, n_out, xo, nearest_index(xo, rule, n_in), None))
        else:
            idx, w = taps(xo, n_in, fs[i], mode, cubic_coeff_a, antialias, exclude_outside)
            steps.append(AxisStep(axis, n_in, n_out, xo, idx, w))
    return ResizePlan(tuple(out_shape), steps, outside, fs, axes)


def check_roi(roi: np.ndarray | None, coord: str, n_axes: int) -> np.ndarray | None:
    """roi in float64 for tf_crop_and_resize (which needs [starts, ends]), else as given."""
    if coord != "tf_crop_and_resize":
        return roi
    if roi is None or roi.size != 2 * n_axes:
        got = "none" if roi is None else f"{roi.size} values"
        raise ShapeError(
            f"input 'roi' has {got}, expected {2 * n_axes} ([starts, ends] for each of "
            f"{n_axes} axes) with coordinate_transformation_mode=tf_crop_and_resize"
        )
    return roi.astype(np.float64)


def apply_step(y: np.ndarray, step: AxisStep, work: type) -> np.ndarray:
    """y resampled along step.axis (the sum over taps of weighted gathers)."""
    if step.n_out == 0 or step.n_in == 0:
        shape = list(y.shape)
        shape[step.axis] = step.n_out
        return np.empty(shape, y.dtype)
    if step.index is None:
        return y
    if step.weight is None:
        return np.take(y, step.index, axis=step.axis)
    w = step.weight.astype(work)
    acc = None
    for k in range(step.index.shape[1]):
        term = np.take(y, step.index[:, k], axis=step.axis) * _along(y.ndim, step.axis, w[:, k])
        acc = term if acc is None else np.add(acc, term, out=acc)
    return acc


@kernel("Resize")
def resize_cpu(
    x: np.ndarray,
    roi: np.ndarray | None = None,
    scales: np.ndarray | None = None,
    sizes: np.ndarray | None = None,
    *,
    extrapolation_value: float,
    **attrs,
) -> tuple[np.ndarray]:
    """Attributes as in the schema; see plan_resize."""
    plan = plan_resize(x.shape, roi, scales, sizes, **attrs)
    mode = attrs["mode"]
    interpolate = mode != "nearest"
    if interpolate and x.dtype.kind not in "iufb" and x.dtype.name != "bfloat16":
        raise SchemaError(f"input 'X' has dtype {x.dtype}; mode={mode!r} needs a numeric type")
    work = resize_work_dtype(x.dtype)
    y = x.astype(work) if interpolate else x
    for step in plan.steps:
        y = apply_step(y, step, work)
    if plan.outside is not None and plan.outside.any():
        y = np.where(plan.outside, np.asarray(extrapolation_value).astype(y.dtype), y)
    return (_cast_back(y, x.dtype),)


def resize_work_dtype(dtype: np.dtype) -> type:
    """float64 for float64 and integer inputs, float32 for narrower floats."""
    wide = dtype == np.float64 or dtype.kind in "iub"
    return np.float64 if wide else np.float32


def _cast_back(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if y.dtype == dtype:
        return y
    if dtype.kind == "b":
        return y != 0
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(np.rint(y), info.min, info.max).astype(dtype)
    return y.astype(dtype)
