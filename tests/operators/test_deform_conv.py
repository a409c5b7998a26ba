"""DeformConv against a loop-based NumPy reference, and against Conv when offsets are zero."""

import itertools
import math

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op


def sample_zero_padded(img, point):
    """N-linear interpolation of img at a (fractional) point; zero outside."""
    base = [math.floor(p) for p in point]
    total = 0.0
    for corner in itertools.product((0, 1), repeat=len(point)):
        idx = [b + c for b, c in zip(base, corner)]
        if all(0 <= i < n for i, n in zip(idx, img.shape)):
            w = math.prod(1 - abs(p - i) for p, i in zip(point, idx))
            total += w * img[tuple(idx)]
    return total


def deform_conv_ref(
    x,
    w,
    offset,
    b=None,
    mask=None,
    *,
    strides=None,
    pads=None,
    dilations=None,
    group=1,
    offset_group=1,
):
    n, c, *spatial = x.shape
    m, cg, *ks = w.shape
    r = len(ks)
    strides, dilations = strides or [1] * r, dilations or [1] * r
    pads = pads or [0] * (2 * r)
    out = offset.shape[2:]
    k_count = math.prod(ks)
    off = offset.reshape(n, offset_group, k_count, r, *out)
    msk = (
        np.ones((n, offset_group, k_count, *out))
        if mask is None
        else mask.reshape(n, offset_group, k_count, *out)
    )
    y = np.zeros((n, m, *out))
    for bi, mi, o in itertools.product(range(n), range(m), np.ndindex(*out)):
        g = mi // (m // group)
        for ci in range(g * cg, (g + 1) * cg):
            og = ci // (c // offset_group)
            for kk, k in enumerate(np.ndindex(*ks)):
                point = [
                    o[d] * strides[d] - pads[d] + k[d] * dilations[d] + off[(bi, og, kk, d, *o)]
                    for d in range(r)
                ]
                v = sample_zero_padded(x[bi, ci].astype(np.float64), point)
                y[(bi, mi, *o)] += w[(mi, ci - g * cg, *k)] * msk[(bi, og, kk, *o)] * v
        if b is not None:
            y[(bi, mi, *o)] += b[mi]
    return (y.astype(x.dtype),)


def out_dims(spatial, ks, strides, pads, dilations):
    r = len(ks)
    return [
        (spatial[d] + pads[d] + pads[d + r] - (ks[d] - 1) * dilations[d] - 1) // strides[d] + 1
        for d in range(r)
    ]


CASES = {
    "2d_basic": ((1, 2, 4, 5), (3, 2, 2, 2), {}),
    "2d_groups_offset_groups": (
        (2, 4, 5, 5),
        (4, 2, 3, 2),
        dict(group=2, offset_group=2, strides=[2, 1], pads=[1, 0, 1, 1], dilations=[1, 2]),
    ),
    "2d_offset_groups": ((1, 6, 4, 4), (2, 6, 2, 2), dict(offset_group=3, pads=[1, 1, 0, 0])),
    "1d": ((2, 2, 7), (3, 2, 3), dict(strides=[2], dilations=[2], pads=[1, 2])),
    "3d": ((1, 2, 3, 3, 4), (2, 2, 2, 2, 2), dict(pads=[0, 1, 0, 0, 0, 1])),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("with_mask_bias", [False, True])
def test_deform_conv(case, with_mask_bias):
    x_shape, w_shape, attrs = CASES[case]
    r = len(w_shape) - 2
    ks = list(w_shape[2:])
    out = out_dims(
        x_shape[2:],
        ks,
        attrs.get("strides", [1] * r),
        attrs.get("pads", [0] * 2 * r),
        attrs.get("dilations", [1] * r),
    )
    og = attrs.get("offset_group", 1)
    k_count = math.prod(ks)
    x, w = rand(*x_shape, seed=1), rand(*w_shape, seed=2)
    offset = rand(x_shape[0], og * k_count * r, *out, seed=3, low=-1.5, high=1.5)
    inputs = [x, w, offset]
    if with_mask_bias:
        inputs += [rand(w_shape[0], seed=4), rand(x_shape[0], og * k_count, *out, seed=5, low=0)]
    check_op(
        "DeformConv",
        inputs,
        lambda *a: deform_conv_ref(*a, **attrs),
        kernel_shape=ks,
        **attrs,
        atol=1e-5,
    )


def test_zero_offsets_match_conv():
    x, w = rand(2, 4, 6, 5, seed=6), rand(6, 2, 3, 3, seed=7)
    attrs = dict(group=2, strides=[1, 2], pads=[1, 1, 0, 1])
    expected = run_op("Conv", [x, w], **attrs)[0]
    offset = np.zeros((2, 18, *expected.shape[2:]), np.float32)
    check_op("DeformConv", [x, w, offset], lambda *_: (expected,), **attrs)


def test_deform_conv_errors():
    x, w = rand(1, 2, 4, 4), rand(3, 2, 2, 2)
    with pytest.raises(OperatorError, match=r"'offset' has shape \[1, 4, 3, 3\], expected \[1, 8"):
        run_op("DeformConv", [x, w, rand(1, 4, 3, 3)])
    with pytest.raises(OperatorError, match="do not divide into offset_group=3"):
        run_op("DeformConv", [x, w, rand(1, 24, 3, 3)], offset_group=3)
    with pytest.raises(OperatorError, match=r"'mask' has shape \[1, 3, 3, 3\], expected"):
        run_op("DeformConv", [x, w, rand(1, 8, 3, 3), None, rand(1, 3, 3, 3)])
