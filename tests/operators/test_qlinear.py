"""MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv against int64 NumPy loops."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op


def ints(*shape, dtype=np.uint8, seed=0):
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, shape).astype(dtype)


def conv2d_ref(x, w, pads=(0, 0, 0, 0), strides=(1, 1), group=1):
    """Direct int64 grouped 2-D convolution."""
    x = np.pad(x.astype(np.int64), [(0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])])
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    oh, ow = (h - kh) // strides[0] + 1, (wd - kw) // strides[1] + 1
    y = np.zeros((n, m, oh, ow), np.int64)
    for b, o, i, j in np.ndindex(n, m, oh, ow):
        g = o // (m // group)
        patch = x[b, g * cg : (g + 1) * cg, i * strides[0] : i * strides[0] + kh,
                  j * strides[1] : j * strides[1] + kw]  # fmt: skip
        y[b, o, i, j] = np.sum(patch * w[o].astype(np.int64))
    return y


def requantize(acc, scale, zp, dtype):
    info = np.iinfo(dtype)
    return np.clip(np.round(acc * scale) + zp.astype(np.int64), info.min, info.max).astype(dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("per_row", [False, True])
def test_matmul_integer(dtype, per_row):
    a, b = ints(2, 3, 4, dtype=dtype, seed=1), ints(4, 5, dtype=dtype, seed=2)
    azp = ints(3, dtype=dtype, seed=3) if per_row else ints(dtype=dtype, seed=3)
    bzp = ints(5, dtype=dtype, seed=4) if per_row else ints(dtype=dtype, seed=4)

    def ref(a, b, azp, bzp):
        az = azp.astype(np.int64).reshape(-1, 1) if per_row else azp.astype(np.int64)
        return (((a.astype(np.int64) - az) @ (b.astype(np.int64) - bzp)).astype(np.int32),)

    check_op("MatMulInteger", [a, b, azp, bzp], ref)
    check_op("MatMulInteger", [a, b], lambda a, b: ((a.astype(np.int32) @ b),))


CONV_CASES = {
    "plain": (dict(), 1),
    "pads_strides": (dict(pads=[1, 0, 1, 2], strides=[2, 1]), 1),
    "groups": (dict(group=2), 2),
}


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_integer(case):
    attrs, group = CONV_CASES[case]
    x, w = ints(2, 4, 5, 5, seed=1), ints(6, 4 // group, 3, 2, seed=2)
    xzp, wzp = np.uint8(100), ints(6, seed=3)

    def ref(x, w, xzp, wzp):
        wv = w.astype(np.int64) - wzp.astype(np.int64).reshape(6, 1, 1, 1)
        xv = x.astype(np.int64) - int(xzp)
        return conv2d_ref(xv, wv, attrs.get("pads", (0,) * 4), attrs.get("strides", (1, 1)),
                          group).astype(np.int32),  # fmt: skip

    check_op("ConvInteger", [x, w, xzp, wzp], ref, **attrs)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("scale_dtype", [np.float32, np.float16])
def test_qlinear_matmul(dtype, scale_dtype):
    a, b = ints(2, 3, 4, dtype=dtype, seed=5), ints(2, 4, 3, dtype=dtype, seed=6)
    sa, sb, sy = (np.array([v], scale_dtype) for v in (0.0066, 0.00705, 0.0107))
    za, zb, zy = (ints(1, dtype=dtype, seed=s) for s in (7, 8, 9))

    def ref(a, sa, za, b, sb, zb, sy, zy):
        acc = (a.astype(np.int64) - za.astype(np.int64)) @ (b.astype(np.int64) - zb)
        scale = np.float64(sa[0]) * np.float64(sb[0]) / np.float64(sy[0])
        return (requantize(acc, scale, zy, dtype),)

    check_op("QLinearMatMul", [a, sa, za, b, sb, zb, sy, zy], ref)


def test_qlinear_matmul_per_row_and_column():
    a, b = ints(3, 4, seed=1), ints(4, 2, seed=2)
    sa, za = np.array([0.1, 0.2, 0.3], np.float32), np.array([1, 2, 3], np.uint8)
    sb, zb = np.array([0.05, 0.5], np.float32), np.array([7, 9], np.uint8)
    sy, zy = np.float32(2.0), np.uint8(10)

    def ref(*_):
        acc = (a.astype(np.int64) - za.reshape(3, 1)) @ (b.astype(np.int64) - zb)
        scale = sa.astype(np.float64).reshape(3, 1) * sb.astype(np.float64) / np.float64(sy)
        return (requantize(acc, scale, zy, np.uint8),)

    check_op("QLinearMatMul", [a, sa, za, b, sb, zb, sy, zy], ref)


@pytest.mark.parametrize("out_dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv(out_dtype, per_channel):
    x, w = ints(1, 2, 6, 5, seed=1), ints(3, 2, 2, 2, dtype=np.int8, seed=2)
    sx, zx = np.float32(0.02), np.uint8(120)
    sw = np.array([0.01, 0.03, 0.02], np.float32) if per_channel else np.float32(0.01)
    zw = np.array([1, -2, 0], np.int8) if per_channel else np.int8(3)
    sy, zy = np.float32(0.5), np.zeros((), out_dtype)
    bias = np.array([100, -2000, 7], np.int32)

    def ref(*_):
        wv = w.astype(np.int64) - zw.astype(np.int64).reshape(-1, 1, 1, 1)
        acc = conv2d_ref(x.astype(np.int64) - int(zx), wv, (1, 1, 0, 0))
        acc += bias.reshape(1, 3, 1, 1)
        scale = np.float64(sx) * sw.astype(np.float64).reshape(-1, 1, 1) / np.float64(sy)
        return (requantize(acc, scale, zy, out_dtype),)

    check_op("QLinearConv", [x, sx, zx, w, sw, zw, sy, zy, bias], ref, pads=[1, 1, 0, 0])


@pytest.mark.parametrize(
    "op, inputs, match",
    [
        ("MatMulInteger", [ints(2, 3), ints(4, 2)], "inner dims"),
        ("MatMulInteger", [ints(2, 3), ints(3, 2), np.int8(0)], "a_zero_point has dtype"),
        ("MatMulInteger", [ints(2, 3).astype(np.int32), ints(3, 2)], "quantized type"),
        ("ConvInteger", [ints(1, 2, 4, 4), ints(3, 2, 2, 2), None, ints(2)], "w_zero_point"),
        (
            "QLinearMatMul",
            [
                ints(2, 3),
                np.float32(1),
                np.uint8(0),
                ints(3, 2),
                np.float32(1),
                np.uint8(0),
                np.float32(1),
                np.int32(0),
            ],
            "y_zero_point",
        ),  # fmt: skip
    ],
)
def test_errors(op, inputs, match):
    with pytest.raises(OperatorError, match=match):
        check_op(op, inputs, lambda *a: (a[0],))
