"""CastLike and BitCast against NumPy and ml_dtypes."""

import ml_dtypes
import numpy as np
import pytest

from netbrew.errors import OperatorError, SchemaError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.operators import GRADIENTS, NoGradient
from netbrew.proto.netbrew_pb2 import NetDef
from netbrew.testing import check_op, rand, run_op

TARGETS = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.uint8,
           np.int32, np.int64, np.uint64, np.bool_]  # fmt: skip


def sources():
    return {
        "float32": rand(2, 3, low=-100, high=100),
        "int64": np.array([[-3, 0, 7], [120, -128, 5]], dtype=np.int64),
        "bool": np.array([True, False, True]),
        "float16": rand(4, low=-50, high=50).astype(np.float16),
    }


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("source", ["float32", "int64", "bool", "float16"])
def test_castlike(source, target):
    x = sources()[source]
    if np.dtype(target).kind == "u":
        x = np.abs(x)
    like = np.zeros((5, 1), target)  # only the dtype is read, never the shape or values
    check_op("CastLike", [x, like], reference=lambda x, _: (x.astype(target),))


SMALL = np.array([-7.5, -2.0, -0.4, 0.0, 0.3, 1.0, 3.7, 500.0], np.float32)


@pytest.mark.parametrize(
    "target",
    [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fnuz,
     ml_dtypes.float8_e5m2fnuz, ml_dtypes.float4_e2m1fn, ml_dtypes.int4, ml_dtypes.uint4],
)  # fmt: skip
def test_castlike_low_precision(target):
    x = np.abs(SMALL) if target == ml_dtypes.uint4 else SMALL
    if np.dtype(target).name.endswith("int4"):  # in range: truncated toward zero
        x = x[:-1]
        expected = np.trunc(x).astype(np.int8).astype(target)
    else:
        info = ml_dtypes.finfo(target)
        expected = np.clip(x, float(info.min), float(info.max)).astype(target)
    (got,) = run_op("CastLike", [x, np.zeros(1, target)])
    assert got.dtype == np.dtype(target)
    np.testing.assert_array_equal(got.astype(np.float32), expected.astype(np.float32))
    (back,) = run_op("CastLike", [got, np.zeros((), np.float32)])
    np.testing.assert_array_equal(back, expected.astype(np.float32))


def test_castlike_no_saturate():
    x = np.array([1000.0, -1000.0, 2.0], np.float32)
    (got,) = run_op("CastLike", [x, np.zeros(1, ml_dtypes.float8_e4m3fn)], saturate=0)
    assert np.isnan(got.astype(np.float32)[:2]).all() and got.astype(np.float32)[2] == 2.0
    (got,) = run_op("CastLike", [x, np.zeros(1, ml_dtypes.float8_e4m3fn)])
    np.testing.assert_array_equal(got.astype(np.float32), [448.0, -448.0, 2.0])


def test_castlike_strings():
    x = np.array(["1.5", "-2", "inf"], dtype=object)
    check_op("CastLike", [x, np.zeros(1, np.float32)],
             reference=lambda x, _: (np.array([1.5, -2, np.inf], np.float32),))  # fmt: skip
    (got,) = run_op("CastLike", [np.array([1, 2], np.int32), np.array(["a"], dtype=object)])
    assert got.dtype == object and list(got) == ["1", "2"]


def backprop(x, like):
    ws = Workspace()
    ws.feed_blob("x", x)
    ws.feed_blob("like", like)
    net = NetDef(name="t", op=[op_def("CastLike", ["x", "like"], ["y"])])
    grads = add_gradient_ops(net, ["y"], wrt=["x"])
    ws.run_net_once(net)
    return ws.fetch_blob(grads["x"])


def test_castlike_gradient():
    x = rand(3, 4)
    dx = backprop(x, np.zeros(1, np.float64))
    assert dx.dtype == np.float32
    np.testing.assert_array_equal(dx, np.ones((3, 4), np.float32))
    dx = backprop(x, np.zeros(1, np.int32))  # through an integer: no gradient
    np.testing.assert_array_equal(dx, np.zeros((3, 4), np.float32))
    (grad_op,) = GRADIENTS["CastLike"](op_def("CastLike", ["x", "t"], ["y"]), ["dy"], ["dx", None])
    assert grad_op.type == "CastLikeGradient" and list(grad_op.input) == ["x", "t", "dy"]
    (dx,) = run_op("CastLikeGradient", [x, np.zeros(1, np.float16), None])
    np.testing.assert_array_equal(dx, np.zeros((3, 4), np.float32))


BITCASTS = [
    (np.float32, "INT32", np.int32),
    (np.int32, "FLOAT", np.float32),
    (np.float64, "INT64", np.int64),
    (np.int64, "DOUBLE", np.float64),
    (np.uint16, "INT16", np.int16),
    (np.float16, "BFLOAT16", ml_dtypes.bfloat16),
    (np.int8, "UINT8", np.uint8),
    (np.uint32, "FLOAT", np.float32),
    (np.complex64, "INT64", np.int64),
    (np.bool_, "UINT8", np.uint8),
]


@pytest.mark.parametrize("shape", [(), (5,), (2, 3)])
@pytest.mark.parametrize("source, to, target", BITCASTS)
def test_bitcast(source, to, target, shape):
    raw = np.random.default_rng(0).integers(0, 2, size=(*shape, np.dtype(source).itemsize * 8))
    if source == np.bool_:
        raw[..., 1:] = 0  # bool's byte holds 0 or 1
    x = np.packbits(raw.astype(np.uint8), axis=-1, bitorder="little").view(source).reshape(shape)
    check_op("BitCast", [x], reference=lambda x: (x.view(target),), to=to)


def test_bitcast_sub_byte():
    x = np.array([-8, -1, 0, 7], ml_dtypes.int4)
    check_op("BitCast", [x], reference=lambda x: (np.array([8, 15, 0, 7], ml_dtypes.uint4),),
             to="UINT4")  # fmt: skip
    y = np.array([0.5, -6.0], ml_dtypes.float4_e2m1fn)
    (got,) = run_op("BitCast", [y], to="INT4")
    np.testing.assert_array_equal(got.astype(np.int8), [1, -1])  # 0b0001, 0b1111


def test_bitcast_errors():
    with pytest.raises(OperatorError, match=r"float32 \(32 bits\).*int64 \(64 bits\)"):
        run_op("BitCast", [rand(3)], to="INT64")
    with pytest.raises(OperatorError, match="strings have no fixed bit width"):
        run_op("BitCast", [np.array(["a"], dtype=object)], to="INT64")
    with pytest.raises(SchemaError, match="BitCast: argument to=12345 is not a tensor type"):
        run_op("BitCast", [rand(3)], to=12345)
    assert isinstance(GRADIENTS["BitCast"], NoGradient)
