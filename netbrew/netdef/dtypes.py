"""One spelling of tensor types in netbrew's Python API.

Two enums number tensor types differently. netbrew's `TensorProto.DataType` is Caffe2's
`core.DataType` (INT32 = 2, INT64 = 10, DOUBLE = 13); ONNX's `onnx.TensorProto.DataType`
has INT32 = 6, INT64 = 7, DOUBLE = 11. A bare number cannot say which enum it came from,
so netbrew's Python API reads every type number as netbrew's own, and an argument that
names a type (Cast's `to`, the `dtype` of ConstantFill, EyeLike or RandomNormal) accepts:

- a NumPy dtype or scalar type: `np.int32`, `np.dtype("float16")`, `float` (float64, as
  NumPy reads it);
- a name, case-insensitive: an enum member's (`"INT32"`, `"DOUBLE"`, `"BYTE"`, `"float"`
  is FLOAT, float32, in both enums) or else NumPy's (`"int32"`, `"float64"`, `"bfloat16"`);
- a number of netbrew's enum: `netbrew_pb2.TensorProto.INT32`.

ONNX's numbers appear only inside ONNX files and in the NetDefs that ONNX ops were
imported into; to pass one from Python, name it: `onnx.TensorProto.DataType.Name(code)`.

What the NetDef stores: an ONNX op keeps ONNX's name of the type (`to: "INT32"`), which
prints and reads without a table, and its kernel also reads ONNX's numbers, as in ONNX
files and older NetDefs; the exporter writes ONNX's number. A Caffe2 op (the fillers)
keeps netbrew's number, as Caffe2's files do.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper

from netbrew.errors import SchemaError
from netbrew.proto.netbrew_pb2 import TensorProto

_DT = TensorProto.DataType
_ONNX_DT = onnx.TensorProto.DataType

# Op type -> its type-valued arguments and the form the NetDef stores them in.
ONNX_TYPE_ARGS = {
    "Bernoulli": "dtype",
    "BitCast": "to",
    "Cast": "to",
    "DequantizeLinear": "output_dtype",
    "EyeLike": "dtype",
    "Multinomial": "dtype",
    "QuantizeLinear": "output_dtype",
    "RandomNormal": "dtype",
    "RandomNormalLike": "dtype",
    "RandomUniform": "dtype",
    "RandomUniformLike": "dtype",
    "SequenceEmpty": "dtype",
}
NETBREW_TYPE_ARGS = {"ConstantFill": "dtype", "GivenTensorFill": "dtype"}

# netbrew enum names that ONNX spells otherwise; the Caffe2-internal states have no tensor.
_NETBREW_TO_ONNX = {"BYTE": "UINT8"}
_NOT_TENSORS = ("UNDEFINED", "ZERO_COLLISION_HASH", "REBATCHING_BUFFER")


def type_name(value: Any, what: str = "dtype") -> str:
    """ONNX's enum name of the type `value` spells (see the module docstring).

    Raises:
        SchemaError: `value` names no tensor type; the message says what was received.
    """
    if isinstance(value, (bool, np.bool_)):
        raise SchemaError(f"argument {what}={value!r}: a bool is not a tensor type")
    if isinstance(value, (int, np.integer)):
        code = int(value)
        if code not in _DT.values() or _DT.Name(code) in _NOT_TENSORS:
            raise SchemaError(
                f"argument {what}={code} is not a tensor type of netbrew's TensorProto.DataType "
                "(Caffe2's numbers: FLOAT=1, INT32=2, INT64=10, DOUBLE=13); pass a NumPy "
                "dtype or a name such as 'int64' instead"
            )
        return _netbrew_to_onnx_name(_DT.Name(code))
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str):
        upper = value.upper()
        if upper in _ONNX_DT.keys() and upper != "UNDEFINED":
            return upper
        if upper in _DT.keys() and upper not in _NOT_TENSORS:
            return _netbrew_to_onnx_name(upper)
    try:
        dtype = np.dtype(value)
    except TypeError:
        raise SchemaError(
            f"argument {what}={value!r} is not a tensor type; expected a NumPy dtype "
            "(np.int32), a name ('int32', 'INT32') or netbrew's TensorProto.DataType"
        ) from None
    if dtype.kind in "OSU":
        return "STRING"
    try:
        return _ONNX_DT.Name(helper.np_dtype_to_tensor_dtype(dtype))
    except (KeyError, ValueError, TypeError):
        raise SchemaError(f"argument {what}={value!r}: dtype {dtype} has no tensor type") from None


def _netbrew_to_onnx_name(name: str) -> str:
    return _NETBREW_TO_ONNX.get(name, name)


def onnx_code(value: int | str | bytes) -> int:
    """ONNX's number of a type stored in a NetDef: ONNX's number itself, or its name."""
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str):
        return _ONNX_DT.Value(value.upper())
    return int(value)


def onnx_np_dtype(value: int | str | bytes) -> np.dtype:
    """The NumPy dtype of a type stored in an ONNX op: ONNX's number or its name.

    Raises:
        ValueError: not one of ONNX's types.
    """
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(onnx_code(value)))
    except (KeyError, ValueError, TypeError):
        raise ValueError(
            f"{value!r} is not an ONNX TensorProto data type; expected a name such as "
            f"'FLOAT' or 'INT64', or ONNX's number (FLOAT={onnx.TensorProto.FLOAT}, "
            f"INT64={onnx.TensorProto.INT64})"
        ) from None


def netbrew_code(value: Any, what: str = "dtype") -> int:
    """netbrew's TensorProto.DataType number of the type `value` spells."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        type_name(value, what)  # checks the number
        return int(value)
    name = type_name(value, what)
    if name not in _DT.keys():
        raise SchemaError(f"argument {what}={value!r}: {name} has no netbrew TensorProto type")
    return _DT.Value(name)


def normalize_type_args(op_type: str, args: dict[str, Any]) -> dict[str, Any]:
    """`args` with the op's type argument in the form its NetDef stores (module docstring).

    An unset argument (None, or 0 for QuantizeLinear's "infer from the zero point") stays."""
    if op_type in ONNX_TYPE_ARGS:
        key, convert = ONNX_TYPE_ARGS[op_type], type_name
    elif op_type in NETBREW_TYPE_ARGS:
        key, convert = NETBREW_TYPE_ARGS[op_type], netbrew_code
    else:
        return args
    value = args.get(key)
    if value is None or (isinstance(value, (int, np.integer)) and int(value) == 0):
        return args
    try:
        return {**args, key: convert(value, key)}
    except SchemaError as e:
        raise SchemaError(f"{op_type}: {e}") from None
