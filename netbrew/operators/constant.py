"""Cast, Constant and Identity.

Identity passes its gradient through. Cast's gradient is the output gradient cast back to
the input's dtype when both types are floating point; a cast from or to anything else
(integers, bools, strings) passes no gradient: dX is zeros. Constant has no inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from netbrew.errors import SchemaError
from netbrew.netdef.dtypes import onnx_code, onnx_np_dtype
from netbrew.netdef.net import op_def
from netbrew.operators.arithmetic_grad import parsed_attrs
from netbrew.operators.schema import DTYPE_CLASSES, REQUIRED, gradient, kernel, no_gradient, schema

_ONNX = onnx.TensorProto
_FLOAT8 = {_ONNX.FLOAT8E4M3FN, _ONNX.FLOAT8E4M3FNUZ, _ONNX.FLOAT8E5M2, _ONNX.FLOAT8E5M2FNUZ}

schema(
    "Cast",
    inputs=["input"],
    outputs=["output"],
    attrs={"to": REQUIRED, "saturate": 1, "round_mode": "up"},
    doc="output = input converted to type `to` (a NumPy dtype, a name such as 'int32', or "
    "netbrew's TensorProto.DataType; stored as ONNX's name); saturate=1 clips float8 casts, "
    "round_mode='up' for FLOAT8E8M0",
)


def onnx_dtype(to: int | str) -> np.dtype:
    """The NumPy dtype of the type a NetDef's Cast stores: ONNX's name ("INT32", as the
    Python API writes it) or ONNX's number (as ONNX files do); see netbrew.netdef.dtypes."""
    try:
        return onnx_np_dtype(to)
    except ValueError as e:
        raise ValueError(f"Cast: to={e}") from None


def _parse_strings(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Numbers from strings ("3.14", "1e-5", "INF", "-inf", "NaN"; "true"/"false" for bool)."""
    if any(isinstance(s, bytes) for s in x.flat):
        decoded = [s.decode() if isinstance(s, bytes) else s for s in x.flat]
        x = np.array(decoded, dtype=object).reshape(x.shape)
    text = x.astype(np.str_)
    if dtype.kind == "b":
        low = np.char.lower(np.char.strip(text))
        text = np.where(low == "true", "1", np.where(low == "false", "0", text))
    if dtype.kind in "iu":
        try:
            return text.astype(dtype)
        except ValueError:  # "100.5" to an integer: ONNX leaves this undefined; we truncate
            pass
    try:
        values = text.astype(np.complex128 if dtype.kind == "c" else np.float64)
    except ValueError as e:
        raise ValueError(f"Cast: input holds a string that is not a number ({e})") from None
    return values != 0 if dtype.kind == "b" else values.astype(dtype)


@kernel("Cast")
def cast_cpu(x: np.ndarray, to: int | str, saturate: int, round_mode: str) -> tuple[np.ndarray]:
    dtype = onnx_dtype(to)
    with np.errstate(all="ignore"):  # out-of-range float -> int is undefined in ONNX too
        if dtype.kind == "O":
            if x.dtype.kind == "O":
                return (x.copy(),)
            return (x.astype(np.str_).astype(object),)
        if x.dtype.kind == "O":
            return (_parse_strings(x, dtype),)
        code = onnx_code(to)
        if code in _FLOAT8 and saturate:
            return (numpy_helper.saturate_cast(x, dtype),)
        if code == _ONNX.FLOAT8E8M0:
            return (numpy_helper.to_float8e8m0(x, bool(saturate), round_mode).astype(dtype),)
        return (x.astype(dtype),)


schema(
    "CastGradient",
    inputs=["input", "doutput?"],
    outputs=["dinput"],
    onnx=False,
    doc="dinput = doutput cast to input's dtype when input and doutput are floating point, "
    "else zeros of input's shape and dtype (doutput omitted: zeros)",
)


def _is_float(dtype: np.dtype) -> bool:
    """Floating point, including bfloat16 and the float8 types (kind 'V' in NumPy)."""
    return DTYPE_CLASSES["float"](dtype) or dtype.name.startswith("float")


@kernel("CastGradient")
def cast_gradient_cpu(x: np.ndarray, dy: np.ndarray | None = None) -> tuple[np.ndarray]:
    if dy is None or not (_is_float(x.dtype) and _is_float(dy.dtype)):
        return (np.zeros_like(x),)
    return (dy.astype(x.dtype),)


@gradient("Cast")
def cast_grad(op, g_out, g_in):
    """Reads input for its dtype; a cast to a non-float type passes no gradient (zeros)."""
    to_float = _is_float(onnx_dtype(parsed_attrs(op)["to"]))
    return [op_def("CastGradient", [op.input[0], g_out[0] if to_float else ""], [g_in[0]])]


_CONSTANT_KINDS = {
    "value_float": np.float32,
    "value_floats": np.float32,
    "value_int": np.int64,
    "value_ints": np.int64,
    "value_string": object,
    "value_strings": object,
}

schema(
    "Constant",
    inputs=[],
    outputs=["output"],
    attrs={"value": None, "sparse_value": None, **dict.fromkeys(_CONSTANT_KINDS)},
    doc="output = the one attribute set: value (tensor), value_float/value_int/value_string "
    "(scalar float32/int64/string) or value_floats/value_ints/value_strings ([k])",
)


@kernel("Constant")
def constant_cpu(**attrs: Any) -> tuple[np.ndarray]:
    given = sorted(name for name, v in attrs.items() if v is not None)
    if len(given) != 1:
        raise SchemaError(
            f"Constant: exactly one of value, {', '.join(_CONSTANT_KINDS)} must be set, "
            f"got {', '.join(given) or 'none'}"
        )
    name = given[0]
    if name == "sparse_value":
        raise SchemaError("Constant: sparse_value is not supported; give a dense `value`")
    if name == "value":
        value = np.array(attrs["value"], copy=True)
        if value.dtype.kind == "O":  # STRING tensors decode to bytes; match value_strings' str
            value.flat[:] = [_text(v) for v in value.flat]
        return (value,)
    value = attrs[name]
    if name.endswith("s") and not isinstance(value, (list, tuple, np.ndarray)):
        value = [value]  # a scalar given for a list attribute
    out = np.empty(len(value) if name.endswith("s") else (), dtype=_CONSTANT_KINDS[name])
    out[...] = value
    return (out,)


def _text(value: object) -> object:
    """UTF-8 bytes as str (as netbrew.netdef.args does for string arguments); others unchanged."""
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return value
    return value


no_gradient("Constant", "it has no inputs")

schema("Identity", inputs=["input"], outputs=["output"], inplace={0: 0}, doc="output = input")


@kernel("Identity")
def identity_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    return (x,)


@gradient("Identity", inplace_safe=True)
def identity_grad(op, g_out, g_in):
    return [op_def("Identity", [g_out[0]], [g_in[0]])]
