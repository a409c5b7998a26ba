"""ONNX edges found by using the bridge as a user would, each checked against onnxruntime:
a weight shared by two folded BatchNorms, overridable initializers, one-element
constants of higher rank in the fusion passes, an empty batch through a fused conv,
lowering to older opsets, and `compare` on bad feeds and files."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import netbrew as nb
from netbrew.converters.onnx import backend, export, import_model
from netbrew.errors import FeedError, ModelLoadError, UnsupportedConversion
from netbrew.netdef import Net

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(0)


def _model(nodes, inputs, initializers, opset=17):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in initializers.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _ort(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _bn(tag):
    return {f"s{tag}": RNG.uniform(0.5, 2, 3), f"b{tag}": RNG.normal(size=3),
            f"m{tag}": RNG.normal(size=3), f"v{tag}": RNG.uniform(0.5, 2, 3)}  # fmt: skip


def test_a_weight_shared_by_two_convs_folds_each_batch_norm_apart():
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "s1", "b1", "m1", "v1"], ["y"]),
        helper.make_node("Conv", ["x2", "w"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c2", "s2", "b2", "m2", "v2"], ["z"]),
    ]
    model = _model(nodes, [("x", [1, 2, 5, 5]), ("x2", [1, 2, 5, 5])],
                   {"w": RNG.normal(size=(3, 2, 3, 3)), **_bn(1), **_bn(2)})  # fmt: skip
    model.graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
    feeds = {k: RNG.normal(size=(1, 2, 5, 5)).astype(np.float32) for k in ("x", "x2")}
    want = _ort(model, feeds)
    got = nb.Predictor(*import_model(model)).run(feeds)
    for name, expected in zip(("y", "z"), want):
        np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=1e-5)
    for expected, actual in zip(want, backend.prepare(model).run(feeds)):
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


def test_a_fed_overridable_initializer_replaces_its_default():
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("BatchNormalization", ["c", "s1", "b1", "m1", "v1"], ["bn"]),
        helper.make_node("Add", ["k", "one"], ["k1"]),
        helper.make_node("Mul", ["bn", "k1"], ["y"]),
    ]
    params = {"w": RNG.normal(size=(3, 2, 3, 3)), **_bn(1), "k": np.full(3, 2.0)[:, None, None],
              "one": np.ones(1)}  # fmt: skip
    model = _model(nodes, [("x", [1, 2, 5, 5]), ("s1", [3]), ("k", [3, 1, 1])], params)
    x = RNG.normal(size=(1, 2, 5, 5)).astype(np.float32)
    fed = {"x": x, "s1": np.float32([3, -1, 0.5]), "k": np.float32([5, 6, 7]).reshape(3, 1, 1)}
    for feeds in ({"x": x}, fed):
        (want,) = _ort(model, feeds)
        got = nb.Predictor(*import_model(model)).run(feeds)["y"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(backend.prepare(model).run(feeds)[0], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("constant_shape", [[1, 1, 1], [1], []])
def test_fusions_keep_the_rank_a_one_element_constant_adds(constant_shape):
    half = np.full(constant_shape, 0.5, np.float32)
    root = np.full(constant_shape, np.sqrt(2.0), np.float32)
    nodes = [  # MatMul / scale, then exact GELU written out
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Div", ["m", "scale"], ["a"]),
        helper.make_node("Div", ["a", "root"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["p"]),
        helper.make_node("Mul", ["a", "p"], ["h"]),
        helper.make_node("Mul", ["h", "half"], ["y"]),
    ]
    params = {"w": RNG.normal(size=(4, 5)), "scale": np.full(constant_shape, 2.0),
              "root": root, "one": np.ones(constant_shape), "half": half}  # fmt: skip
    model = _model(nodes, [("x", [3, 4])], params)
    feeds = {"x": RNG.normal(size=(3, 4)).astype(np.float32)}
    (want,) = _ort(model, feeds)
    got = nb.Predictor(*import_model(model)).run(feeds)["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_fused_conv_runs_an_empty_batch():
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]  # fmt: skip
    model = _model(nodes, [("x", ["N", 2, 8, 8])],
                   {"w": RNG.normal(size=(4, 2, 3, 3)), "b": RNG.normal(size=4)})  # fmt: skip
    got = nb.Predictor(*import_model(model)).run({"x": np.zeros((0, 2, 8, 8), np.float32)})
    assert got["y"].shape == (0, 4, 8, 8)


def _bn_net():
    init, net = Net("init"), Net("bn")
    for name, value in {"w": RNG.normal(size=(3, 2, 3, 3)), **_bn("")}.items():
        init.GivenTensorFill([], name, values=np.asarray(value, np.float32).ravel().tolist(),
                             shape=list(np.shape(value)))  # fmt: skip
    net.add_external_input("x", "w", "s", "b", "m", "v")
    net.Conv(["x", "w"], "c", kernel_shape=[3, 3])
    net.BatchNormalization(["c", "s", "b", "m", "v"], "bn")
    net.Gelu(["bn"], "y", approximate="tanh")
    net.Gelu(["y"], "z")
    net.add_external_output("z")
    return init, net


@pytest.mark.parametrize("opset", [9, 13, 14, 17, 19, 21])
def test_export_lowers_batch_norm_and_gelu_to_older_opsets(opset):
    init, net = _bn_net()
    x = RNG.normal(size=(1, 2, 6, 6)).astype(np.float32)
    model = export(net, init, inputs={"x": (1, 2, 6, 6)}, opset=opset)
    assert next(o.version for o in model.opset_import if o.domain == "") == opset
    if opset < 20:
        assert "Gelu" not in {n.op_type for n in model.graph.node}
    want = nb.Predictor(init, net).run({"x": x})["z"]
    np.testing.assert_allclose(_ort(model, {"x": x})[0], want, rtol=1e-4, atol=1e-5)


def test_export_names_what_an_opset_lacks():
    init, net = Net("init"), Net("ln")
    init.ConstantFill([], "g", shape=[4], value=1.0)
    net.add_external_input("x", "g")
    net.LayerNormalization(["x", "g"], "y")
    net.add_external_output("y")
    with pytest.raises(UnsupportedConversion, match=r"opset 16: it has no LayerNormalization "
                       r"\(from opset 17\)"):  # fmt: skip
        export(net, init, inputs={"x": (2, 4)}, opset=16)
    with pytest.raises(UnsupportedConversion, match="knows default-domain opsets 7 to"):
        export(net, init, inputs={"x": (2, 4)}, opset=99)


def test_compare_refuses_bad_feeds_and_files_by_name(tmp_path):
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", ["N", 4])], {})
    with pytest.raises(FeedError, match="input 'x' has dtype float64, expected float32"):
        nb.compare(model, {"x": np.ones((2, 4))})
    with pytest.raises(FeedError, match="input 'x' has 1 dims"):
        nb.compare(model, {"x": np.ones(4, np.float32)})
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage\xff\xff\xff")
    with pytest.raises(ModelLoadError, match="bad.onnx: not a valid ONNX model"):
        nb.compare(str(bad), {"x": np.ones((2, 4), np.float32)})
    path = tmp_path / "relu.onnx"
    onnx.save(model, path)
    report = nb.compare(str(path), {"x": RNG.normal(size=(2, 4)).astype(np.float32)})
    assert report.ok


def test_export_keeps_the_symbolic_dims_of_inputs_named_by_value_info():
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("ReduceSum", ["r", "axes"], ["y"], keepdims=1)]  # fmt: skip
    source = _model(nodes, [("x", ["N", "T", 4])], {})
    source.graph.initializer.append(numpy_helper.from_array(np.array([2], np.int64), "axes"))
    init, net = import_model(source)
    model = export(net, init, inputs=["x"])
    dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["N", "T", 4]
    out = [d.dim_param or d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    assert out == ["N", "T", 1]
    x = RNG.normal(size=(3, 5, 4)).astype(np.float32)
    np.testing.assert_allclose(_ort(model, {"x": x})[0], np.maximum(x, 0).sum(2, keepdims=True),
                               rtol=1e-5)  # fmt: skip


def test_the_backend_refuses_a_feed_the_model_does_not_take():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", ["N", 4])], {})
    rep = backend.prepare(model)
    x = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(rep.run({"x": x})[0], x)
    with pytest.raises(FeedError, match="unexpected input 'xx'; the model's inputs are: x"):
        rep.run({"x": x, "xx": x})
