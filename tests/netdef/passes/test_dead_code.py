"""eliminate_dead_code keeps what the outputs need and ops with side effects."""

import numpy as np
from _nets import assert_same, conv_bn_net, count

from netbrew.netdef import op_def
from netbrew.netdef.passes import eliminate_dead_code


def test_unused_branch_is_dropped_and_numbers_unchanged():
    net, params, feeds = conv_bn_net()
    before = type(net)()
    before.CopyFrom(net)
    net.op.extend([op_def("Sigmoid", ["r1"], ["unused"]), op_def("Tanh", ["unused"], ["unused2"])])
    snapshot = net.SerializeToString()
    out = eliminate_dead_code(net)
    assert net.SerializeToString() == snapshot  # input untouched
    assert len(out.op) == len(net.op) - 2 and count(out, "Sigmoid") == count(out, "Tanh") == 0
    assert_same(net, out, {**feeds, **params})


def test_side_effects_and_overwritten_blobs(tmp_path):
    net = type(conv_bn_net()[0])(name="n", external_input=["x"], external_output=["y"])
    net.op.extend(
        [
            op_def("Relu", ["x"], ["y"]),  # dead: y is overwritten before anyone reads it
            op_def("Sigmoid", ["x"], ["s"]),
            op_def("Save", ["s"], [], db=str(tmp_path / "s.pb"), db_type="tensorprotos"),
            op_def("Neg", ["x"], ["y"]),
        ]
    )
    out = eliminate_dead_code(net)
    assert [op.type for op in out.op] == ["Sigmoid", "Save", "Neg"]
    feeds = {"x": np.linspace(-1, 1, 5, dtype=np.float32)}
    assert_same(net, out, feeds)
