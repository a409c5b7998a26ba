"""QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear (ONNX linear quantization).

A scale and its zero point give the granularity: a scalar (or one element) is per tensor,
a 1-D tensor of x.shape[axis] values is per axis, and a tensor shaped like x except for
ceil(x.shape[axis] / block_size) along `axis` is blocked. Quantized types: (u)int8, (u)int16,
and through ml_dtypes (u)int4, (u)int2, float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz), float4e2m1
and float6. Integer results round half to even and clip to the type's range; float8 results
clip to the largest finite value when saturate=1, else overflow becomes inf or NaN.
`expand_param` and `quantize_values` are shared with the QLinear ops (qlinear.py).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef.dtypes import onnx_np_dtype
from netbrew.operators.schema import kernel, no_gradient, schema

_INTS = ("int8", "uint8", "int16", "uint16", "int4", "uint4", "int2", "uint2")
_FLOAT8 = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")
_SMALL_FLOATS = ("float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn")
QUANT_TYPES = _INTS + _FLOAT8 + _SMALL_FLOATS
_NAMES = ", ".join(QUANT_TYPES)


def onnx_dtype(code: int | str, what: str) -> np.dtype:
    """The numpy dtype of a stored ONNX type: its number (3 -> int8) or name ("INT8")."""
    try:
        return onnx_np_dtype(code)
    except ValueError as e:
        raise SchemaError(f"argument {what}={e}") from None


def check_quant_type(dtype: np.dtype, slot: str, allowed=QUANT_TYPES) -> None:
    if dtype.name not in allowed:
        raise SchemaError(
            f"{slot} has dtype {dtype}, expected a quantized type ({', '.join(allowed)})"
        )


def expand_param(value: np.ndarray, shape: tuple, axis: int, block_size: int, slot: str):
    """A scale or zero point made broadcastable to `shape` (per tensor, axis or block)."""
    if value.size == 1:
        return value.reshape(())
    rank = len(shape)
    if not -rank <= axis < rank:
        raise SchemaError(f"argument axis={axis} is out of range for input of rank {rank}")
    axis %= rank
    if block_size == 0:
        if value.shape != (shape[axis],):
            raise ShapeError(
                f"input {slot} has shape {list(value.shape)}, expected a scalar or "
                f"[{shape[axis]}] (per-axis along axis {axis} of {list(shape)}); set "
                "block_size for blocked quantization"
            )
        dims = [1] * rank
        dims[axis] = shape[axis]
        return value.reshape(dims)
    if block_size < 0:
        raise SchemaError(f"argument block_size={block_size} must be >= 0")
    want = list(shape)
    want[axis] = math.ceil(shape[axis] / block_size)
    if list(value.shape) != want:
        raise ShapeError(
            f"input {slot} has shape {list(value.shape)}, expected {want} for blocked "
            f"quantization of {list(shape)} with block_size={block_size} along axis {axis}"
        )
    return np.repeat(value, block_size, axis=axis).take(np.arange(shape[axis]), axis=axis)


def quantize_values(v: np.ndarray, zp, dtype: np.dtype, saturate: bool = True) -> np.ndarray:
    """v (already divided by the scale) + zp, rounded and saturated into `dtype`."""
    zp = 0.0 if zp is None else np.asarray(zp).astype(np.float64)
    if dtype.name in _INTS:
        info = ml_dtypes.iinfo(dtype)
        q = np.clip(np.rint(v) + zp, info.min, info.max)
        return np.nan_to_num(q, nan=0.0).astype(np.int32).astype(dtype)
    v = v + zp
    if saturate or dtype.name in _SMALL_FLOATS:
        top = float(ml_dtypes.finfo(dtype).max)
        v = np.clip(v, -top, top)
    return v.astype(dtype)


def _division_dtype(scale: np.ndarray, precision: int) -> np.dtype:
    if precision:
        return onnx_dtype(precision, "precision")
    dtype = scale.dtype
    return np.dtype(np.float32) if dtype.kind != "f" or dtype.itemsize < 4 else dtype


_AXIS_DOC = "axis=1, block_size=0 (scale: scalar, [x.shape[axis]] or blocked)"
schema(
    "QuantizeLinear",
    inputs=["x", "y_scale", "y_zero_point?"],
    outputs=["y"],
    attrs={"axis": 1, "block_size": 0, "output_dtype": 0, "precision": 0, "saturate": 1},
    doc=f"y = saturate(round_half_even(x / y_scale) + y_zero_point), of y_zero_point's type, "
    f"else output_dtype, else uint8; {_AXIS_DOC}, saturate=1 (float8 only)",
)
schema(
    "DequantizeLinear",
    inputs=["x", "x_scale", "x_zero_point?"],
    outputs=["y"],
    attrs={"axis": 1, "block_size": 0, "output_dtype": 0},
    doc=f"y = (x - x_zero_point) * x_scale, of output_dtype or else x_scale's type; {_AXIS_DOC}",
)
schema(
    "DynamicQuantizeLinear",
    inputs=["x"],
    outputs=["y", "y_scale", "y_zero_point"],
    dtypes={0: "float"},
    doc="y_scale = (max(0, max x) - min(0, min x)) / 255, y_zero_point = round(clip(-min(0, "
    "min x) / y_scale, 0, 255)), y = saturate(round(x / y_scale) + y_zero_point); uint8 y",
)


@kernel("QuantizeLinear")
def quantize_linear_cpu(x, y_scale, y_zero_point=None, *, axis=1, block_size=0, output_dtype=0,
                        precision=0, saturate=1):  # fmt: skip
    if y_zero_point is not None:
        dtype = y_zero_point.dtype
        if output_dtype and onnx_dtype(output_dtype, "output_dtype") != dtype:
            raise SchemaError(
                f"argument output_dtype={output_dtype} ({onnx_dtype(output_dtype, '')}) does not "
                f"match y_zero_point's dtype {dtype}"
            )
    else:
        dtype = onnx_dtype(output_dtype, "output_dtype") if output_dtype else np.dtype(np.uint8)
    check_quant_type(dtype, "output y (y_zero_point or output_dtype)")
    if x.dtype.kind not in "fi" and x.dtype.name != "bfloat16":
        raise SchemaError(f"input x has dtype {x.dtype}, expected float, float16, bfloat16, int32")
    work = _division_dtype(y_scale, precision)
    scale = expand_param(y_scale, x.shape, axis, block_size, "y_scale").astype(work)
    zp = y_zero_point
    if zp is not None:
        if zp.shape != y_scale.shape and zp.size + y_scale.size > 2:
            raise ShapeError(
                f"input y_zero_point has shape {list(zp.shape)}, expected {list(y_scale.shape)} "
                "like y_scale"
            )
        zp = expand_param(zp, x.shape, axis, block_size, "y_zero_point")
    v = (x.astype(work) / scale).astype(np.float64)
    return (quantize_values(v, zp, dtype, bool(saturate)),)


@kernel("DequantizeLinear")
def dequantize_linear_cpu(x, x_scale, x_zero_point=None, *, axis=1, block_size=0, output_dtype=0):
    check_quant_type(x.dtype, "input x", (*QUANT_TYPES, "int32"))
    if output_dtype:
        out = onnx_dtype(output_dtype, "output_dtype")
    elif x_scale.dtype.kind == "f" or x_scale.dtype.name == "bfloat16":
        out = x_scale.dtype
    else:
        raise SchemaError(f"x_scale has dtype {x_scale.dtype}; set output_dtype for the output")
    if out.name not in ("float32", "float16", "bfloat16"):
        raise SchemaError(f"output dtype {out} must be float32, float16 or bfloat16")
    v = x.astype(np.float64)
    if x_zero_point is not None:
        if x_zero_point.dtype != x.dtype:
            raise SchemaError(
                f"input x_zero_point has dtype {x_zero_point.dtype}, expected {x.dtype} like x"
            )
        if x_zero_point.shape != x_scale.shape and x_zero_point.size + x_scale.size > 2:
            raise ShapeError(
                f"input x_zero_point has shape {list(x_zero_point.shape)}, expected "
                f"{list(x_scale.shape)} like x_scale"
            )
        v -= expand_param(x_zero_point, x.shape, axis, block_size, "x_zero_point").astype(float)
    scale = expand_param(x_scale, x.shape, axis, block_size, "x_scale").astype(np.float64)
    return ((v * scale).astype(out),)


@kernel("DynamicQuantizeLinear")
def dynamic_quantize_linear_cpu(x):
    if x.dtype != np.float32:
        raise SchemaError(f"input x has dtype {x.dtype}, expected float32")
    low = np.float32(min(0.0, x.min())) if x.size else np.float32(0)
    high = np.float32(max(0.0, x.max())) if x.size else np.float32(0)
    scale = np.float32(1.0) if high == low else (high - low) / np.float32(255)
    zp = np.rint(np.clip(-low / scale, 0, 255))
    y = np.clip(np.rint(x / scale) + zp, 0, 255)
    return y.astype(np.uint8), np.asarray(scale, np.float32), np.asarray(zp).astype(np.uint8)


_ROUNDS = "quantization rounds to a discrete grid: the gradient is zero almost everywhere"
no_gradient("QuantizeLinear", _ROUNDS)
no_gradient("DynamicQuantizeLinear", _ROUNDS)
no_gradient("DequantizeLinear", "its input x is a quantized (integer or float8) tensor")
