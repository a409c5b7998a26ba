"""RoiAlign (opset 22) and NonMaxSuppression (opset 11): the detection-head ops.

RoiAlign samples a regular grid of points in each output bin of each ROI bilinearly and
pools them (average, or onnxruntime's max of the weighted corner values). ROIs that share a
sampling grid size are processed together: per spatial axis every sample point gets two taps
(low, high) and weights, the four corners are gathered with one fancy index each, and the
weighted values are pooled over the grid. Points outside [-1, size] contribute 0 (and still
count in the average), as in ONNX's reference and onnxruntime. `plan_roi_align` and
`RoiPlan.taps` are shared with RoiAlignGradient (roi_grad.py), which scatters dY back onto
the same taps.

NonMaxSuppression runs the greedy per-(batch, class) selection with one vectorised IoU
against the remaining candidates per selected box.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import kernel, no_gradient, schema

schema(
    "RoiAlign",
    inputs=["X", "rois", "batch_indices"],
    outputs=["Y"],
    attrs={
        "coordinate_transformation_mode": "half_pixel",
        "mode": "avg",
        "output_height": 1,
        "output_width": 1,
        "sampling_ratio": 0,
        "spatial_scale": 1.0,
    },
    dtypes={0: "float", 1: "float", 2: "int"},
    doc="Y[r, c] = pool over each of output_height x output_width bins of ROI "
    "rois[r] = (x1, y1, x2, y2) * spatial_scale (- 0.5 for half_pixel) of bilinear samples of "
    "X[batch_indices[r], c] on a sampling_ratio^2 grid (0: ceil(roi size / output size)); "
    "X (N, C, H, W), rois (R, 4), batch_indices (R,) -> Y (R, C, output_height, "
    "output_width); mode avg|max (avg), coordinate_transformation_mode half_pixel|"
    "output_half_pixel (half_pixel), output_height=1, output_width=1, sampling_ratio=0, "
    "spatial_scale=1.0",
)
schema(
    "NonMaxSuppression",
    inputs=[
        "boxes",
        "scores",
        "max_output_boxes_per_class?",
        "iou_threshold?",
        "score_threshold?",
    ],
    outputs=["selected_indices"],
    attrs={"center_point_box": 0},
    dtypes={0: "float", 1: "float", 2: "int", 3: "float", 4: "float"},
    doc="selected_indices (K, 3) int64 rows (batch, class, box): per batch and class, boxes "
    "with score > score_threshold taken greedily by descending score, skipping any with IoU "
    "> iou_threshold against one already taken, at most max_output_boxes_per_class (0 when "
    "omitted) of them; boxes (B, S, 4) as [y1, x1, y2, x2] (any diagonal corners) or "
    "[x_center, y_center, width, height] with center_point_box=1; scores (B, C, S); "
    "iou_threshold=0, score_threshold none",
)
no_gradient(
    "NonMaxSuppression", "its output is integer indices chosen by comparisons: not differentiable"
)


def _axis_taps(pos: np.ndarray, n: int):
    """Bilinear taps of sample coordinates along one axis: (low, high), (w_low, w_high)."""
    outside = (pos < -1.0) | (pos > n)
    p = np.maximum(pos, 0.0)
    low = np.floor(p)
    edge = low >= n - 1
    low = np.where(edge, n - 1, low)
    high = np.where(edge, n - 1, low + 1)
    frac = np.where(edge, 0.0, p - low)
    w_low = np.where(outside, 0.0, 1.0 - frac)
    w_high = np.where(outside, 0.0, frac)
    return (low.astype(np.intp), high.astype(np.intp)), (w_low, w_high)


@dataclass(frozen=True)
class RoiPlan:
    """RoiAlign's checked inputs: each ROI's batch, start and bin size (R, 2) as (h, w) in
    pixels, its sampling grid (R, 2), and Y's shape."""

    batch: np.ndarray
    start: np.ndarray
    bin_size: np.ndarray
    grid: np.ndarray
    out_hw: tuple[int, int]
    shape: tuple[int, ...]

    def chunks(self, channels: int) -> Iterator[tuple[np.ndarray, tuple[int, int]]]:
        """(members, (gh, gw)): ROIs sharing a non-empty sampling grid, in chunks whose
        gathered samples stay near 4M values."""
        oh, ow = self.out_hw
        per_roi = max(1, channels * oh * ow)
        for g in {tuple(v) for v in self.grid.tolist()}:
            if g[0] == 0 or g[1] == 0:
                continue  # no samples: the bins stay 0
            members = np.flatnonzero((self.grid[:, 0] == g[0]) & (self.grid[:, 1] == g[1]))
            chunk = max(1, (1 << 22) // (per_roi * g[0] * g[1]))
            for i in range(0, len(members), chunk):
                yield members[i : i + chunk], g

    def taps(self, members: np.ndarray, grid: tuple[int, int], hw: tuple[int, int]) -> list:
        """Per axis (h, w): the bilinear taps (low, high) and weights of every sample point,
        each (R, o, g) for the ROIs `members` sharing the sampling grid `grid`."""
        out = []
        for axis, (o, g, n) in enumerate(zip(self.out_hw, grid, hw)):
            step = self.bin_size[members, axis, None, None]
            pos = (
                self.start[members, axis, None, None]
                + np.arange(o)[None, :, None] * step
                + (np.arange(g)[None, None, :] + 0.5) * step / g
            )
            out.append(_axis_taps(pos, n))
        return out


def _pool_group(x, batch, taps, count, mode, work):
    """Pools ROIs that share the sampling grid; taps from RoiPlan.taps."""
    (ys, wys), (xs, wxs) = taps
    b = batch[:, None, None, None, None]
    result = None
    for yi, wy in zip(ys, wys):
        for xi, wx in zip(xs, wxs):
            vals = x[b, :, yi[:, :, :, None, None], xi[:, None, None, :, :]]  # (R,oh,gh,ow,gw,C)
            w = (wy[:, :, :, None, None] * wx[:, None, None, :, :]).astype(work)
            term = vals * w[..., None]
            if mode == "avg":
                result = term if result is None else np.add(result, term, out=result)
            else:
                result = term if result is None else np.maximum(result, term, out=result)
    if mode == "avg":
        pooled = result.sum(axis=(2, 4)) / work(count)
    else:
        pooled = result.max(axis=(2, 4))
    return pooled.transpose(0, 3, 1, 2)  # (R, C, oh, ow)


def plan_roi_align(
    x_shape,
    rois,
    batch_indices,
    *,
    coordinate_transformation_mode,
    mode,
    output_height,
    output_width,
    sampling_ratio,
    spatial_scale,
) -> RoiPlan:
    """Checks RoiAlign's inputs and attributes and places every ROI's bins and samples
    (shared by the kernel and RoiAlignGradient)."""
    if mode not in ("avg", "max"):
        raise SchemaError(f"argument mode={mode!r} is not one of avg, max")
    if coordinate_transformation_mode not in ("half_pixel", "output_half_pixel"):
        raise SchemaError(
            f"argument coordinate_transformation_mode={coordinate_transformation_mode!r} is "
            "not one of half_pixel, output_half_pixel"
        )
    if len(x_shape) != 4:
        raise ShapeError(f"input 'X' has shape {list(x_shape)}, expected (N, C, H, W)")
    if rois.ndim != 2 or rois.shape[1] != 4:
        raise ShapeError(f"input 'rois' has shape {list(rois.shape)}, expected (num_rois, 4)")
    batch = np.asarray(batch_indices).reshape(-1).astype(np.intp)
    if batch.shape[0] != rois.shape[0]:
        raise ShapeError(
            f"input 'batch_indices' has {batch.shape[0]} values, expected {rois.shape[0]} "
            "(one per ROI)"
        )
    if batch.size and (batch.min() < 0 or batch.max() >= x_shape[0]):
        raise ShapeError(f"input 'batch_indices' has values outside [0, {x_shape[0]})")
    if output_height < 1 or output_width < 1:
        raise SchemaError(
            f"output_height={output_height}, output_width={output_width} must be >= 1"
        )
    shape = check_numel((rois.shape[0], x_shape[1], output_height, output_width), "RoiAlign output")
    half_pixel = coordinate_transformation_mode == "half_pixel"
    boxes = rois.astype(np.float64) * float(spatial_scale) - (0.5 if half_pixel else 0.0)
    start = boxes[:, [1, 0]]  # (h, w)
    size = boxes[:, [3, 2]] - start
    if not half_pixel:
        size = np.maximum(size, 1.0)
    out_hw = np.array([output_height, output_width])
    if sampling_ratio > 0:
        grid = np.full_like(batch, sampling_ratio, shape=(len(batch), 2))
    else:
        grid = np.maximum(np.ceil(size / out_hw), 0).astype(np.intp)
    return RoiPlan(batch, start, size / out_hw, grid, (output_height, output_width), shape)


@kernel("RoiAlign")
def roi_align_cpu(
    x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, **attrs
) -> tuple[np.ndarray]:
    """Attributes as in the schema; see plan_roi_align."""
    plan = plan_roi_align(x.shape, rois, batch_indices, **attrs)
    y = np.zeros(plan.shape, x.dtype)
    if y.size == 0:
        return (y,)
    work = np.result_type(x.dtype, np.float32).type
    xw = x.astype(work, copy=False)
    for m, g in plan.chunks(x.shape[1]):
        taps = plan.taps(m, g, x.shape[2:])
        pooled = _pool_group(xw, plan.batch[m], taps, max(g[0] * g[1], 1), attrs["mode"], work)
        y[m] = pooled.astype(x.dtype, copy=False)
    return (y,)


def _corners(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
    """(S, 4) boxes as (y_min, x_min, y_max, x_max)."""
    if center_point_box:
        xc, yc, w, h = boxes.T
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=1)
    y1, x1, y2, x2 = boxes.T
    return np.stack(
        [np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)], axis=1
    )


def _scalar(a, name, default, kind):
    if a is None or np.asarray(a).size == 0:
        return default
    a = np.asarray(a)
    if a.size != 1:
        raise ShapeError(f"input {name!r} has shape {list(a.shape)}, expected a single value")
    return kind(a.reshape(-1)[0])


@kernel("NonMaxSuppression")
def non_max_suppression_cpu(
    boxes,
    scores,
    max_output_boxes_per_class=None,
    iou_threshold=None,
    score_threshold=None,
    *,
    center_point_box,
) -> tuple[np.ndarray]:
    if boxes.ndim != 3 or boxes.shape[2] != 4:
        raise ShapeError(
            f"input 'boxes' has shape {list(boxes.shape)}, expected (batches, boxes, 4)"
        )
    if scores.ndim != 3 or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise ShapeError(
            f"input 'scores' has shape {list(scores.shape)}, expected ({boxes.shape[0]}, "
            f"classes, {boxes.shape[1]}) for boxes of shape {list(boxes.shape)}"
        )
    limit = max(_scalar(max_output_boxes_per_class, "max_output_boxes_per_class", 0, int), 0)
    ftype = boxes.dtype.type
    iou_t = ftype(_scalar(iou_threshold, "iou_threshold", 0.0, float))
    score_t = _scalar(score_threshold, "score_threshold", None, float)
    picked: list[tuple[int, int, int]] = []
    if limit == 0:
        return (np.zeros((0, 3), np.int64),)
    for b in range(boxes.shape[0]):
        corners = _corners(boxes[b], center_point_box)
        areas = (corners[:, 2] - corners[:, 0]) * (corners[:, 3] - corners[:, 1])
        for c in range(scores.shape[1]):
            s = scores[b, c]
            cand = np.arange(s.shape[0])
            if score_t is not None:
                cand = cand[s > s.dtype.type(score_t)]
            cand = cand[np.argsort(-s[cand], kind="stable")]
            for taken in range(limit):
                if cand.size == 0:
                    break
                top, cand = cand[0], cand[1:]
                picked.append((b, c, int(top)))
                if taken + 1 == limit or cand.size == 0:
                    break
                cand = cand[~_suppressed(corners, areas, top, cand, iou_t)]
    return (np.array(picked, np.int64).reshape(-1, 3),)


def _suppressed(corners, areas, top, cand, iou_t) -> np.ndarray:
    """IoU(top, cand) > iou_t, False where the boxes do not overlap or have no area."""
    a, o = corners[top], corners[cand]
    ih = np.minimum(a[2], o[:, 2]) - np.maximum(a[0], o[:, 0])
    iw = np.minimum(a[3], o[:, 3]) - np.maximum(a[1], o[:, 1])
    overlap = (ih > 0) & (iw > 0)
    inter = np.where(overlap, ih * iw, 0)
    union = areas[top] + areas[cand] - inter
    valid = overlap & (areas[top] > 0) & (areas[cand] > 0) & (union > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / np.where(union > 0, union, 1)
    return valid & (iou > iou_t)
