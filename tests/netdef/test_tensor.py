"""TensorProto <-> ndarray for every dtype, typed fields and raw_data."""

import ml_dtypes
import numpy as np
import pytest

from netbrew.errors import ModelLoadError
from netbrew.netdef.tensor import from_array, to_array
from netbrew.proto.netbrew_pb2 import TensorProto

DT = TensorProto.DataType
CASES = [
    (np.float32, DT.FLOAT, "float_data"),
    (np.float64, DT.DOUBLE, "double_data"),
    (np.float16, DT.FLOAT16, "int32_data"),
    (ml_dtypes.bfloat16, DT.BFLOAT16, "int32_data"),
    (np.int8, DT.INT8, "int32_data"),
    (np.int16, DT.INT16, "int32_data"),
    (np.int32, DT.INT32, "int32_data"),
    (np.int64, DT.INT64, "int64_data"),
    (np.uint8, DT.UINT8, "int32_data"),
    (np.uint16, DT.UINT16, "int32_data"),
    (np.uint32, DT.UINT32, "int64_data"),
    (np.uint64, DT.UINT64, "int64_data"),
    (np.bool_, DT.BOOL, "int32_data"),
    (np.complex64, DT.COMPLEX64, "float_data"),
    (np.complex128, DT.COMPLEX128, "double_data"),
]


def sample(dtype, shape=(2, 3)):
    rng = np.random.default_rng(0)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    if dtype.kind == "c":
        return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)
    return rng.normal(size=shape).astype(dtype)


@pytest.mark.parametrize("raw", [False, True], ids=["typed", "raw"])
@pytest.mark.parametrize("dtype,code,field", CASES, ids=[str(np.dtype(c[0])) for c in CASES])
@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3, 4)])
def test_round_trip(dtype, code, field, raw, shape):
    x = sample(dtype, shape)
    proto = from_array(x, "blob", raw=raw)
    assert proto.data_type == code and proto.name == "blob" and list(proto.dims) == list(shape)
    if raw:
        assert proto.HasField("raw_data")
    elif x.size:
        assert len(getattr(proto, field)) > 0
    back = to_array(TensorProto.FromString(proto.SerializeToString()))
    assert back.dtype == x.dtype and back.shape == x.shape
    np.testing.assert_array_equal(back.reshape(-1).view(np.uint8), x.reshape(-1).view(np.uint8))


def test_float16_uses_caffe2_int32_bit_pattern():
    proto = from_array(np.array([1.0, -2.0], dtype=np.float16))
    assert list(proto.int32_data) == [0x3C00, 0xC000]
    written = TensorProto(data_type=DT.FLOAT16, dims=[2], int32_data=[0x3C00, 0x7BFF])
    np.testing.assert_array_equal(to_array(written), np.array([1.0, 65504.0], np.float16))


def test_strings_and_bytes():
    x = np.array([b"ab", "c\u00e9".encode(), b"\xff"], dtype=object)
    back = to_array(from_array(x))
    assert back.dtype == object and list(back) == ["ab", "c\u00e9", b"\xff"]
    text = to_array(from_array(np.array(["x", "yz"])))
    assert list(text) == ["x", "yz"]


def test_byte_type_reads_byte_data():
    proto = TensorProto(data_type=DT.BYTE, dims=[3], byte_data=b"\x01\x02\xff")
    np.testing.assert_array_equal(to_array(proto), np.array([1, 2, 255], np.uint8))


def test_small_ints_in_byte_data_as_newer_caffe2_writes():
    proto = TensorProto(data_type=DT.INT8, dims=[2], byte_data=b"\x05\xfe")
    np.testing.assert_array_equal(to_array(proto), np.array([5, -2], np.int8))


def test_bfloat16_serialization_format():
    x = np.array([1.5, -3.0], dtype=np.float32)
    bits = (x.view(np.uint32) >> 16).astype("<u2").tobytes()
    proto = TensorProto(data_type=DT.FLOAT, dims=[2], raw_data=bits, data_format=1)
    np.testing.assert_array_equal(to_array(proto), x)


def test_count_mismatch_names_tensor():
    proto = TensorProto(name="w", data_type=DT.FLOAT, dims=[2, 2], float_data=[1.0])
    with pytest.raises(ModelLoadError, match=r"tensor 'w': dims \[2, 2\] need 4 values.*holds 1"):
        to_array(proto)


def test_unknown_data_type():
    proto = TensorProto(name="q", data_type=DT.ZERO_COLLISION_HASH, dims=[1])
    with pytest.raises(ModelLoadError, match="ZERO_COLLISION_HASH has no numpy equivalent"):
        to_array(proto)


NARROW = ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "int4", "uint4",
          "float4_e2m1fn", "float8_e8m0fnu"]  # fmt: skip


@pytest.mark.parametrize("raw", [False, True], ids=["typed", "raw"])
@pytest.mark.parametrize("name", NARROW)
def test_onnx_narrow_types_round_trip(name, raw):
    dtype = np.dtype(getattr(ml_dtypes, name))
    x = np.array([[0.5, 1.0], [2.0, 4.0]], np.float32).astype(dtype)
    back = to_array(TensorProto.FromString(from_array(x, raw=raw).SerializeToString()))
    assert back.dtype == dtype
    np.testing.assert_array_equal(back.view(np.uint8), x.view(np.uint8))
