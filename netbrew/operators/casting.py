"""CastLike and BitCast.

CastLike is Cast (netbrew.operators.constant) with the target type taken from a second
input's dtype; its gradient is Cast's, deciding at run time whether the target is a float.
BitCast reinterprets the bits of each element as another type of the same width and has no
gradient.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from netbrew.errors import SchemaError
from netbrew.netdef.net import op_def
from netbrew.operators.constant import cast_cpu, cast_gradient_cpu, onnx_dtype
from netbrew.operators.schema import REQUIRED, gradient, kernel, no_gradient, schema
from netbrew.operators.unary_math import is_float

_ONNX = onnx.TensorProto
_SUB_BYTE_BITS = {"int4": 4, "uint4": 4, "float4_e2m1fn": 4, "int2": 2, "uint2": 2}

schema(
    "CastLike",
    inputs=["input", "target_type"],
    outputs=["output"],
    attrs={"saturate": 1, "round_mode": "up"},
    doc="output = input converted to target_type's dtype, as Cast (target_type's values are "
    "not read); saturate=1 clips float8 casts, round_mode='up' for FLOAT8E8M0",
)


def onnx_type_of(dtype: np.dtype) -> int:
    """The ONNX TensorProto data type of a NumPy (or ml_dtypes) dtype; strings are STRING."""
    if dtype.kind in "OUS":
        return _ONNX.STRING
    try:
        return helper.np_dtype_to_tensor_dtype(dtype)
    except (KeyError, ValueError, TypeError):
        raise SchemaError(f"dtype {dtype} has no ONNX tensor type") from None


@kernel("CastLike")
def cast_like_cpu(
    x: np.ndarray, target: np.ndarray, saturate: int, round_mode: str
) -> tuple[np.ndarray]:
    try:
        to = onnx_type_of(target.dtype)
    except SchemaError as e:
        raise SchemaError(f"input 'target_type': {e}") from None
    return cast_cpu(x, to=to, saturate=saturate, round_mode=round_mode)


schema(
    "CastLikeGradient",
    inputs=["input", "target_type", "doutput?"],
    outputs=["dinput"],
    onnx=False,
    doc="dinput = doutput cast to input's dtype when input, target_type and doutput are "
    "floating point, else zeros of input's shape and dtype (as CastGradient)",
)


@kernel("CastLikeGradient")
def cast_like_gradient_cpu(
    x: np.ndarray, target: np.ndarray, dy: np.ndarray | None = None
) -> tuple[np.ndarray]:
    return cast_gradient_cpu(x, dy if is_float(target.dtype) else None)


@gradient("CastLike")
def cast_like_grad(op, g_out, g_in):
    """As Cast's, with the target type read at run time; target_type gets no gradient."""
    if not g_in[0]:
        return []
    return [op_def("CastLikeGradient", [op.input[0], op.input[1], g_out[0] or ""], [g_in[0]])]


schema(
    "BitCast",
    inputs=["input"],
    outputs=["output"],
    attrs={"to": REQUIRED},
    doc="output = input's bits reinterpreted as ONNX TensorProto type `to` (enum int or name) "
    "of the same bit width (little endian); same shape; strings refused",
)
no_gradient("BitCast", "reinterpreting bits is not a differentiable function of the values")


def _bits(dtype: np.dtype) -> int:
    return _SUB_BYTE_BITS.get(dtype.name, dtype.itemsize * 8)


@kernel("BitCast")
def bit_cast_cpu(x: np.ndarray, to: int | str) -> tuple[np.ndarray]:
    try:
        dtype = onnx_dtype(to)
    except ValueError as e:
        raise ValueError(str(e).replace("Cast:", "BitCast:", 1)) from None
    if dtype.kind in "OUS" or x.dtype.kind in "OUS":
        raise SchemaError(
            f"BitCast: strings have no fixed bit width (input {x.dtype}, to {dtype}); "
            "use Cast to convert them"
        )
    if _bits(x.dtype) != _bits(dtype):
        raise SchemaError(
            f"BitCast: input 'input' has dtype {x.dtype} ({_bits(x.dtype)} bits), but to={to!r} "
            f"is {dtype} ({_bits(dtype)} bits); the widths must match"
        )
    if x.dtype.byteorder == ">":
        x = x.astype(x.dtype.newbyteorder("<"))
    # sub-byte types (ml_dtypes) keep their bits in the low bits of a byte, so a view works
    return (x.copy(order="C").view(dtype),)
