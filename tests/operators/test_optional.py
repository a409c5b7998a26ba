"""Optional, OptionalHasElement and OptionalGetElement: None is an empty optional."""

import numpy as np
import pytest
from onnx import helper

from netbrew.errors import OperatorError
from netbrew.executor.runtime import create_runtime
from netbrew.netdef import op_def
from netbrew.proto.netbrew_pb2 import NetDef
from netbrew.testing import check_op, rand

SEQ_TYPE = (
    b"onnx.TypeProto:"
    + helper.make_sequence_type_proto(helper.make_tensor_type_proto(1, [5])).SerializeToString()
)


def run(ops, feeds, outputs):
    blobs = dict(feeds)
    net = NetDef(name="t")
    net.op.extend(ops)
    create_runtime(net).run(blobs)
    return [blobs[o] for o in outputs]


@pytest.mark.parametrize("x", [rand(2, 3), np.array(3, np.int64)])
def test_full_optional_round_trip(x):
    check_op("Optional", [x], lambda x: (x,))
    check_op("OptionalHasElement", [x], lambda x: (np.array(True),))
    check_op("OptionalGetElement", [x], lambda x: (x,))


def test_empty_optional():
    opt, has, has_missing = run(
        [
            op_def("Optional", [], ["opt"], type=[SEQ_TYPE]),
            op_def("OptionalHasElement", ["opt"], ["has"]),
            op_def("OptionalHasElement", [], ["has_missing"]),
        ],
        {},
        ["opt", "has", "has_missing"],
    )
    assert opt is None
    assert has.dtype == np.bool_ and has.shape == () and not has
    assert not has_missing
    with pytest.raises(OperatorError, match="is an empty optional"):
        run([op_def("OptionalGetElement", ["opt"], ["x"])], {"opt": None}, ["x"])


def test_sequence_optional():
    seq = [rand(5), rand(5, seed=1)]
    opt, got = run(
        [op_def("Optional", ["s"], ["opt"]), op_def("OptionalGetElement", ["opt"], ["got"])],
        {"s": seq},
        ["opt", "got"],
    )
    assert opt is seq and got is seq


def test_type_errors():
    with pytest.raises(OperatorError, match="must give the element type"):
        run([op_def("Optional", [], ["opt"])], {}, ["opt"])
    with pytest.raises(OperatorError, match="must be an ONNX TypeProto"):
        run([op_def("Optional", [], ["opt"], type="float")], {}, ["opt"])
