"""QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear against NumPy written here."""

import ml_dtypes
import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op

RANGES = {
    np.dtype(np.uint8): (0, 255),
    np.dtype(np.int8): (-128, 127),
    np.dtype(np.int16): (-32768, 32767),
    np.dtype(np.uint16): (0, 65535),
    np.dtype(ml_dtypes.int4): (-8, 7),
    np.dtype(ml_dtypes.uint4): (0, 15),
    np.dtype(ml_dtypes.int2): (-2, 1),
    np.dtype(ml_dtypes.uint2): (0, 3),
}
ONNX_CODES = {"int8": 3, "uint8": 2, "int4": 22, "float8e4m3fn": 17, "float16": 10}


def broadcast_param(p, shape, axis, block):
    """Scale or zero point expanded to x's shape, by explicit index arithmetic."""
    p = np.asarray(p)
    if p.size == 1:
        return np.broadcast_to(p.reshape(()), shape)
    out = np.empty(shape, p.dtype)
    for idx in np.ndindex(*shape):
        src = list(idx) if block else [idx[axis]]
        if block:
            src[axis] = idx[axis] // block
        out[idx] = p[tuple(src)]
    return out


def quantize_ref(x, scale, zp, dtype, axis=1, block=0):
    s = broadcast_param(scale, x.shape, axis, block).astype(np.float32)
    z = 0 if zp is None else broadcast_param(zp, x.shape, axis, block).astype(np.int64)
    q = np.round(x / s) + z  # np.round rounds half to even
    lo, hi = RANGES[np.dtype(dtype)]
    return np.clip(q, lo, hi).astype(np.int64).astype(dtype)


X = np.array([[0.0, 2.0, 3.0, 1000.0], [-254.0, -1000.0, 2.5, -3.5], [5.0, 7.0, 1.5, -1.5]],
             np.float32)  # fmt: skip
SCALE_AXIS0 = np.array([2.0, 4.0, 0.5], np.float32)
SCALE_BLOCKED = np.array([[1.5, 2.5], [3.0, 4.9], [5.1, 6.9]], np.float32)

# (x, scale, zero point (or a dtype when absent), attrs)
Q_CASES = {
    "per_tensor_uint8": (X, np.float32(2), np.uint8(128), {}),
    "per_tensor_int8_no_zp": (X, np.float32(3), np.int8, {"output_dtype": "INT8"}),
    "default_uint8": (X, np.float32(3), np.uint8, {}),
    "per_axis0_int16": (X, SCALE_AXIS0, np.array([1, -2, 300], np.int16), {"axis": 0}),
    "per_axis_negative": (X.T.copy(), SCALE_AXIS0, np.array([1, 2, 3], np.uint8), {"axis": -1}),
    "blocked_uint16": (
        X,
        SCALE_BLOCKED,
        np.array([[0, 1], [2, 3], [4, 5]], np.uint16),
        {"axis": 1, "block_size": 2},
    ),  # fmt: skip
    "blocked_ragged_int8": (
        X[:, :3],
        SCALE_BLOCKED,
        np.zeros((3, 2), np.int8),
        {"axis": 1, "block_size": 2},
    ),  # fmt: skip
    "int4": (X, SCALE_AXIS0, np.array([1, -1, 0], ml_dtypes.int4), {"axis": 0}),
    "uint4": (X, np.float32(20), np.array([8], ml_dtypes.uint4), {}),
    "int2": (X, np.float32(100), None, {"output_dtype": "INT2"}),
    "uint2": (X, np.float32(100), np.array(1, ml_dtypes.uint2), {}),
}


@pytest.mark.parametrize("case", Q_CASES)
def test_quantize_linear(case):
    x, scale, zp, attrs = Q_CASES[case]
    if zp is None:
        zp_in, dtype = None, np.dtype(ml_dtypes.int2)
    elif isinstance(zp, type):
        zp_in, dtype = None, np.dtype(zp)
    else:
        zp_in, dtype = np.asarray(zp), np.asarray(zp).dtype
    axis, block = attrs.get("axis", 1), attrs.get("block_size", 0)
    ref = quantize_ref(x, scale, zp_in, dtype, axis % x.ndim, block)
    check_op("QuantizeLinear", [x, np.asarray(scale), zp_in], lambda *a: (ref,), **attrs)


@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz"])
def test_quantize_linear_float8(name, saturate):
    dtype = np.dtype(getattr(ml_dtypes, name))
    x = np.array([0.0, 1.0, -3.3, 1e5, -1e6, 0.1], np.float32)
    top = float(ml_dtypes.finfo(dtype).max)
    v = x / np.float32(2)
    want = np.clip(v, -top, top).astype(dtype) if saturate else v.astype(dtype)
    got = run_op("QuantizeLinear", [x, np.float32(2), np.zeros((), dtype)], saturate=saturate)[0]
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))  # NaN bits too


def test_quantize_linear_float4_and_precision():
    dtype = np.dtype(ml_dtypes.float4_e2m1fn)
    x = np.array([0.0, 1.2, -7.0, 100.0], np.float32)
    want = np.clip(x / 2, -6, 6).astype(dtype)
    check_op("QuantizeLinear", [x, np.float32(2), np.zeros(1, dtype)], lambda *a: (want,))
    # precision=FLOAT16 divides in float16, where 1000.7 is 1000.5 and rounds to even
    x = np.array([1000.7, -3.2], np.float32)
    for precision, want in ((10, [1000, -3]), (0, [1001, -3])):
        check_op("QuantizeLinear", [x, np.float32(1), np.int16(0)],
                 lambda *a, w=want: (np.array(w, np.int16),), precision=precision)  # fmt: skip


def dequantize_ref(x, scale, zp, axis=1, block=0, out=None):
    s = broadcast_param(scale, x.shape, axis, block).astype(np.float64)
    z = 0 if zp is None else broadcast_param(zp, x.shape, axis, block).astype(np.float64)
    return ((x.astype(np.float64) - z) * s).astype(out or np.asarray(scale).dtype)


Q8 = np.array([[0, 3, 128, 255], [10, 20, 30, 40], [1, 2, 3, 4]], np.uint8)
D_CASES = {
    "per_tensor": (Q8, np.float32(2), np.uint8(128), {}),
    "no_zero_point_float16_scale": (Q8, np.float16(0.5), None, {}),
    "per_axis0": (Q8, SCALE_AXIS0, np.array([1, 2, 3], np.uint8), {"axis": 0}),
    "blocked": (
        Q8,
        SCALE_BLOCKED,
        np.array([[0, 1], [2, 3], [4, 5]], np.uint8),
        {"axis": 1, "block_size": 2},
    ),  # fmt: skip
    "int32": (np.array([-70000, 5, 1 << 30], np.int32), np.float32(0.5), None, {}),
    "int4_output_dtype": (
        Q8.astype(np.int8).clip(-8, 7).astype(ml_dtypes.int4),
        np.float32(3),
        np.array(-1, ml_dtypes.int4),
        {"output_dtype": "FLOAT16"},
    ),  # fmt: skip
    "float8": (np.array([0.5, -448, 3], ml_dtypes.float8_e4m3fn), np.float32(2), None, {}),
}


@pytest.mark.parametrize("case", D_CASES)
def test_dequantize_linear(case):
    x, scale, zp, attrs = D_CASES[case]
    out = np.float16 if attrs.get("output_dtype") == "FLOAT16" else None
    ref = dequantize_ref(x, scale, zp, attrs.get("axis", 1), attrs.get("block_size", 0), out)
    zp = None if zp is None else np.asarray(zp)
    check_op("DequantizeLinear", [x, np.asarray(scale), zp], lambda *a: (ref,), **attrs)


@pytest.mark.parametrize(
    "x",
    [
        np.array([0, 2, -3, -2.5, 1.34, 0.5], np.float32),
        np.array([-1.0, -2.1, -1.3, -2.5, -3.34, -4.0], np.float32),
        rand(3, 4, low=1, high=4),
        np.zeros(3, np.float32),
    ],
)
def test_dynamic_quantize_linear(x):
    def ref(x):
        low, high = min(0.0, float(x.min())), max(0.0, float(x.max()))
        scale = np.float32((high - low) / 255) if high != low else np.float32(1)
        zp = np.uint8(np.clip(np.round(-np.float32(low) / scale), 0, 255))
        y = np.clip(np.round(x / scale) + zp, 0, 255).astype(np.uint8)
        return y, np.array(scale), np.array(zp)

    check_op("DynamicQuantizeLinear", [x], ref)


@pytest.mark.parametrize(
    "op, inputs, attrs, match",
    [
        ("QuantizeLinear", [X, SCALE_AXIS0[:2], None], {"axis": 0}, "expected a scalar or"),
        ("QuantizeLinear", [X, SCALE_BLOCKED, None], {"block_size": 1}, "blocked"),
        (
            "QuantizeLinear",
            [X, np.float32(1), np.int8(0)],
            {"output_dtype": "UINT8"},
            "output_dtype",
        ),
        ("QuantizeLinear", [X, np.float32(1), np.int32(0)], {}, "quantized type"),
        ("DequantizeLinear", [Q8, np.float32(1), np.int8(0)], {}, "x_zero_point has dtype"),
        ("DequantizeLinear", [X, np.float32(1)], {}, "quantized type"),
        ("DynamicQuantizeLinear", [X.astype(np.float64)], {}, "float32"),
    ],
)
def test_errors(op, inputs, attrs, match):
    with pytest.raises(OperatorError, match=match):
        run_op(op, inputs, outputs=3 if op == "DynamicQuantizeLinear" else 1, **attrs)
