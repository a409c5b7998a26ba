"""fold_constants evaluates constant subgraphs once and leaves random ops alone."""

import numpy as np
from _nets import assert_same, count, run

from netbrew.netdef import op_def
from netbrew.netdef.passes import eliminate_dead_code, fold_constants
from netbrew.proto.netbrew_pb2 import NetDef


def test_folds_constants_and_given_params():
    net = NetDef(name="n", external_input=["x", "w"], external_output=["y"])
    net.op.extend(
        [
            op_def("Constant", [], ["c"], value=np.arange(4, dtype=np.float32)),
            op_def("Mul", ["c", "c"], ["c2"]),
            op_def("Transpose", ["w"], ["wt"]),  # w is a given constant
            op_def("Add", ["wt", "c2"], ["bias"]),
            op_def("Add", ["x", "bias"], ["y"]),
        ]
    )
    w = np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32)
    snapshot = net.SerializeToString()
    out = eliminate_dead_code(fold_constants(net, {"w": w}))
    assert net.SerializeToString() == snapshot
    assert [op.type for op in out.op] == ["Constant", "Add"]
    feeds = {"x": np.ones((4, 4), np.float32), "w": w}
    assert_same(net, out, feeds)


def test_random_ops_and_overwritten_blobs_are_not_folded():
    net = NetDef(name="n", external_input=["x"], external_output=["y", "r"])
    net.op.extend(
        [
            op_def("Constant", [], ["c"], value=np.ones(3, np.float32)),
            op_def("Neg", ["x"], ["c"]),  # c is no longer a constant after this
            op_def("Relu", ["c"], ["y"]),
            op_def("RandomNormal", [], ["r"], shape=[3]),
        ]
    )
    out = fold_constants(net)
    assert [op.type for op in out.op] == ["Constant", "Neg", "Relu", "RandomNormal"]
    assert count(out, "Constant") == 1
    x = np.array([1.0, -2.0, 3.0], np.float32)
    np.testing.assert_array_equal(run(out, {"x": x}, ["y"])[0], np.maximum(-x, 0))
