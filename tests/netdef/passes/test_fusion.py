"""fuse_activation turns Conv/FC + Relu into ConvRelu/FCRelu with the same numbers."""

import numpy as np
from _nets import assert_same, conv_bn_net, count

from netbrew.netdef import op_def
from netbrew.netdef.passes import fold_batch_norm, fuse_activation
from netbrew.proto.netbrew_pb2 import NetDef


def test_conv_and_fc_fuse_with_relu():
    net, params, feeds = conv_bn_net()
    net, params = fold_batch_norm(net, params)
    out = fuse_activation(net)
    assert count(out, "Relu") == 0 and count(out, "ConvRelu") == 1 and count(out, "FCRelu") == 1
    assert_same(net, out, {**feeds, **params})


def test_gemm_relu_with_a_second_reader_is_not_fused():
    net = NetDef(name="n", external_input=["a", "b"], external_output=["y", "z"])
    net.op.extend(
        [
            op_def("Gemm", ["a", "b"], ["g"], transB=1),
            op_def("Relu", ["g"], ["y"]),
            op_def("Gemm", ["a", "b"], ["h"]),
            op_def("Relu", ["h"], ["z"]),
            op_def("Sigmoid", ["g"], ["s"]),  # a second reader of g
        ]
    )
    out = fuse_activation(net)
    assert [op.type for op in out.op] == ["Gemm", "Relu", "GemmRelu", "Sigmoid"]
    rng = np.random.default_rng(0)
    feeds = {k: rng.normal(size=(3, 3)).astype(np.float32) for k in "ab"}
    assert_same(net, out, feeds)
