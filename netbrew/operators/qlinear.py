"""MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv: integer and quantized products.

Products accumulate exactly: the zero-point-shifted integer operands go through a float64
matmul or Conv's kernel (conv.py), exact while sums stay below 2**53, and integer results wrap
to int32 as ONNX allows. The QLinear ops then requantize: round_half_even(acc * a_scale *
b_scale / y_scale) + y_zero_point, saturated to y_zero_point's type (quantize.py).
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.conv import conv_cpu
from netbrew.operators.quantize import check_quant_type, quantize_values
from netbrew.operators.schema import kernel, no_gradient, schema

_INT8 = ("int8", "uint8")
_CONV_ATTRS = {
    "auto_pad": "NOTSET",
    "dilations": None,
    "group": 1,
    "kernel_shape": None,
    "pads": None,
    "strides": None,
}
_CONV_DOC = "auto_pad=NOTSET, dilations=1, group=1, kernel_shape=w.shape[2:], pads=0, strides=1"


def _to_int32(acc: np.ndarray) -> np.ndarray:
    """An exact float64 integer accumulator as int32, wrapping on overflow like 32-bit sums."""
    return acc.astype(np.int64).astype(np.int32)


def _shifted(x: np.ndarray, zp: np.ndarray | None, slot: str, zp_slot: str, rows: bool):
    """x - zp in float64; a 1-D zp of a matrix operand is per row (`rows`) or per column."""
    v = x.astype(np.float64)
    if zp is None:
        return v
    if zp.dtype != x.dtype:
        raise SchemaError(f"input {zp_slot} has dtype {zp.dtype}, expected {x.dtype} like {slot}")
    return v - _per_row_or_col(zp.astype(np.float64), x.shape, zp_slot, rows)


def _per_row_or_col(p: np.ndarray, shape: tuple, slot: str, rows: bool) -> np.ndarray:
    if p.size == 1:
        return p.reshape(())
    if p.ndim == 1 and len(shape) >= 2:
        n = shape[-2] if rows else shape[-1]
        if p.shape[0] == n:
            return p.reshape(n, 1) if rows else p
    try:
        np.broadcast_shapes(p.shape, shape)
    except ValueError:
        what = "row" if rows else "column"
        raise ShapeError(
            f"input {slot} has shape {list(p.shape)}, expected a scalar, one value per {what} "
            f"or a shape that broadcasts to {list(shape)}"
        ) from None
    return p


def _per_channel(p: np.ndarray | None, m: int, nd: int, slot: str) -> np.ndarray | float:
    """A scalar or per-output-channel (M,) parameter, shaped to broadcast over (N, M, ...)."""
    if p is None:
        return 0.0
    if p.size == 1:
        return p.astype(np.float64).reshape(())
    if p.shape != (m,):
        raise ShapeError(f"input {slot} has shape {list(p.shape)}, expected a scalar or [{m}]")
    return p.astype(np.float64).reshape(m, *(1,) * nd)


def _check_int8(**arrays: np.ndarray | None) -> None:
    for slot, a in arrays.items():
        if a is not None:
            check_quant_type(a.dtype, f"input {slot}", _INT8)


schema(
    "MatMulInteger",
    inputs=["A", "B", "a_zero_point?", "b_zero_point?"],
    outputs=["Y"],
    doc="Y = (A - a_zero_point) @ (B - b_zero_point) in int32, numpy.matmul broadcasting; "
    "(u)int8 A, B; zero points scalar, per row of A / per column of B",
)
schema(
    "ConvInteger",
    inputs=["x", "w", "x_zero_point?", "w_zero_point?"],
    outputs=["y"],
    attrs=_CONV_ATTRS,
    doc="y = Conv(x - x_zero_point, w - w_zero_point) in int32; (u)int8 x (N, C, D1..Dn), "
    f"w (M, C/group, k1..kn); w_zero_point scalar or (M,); {_CONV_DOC}",
)
schema(
    "QLinearMatMul",
    inputs=[
        "a",
        "a_scale",
        "a_zero_point",
        "b",
        "b_scale",
        "b_zero_point",
        "y_scale",
        "y_zero_point",
    ],  # fmt: skip
    outputs=["y"],
    doc="y = saturate(round((a - a_zp) @ (b - b_zp) * a_scale * b_scale / y_scale) + y_zp), "
    "of y_zero_point's type; a's parameters scalar or per row, b's scalar or per column",
)
schema(
    "QLinearConv",
    inputs=[
        "x",
        "x_scale",
        "x_zero_point",
        "w",
        "w_scale",
        "w_zero_point",
        "y_scale",
        "y_zero_point",
        "B?",
    ],  # fmt: skip
    outputs=["y"],
    attrs=_CONV_ATTRS,
    doc="y = saturate(round((Conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale / y_scale) "
    f"+ y_zp), of y_zero_point's type; w_scale/w_zp scalar or (M,), B int32 (M,); {_CONV_DOC}",
)


@kernel("MatMulInteger")
def matmul_integer_cpu(a, b, a_zero_point=None, b_zero_point=None):
    _check_int8(A=a, B=b, a_zero_point=a_zero_point, b_zero_point=b_zero_point)
    if a.ndim < 1 or b.ndim < 1:
        raise ShapeError(f"inputs A {list(a.shape)} and B {list(b.shape)} must have >= 1 dim")
    if a.shape[-1] != b.shape[max(b.ndim - 2, 0)]:
        raise ShapeError(f"inputs A {list(a.shape)} and B {list(b.shape)}: inner dims differ")
    av = _shifted(a, a_zero_point, "A", "a_zero_point", rows=True)
    bv = _shifted(b, b_zero_point, "B", "b_zero_point", rows=False)
    return (_to_int32(np.matmul(av, bv)),)


def _integer_conv(x, w, x_zp, w_zp, b, attrs) -> np.ndarray:
    """Conv(x - x_zp, w - w_zp) (+ b) as an exact float64 accumulator."""
    if x.ndim < 3 or w.ndim != x.ndim:
        raise ShapeError(f"inputs x {list(x.shape)} and w {list(w.shape)}: expected (N, C, ...) "
                         "and (M, C/group, ...) of one rank >= 3")  # fmt: skip
    nd = x.ndim - 2
    xv = x.astype(np.float64) - _per_channel(x_zp, 1, 0, "x_zero_point")
    wv = w.astype(np.float64) - _per_channel(w_zp, w.shape[0], nd + 1, "w_zero_point")
    bias = None if b is None else b.astype(np.float64)
    return conv_cpu(xv, wv, bias, **attrs)[0]


@kernel("ConvInteger")
def conv_integer_cpu(x, w, x_zero_point=None, w_zero_point=None, **attrs):
    _check_int8(x=x, w=w, x_zero_point=x_zero_point, w_zero_point=w_zero_point)
    return (_to_int32(_integer_conv(x, w, x_zero_point, w_zero_point, None, attrs)),)


def _zero_point_dtype(y_zp: np.ndarray, allowed) -> np.dtype:
    check_quant_type(y_zp.dtype, "input y_zero_point", allowed)
    return y_zp.dtype


@kernel("QLinearMatMul")
def qlinear_matmul_cpu(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
    fp8 = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")
    for slot, arr in (("a", a), ("b", b)):
        check_quant_type(arr.dtype, f"input {slot}", (*_INT8, *fp8))
    dtype = _zero_point_dtype(y_zero_point, (*_INT8, *fp8))
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"inputs a {list(a.shape)} and b {list(b.shape)}: expected (..., M, K) "
                         "and (..., K, N) matrices")  # fmt: skip
    av = _shifted(a, a_zero_point, "a", "a_zero_point", rows=True)
    bv = _shifted(b, b_zero_point, "b", "b_zero_point", rows=False)
    acc = np.matmul(av, bv)
    sa = _per_row_or_col(a_scale.astype(np.float64), a.shape, "a_scale", rows=True)
    sb = _per_row_or_col(b_scale.astype(np.float64), b.shape, "b_scale", rows=False)
    sy = _per_row_or_col(y_scale.astype(np.float64), acc.shape, "y_scale", rows=False)
    zy = _per_row_or_col(y_zero_point, acc.shape, "y_zero_point", rows=False)
    return (quantize_values(acc * (sa * sb) / sy, zy, dtype),)


@kernel("QLinearConv")
def qlinear_conv_cpu(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point,
                     b=None, **attrs):  # fmt: skip
    _check_int8(x=x, w=w, x_zero_point=x_zero_point, w_zero_point=w_zero_point)
    dtype = _zero_point_dtype(y_zero_point, _INT8)
    if b is not None and b.dtype != np.int32:
        raise SchemaError(f"input B has dtype {b.dtype}, expected int32")
    for slot, p in (("x_scale", x_scale), ("y_scale", y_scale), ("y_zero_point", y_zero_point)):
        if p.size != 1:
            raise ShapeError(f"input {slot} has shape {list(p.shape)}, expected a scalar")
    acc = _integer_conv(x, w, x_zero_point, w_zero_point, b, attrs)
    ws = _per_channel(w_scale, w.shape[0], x.ndim - 2, "w_scale")
    real = acc * (float(x_scale.reshape(())) * ws) / float(y_scale.reshape(()))
    return (quantize_values(real, y_zero_point.reshape(()), dtype),)


for _op in ("MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv"):
    no_gradient(_op, "integer (quantized) inputs and outputs: no gradient flows through them")
