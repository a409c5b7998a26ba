"""Resize against a loop-based NumPy reference: one output sample at a time, axis by axis."""

import math

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op


def source(y, n_in, n_out, scale, coord, roi):
    length = scale * n_in
    if coord == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if coord == "half_pixel_symmetric":
        return n_in / 2 * (1 - n_out / length) + (y + 0.5) / scale - 0.5
    if coord == "pytorch_half_pixel":
        return (y + 0.5) / scale - 0.5 if length > 1 else 0.0
    if coord == "align_corners":
        return y * (n_in - 1) / (length - 1) if length != 1 else 0.0
    if coord == "asymmetric":
        return y / scale
    start, end = roi
    if length != 1:
        return start * (n_in - 1) + y * (end - start) * (n_in - 1) / (length - 1)
    return 0.5 * (start + end) * (n_in - 1)


def kernel_value(t, mode, a):
    t = abs(t)
    if mode == "linear":
        return max(0.0, 1 - t)
    if t <= 1:
        return (a + 2) * t**3 - (a + 3) * t**2 + 1
    return a * t**3 - 5 * a * t**2 + 8 * a * t - 4 * a if t < 2 else 0.0


def resize_line(v, n_out, scale, p, roi):
    """One 1-D line resized; p holds the attributes. Returns (values, extrapolated flags)."""
    n_in = len(v)
    out, flags = [], []
    for y in range(n_out):
        x = source(y, n_in, n_out, scale, p["coord"], roi)
        flags.append(p["coord"] == "tf_crop_and_resize" and not 0 <= x <= n_in - 1)
        if p["mode"] == "nearest":
            frac = x - math.floor(x)
            up = {
                "round_prefer_floor": frac > 0.5,
                "round_prefer_ceil": frac >= 0.5,
                "floor": False,
                "ceil": frac > 0,
            }[p["nearest_mode"]]
            i = math.floor(x) + (1 if up else 0)
            out.append(v[min(max(i, 0), n_in - 1)])
            continue
        s = min(scale, 1.0) if p["antialias"] else 1.0
        reach = (1 if p["mode"] == "linear" else 2) / s
        taps = [i for i in range(math.floor(x - reach), math.ceil(x + reach) + 1)]
        ws = [kernel_value((i - x) * s, p["mode"], p["a"]) for i in taps]
        if p["antialias"]:
            ws = [w / sum(ws) for w in ws]
        if p["exclude"]:
            ws = [w if 0 <= i < n_in else 0.0 for i, w in zip(taps, ws)]
            ws = [w / sum(ws) for w in ws]
        out.append(sum(w * v[min(max(i, 0), n_in - 1)] for i, w in zip(taps, ws)))
    return out, flags


def resize_ref(
    x,
    outs,
    scales,
    axes,
    roi=None,
    mode="nearest",
    coord="half_pixel",
    nearest_mode="round_prefer_floor",
    a=-0.75,
    exclude=0,
    antialias=0,
    extra=0.0,
):
    p = dict(mode=mode, coord=coord, nearest_mode=nearest_mode, a=a, exclude=exclude)
    p["antialias"] = antialias
    y = x.astype(np.float64)
    outside = np.zeros(x.shape, bool)
    for k, axis in enumerate(axes):
        span = None if roi is None else (float(roi[k]), float(roi[k + len(axes)]))
        moved = np.moveaxis(y, axis, -1)
        lines = moved.reshape(-1, moved.shape[-1])
        res = [resize_line(list(line), outs[k], scales[k], p, span) for line in lines]
        vals = np.array([r[0] for r in res]).reshape(*moved.shape[:-1], outs[k])
        flags = np.array(res[0][1] if res else [False] * outs[k], bool)
        y = np.moveaxis(vals, -1, axis)
        outside = np.moveaxis(np.moveaxis(outside, axis, -1)[..., :1].repeat(outs[k], -1), -1, axis)
        outside |= flags.reshape((-1,) + (1,) * (x.ndim - axis - 1))
    return np.where(outside, extra, y).astype(x.dtype)


X = rand(2, 3, 5, 6, seed=1)
COORDS = [
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
]


@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize(
    "nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
)
def test_nearest_scales(coord, nearest_mode):
    scales = np.array([1, 1, 1.5, 0.7], np.float32)
    outs = [math.floor(n * float(s)) for n, s in zip(X.shape[2:], scales[2:])]
    check_op(
        "Resize",
        [X, None, scales],
        lambda *_: (
            resize_ref(
                X,
                outs,
                [float(s) for s in scales[2:]],
                [2, 3],
                coord=coord,
                nearest_mode=nearest_mode,
            ),
        ),
        mode="nearest",
        coordinate_transformation_mode=coord,
        nearest_mode=nearest_mode,
    )


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize(
    "flags", [(0, 0), (1, 0), (0, 1), (1, 1)], ids=["plain", "exclude", "antialias", "both"]
)
def test_linear_cubic_sizes(mode, coord, flags):
    exclude, antialias = flags
    sizes = np.array([2, 3, 9, 4], np.int64)
    ref = resize_ref(
        X,
        [9, 4],
        [9 / 5, 4 / 6],
        [2, 3],
        mode=mode,
        coord=coord,
        a=-0.5,
        exclude=exclude,
        antialias=antialias,
    )
    check_op(
        "Resize",
        [X, None, None, sizes],
        lambda *_: (ref,),
        mode=mode,
        coordinate_transformation_mode=coord,
        cubic_coeff_a=-0.5,
        exclude_outside=exclude,
        antialias=antialias,
    )


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_tf_crop_and_resize_with_axes(mode):
    roi = np.array([0.6, 0.1, 1.3, 0.9], np.float32)  # axes (3, 2): starts then ends
    sizes = np.array([4, 3], np.int64)
    ref = resize_ref(
        X, [4, 3], [4 / 6, 3 / 5], [3, 2], roi=roi, mode=mode, coord="tf_crop_and_resize", extra=7.0
    )
    got = check_op(
        "Resize",
        [X, roi, None, sizes],
        lambda *_: (ref,),
        mode=mode,
        axes=[3, 2],
        coordinate_transformation_mode="tf_crop_and_resize",
        extrapolation_value=7.0,
    )[0]
    assert (got[..., -1] == 7.0).any()


@pytest.mark.parametrize(
    "policy, want", [("stretch", (7, 8)), ("not_larger", (7, 7)), ("not_smaller", (8, 8))]
)
def test_keep_aspect_ratio_policy(policy, want):
    x = rand(1, 1, 4, 4)
    got = run_op(
        "Resize", [x, None, None, np.array([7, 8])], axes=[-2, -1], keep_aspect_ratio_policy=policy
    )[0]
    assert got.shape == (1, 1, *want)


def test_integer_input_rounds_and_saturates():
    x = np.array([[0, 200, 255, 10]], np.uint8)
    scales = np.array([1, 1.75], np.float32)
    expect = np.clip(
        np.rint(resize_ref(x.astype(np.float64), [7], [1.75], [1], mode="cubic")), 0, 255
    )
    assert expect.max() == 255 and expect.min() == 0  # cubic overshoots on both sides
    check_op("Resize", [x, None, scales], lambda *_: (expect.astype(np.uint8),), mode="cubic")


def test_nearest_keeps_any_dtype():
    x = np.array([["a", "b"], ["c", "d"]])
    got = run_op("Resize", [x, None, np.array([1.0, 2.0], np.float32)])[0]
    assert got.tolist() == [["a", "a", "b", "b"], ["c", "c", "d", "d"]]


def test_identity_and_empty():
    check_op("Resize", [X, None, np.ones(4, np.float32)], lambda x, *_: (x,), mode="cubic")
    got = run_op("Resize", [X, None, np.array([1, 1, 0.1, 1], np.float32)])[0]
    assert got.shape == (2, 3, 0, 6)


@pytest.mark.parametrize(
    "inputs, attrs, message",
    [
        ([X, None, np.ones(4, np.float32), np.ones(4, np.int64)], {}, "exactly one of"),
        ([X, None, None, None], {}, "exactly one of"),
        ([X, None, np.ones(3, np.float32)], {}, r"'scales' has 3 values, expected 4"),
        ([X, None, np.array([1, 1, 0, 1], np.float32)], {}, "must be > 0"),
        (
            [X, None, None, np.ones(4, np.int64)],
            {"coordinate_transformation_mode": "tf_crop_and_resize"},
            "input 'roi' has none",
        ),
        ([X, None, np.ones(4, np.float32)], {"mode": "bicubic"}, "not one of nearest"),
        ([X, None, np.ones(2, np.float32)], {"axes": [1, 1]}, "repeats an axis"),
        ([X, None, np.ones(1, np.float32)], {"axes": [4]}, "out of range"),
    ],
)
def test_errors(inputs, attrs, message):
    with pytest.raises(OperatorError, match=message):
        run_op("Resize", inputs, **attrs)


def test_output_size_limit(monkeypatch):
    from netbrew.operators import limits

    monkeypatch.setattr(limits, "MAX_ELEMENTS", 100)
    with pytest.raises(OperatorError, match="over the limit"):
        run_op("Resize", [X, None, np.array([1, 1, 10, 10], np.float32)])
