"""Conv against a direct, loop-based NumPy convolution written here."""

import math

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand


def same_pads(in_shape, span, strides, auto_pad):
    """ONNX SAME_*: out = ceil(in / stride); the odd pixel at the end for SAME_UPPER."""
    total = [max(0, (math.ceil(i / s) - 1) * s + k - i) for i, k, s in zip(in_shape, span, strides)]
    begin = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
    return begin + [t - b for t, b in zip(total, begin)]


def conv_ref(x, w, b=None, *, auto_pad="NOTSET", dilations=None, group=1, pads=None, strides=None):
    n = x.ndim - 2
    strides = strides or [1] * n
    dilations = dilations or [1] * n
    span = [(k - 1) * d + 1 for k, d in zip(w.shape[2:], dilations)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = same_pads(x.shape[2:], span, strides, auto_pad)
    elif auto_pad == "VALID" or pads is None:
        pads = [0] * (2 * n)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + n]) for i in range(n)])
    out = [(xp.shape[2 + i] - span[i]) // strides[i] + 1 for i in range(n)]
    m, cg = w.shape[0], w.shape[1]
    mg = m // group
    y = np.zeros((x.shape[0], m, *out), dtype=x.dtype)
    axes = list(range(1, n + 2))
    for o in np.ndindex(*out):
        window = tuple(
            slice(o[i] * strides[i], o[i] * strides[i] + span[i], dilations[i]) for i in range(n)
        )
        patch = xp[(slice(None), slice(None), *window)]  # (N, C, k1..kn)
        for g in range(group):
            wg = w[g * mg : (g + 1) * mg]
            value = np.tensordot(patch[:, g * cg : (g + 1) * cg], wg, axes=(axes, axes))
            y[(slice(None), slice(g * mg, (g + 1) * mg), *o)] = value
    if b is not None:
        y += b.reshape(m, *(1,) * n)
    return (y,)


# (X shape, W shape, attrs): every rank, groups, depthwise, dilation, stride, pads, auto_pad.
CASES = {
    "1d": ((2, 3, 9), (4, 3, 3), {}),
    "1d_stride_dilation_pads": (
        (2, 3, 11),
        (4, 3, 3),
        dict(strides=[2], dilations=[2], pads=[2, 1]),
    ),
    "2d": ((2, 3, 6, 7), (5, 3, 3, 3), {}),
    "2d_asymmetric_pads": ((1, 3, 6, 7), (4, 3, 3, 2), dict(pads=[1, 0, 2, 3])),
    "2d_stride": ((2, 3, 7, 8), (4, 3, 3, 3), dict(strides=[2, 3], pads=[1, 1, 1, 1])),
    "2d_dilation": ((1, 2, 9, 8), (3, 2, 3, 2), dict(dilations=[2, 3])),
    "2d_groups": ((2, 6, 5, 6), (4, 3, 3, 3), dict(group=2, pads=[1, 1, 1, 1])),
    "2d_depthwise": ((2, 4, 6, 6), (8, 1, 3, 3), dict(group=4, strides=[2, 1], pads=[1, 1, 1, 1])),
    "2d_same_upper": ((1, 3, 7, 8), (4, 3, 3, 2), dict(auto_pad="SAME_UPPER", strides=[2, 3])),
    "2d_same_lower": ((1, 3, 7, 8), (4, 3, 2, 3), dict(auto_pad="SAME_LOWER", strides=[2, 2])),
    "2d_same_dilated": ((1, 2, 7, 6), (3, 2, 3, 3), dict(auto_pad="SAME_LOWER", dilations=[2, 1])),
    "2d_valid": ((2, 3, 7, 8), (4, 3, 3, 2), dict(auto_pad="VALID", strides=[2, 2])),
    "2d_notset": ((1, 3, 5, 5), (2, 3, 3, 3), dict(auto_pad="NOTSET", pads=[0, 1, 1, 0])),
    "2d_1x1": ((2, 6, 5, 4), (3, 6, 1, 1), {}),
    "2d_1x1_grouped_strided": ((2, 6, 5, 4), (4, 3, 1, 1), dict(group=2, strides=[2, 2])),
    "3d": ((1, 2, 4, 5, 4), (3, 2, 2, 3, 2), dict(strides=[1, 2, 1], pads=[0, 1, 1, 1, 0, 1])),
    "3d_depthwise_dilated": ((1, 3, 5, 5, 5), (3, 1, 2, 2, 2), dict(group=3, dilations=[2, 1, 2])),
    "3d_same_upper": (
        (1, 2, 5, 4, 3),
        (2, 2, 3, 3, 3),
        dict(auto_pad="SAME_UPPER", strides=[2, 1, 2]),
    ),
}


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", list(CASES))
def test_conv(case, dtype, bias):
    x_shape, w_shape, attrs = CASES[case]
    x, w = rand(*x_shape, dtype=dtype, seed=1), rand(*w_shape, dtype=dtype, seed=2)
    b = rand(w_shape[0], dtype=dtype, seed=3) if bias else None
    check_op(
        "Conv",
        [x, w, b],
        reference=lambda x, w, b: conv_ref(x, w, b, **attrs),
        atol=1e-5 if dtype == np.float64 else 1e-4,
        **attrs,
    )


def test_conv_kernel_shape_attribute():
    x, w = rand(1, 2, 5, 5), rand(3, 2, 3, 2, seed=1)
    check_op("Conv", [x, w], reference=lambda x, w: conv_ref(x, w), kernel_shape=[3, 2], atol=1e-4)


def test_conv_rank_mismatch():
    with pytest.raises(OperatorError, match=r"3 dims, expected 4 \(N, C, H, W\)"):
        check_op("Conv", [rand(1, 3, 5), rand(2, 3, 3, 3)], reference=lambda x, w: (x,))


def test_conv_channel_mismatch():
    with pytest.raises(OperatorError, match=r"X has C=5 channels but W expects group\*C_in = 3"):
        check_op("Conv", [rand(1, 5, 5, 5), rand(2, 3, 3, 3)], reference=lambda x, w: (x,))


@pytest.mark.parametrize(
    "w_shape, attrs, message",
    [
        ((2, 3, 3, 3), dict(pads=[1, 1]), "'pads' has 2 values"),
        ((2, 3, 3, 3), dict(auto_pad="SAME"), "auto_pad='SAME' is not one of"),
        ((2, 3, 3, 3), dict(strides=[1, 1, 1]), "'strides' has 3 values"),
        ((2, 3, 7, 3), {}, "smaller than the window span 7"),
        ((2, 3, 3, 3), dict(kernel_shape=[2, 2]), "does not match the spatial dims"),
        ((4, 1, 3, 3), dict(group=3), "4 output channels do not divide into group=3"),
    ],
)
def test_conv_bad_arguments(w_shape, attrs, message):
    with pytest.raises(OperatorError, match=message):
        check_op("Conv", [rand(1, 3, 5, 5), rand(*w_shape)], reference=lambda x, w: (x,), **attrs)


def test_conv_bias_shape():
    with pytest.raises(OperatorError, match=r"input B has shape \[3\], expected \[2\]"):
        check_op(
            "Conv", [rand(1, 3, 5, 5), rand(2, 3, 3, 3), rand(3)], reference=lambda x, w, b: (x,)
        )
