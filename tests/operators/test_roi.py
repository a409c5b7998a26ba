"""RoiAlign and NonMaxSuppression against loop-based NumPy references."""

import math

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op


def bilinear(img, y, x):
    """The four weighted corners of (y, x) (onnxruntime's RoiAlign rules)."""
    h, w = img.shape
    if y < -1 or y > h or x < -1 or x > w:
        return [0.0] * 4
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    if y0 >= h - 1:
        y0 = y1 = h - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= w - 1:
        x0 = x1 = w - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    return [
        (1 - ly) * (1 - lx) * img[y0, x0],
        (1 - ly) * lx * img[y0, x1],
        ly * (1 - lx) * img[y1, x0],
        ly * lx * img[y1, x1],
    ]


def roi_align_ref(
    x,
    rois,
    batch,
    mode="avg",
    coordinate_transformation_mode="half_pixel",
    output_height=1,
    output_width=1,
    sampling_ratio=0,
    spatial_scale=1.0,
):
    half = coordinate_transformation_mode == "half_pixel"
    out = np.zeros((len(rois), x.shape[1], output_height, output_width))
    for r, roi in enumerate(rois.astype(np.float64)):
        x1, y1, x2, y2 = roi * spatial_scale - (0.5 if half else 0.0)
        rh, rw = y2 - y1, x2 - x1
        if not half:
            rh, rw = max(rh, 1.0), max(rw, 1.0)
        bh, bw = rh / output_height, rw / output_width
        gh = sampling_ratio if sampling_ratio > 0 else max(math.ceil(rh / output_height), 0)
        gw = sampling_ratio if sampling_ratio > 0 else max(math.ceil(rw / output_width), 0)
        for c in range(x.shape[1]):
            img = x[batch[r], c].astype(np.float64)
            for ph in range(output_height):
                for pw in range(output_width):
                    vals = []
                    for iy in range(gh):
                        yy = y1 + ph * bh + (iy + 0.5) * bh / gh
                        for ix in range(gw):
                            xx = x1 + pw * bw + (ix + 0.5) * bw / gw
                            corners = bilinear(img, yy, xx)
                            vals.append(sum(corners) if mode == "avg" else max(corners))
                    if vals:
                        total = sum(vals) / max(gh * gw, 1) if mode == "avg" else max(vals)
                        out[r, c, ph, pw] = total
    return out.astype(x.dtype)


X = rand(2, 3, 8, 9, seed=11)
ROIS = np.array(
    [[0, 0, 8, 7], [1.2, 2.5, 6.3, 7.9], [-3, -2, 4, 5], [5, 5, 5.4, 5.2], [2, 3, 20, 15]],
    np.float32,
)
BATCH = np.array([0, 1, 1, 0, 1], np.int64)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
@pytest.mark.parametrize("spatial_scale", [1.0, 0.5])
def test_roi_align(mode, ctm, sampling_ratio, spatial_scale):
    attrs = dict(
        mode=mode,
        coordinate_transformation_mode=ctm,
        output_height=3,
        output_width=2,
        sampling_ratio=sampling_ratio,
        spatial_scale=spatial_scale,
    )
    check_op("RoiAlign", [X, ROIS, BATCH], lambda *a: (roi_align_ref(*a, **attrs),), **attrs)


def test_roi_align_errors():
    with pytest.raises(OperatorError, match=r"'rois' has shape \[5, 3\], expected"):
        run_op("RoiAlign", [X, ROIS[:, :3], BATCH])
    with pytest.raises(OperatorError, match=r"'batch_indices' has values outside \[0, 2\)"):
        run_op("RoiAlign", [X, ROIS, BATCH + 1])


def iou(a, b):
    ay1, ay2 = sorted((a[0], a[2]))
    ax1, ax2 = sorted((a[1], a[3]))
    by1, by2 = sorted((b[0], b[2]))
    bx1, bx2 = sorted((b[1], b[3]))
    ih = min(ay2, by2) - max(ay1, by1)
    iw = min(ax2, bx2) - max(ax1, bx1)
    if ih <= 0 or iw <= 0:
        return 0.0
    inter = ih * iw
    union = (ay2 - ay1) * (ax2 - ax1) + (by2 - by1) * (bx2 - bx1) - inter
    return inter / union if union > 0 else 0.0


def nms_ref(boxes, scores, max_out=None, iou_t=None, score_t=None, center=0):
    limit = 0 if max_out is None else int(max_out[0])
    iou_t = 0.0 if iou_t is None else float(iou_t[0])
    if center:
        xc, yc, w, h = np.moveaxis(boxes, -1, 0)
        boxes = np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], -1)
    rows = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            order = sorted(range(scores.shape[2]), key=lambda i: (-scores[b, c, i], i))
            if score_t is not None:
                order = [i for i in order if scores[b, c, i] > score_t[0]]
            kept = []
            for i in order:
                if len(kept) == limit:
                    break
                if all(iou(boxes[b, i], boxes[b, k]) <= iou_t for k in kept):
                    kept.append(i)
            rows += [(b, c, i) for i in kept]
    return (np.array(rows, np.int64).reshape(-1, 3),)


BOXES = np.array(
    [
        [
            [0, 0, 1, 1],
            [0, 0.1, 1, 1.1],
            [0, -0.1, 1, 0.9],
            [0, 10, 1, 11],
            [1, 10.1, 0, 11.1],
            [0, 100, 1, 101],
        ],
        [[0, 0, 2, 2], [1, 1, 3, 3], [0, 0, 2.1, 2], [5, 5, 6, 6], [5, 5, 6, 6], [0, 0, 0, 0]],
    ],
    np.float32,
)
SCORES = np.array(
    [
        [[0.9, 0.75, 0.6, 0.95, 0.5, 0.3], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]],
        [[0.5, 0.5, 0.7, 0.2, 0.2, 0.9], [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]],
    ],
    np.float32,
)


@pytest.mark.parametrize(
    "extra",
    [
        [np.array([3]), np.array([0.5], np.float32), np.array([0.0], np.float32)],
        [np.array([2]), np.array([0.1], np.float32), np.array([0.4], np.float32)],
        [np.array([10]), np.array([0.5], np.float32)],
        [np.array([10])],
        [],
    ],
    ids=["basic", "score_threshold", "no_score_threshold", "iou_default", "no_output"],
)
@pytest.mark.parametrize("center", [0, 1])
def test_non_max_suppression(extra, center):
    inputs = [BOXES, SCORES, *extra]
    ref = nms_ref(*inputs, center=center)
    got = check_op("NonMaxSuppression", inputs, lambda *_: ref, center_point_box=center)[0]
    assert got.shape[1] == 3


def test_non_max_suppression_errors():
    with pytest.raises(OperatorError, match=r"'scores' has shape \[2, 2, 5\], expected"):
        run_op("NonMaxSuppression", [BOXES, SCORES[:, :, :5]])
