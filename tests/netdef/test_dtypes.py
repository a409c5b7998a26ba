"""Every public spelling of a tensor type names one type (netbrew.netdef.dtypes).

Before: Cast read netbrew's own TensorProto.INT32 (2) as ONNX's UINT8, so 300.7 became 44."""

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

from netbrew.errors import SchemaError
from netbrew.netdef import Net, op_def
from netbrew.netdef.dtypes import netbrew_code, type_name
from netbrew.netdef.tensor import dtype_of
from netbrew.proto.netbrew_pb2 import TensorProto
from netbrew.testing import run_op

DT = TensorProto.DataType
# netbrew's enum members that are numeric tensor types Cast can make from float32.
CODES = [
    c
    for c in DT.values()
    if DT.Name(c) not in ("UNDEFINED", "ZERO_COLLISION_HASH", "REBATCHING_BUFFER", "STRING")
    and DT.Name(c).startswith(("FLOAT", "DOUBLE", "INT", "UINT", "BOOL", "BYTE", "BFLOAT"))
    and not DT.Name(c).startswith(("FLOAT4", "FLOAT6", "INT2", "UINT2", "INT4", "UINT4"))
]


def spellings(code: int) -> list:
    """Every way the Python API accepts to name the type of netbrew's `code`."""
    dtype = dtype_of(code)
    out = [code, TensorProto.DataType.Name(code), TensorProto.DataType.Name(code).lower()]
    out += [dtype, dtype.type, dtype.name]
    return out


def test_the_issue_case_casts_to_int32():
    (y,) = run_op("Cast", [np.array([300.7, -2.5], np.float32)], to=TensorProto.INT32)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, [300, -2])


@pytest.mark.parametrize("code", CODES, ids=[DT.Name(c) for c in CODES])
def test_every_spelling_of_a_type_casts_to_that_type(code):
    want = dtype_of(code)
    x = np.array([1.0, 0.0] if want == np.bool_ else [1.0, 2.0, 4.0], np.float32)
    for spelling in spellings(code):
        (y,) = run_op("Cast", [x], to=spelling)
        assert y.dtype == want, f"to={spelling!r} gave {y.dtype}, expected {want}"
        np.testing.assert_array_equal(y.astype(np.float32), x)


@pytest.mark.parametrize("code", CODES, ids=[DT.Name(c) for c in CODES])
def test_every_spelling_fills_that_type(code):
    want = dtype_of(code)
    for spelling in spellings(code):
        (y,) = run_op("ConstantFill", [], shape=[2], value=1, dtype=spelling)
        assert y.dtype == want, f"dtype={spelling!r} gave {y.dtype}, expected {want}"


@pytest.mark.parametrize("code", CODES, ids=[DT.Name(c) for c in CODES])
def test_spellings_agree_pairwise(code):
    names = {type_name(s) for s in spellings(code)}
    dtypes = {dtype_of(netbrew_code(s)) for s in spellings(code)}
    assert len(names) == 1 and dtypes == {dtype_of(code)}


def test_the_netdef_stores_the_name_and_prints_it():
    net = Net("cast")
    net.Cast("x", "y", to=np.int64)
    assert "to='INT64'" in str(net) or 'to="INT64"' in str(net)
    assert op_def("Cast", ["x"], ["y"], to=TensorProto.DOUBLE).arg[0].s == b"DOUBLE"
    # Caffe2's fillers keep netbrew's number, as Caffe2's files do.
    assert op_def("ConstantFill", [], ["y"], dtype="int64").arg[0].i == TensorProto.INT64


def test_onnx_numbers_in_a_netdef_still_read_as_onnx():
    # NetDefs imported from ONNX files hold ONNX's numbers (onnx.TensorProto.INT64 = 7).
    op = op_def("Cast", ["x"], ["y"])
    op.arg.add(name="to", i=onnx.TensorProto.INT64)
    from netbrew.executor import Workspace

    ws = Workspace()
    ws.feed_blob("x", np.array([1.5], np.float32))
    ws.run_operator_once(op)
    assert ws.fetch_blob("y").dtype == np.int64


def test_export_writes_onnx_numbers():
    from netbrew.converters import onnx as nb_onnx

    net = Net("cast")
    net.add_external_input("x")
    net.Cast("x", "i", to=TensorProto.INT32)
    net.Cast("i", "h", to="float16")
    net.Cast("h", "b", to=ml_dtypes.bfloat16)
    net.Cast("b", "y", to=np.float64)
    net.add_external_output("y", "i")
    model = nb_onnx.export(net, Net("init"), inputs={"x": (3,)})
    tos = [a.i for node in model.graph.node for a in node.attribute if a.name == "to"]
    assert tos == [onnx.TensorProto.INT32, onnx.TensorProto.FLOAT16, 16, onnx.TensorProto.DOUBLE]
    x = np.array([300.7, -2.5, 3.0], np.float32)
    y, i = ReferenceEvaluator(model).run(None, {"x": x})
    assert i.dtype == np.int32 and y.dtype == np.float64
    np.testing.assert_array_equal(i, [300, -2, 3])


@pytest.mark.parametrize(
    "value, match",
    [
        (12345, "12345 is not a tensor type of netbrew's TensorProto.DataType"),
        (TensorProto.ZERO_COLLISION_HASH, "is not a tensor type"),
        ("int33", "'int33' is not a tensor type"),
        (True, "a bool is not a tensor type"),
        (np.dtype("M8[s]"), "has no tensor type"),
    ],
)
def test_bad_spellings_are_refused_with_the_op_named(value, match):
    with pytest.raises(SchemaError, match=match) as info:
        op_def("Cast", ["x"], ["y"], to=value)
    assert str(info.value).startswith("Cast: argument to=")
