"""eliminate_common_subexpressions merges identical deterministic ops."""

import numpy as np
from _nets import assert_same, count

from netbrew.netdef import op_def
from netbrew.netdef.passes import eliminate_common_subexpressions
from netbrew.proto.netbrew_pb2 import NetDef


def test_identical_ops_merge_and_readers_follow():
    net = NetDef(name="n", external_input=["x"], external_output=["y", "r"])
    net.op.extend(
        [
            op_def("Sigmoid", ["x"], ["a"]),
            op_def("Sigmoid", ["x"], ["b"]),
            op_def("Add", ["a", "b"], ["y"]),
            op_def("RandomUniform", [], ["r1"], shape=[2]),
            op_def("RandomUniform", [], ["r2"], shape=[2]),  # never merged: rng
            op_def("Add", ["r1", "r2"], ["r"]),
        ]
    )
    snapshot = net.SerializeToString()
    out = eliminate_common_subexpressions(net)
    assert net.SerializeToString() == snapshot
    assert count(out, "Sigmoid") == 1 and count(out, "RandomUniform") == 2
    assert list(out.op[1].input) == ["a", "a"]
    x = np.linspace(-2, 2, 6, dtype=np.float32)
    assert_same(
        NetDef(name="m", external_output=["y"], op=net.op[:3]),
        NetDef(name="m", external_output=["y"], op=out.op[:2]),
        {"x": x},
    )


def test_external_outputs_and_overwritten_inputs_are_kept():
    net = NetDef(name="n", external_input=["x"], external_output=["a", "b", "d"])
    net.op.extend(
        [
            op_def("Exp", ["x"], ["a"]),
            op_def("Exp", ["x"], ["b"]),  # an external output: stays
            op_def("Neg", ["x"], ["x"]),
            op_def("Exp", ["x"], ["d"]),  # reads a newer x: not the same op
        ]
    )
    out = eliminate_common_subexpressions(net)
    assert count(out, "Exp") == 3
    assert_same(net, out, {"x": np.arange(3, dtype=np.float32)})
