"""ConvTranspose against a loop-based NumPy scatter written here."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand


def conv_transpose_ref(
    x,
    w,
    b=None,
    *,
    auto_pad="NOTSET",
    dilations=None,
    group=1,
    output_padding=None,
    output_shape=None,
    pads=None,
    strides=None,
):
    n = x.ndim - 2
    strides = strides or [1] * n
    dilations = dilations or [1] * n
    output_padding = output_padding or [0] * n
    span = [(k - 1) * d + 1 for k, d in zip(w.shape[2:], dilations)]
    full = [s * (i - 1) + p + k for s, i, p, k in zip(strides, x.shape[2:], output_padding, span)]
    if output_shape is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        output_shape = [i * s for i, s in zip(x.shape[2:], strides)]
    if output_shape is not None:  # ONNX: the odd pixel of padding at the end for SAME_UPPER
        total = [f - o for f, o in zip(full, output_shape)]
        begin = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
        out = list(output_shape)
    else:
        pads = pads if pads is not None and auto_pad == "NOTSET" else [0] * (2 * n)
        begin = pads[:n]
        out = [f - pads[i] - pads[i + n] for i, f in enumerate(full)]
    low = [min(0, bg) for bg in begin]  # the canvas also covers output beyond the full size
    size = [max(f, bg + o) - lo for f, bg, o, lo in zip(full, begin, out, low)]
    cg, mg = x.shape[1] // group, w.shape[1]
    canvas = np.zeros((x.shape[0], mg * group, *size), dtype=x.dtype)
    for i in np.ndindex(*x.shape[2:]):
        patch = tuple(
            slice(i[a] * strides[a] - low[a], i[a] * strides[a] - low[a] + span[a], dilations[a])
            for a in range(n)
        )
        for g in range(group):
            pixel = x[(slice(None), slice(g * cg, (g + 1) * cg), *i)]  # (N, C/group)
            contribution = np.tensordot(pixel, w[g * cg : (g + 1) * cg], axes=1)
            canvas[(slice(None), slice(g * mg, (g + 1) * mg), *patch)] += contribution
    crop = tuple(slice(bg - lo, bg - lo + o) for bg, lo, o in zip(begin, low, out))
    y = canvas[(slice(None), slice(None), *crop)]
    if b is not None:
        y = y + b.reshape(-1, *(1,) * n)
    return (y,)


# (X shape, W shape, attrs); W is (C, M/group, k1..kn).
CASES = {
    "1d": ((2, 3, 5), (3, 2, 3), {}),
    "1d_stride_pads": ((1, 2, 5), (2, 3, 3), dict(strides=[2], pads=[1, 2])),
    "2d": ((2, 3, 4, 5), (3, 2, 3, 3), {}),
    "2d_stride_asymmetric_pads": (
        (2, 3, 4, 5),
        (3, 2, 3, 2),
        dict(strides=[2, 3], pads=[1, 0, 0, 1]),
    ),
    "2d_dilation_output_padding": (
        (1, 2, 4, 3),
        (2, 2, 3, 2),
        dict(strides=[2, 1], dilations=[1, 2], output_padding=[1, 1]),
    ),
    "2d_groups": ((2, 4, 4, 5), (4, 3, 3, 2), dict(group=2, strides=[2, 1], dilations=[1, 2])),
    "2d_depthwise": ((1, 4, 3, 3), (4, 1, 3, 3), dict(group=4, strides=[2, 2], pads=[1, 1, 0, 0])),
    "2d_output_shape": ((1, 1, 3, 3), (1, 2, 3, 3), dict(strides=[3, 2], output_shape=[10, 8])),
    "2d_output_shape_crop": ((1, 2, 4, 4), (2, 2, 3, 3), dict(strides=[2, 2], output_shape=[7, 8])),
    "2d_output_shape_upper": (
        (1, 2, 4, 4),
        (2, 2, 3, 3),
        dict(strides=[2, 2], output_shape=[6, 7], auto_pad="SAME_UPPER"),
    ),
    "2d_same_upper": ((1, 1, 3, 3), (1, 2, 3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER")),
    "2d_same_lower": ((1, 2, 3, 4), (2, 2, 3, 2), dict(strides=[2, 3], auto_pad="SAME_LOWER")),
    "2d_valid": ((1, 2, 3, 4), (2, 3, 3, 2), dict(strides=[2, 1], auto_pad="VALID")),
    "3d": ((1, 2, 3, 4, 3), (2, 2, 2, 3, 2), dict(strides=[2, 1, 2], pads=[0, 1, 1, 1, 0, 0])),
}


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", list(CASES))
def test_conv_transpose(case, dtype, bias):
    x_shape, w_shape, attrs = CASES[case]
    x, w = rand(*x_shape, dtype=dtype, seed=1), rand(*w_shape, dtype=dtype, seed=2)
    b = rand(w_shape[1] * attrs.get("group", 1), dtype=dtype, seed=3) if bias else None
    check_op(
        "ConvTranspose",
        [x, w, b],
        reference=lambda x, w, b: conv_transpose_ref(x, w, b, **attrs),
        atol=1e-5 if dtype == np.float64 else 1e-4,
        **attrs,
    )


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs, message",
    [
        ((1, 3, 4), (3, 2, 3, 3), {}, r"3 dims, expected 4 \(N, C, H, W\)"),
        ((1, 4, 4, 4), (3, 2, 3, 3), {}, "X has C=4 channels but W expects"),
        ((1, 3, 4, 4), (3, 2, 3, 3), dict(output_padding=[2, 0], strides=[2, 2]), "smaller than"),
        ((1, 3, 4, 4), (3, 2, 3, 3), dict(output_shape=[5]), "'output_shape' has 1 values"),
        ((1, 3, 2, 2), (3, 2, 2, 2), dict(pads=[2, 2, 1, 1]), "crop the whole output"),
    ],
)
def test_conv_transpose_errors(x_shape, w_shape, attrs, message):
    with pytest.raises(OperatorError, match=message):
        check_op(
            "ConvTranspose", [rand(*x_shape), rand(*w_shape)], reference=lambda x, w: (x,), **attrs
        )
