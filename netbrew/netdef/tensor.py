"""TensorProto <-> ndarray, for every dtype, in typed fields or raw_data.

Caffe2's conventions are kept: bool, (u)int8, (u)int16 and float16 values live in
int32_data (float16 as its uint16 bit pattern), BYTE tensors in byte_data, and a float
tensor with data_format FMT_BFLOAT16 holds bfloat16 bits in raw_data.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import ModelLoadError
from netbrew.proto.netbrew_pb2 import TensorProto

DT = TensorProto.DataType

try:  # ml_dtypes ships with onnx; bfloat16 arrays need it
    from ml_dtypes import bfloat16 as _bfloat16
except ImportError:  # pragma: no cover
    _bfloat16 = None

# data_type -> (numpy dtype, typed field)
_FIELDS: dict[int, tuple[np.dtype, str]] = {
    DT.FLOAT: (np.dtype(np.float32), "float_data"),
    DT.INT32: (np.dtype(np.int32), "int32_data"),
    DT.BYTE: (np.dtype(np.uint8), "byte_data"),
    DT.STRING: (np.dtype(object), "string_data"),
    DT.BOOL: (np.dtype(np.bool_), "int32_data"),
    DT.UINT8: (np.dtype(np.uint8), "int32_data"),
    DT.INT8: (np.dtype(np.int8), "int32_data"),
    DT.UINT16: (np.dtype(np.uint16), "int32_data"),
    DT.INT16: (np.dtype(np.int16), "int32_data"),
    DT.INT64: (np.dtype(np.int64), "int64_data"),
    DT.FLOAT16: (np.dtype(np.float16), "int32_data"),
    DT.DOUBLE: (np.dtype(np.float64), "double_data"),
    DT.UINT32: (np.dtype(np.uint32), "int64_data"),
    DT.UINT64: (np.dtype(np.uint64), "int64_data"),
    DT.COMPLEX64: (np.dtype(np.complex64), "float_data"),
    DT.COMPLEX128: (np.dtype(np.complex128), "double_data"),
}
if _bfloat16 is not None:
    import ml_dtypes

    _FIELDS[DT.BFLOAT16] = (np.dtype(_bfloat16), "int32_data")
    _NARROW = {
        DT.FLOAT8E4M3FN: "float8_e4m3fn",
        DT.FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
        DT.FLOAT8E5M2: "float8_e5m2",
        DT.FLOAT8E5M2FNUZ: "float8_e5m2fnuz",
        DT.UINT4: "uint4",
        DT.INT4: "int4",
        DT.FLOAT4E2M1: "float4_e2m1fn",
        DT.FLOAT8E8M0: "float8_e8m0fnu",
        DT.UINT2: "uint2",
        DT.INT2: "int2",
        DT.FLOAT6E2M3: "float6_e2m3fn",
        DT.FLOAT6E3M2: "float6_e3m2fn",
    }
    for _code, _name in _NARROW.items():
        if hasattr(ml_dtypes, _name):
            _FIELDS[_code] = (np.dtype(getattr(ml_dtypes, _name)), "int32_data")

_NARROW_CODES = frozenset(c for c in _FIELDS if c >= DT.FLOAT8E4M3FN)
_BY_DTYPE = {dtype: code for code, (dtype, _) in _FIELDS.items() if code != DT.BYTE}


def dtype_of(data_type: int) -> np.dtype:
    """The numpy dtype of a TensorProto.DataType value."""
    if data_type not in _FIELDS:
        name = DT.Name(data_type) if data_type in DT.values() else str(data_type)
        raise ValueError(f"tensor data type {name} has no numpy equivalent")
    return _FIELDS[data_type][0]


def data_type_of(dtype: np.dtype | type) -> int:
    """The TensorProto.DataType value of a numpy dtype (str and bytes arrays are STRING)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "OSU":
        return DT.STRING
    if dtype not in _BY_DTYPE:
        raise ValueError(f"numpy dtype {dtype} has no TensorProto data type")
    return _BY_DTYPE[dtype]


def to_array(proto: TensorProto) -> np.ndarray:
    """Decodes a TensorProto into an ndarray of its dims and dtype.

    Raises:
        ModelLoadError: the element count does not match dims, or the type is unknown.
    """
    name = proto.name or "<unnamed>"
    try:
        dtype = dtype_of(proto.data_type)
    except ValueError as e:
        raise ModelLoadError(f"tensor {name!r}: {e}") from None
    shape = tuple(int(d) for d in proto.dims)
    if any(d < 0 for d in shape):
        raise ModelLoadError(f"tensor {name!r}: negative dimension in dims {list(shape)}")
    flat = _decode(proto, dtype)
    count = int(np.prod(shape, dtype=np.int64))
    if flat.size != count:
        raise ModelLoadError(
            f"tensor {name!r}: dims {list(shape)} need {count} values, "
            f"the {proto.data_type and DT.Name(proto.data_type)} data holds {flat.size}"
        )
    return flat.reshape(shape)


def _decode(proto: TensorProto, dtype: np.dtype) -> np.ndarray:
    code = proto.data_type
    if proto.data_format == TensorProto.FMT_BFLOAT16:
        bits = np.frombuffer(proto.raw_data, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).astype(dtype)
    if proto.HasField("raw_data"):
        return np.frombuffer(proto.raw_data, dtype=dtype.newbyteorder("<")).astype(dtype)
    field = _FIELDS[code][1]
    if code == DT.STRING:
        # decoded like string arguments (and like onnx.numpy_helper); non-UTF-8 stays bytes
        from netbrew.netdef.args import _text

        return np.array([_text(s) for s in proto.string_data], dtype=object)
    if proto.HasField("byte_data") and field != "byte_data" and dtype.itemsize <= 2:
        # newer Caffe2 writes small integer types as raw bytes in byte_data
        return np.frombuffer(proto.byte_data, dtype=dtype.newbyteorder("<")).astype(dtype)
    if field == "byte_data":
        return np.frombuffer(proto.byte_data, dtype=np.uint8).copy()
    values = getattr(proto, field)
    if code in (DT.FLOAT16, DT.BFLOAT16):
        return np.array(values, dtype=np.int32).astype(np.uint16).view(dtype)
    if code in _NARROW_CODES:
        return np.array(values, dtype=np.int32).astype(np.uint8).view(dtype)
    if code == DT.UINT64:
        return np.array(values, dtype=np.int64).view(np.uint64)
    if code in (DT.COMPLEX64, DT.COMPLEX128):
        return np.array(values, dtype=dtype.type(0).real.dtype).view(dtype)
    return np.array(values, dtype=np.int64 if field == "int32_data" else dtype).astype(dtype)


def from_array(
    array: np.ndarray | object, name: str | None = None, *, raw: bool = False
) -> TensorProto:
    """Encodes an array as a TensorProto.

    Args:
        array: the values; anything np.asarray accepts.
        name: the tensor's name (its blob name).
        raw: store numeric values as little-endian bytes in raw_data instead of typed fields.
    """
    if isinstance(array, (bytes, str)):  # np.asarray(b"a\0") drops trailing NULs
        arr = np.empty((), object)
        arr[()] = array
    else:
        arr = np.asarray(array)
    proto = TensorProto(dims=arr.shape, data_type=data_type_of(arr.dtype))
    if name is not None:
        proto.name = name
    code = proto.data_type
    if code == DT.STRING:
        proto.string_data.extend(v if isinstance(v, bytes) else str(v).encode() for v in arr.flat)
        return proto
    if raw:
        proto.raw_data = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()
        return proto
    field = _FIELDS[code][1]
    flat = arr.reshape(-1)
    if code in (DT.FLOAT16, DT.BFLOAT16):
        flat = flat.view(np.uint16).astype(np.int32)
    elif code in _NARROW_CODES:
        flat = flat.view(np.uint8).astype(np.int32)
    elif code == DT.UINT64:
        flat = flat.view(np.int64)
    elif code == DT.BOOL:
        flat = flat.astype(np.int32)
    elif code in (DT.COMPLEX64, DT.COMPLEX128):
        flat = flat.view(flat.real.dtype)
    getattr(proto, field).extend(flat.tolist())
    return proto
