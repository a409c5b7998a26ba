"""fuse_activation turns Conv/FC + Relu into ConvRelu/FCRelu, fuse_conv_epilogue Conv + Add
and/or Relu or Clip into FusedConv, with the same numbers."""

import numpy as np
from _nets import assert_same, conv_bn_net, count

from netbrew.netdef import op_def
from netbrew.netdef.args import args_dict
from netbrew.netdef.passes import fold_batch_norm, fuse_activation, fuse_conv_epilogue
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


def _residual_block(tail):
    """x -> Conv a; x -> Conv s (the shortcut, written after a); Sum(a, s) -> `tail` ops."""
    net = NetDef(name="res", external_input=["x", "wa", "ba", "ws", "lo", "hi"])
    net.external_output.append("y")
    net.op.extend(
        [
            op_def("Conv", ["x", "wa", "ba"], ["a"], pads=[1, 1, 1, 1]),
            op_def("Conv", ["x", "ws"], ["s"]),
            op_def("Sum", ["a", "s"], ["t"]),
            *tail,
        ]
    )
    return net


def _feeds():
    rng = np.random.default_rng(0)
    return {
        "x": rng.normal(size=(2, 3, 5, 5)).astype(np.float32),
        "wa": rng.normal(size=(4, 3, 3, 3)).astype(np.float32),
        "ba": rng.normal(size=4).astype(np.float32),
        "ws": rng.normal(size=(4, 3, 1, 1)).astype(np.float32),
        "lo": np.array(-0.5, np.float32),
        "hi": np.array(1.0, np.float32),
    }


def test_conv_add_relu_becomes_one_fused_conv_where_the_add_ran():
    net = _residual_block([op_def("Relu", ["t"], ["y"])])
    feeds = _feeds()
    out = fuse_conv_epilogue(net, feeds)
    assert [op.type for op in out.op] == ["Conv", "FusedConv"]  # the shortcut conv stays
    fused = out.op[1]
    assert list(fused.input) == ["x", "wa", "ba", "s"] and list(fused.output) == ["y"]
    assert args_dict(fused.arg)["activation"] == "Relu"
    assert_same(net, out, feeds)


def test_conv_clip_and_conv_add_clip_fuse_with_constant_bounds():
    net = _residual_block([op_def("Clip", ["t", "lo", "hi"], ["y"])])
    feeds = _feeds()
    out = fuse_conv_epilogue(net, feeds)
    assert [op.type for op in out.op] == ["Conv", "FusedConv"]
    assert list(out.op[1].input) == ["x", "wa", "ba", "s", "lo", "hi"]
    assert_same(net, out, feeds)
    lone = NetDef(name="c", external_input=["x", "ws", "hi"], external_output=["y"])
    lone.op.extend([op_def("Conv", ["x", "ws"], ["c"]), op_def("Clip", ["c", "", "hi"], ["y"])])
    out = fuse_conv_epilogue(lone, feeds)
    assert [op.type for op in out.op] == ["FusedConv"]
    assert list(out.op[0].input) == ["x", "ws", "", "", "", "hi"]
    assert_same(lone, out, feeds)


def test_clip_bounds_must_be_unwritten_params():
    net = _residual_block([op_def("Clip", ["t", "lo", "hi"], ["y"])])
    feeds = _feeds()
    assert count(fuse_conv_epilogue(net, {}), "FusedConv") == 1  # bounds unknown: Add only
    assert count(fuse_conv_epilogue(net, {}), "Clip") == 1
    written = _residual_block(
        [op_def("Abs", ["lo"], ["lo2"]), op_def("Clip", ["t", "lo2", "hi"], ["y"])]
    )
    out = fuse_conv_epilogue(written, feeds)
    assert count(out, "Clip") == 1 and count(out, "FusedConv") == 1


def test_lone_relu_second_reader_and_overwritten_input_are_left_alone():
    feeds = _feeds()
    lone = NetDef(name="r", external_input=["x", "ws"], external_output=["y"])
    lone.op.extend([op_def("Conv", ["x", "ws"], ["c"]), op_def("Relu", ["c"], ["y"])])
    assert [op.type for op in fuse_conv_epilogue(lone, feeds).op] == ["Conv", "Relu"]
    shared = _residual_block([op_def("Relu", ["t"], ["y"]), op_def("Sigmoid", ["t"], ["z"])])
    shared.external_output.append("z")
    out = fuse_conv_epilogue(shared, feeds)
    assert [op.type for op in out.op] == ["Conv", "FusedConv", "Relu", "Sigmoid"]  # Add only
    assert_same(shared, out, feeds)
    # x is overwritten before the Sum: a fused op there would read the wrong x
    clobbered = NetDef(name="o", external_input=["x", "wa", "ba", "ws"], external_output=["y"])
    clobbered.op.extend(
        [
            op_def("Conv", ["x", "wa", "ba"], ["a"], pads=[1, 1, 1, 1]),
            op_def("Conv", ["x", "ws"], ["s"]),
            op_def("Relu", ["x"], ["x"]),
            op_def("Sum", ["a", "s"], ["y"]),
        ]
    )
    out = fuse_conv_epilogue(clobbered, feeds)
    assert [op.type for op in out.op] == ["Conv", "Conv", "Relu", "Sum"]


def _stem_net(extra_readers=()):
    """MobileNetV2's stem: a 3x3 stride-2 conv + Relu6, read by a depthwise conv + Relu6."""
    net = NetDef(name="stem", external_input=["x", "w1", "b1", "wd", "lo", "hi"])
    net.external_output.append("y")
    net.op.extend(
        [
            op_def("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
            op_def("Clip", ["c", "lo", "hi"], ["h"]),
            op_def("Conv", ["h", "wd"], ["d"], pads=[1, 1, 1, 1], group=8),
            op_def("Clip", ["d", "lo", "hi"], ["y"]),
            *extra_readers,
        ]
    )
    rng = np.random.default_rng(1)
    feeds = {
        "x": rng.normal(size=(2, 3, 17, 15)).astype(np.float32),
        "w1": rng.normal(size=(8, 3, 3, 3)).astype(np.float32),
        "b1": rng.normal(size=8).astype(np.float32),
        "wd": rng.normal(size=(8, 1, 3, 3)).astype(np.float32),
        "lo": np.array(0, np.float32),
        "hi": np.array(6, np.float32),
    }
    return net, feeds


def test_stem_conv_read_only_by_a_depthwise_conv_answers_channels_last():
    net, feeds = _stem_net()
    out = fuse_conv_epilogue(net, feeds)
    assert [op.type for op in out.op] == ["FusedConv", "FusedConv"]
    assert args_dict(out.op[0].arg).get("channels_last") == 1
    assert "channels_last" not in args_dict(out.op[1].arg)  # depthwise: follows its input
    assert_same(net, out, feeds)


def test_stem_conv_with_another_reader_stays_c_ordered():
    net, feeds = _stem_net([op_def("Relu", ["h"], ["r"])])
    out = fuse_conv_epilogue(net, feeds)
    assert "channels_last" not in args_dict(out.op[0].arg)
    net.external_output.append("h")
    assert "channels_last" not in args_dict(fuse_conv_epilogue(net, feeds).op[0].arg)


def _pooled_stem(strides, readers):
    """ShuffleNet's and ResNet's stem: Conv + Relu (ConvRelu after fuse_activation), then
    `readers` of its output r."""
    net = NetDef(name="stem", external_input=["x", "w", "b"], external_output=["y"])
    net.op.extend(
        [
            op_def("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=strides),
            op_def("Relu", ["c"], ["r"]),
            *readers,
        ]
    )
    rng = np.random.default_rng(2)
    feeds = {
        "x": rng.normal(size=(2, 3, 17, 15)).astype(np.float32),
        "w": rng.normal(size=(8, 3, 3, 3)).astype(np.float32),
        "b": rng.normal(size=8).astype(np.float32),
    }
    return net, feeds


def test_stem_conv_read_by_pools_answers_channels_last():
    pools = [
        op_def("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        op_def("AveragePool", ["r"], ["q"], kernel_shape=[3, 3], strides=[2, 2]),
        op_def("Add", ["p", "p"], ["y"]),
    ]
    net, feeds = _pooled_stem([2, 2], pools)
    net.external_output.append("q")
    out = fuse_conv_epilogue(fuse_activation(net), feeds)
    assert out.op[0].type == "FusedConv"
    args = args_dict(out.op[0].arg)
    assert args["activation"] == "Relu" and args["channels_last"] == 1
    assert_same(net, out, feeds)


def test_stem_conv_stays_c_ordered_for_other_readers_and_winograd():
    indices = op_def("MaxPool", ["r"], ["y", "i"], kernel_shape=[2, 2])  # Indices: NumPy's
    net, feeds = _pooled_stem([2, 2], [indices])
    assert fuse_conv_epilogue(fuse_activation(net), feeds).op[0].type == "ConvRelu"
    pool = op_def("MaxPool", ["r"], ["y"], kernel_shape=[2, 2])
    net, feeds = _pooled_stem([1, 1], [pool])  # a stride-1 3x3 conv: Winograd's
    assert fuse_conv_epilogue(fuse_activation(net), feeds).op[0].type == "ConvRelu"
    net, feeds = _pooled_stem([2, 2], [pool, op_def("Sigmoid", ["r"], ["s"])])
    assert fuse_conv_epilogue(fuse_activation(net), feeds).op[0].type == "ConvRelu"


def test_inference_batch_norm_fuses_with_relu_and_a_training_one_does_not():
    rng = np.random.default_rng(0)
    params = {n: rng.uniform(0.5, 1.5, 3).astype(np.float32) for n in ("s", "b", "m", "v")}
    net = NetDef(name="n", external_input=["x", *params], external_output=["y", "z"])
    net.op.extend(
        [
            op_def("BatchNormalization", ["x", "s", "b", "m", "v"], ["h"]),
            op_def("Relu", ["h"], ["y"]),
            op_def(
                "BatchNormalization", ["x", "s", "b", "m", "v"], ["t", "rm", "rv"], training_mode=1
            ),  # fmt: skip
            op_def("Relu", ["t"], ["z"]),
        ]
    )
    out = fuse_activation(net)
    assert [op.type for op in out.op] == ["BatchNormalizationRelu", "BatchNormalization", "Relu"]
    assert list(out.op[0].output) == ["y"]
    feeds = {"x": rng.normal(size=(2, 3, 4, 4)).astype(np.float32), **params}
    assert_same(net, out, feeds)
