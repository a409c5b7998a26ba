"""share_blobs renames intermediates so dead blobs are overwritten: less memory held,
same numbers, and nothing a caller reads by name is renamed."""

import numpy as np
import onnx
import pytest
from _nets import run
from onnx import helper

from netbrew import brew
from netbrew.brew import ModelHelper
from netbrew.converters.onnx import backend
from netbrew.executor import Predictor
from netbrew.executor.dag import op_dependencies
from netbrew.executor.runtime import create_runtime
from netbrew.netdef import op_def, optimize
from netbrew.netdef.model_dir import inference_net
from netbrew.netdef.passes import share_blobs
from netbrew.proto.netbrew_pb2 import NetDef

UNARY = ["Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Softsign"]


def _net(ops, inputs, outputs, net_type=""):
    net = NetDef(name="n", type=net_type, external_input=inputs, external_output=outputs)
    net.op.extend(ops)
    return net


def _deep(n=12, net_type=""):
    """x -> n unary ops, with a skip Add every third op, -> y."""
    ops, prev = [], "x"
    for i in range(n):
        ops.append(op_def(UNARY[i % len(UNARY)], [prev], [f"a{i}"]))
        prev = f"a{i}"
        if i % 3 == 2:
            ops.append(op_def("Add", [prev, f"a{i - 2}"], [f"s{i}"]))
            prev = f"s{i}"
    ops.append(op_def("Softmax", [prev], ["y"]))
    return _net(ops, ["x"], ["y"], net_type)


def _names(net):
    return {b for op in net.op for b in op.output} - set(net.external_output)


def _peak_bytes(net, feeds):
    """Runs `net` op by op; the most bytes its blob dict held (feeds excluded)."""
    blobs, peak = dict(feeds), 0
    for op in create_runtime(net).ops:
        op.run(blobs)
        peak = max(peak, sum(v.nbytes for k, v in blobs.items() if k not in feeds))
    return peak


def _same_bits(before, after, feeds):
    for a, b in zip(run(before, feeds), run(after, feeds), strict=True):
        np.testing.assert_array_equal(b, a)


def test_deep_net_holds_a_few_blobs_and_gives_the_same_numbers():
    net = _deep()
    snapshot = net.SerializeToString()
    out = share_blobs(net)
    assert net.SerializeToString() == snapshot  # input untouched
    assert len(_names(net)) == 16 and len(_names(out)) <= 3
    assert list(out.external_input) == ["x"] and out.op[0].input == ["x"]
    assert out.op[-1].output == ["y"]
    feeds = {"x": np.random.default_rng(0).normal(size=(8, 256)).astype(np.float32)}
    _same_bits(net, out, feeds)
    one = feeds["x"].nbytes
    assert _peak_bytes(net, feeds) == 17 * one  # every intermediate kept to the end
    assert _peak_bytes(out, feeds) <= 4 * one


def test_in_place_ops_stay_in_place_and_protected_names_are_kept():
    net = _net(
        [
            op_def("Mul", ["x", "w"], ["t"]),  # w: read before written, a parameter
            op_def("Relu", ["t"], ["u"]),
            op_def("Sigmoid", ["u"], ["u"]),  # in place
            op_def("Tanh", ["u"], ["fetched"]),
            op_def("Neg", ["fetched"], ["v"]),
            op_def("Exp", ["v"], ["z"]),
            op_def("Abs", ["z"], ["y"]),
        ],
        ["x"],
        ["y"],
    )
    net.op[6].control_input.append("v")
    out = share_blobs(net, keep=["fetched"])
    assert out.op[2].input == out.op[2].output  # still in place
    assert out.op[0].input == ["x", "w"] and out.op[3].output == ["fetched"]
    assert out.op[4].output == ["v"] and out.op[6].control_input == ["v"]
    assert out.op[5].output[0] == "u"  # z reuses u, dead since the Tanh (t is too)
    rng = np.random.default_rng(1)
    _same_bits(net, out, {"x": rng.normal(size=(3, 4)), "w": rng.normal(size=(4,))})


def test_dag_reuse_adds_no_dependency():
    """Two branches: on a dag net a name moves only along existing dependencies."""

    def branches(net_type):
        ops = []
        for side in "lr":
            ops += [
                op_def("Relu", ["x"], [f"{side}0"]),
                op_def("Tanh", [f"{side}0"], [f"{side}1"]),
                op_def("Neg", [f"{side}1"], [f"{side}2"]),
                op_def("Abs", [f"{side}2"], [f"{side}3"]),
            ]
        ops.append(op_def("Add", ["l3", "r3"], ["y"]))
        return _net(ops, ["x"], ["y"], net_type)

    def closure(net):
        deps = op_dependencies(create_runtime(net).ops)
        reach = []
        for mine in deps:
            reach.append(set(mine).union(*(reach[d] for d in mine)))
        return reach

    dag, simple = share_blobs(branches("dag")), share_blobs(branches(""))
    assert all(a <= b for a, b in zip(closure(dag), closure(branches("dag"))))
    assert closure(branches("dag"))[4] == set()  # the branches stay independent
    assert len(_names(simple)) < len(_names(dag)) < len(_names(branches("dag")))
    feeds = {"x": np.random.default_rng(2).normal(size=(5, 6))}
    _same_bits(branches("dag"), dag, feeds)
    _same_bits(branches(""), simple, feeds)


def test_control_flow_nets_are_left_alone():
    then = NetDef(name="then", external_output=["t"])
    then.op.extend([op_def("Neg", ["a"], ["t"])])  # reads outer "a" by name
    net = _net(
        [
            op_def("Relu", ["x"], ["a"]),
            op_def("Sigmoid", ["a"], ["b"]),
            op_def("If", ["c"], ["y"], then_branch=then, else_branch=then),
        ],
        ["x", "c"],
        ["y"],
    )
    assert share_blobs(net).SerializeToString() == net.SerializeToString()


def test_optimize_shares_at_level_2_and_keeps_what_it_is_told():
    net = _deep()
    assert _names(optimize(net, level=1)) == _names(net)
    out = optimize(net, level=2)
    assert len(_names(out)) <= 4  # fusion leaves a3, a4 live together (two outputs), a5...
    feeds = {"x": np.random.default_rng(3).normal(size=(2, 5)).astype(np.float32)}
    _same_bits(net, out, feeds)
    kept = optimize(net, level=2, keep=["a4"])
    assert "a4" in _names(kept) and run(kept, feeds, ["a4"])[0].shape == (2, 5)


def test_predictor_and_onnx_backend_outputs_are_unchanged():
    model = ModelHelper("cnn", seed=4)
    h = brew.relu(model, brew.conv(model, "data", "c1", 3, 4, kernel=3, pad=1), "r1")
    h = brew.relu(model, brew.conv(model, h, "c2", 4, 4, kernel=3, pad=1), "r2")
    h = brew.relu(model, brew.sum(model, [h, "r1"], "s"), "r3")
    brew.softmax(model, brew.fc(model, h, "fc", 4 * 6 * 6, 5), "prob")
    net = inference_net(model.net, ["data"], ["prob"])
    x = np.random.default_rng(5).normal(size=(2, 3, 6, 6)).astype(np.float32)
    plain = Predictor(model.param_init_net, net, optimize=False)
    fast = Predictor(model.param_init_net, net)
    assert len(_names(fast.predict_net)) < len(_names(plain.predict_net))
    np.testing.assert_allclose(fast.run({"data": x})["prob"], plain.run({"data": x})["prob"])

    nodes = [
        helper.make_node("Relu", ["X"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["b"]),
        helper.make_node("Softmax", ["b"], ["c"]),
        helper.make_node("Tanh", ["c"], ["d"]),
        helper.make_node("Softmax", ["d"], ["Y"]),
    ]
    info = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2, 3]) for n in "XY"]
    graph = helper.make_graph(nodes, "g", info[:1], info[1:])
    model_proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model_proto.ir_version = 10  # what onnxruntime 1.31 reads
    rep = backend.prepare(model_proto)
    assert len(_names(rep.runtime.net)) < 4
    ort = pytest.importorskip("onnxruntime")
    xs = np.random.default_rng(6).normal(size=(2, 3)).astype(np.float32)
    session = ort.InferenceSession(model_proto.SerializeToString())
    (expected,) = session.run(None, {"X": xs})
    np.testing.assert_allclose(rep.run([xs]).Y, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(backend.run_model(model_proto, [xs])[0], expected, rtol=1e-6)
