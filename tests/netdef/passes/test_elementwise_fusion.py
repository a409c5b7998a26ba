"""fuse_elementwise turns elementwise chains into FusedElementwise ops, same numbers."""

import numpy as np
import pytest
from _nets import count, run

from netbrew import brew, jit
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
    """Bit for bit through the NumPy kernel; the numba loop's exp and tanh are LLVM's,
    equal to rounding."""
    with jit.disabled():
        for a, b in zip(run(before, feeds), run(after, feeds), strict=True):
            np.testing.assert_array_equal(b, a)
    for a, b in zip(run(before, feeds), run(after, feeds), strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)


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


def test_results_read_outside_become_outputs_until_a_reader_comes_first():
    net = _net(
        [
            op_def("Sigmoid", ["x"], ["a"]),
            op_def("Mul", ["a", "x"], ["b"]),  # x read twice: fine, it is an input
            op_def("Exp", ["b"], ["c"]),  # c is read by Neg and by Softmax
            op_def("Neg", ["c"], ["d"]),  # joins: Softmax reads c after it, c an output
            op_def("Softmax", ["c"], ["e"]),
            op_def("Abs", ["d"], ["f"]),  # cannot join: Softmax would read c too early
            op_def("Sqrt", ["f"], ["g"]),  # f is a net output and read here
            op_def("Relu", ["e"], ["h"]),
        ],
        ["x"],
        ["f", "g", "h"],
    )
    out = fuse_elementwise(net)
    assert [op.type for op in out.op] == [
        "FusedElementwise",  # Sigmoid, Mul, Exp, Neg -> c, d, where the Neg was
        "Softmax",
        "FusedElementwise",  # Abs, Sqrt -> f, g
        "Relu",
    ]
    assert list(out.op[0].input) == ["x"] and list(out.op[0].output) == ["c", "d"]
    assert list(out.op[2].input) == ["d"] and list(out.op[2].output) == ["f", "g"]
    _same_bits(net, out, _feeds("x"))


def test_lstm_cell_gate_math_is_one_op_with_two_outputs():
    net = _net(
        [
            op_def("Sigmoid", ["a0"], ["i"]),
            op_def("Add", ["a1", "one"], ["a1b"]),
            op_def("Sigmoid", ["a1b"], ["f"]),
            op_def("Tanh", ["a2"], ["g"]),
            op_def("Sigmoid", ["a3"], ["o"]),
            op_def("Mul", ["f", "c"], ["fc"]),
            op_def("Mul", ["i", "g"], ["ig"]),
            op_def("Add", ["fc", "ig"], ["c2"]),
            op_def("Tanh", ["c2"], ["tc"]),
            op_def("Mul", ["o", "tc"], ["h2"]),
        ],
        ["a0", "a1", "a2", "a3", "one", "c"],
        ["h2", "c2"],
    )
    out = fuse_elementwise(net)
    assert [op.type for op in out.op] == ["FusedElementwise"]
    assert sorted(out.op[0].output) == ["c2", "h2"]
    _same_bits(net, out, {**_feeds("a0", "a1", "a2", "a3", "c"), "one": np.float32(1)[None]})


def test_group_waits_for_no_reader_and_keeps_what_scopes_read():
    """A result read by an op between the group's members cannot move after it; one read
    by a Loop body (an outer-scope read, not an input) stays written."""
    body = NetDef(name="body", external_input=["t", "cond", "v"], external_output=["cond", "w"])
    body.op.extend([op_def("Add", ["v", "u"], ["w"])])  # u: read from the enclosing scope
    net = _net(
        [
            op_def("Relu", ["x"], ["u"]),
            op_def("Softmax", ["u"], ["s"]),  # reads u between Relu and Mul
            op_def("Mul", ["u", "x"], ["m"]),
            op_def("Tanh", ["m"], ["k"]),
            op_def("Neg", ["k"], ["n"]),
            op_def("Loop", ["trip", "", "n"], ["final"], body=body),
            op_def("Add", ["s", "final"], ["y"]),
        ],
        ["x", "trip"],
        ["y"],
    )
    out = fuse_elementwise(net)
    assert [op.type for op in out.op] == ["Relu", "Softmax", "FusedElementwise", "Loop", "Add"]
    assert list(out.op[2].input) == ["u", "x"] and list(out.op[2].output) == ["n"]
    net.op[0].CopyFrom(op_def("Abs", ["x"], ["u"]))
    del net.op[1]  # no reader between: u joins, and stays written for the Loop body
    net.op[-1].CopyFrom(op_def("Add", ["final", "x"], ["y"]))
    out = fuse_elementwise(net)
    assert [op.type for op in out.op] == ["FusedElementwise", "Loop", "Add"]
    assert list(out.op[0].output) == ["u", "n"]
    _same_bits(net, out, {**_feeds("x"), "trip": np.array(3, np.int64)})


def test_subnets_are_fused():
    body = NetDef(name="body", external_input=["t", "cond", "v"], external_output=["cond", "w"])
    body.op.extend([op_def("Mul", ["v", "s"], ["a"]), op_def("Tanh", ["a"], ["w"])])
    then_net = NetDef(name="then", external_output=["r"])
    then_net.op.extend([op_def("Relu", ["x"], ["q"]), op_def("Exp", ["q"], ["r"])])
    else_net = NetDef(name="else", external_output=["r"])
    else_net.op.extend([op_def("Neg", ["x"], ["r"])])
    net = _net(
        [
            op_def("Loop", ["trip", "", "x"], ["looped"], body=body),
            op_def("If", ["flag"], ["branch"], then_branch=then_net, else_branch=else_net),
            op_def("Add", ["looped", "branch"], ["y"]),
        ],
        ["x", "s", "trip", "flag"],
        ["y"],
    )
    out = fuse_elementwise(net)
    loop, if_op = out.op[0], out.op[1]
    assert [op.type for op in loop.arg[0].n.op] == ["FusedElementwise"]
    branches = {a.name: a.n for a in if_op.arg}
    assert [op.type for op in branches["then_branch"].op] == ["FusedElementwise"]
    assert [op.type for op in branches["else_branch"].op] == ["Neg"]
    for flag in (True, False):
        feeds = {**_feeds("x", "s"), "trip": np.array(4, np.int64), "flag": np.array(flag)}
        _same_bits(net, out, feeds)


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
    net.Mul(["xb", "sig"], "swish")  # xb read twice, inside the group
    net.LeakyRelu("swish", "lr", alpha=0.3)
    net.Clip(["lr", "lo", "hi"], "y")
    net.add_external_output("y")
    init = Net("init")
    init.GivenTensorFill([], "lo", shape=[], values=[-0.1])
    init.GivenTensorFill([], "hi", shape=[], values=[0.8])
    init.GivenTensorFill([], "b", shape=[3], values=[0.1, -0.2, 0.3])
    fused = fuse_elementwise(net.proto())
    assert [op.type for op in fused.op] == ["FusedElementwise"]
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
    c = brew.fc(model, "data", "fc1", 4, 4)  # (a Conv would take Sum and Relu: FusedConv)
    s = brew.relu(model, brew.sum(model, [c, "data"], "skip"), "r")
    brew.tanh(model, s, "out")
    net = inference_net(model.net, ["data"], ["out"])
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    params = {b: ws.fetch_blob(b) for b in net.external_input[1:]}
    x = np.random.default_rng(2).normal(size=(2, 4)).astype(np.float32)
    (expected,) = run(net, {"data": x, **params})
    out, _ = optimize(net, level=2, params=params)
    assert [op.type for op in out.op] == ["FC", "FusedElementwise"]  # Sum, Relu, Tanh
    with jit.disabled():
        np.testing.assert_array_equal(run(out, {"data": x, **params})[0], expected)
    np.testing.assert_allclose(run(out, {"data": x, **params})[0], expected, rtol=1e-6)
    predictor = Predictor(model.param_init_net, net)
    assert count(predictor.predict_net, "FusedElementwise") == 1
    np.testing.assert_allclose(predictor.run({"data": x})["out"], expected, rtol=1e-6)
