"""Edges of the inference passes, the Predictor, the profiler and the command line, found
by using them as a user would; numbers checked against optimize=False, onnxruntime or
NumPy."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import netbrew as nb
from netbrew.cli import _parse_shape, main
from netbrew.converters.onnx import export, import_model
from netbrew.errors import FeedError
from netbrew.executor import Workspace
from netbrew.netdef import Net

RNG = np.random.default_rng(0)


def _both(init, net, feeds):
    """The outputs with and without the inference passes."""
    return (nb.Predictor(init, net, optimize=opt).run(feeds) for opt in (True, False))


def test_a_per_row_gemm_bias_is_not_folded_as_per_channel():
    init, net = Net("init"), Net("gemm")
    for name, value in {"w": RNG.normal(size=(3, 4)), "c": RNG.normal(size=(3, 1)),
                        "s": RNG.normal(size=(4,))}.items():  # fmt: skip
        init.GivenTensorFill([], name, shape=list(value.shape), values=value.ravel().tolist())
    net.add_external_input("a", "w", "c", "s")
    net.Gemm(["a", "w", "c"], "g")
    net.Mul(["g", "s"], "y")
    net.add_external_output("y")
    a = RNG.normal(size=(3, 3)).astype(np.float32)  # M = 3 rows, as many as c has
    folded, plain = _both(init, net, {"a": a})
    np.testing.assert_allclose(folded["y"], plain["y"], rtol=1e-5, atol=1e-6)


def test_fusions_keep_a_blob_an_if_branch_reads():
    def info(name, shape, kind=TensorProto.FLOAT):
        return helper.make_tensor_value_info(name, kind, shape)

    then = helper.make_graph([helper.make_node("Identity", ["y"], ["t"])], "then", [],
                             [info("t", [1, 2, 4, 4])])  # fmt: skip
    other = helper.make_graph([helper.make_node("Neg", ["y"], ["e"])], "else", [],
                              [info("e", [1, 2, 4, 4])])  # fmt: skip
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"]),
         helper.make_node("Relu", ["y"], ["r"]),
         helper.make_node("If", ["cond"], ["z"], then_branch=then, else_branch=other)],
        "g", [info("x", [1, 3, 4, 4]), info("cond", [], TensorProto.BOOL)],
        [info("r", [1, 2, 4, 4]), info("z", [1, 2, 4, 4])],
        [numpy_helper.from_array(RNG.normal(size=(2, 3, 1, 1)).astype(np.float32), "w"),
         numpy_helper.from_array(np.ones(2, np.float32), "b")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = RNG.normal(size=(1, 3, 4, 4)).astype(np.float32)
    for cond in (True, False):
        feeds = {"x": x, "cond": np.array(cond)}
        folded, plain = _both(*import_model(model), feeds)
        for name in ("r", "z"):
            np.testing.assert_allclose(folded[name], plain[name], rtol=1e-5, atol=1e-6)


def test_outputs_never_share_memory_with_the_parameters():
    init, net = Net("init"), Net("alias")
    init.GivenTensorFill([], "w", shape=[3], values=[1.0, 2.0, 3.0])
    net.add_external_input("x", "w")
    net.Identity(["w"], "wi")
    net.Add(["x", "w"], "y")
    net.add_external_output("wi", "y")
    for optimize in (True, False):
        predictor = nb.Predictor(init, net, optimize=optimize)
        out = predictor.run({"x": np.zeros(3, np.float32)})
        out["wi"] *= 0
        np.testing.assert_array_equal(predictor.run({"x": np.zeros(3, np.float32)})["y"], [1, 2, 3])


def test_a_fed_blob_the_passes_folded_is_refused():
    w = RNG.normal(size=(5, 4)).astype(np.float32)
    init, net = Net("init"), Net("p")
    init.GivenTensorFill([], "W", shape=[5, 4], values=w.ravel().tolist())
    init.ConstantFill([], "data", shape=[4, 3], value=0.0)  # a Caffe2 placeholder
    init.ConstantFill([], "c", shape=[], value=2.0)
    net.add_external_input("W", "data", "c")
    net.Div([net.MatMul(["W", "data"], "s"), "c"], "y")
    net.add_external_output("y")
    data = RNG.normal(size=(4, 3)).astype(np.float32)
    with pytest.raises(FeedError, match="input 'data' is filled by the init net.*optimize=False"):
        nb.Predictor(init, net).run({"data": data})
    got = nb.Predictor(init, net, optimize=False).run({"data": data})["y"]
    np.testing.assert_allclose(got, w @ data / 2, rtol=1e-5)


def test_export_renames_an_input_written_in_place():
    ort = pytest.importorskip("onnxruntime")
    net = Net("inplace")
    net.add_external_input("x")
    net.Relu(["x"], "x")
    net.Sigmoid(["x"], "x")
    net.add_external_output("x")
    model = export(net, None, inputs={"x": (1, 2)})
    onnx.checker.check_model(model, full_check=True)
    x = np.float32([[-1.0, 2.0]])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {"x": x})[0]
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-np.maximum(x, 0))), rtol=1e-6)


def test_profile_counts_flops_of_an_op_that_writes_its_input():
    ws = Workspace()
    ws.feed_blob("a", RNG.normal(size=(64, 512)).astype(np.float32))
    ws.feed_blob("w", RNG.normal(size=(512, 2)).astype(np.float32))
    net = Net("mm")
    net.MatMul(["a", "w"], "a")
    ws.create_net(net)
    profile = ws.run_net("mm", profile=True)
    (row,) = profile.rows()
    assert row.flops == 2 * 64 * 512 * 2


def test_run_refuses_two_outputs_with_one_file_name(tmp_path, capsys):
    net, init = Net("two"), Net("init")
    net.add_external_input("x")
    net.Relu(["x"], "a/b")
    net.Neg(["x"], "a_b")
    net.add_external_output("a/b", "a_b")
    model = export(net, init, inputs={"x": (2,)})
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    np.save(tmp_path / "x.npy", np.float32([1, -1]))
    args = ["run", str(path), "--input", f"x={tmp_path / 'x.npy'}", "-o", str(tmp_path / "o")]
    assert main(args) == 1
    assert "outputs 'a/b' and 'a_b' would both be written to a_b.npy" in capsys.readouterr().err


def test_bench_feeds_inputs_of_their_declared_dtype(tmp_path, capsys):
    init, net = Net("init"), Net("emb")
    init.GivenTensorFill([], "table", shape=[4, 2], values=list(range(8)))
    net.add_external_input("ids", "table")
    net.Gather(["table", "ids"], "y", axis=0)
    net.add_external_output("y")
    model = export(net, init, inputs={"ids": ((2, 3), np.int64)})
    path = tmp_path / "emb.onnx"
    onnx.save(model, path)
    assert main(["bench", str(path), "--input", "ids=2x3", "--iters", "1"]) == 0
    assert _parse_shape("cond=scalar") == ("cond", ())


def test_an_error_in_an_optimized_net_says_how_to_see_the_ops_as_written():
    init, net = Net("init"), Net("p")
    init.GivenTensorFill([], "w", shape=[3, 4], values=[0.1] * 12)
    init.GivenTensorFill([], "b", shape=[3], values=[0.0] * 3)
    net.add_external_input("x", "w", "b")
    net.FC(["x", "w", "b"], "fc").Relu([], "r")
    net.add_external_output("r")
    x = np.ones((2, 5), np.float32)
    with pytest.raises(nb.OperatorError, match=r"(?s)FCRelu.*K=5.*optimize=False"):
        nb.Predictor(init, net).run({"x": x})
    with pytest.raises(nb.OperatorError, match=r"op #0 FC ") as caught:
        nb.Predictor(init, net, optimize=False).run({"x": x})
    assert "optimize=False" not in str(caught.value)
