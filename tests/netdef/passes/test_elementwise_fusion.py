"""fuse_elementwise turns elementwise chains into FusedElementwise ops, same numbers."""

import numpy as np
import pytest
from _nets import count, run

from netbrew import brew
from netbrew.brew import ModelHelper
from netbrew.converters.onnx import export
from netbrew.executor import Predictor, Workspace
from netbrew.netdef import Net, op_def, optimize
from netbrew.netdef.model_dir import inference_net
from netbrew.netdef.passes import fuse_elementwise
from netbrew.proto.netbrew_pb2 import NetDef

ort = pytest.importorskip("onnxruntime")


def _net(ops, inputs, outputs, net_type=""):
    net = NetDef(name="n", type=net_type, external_input=inputs, external_output=outputs)
    net.op.extend(ops)
    return net


def _feeds(*names, shape=(2, 3, 4)):
    rng = np.random.default_rng(0)
    return {n: rng.normal(size=shape).astype(np.float32) for n in names}


def _same_bits(before, after, feeds):
    for a, b in zip(run(before, feeds), run(after, feeds), strict=True):
        np.testing.assert_array_equal(b, a)


def test_chain_becomes_one_op_with_the_same_numbers():
    net = _net(
        [
            op_def("Mul", ["x", "s"], ["t1"]),
            op_def("Add", ["t1", "b"], ["t2"]),
            op_def("Relu", ["t2"], ["t3"]),
            op_def("Tanh", ["t3"], ["y"]),
        ],
        ["x", "s", "b"],
        ["y"],
    )
    snapshot = net.SerializeToString()
    out = fuse_elementwise(net)
    assert net.SerializeToString() == snapshot  # input untouched
    assert [op.type for op in out.op] == ["FusedElementwise"]
    assert list(out.op[0].input) == ["x", "s", "b"] and list(out.op[0].output) == ["y"]
    feeds = _feeds("x", "s", "b")
    _same_bits(net, out, feeds)
    x, s, b = feeds.values()
    np.testing.assert_allclose(run(out, feeds)[0], np.tanh(np.maximum(x * s + b, 0)), rtol=1e-6)


def test_chains_stop_at_fan_out_net_outputs_and_other_ops():
    net = _net(
        [
            op_def("Sigmoid", ["x"], ["a"]),
            op_def("Mul", ["a", "x"], ["b"]),  # x read twice: fine, it is the chain's input
            op_def("Exp", ["b"], ["c"]),  # c has two readers: the chain ends here
            op_def("Neg", ["c"], ["d"]),
            op_def("Softmax", ["c"], ["e"]),
            op_def("Abs", ["d"], ["f"]),  # f is a net output: ends the next chain
            op_def("Sqrt", ["f"], ["g"]),
            op_def("Relu", ["e"], ["h"]),
        ],
        ["x"],
        ["f", "g", "h"],
    )
    out = fuse_elementwise(net)
    assert [op.type for op in out.op] == [
        "FusedElementwise",  # Sigmoid, Mul, Exp -> c
        "Softmax",
        "FusedElementwise",  # Neg, Abs -> f, where the Abs was
        "Sqrt",
        "Relu",
    ]
    assert list(out.op[0].input) == ["x"] and list(out.op[0].output) == ["c"]
    _same_bits(net, out, _feeds("x"))


def test_operand_overwritten_between_steps_blocks_fusion():
    net = _net(
        [
            op_def("Add", ["x", "b"], ["t"]),
            op_def("Softmax", ["x"], ["b"]),  # b changes after the Add read it
            op_def("Relu", ["t"], ["y"]),
            op_def("Mul", ["y", "b"], ["z"]),
        ],
        ["x", "b"],
        ["z"],
    )
    out = fuse_elementwise(net)
    assert [op.type for op in out.op] == ["Add", "Softmax", "FusedElementwise"]
    assert list(out.op[2].input) == ["t", "b"]  # Relu then Mul, after Softmax wrote b
    _same_bits(net, out, _feeds("x", "b"))


def test_in_place_chain_on_cpu_only():
    ops = [
        op_def("Relu", ["x"], ["y"]),
        op_def("Sigmoid", ["y"], ["y"]),
        op_def("Clip", ["y", "lo"], ["y"]),
        op_def("Exp", ["y"], ["z"], device="cuda:0"),
        op_def("Tanh", ["z"], ["w"], device="cuda:0"),
    ]
    net = _net(ops, ["x", "lo"], ["y"])
    out = fuse_elementwise(net)
    assert [op.type for op in out.op] == ["FusedElementwise", "Exp", "Tanh"]
    cpu_only = _net(ops[:3], ["x", "lo"], ["y"])
    feeds = {**_feeds("x"), "lo": np.array(0.6, np.float32)}
    _same_bits(cpu_only, fuse_elementwise(cpu_only), feeds)


def test_exported_model_is_the_unfused_one():
    net = Net("swish")
    net.add_external_input("x", "b")
    net.Add(["x", "b"], "xb")
    net.Sigmoid("xb", "sig")
    net.Mul(["xb", "sig"], "swish")  # xb read twice: the chain starts after the Add
    net.LeakyRelu("swish", "lr", alpha=0.3)
    net.Clip(["lr", "lo", "hi"], "y")
    net.add_external_output("y")
    init = Net("init")
    init.GivenTensorFill([], "lo", shape=[], values=[-0.1])
    init.GivenTensorFill([], "hi", shape=[], values=[0.8])
    init.GivenTensorFill([], "b", shape=[3], values=[0.1, -0.2, 0.3])
    fused = fuse_elementwise(net.proto())
    assert [op.type for op in fused.op] == ["Add", "FusedElementwise"]
    shapes = {"x": (2, 3)}
    plain = export(net, init, inputs=shapes, opset=21)  # what onnxruntime 1.31 reads
    from_fused = export(fused, init, inputs=shapes, opset=21)

    def nodes(model):
        return [
            (n.op_type, list(n.input), list(n.output), list(n.attribute)) for n in model.graph.node
        ]

    assert nodes(from_fused) == nodes(plain)
    x = np.random.default_rng(1).normal(size=(2, 3)).astype(np.float32)
    session = ort.InferenceSession(from_fused.SerializeToString())
    ws = Workspace()
    ws.run_net_once(init)
    ws.feed_blob("x", x)
    ws.run_net_once(fused)
    np.testing.assert_allclose(session.run(None, {"x": x})[0], ws.fetch_blob("y"), rtol=1e-6)


def test_optimize_and_predictor_fuse_the_residual_add_relu():
    model = ModelHelper("res", seed=3)
    c = brew.conv(model, "data", "c1", 4, 4, kernel=3, pad=1)
    s = brew.relu(model, brew.sum(model, [c, "data"], "skip"), "r")
    brew.tanh(model, s, "out")
    net = inference_net(model.net, ["data"], ["out"])
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    params = {b: ws.fetch_blob(b) for b in net.external_input[1:]}
    x = np.random.default_rng(2).normal(size=(2, 4, 5, 5)).astype(np.float32)
    (expected,) = run(net, {"data": x, **params})
    out, _ = optimize(net, level=2, params=params)
    assert [op.type for op in out.op] == ["Conv", "FusedElementwise"]  # Sum, Relu, Tanh
    np.testing.assert_array_equal(run(out, {"data": x, **params})[0], expected)
    predictor = Predictor(model.param_init_net, net)
    assert count(predictor.predict_net, "FusedElementwise") == 1
    np.testing.assert_array_equal(predictor.run({"data": x})["out"], expected)
