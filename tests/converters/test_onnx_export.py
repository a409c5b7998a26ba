"""NetDef -> ONNX: brew-built nets round-trip through onnxruntime and back into netbrew."""

import numpy as np
import onnx
import pytest

from netbrew import brew
from netbrew.brew import ModelHelper
from netbrew.converters.onnx import export, import_model
from netbrew.errors import UnsupportedConversion
from netbrew.executor import Workspace
from netbrew.netdef import Net
from netbrew.netdef.model_dir import inference_net

ort = pytest.importorskip("onnxruntime")
ORT_OPSET = 21  # onnxruntime 1.31 reads IR 13 / opset <= 26; 21 is widely supported


def mlp():
    model = ModelHelper("mlp", seed=1)
    h = brew.relu(model, brew.fc(model, "data", "fc1", 16, 32), "h")
    h = brew.tanh(model, brew.fc(model, h, "fc2", 32, 32), "h2")
    brew.softmax(model, brew.fc(model, h, "fc3", 32, 5), "prob")
    return model, (4, 16), "prob"


def lenet():
    model = ModelHelper("lenet", seed=2)
    c = brew.conv(model, "data", "conv1", 1, 6, kernel=5, pad=2)
    p = brew.max_pool(model, brew.relu(model, c, "r1"), "p1", kernel=2, stride=2)
    c = brew.conv(model, p, "conv2", 6, 16, kernel=5)
    p = brew.average_pool(model, brew.relu(model, c, "r2"), "p2", kernel=2, stride=2)
    f = brew.relu(model, brew.fc(model, p, "fc1", 16 * 5 * 5, 32), "r3")
    brew.softmax(model, brew.fc(model, f, "fc2", 32, 10), "prob")
    return model, (2, 1, 28, 28), "prob"


def resnet_block():
    model = ModelHelper("resblock", seed=3)
    c1 = brew.conv(model, "data", "c1", 8, 8, kernel=3, pad=1, no_bias=True)
    b1 = brew.relu(model, brew.spatial_bn(model, c1, "bn1", 8, is_test=True), "r1")
    c2 = brew.conv(model, b1, "c2", 8, 8, kernel=3, pad=1, no_bias=True)
    b2 = brew.spatial_bn(model, c2, "bn2", 8, is_test=True)
    out = brew.relu(model, brew.sum(model, [b2, "data"], "skip"), "out")
    brew.global_avg_pool(model, out, "gap")
    return model, (2, 8, 6, 6), "gap"


def with_nontrivial_bn_stats(ws, model):
    rng = np.random.default_rng(0)
    for p in model.get_computed_params():
        shape = ws.fetch_blob(p).shape
        value = rng.uniform(0.5, 1.5, shape) if p.endswith("_rv") else rng.normal(size=shape)
        ws.feed_blob(p, value.astype(np.float32))


@pytest.mark.parametrize("build", [mlp, lenet, resnet_block], ids=lambda f: f.__name__)
def test_brew_net_to_onnxruntime(build):
    model, shape, output = build()
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    with_nontrivial_bn_stats(ws, model)
    net = inference_net(model.net, ["data"], [output])
    init = Net("init")
    for blob in net.external_input[1:]:
        brew.initializers.add_given_fill(init, blob, ws.fetch_blob(blob))
    x = np.random.default_rng(5).normal(size=shape).astype(np.float32)
    ws.feed_blob("data", x)
    ws.run_net_once(net)
    expected = ws.fetch_blob(output)

    onnx_model = export(net, init, inputs={"data": shape}, opset=ORT_OPSET, dynamic_batch=True)
    onnx.checker.check_model(onnx_model, full_check=True)
    names = {n for node in onnx_model.graph.node for n in node.output}
    assert output in names and {i.name for i in onnx_model.graph.initializer} >= {
        p for p in net.external_input[1:]
    }
    session = ort.InferenceSession(onnx_model.SerializeToString())
    got = session.run(None, {"data": x})[0]
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4)
    bigger = np.concatenate([x, x])  # the batch dimension is symbolic
    assert session.run(None, {"data": bigger})[0].shape[0] == 2 * shape[0]

    back_init, back_net = import_model(onnx_model)
    ws2 = Workspace()
    ws2.run_net_once(back_init)
    ws2.feed_blob("data", x)
    ws2.run_net_once(back_net)
    np.testing.assert_allclose(ws2.fetch_blob(output), expected, atol=1e-5)


def test_newest_opset_passes_the_full_checker_and_reference_evaluator():
    from onnx.reference import ReferenceEvaluator

    model, shape, output = lenet()
    net = inference_net(model.net, ["data"], [output])
    onnx_model = export(net, model.param_init_net, inputs={"data": shape})
    assert onnx_model.opset_import[0].version == onnx.defs.onnx_opset_version()
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    x = np.ones(shape, np.float32)
    ws.feed_blob("data", x)
    ws.run_net_once(net)
    # the same parameters: export ran the same seeded init net
    got = ReferenceEvaluator(onnx_model).run(None, {"data": x})[0]
    np.testing.assert_allclose(got, ws.fetch_blob(output), atol=1e-5)
    assert [n.op_type for n in onnx_model.graph.node].count("Gemm") == 2  # FC -> Flatten+Gemm


def test_training_ops_are_refused_all_at_once():
    model, shape, _ = mlp()
    xent = model.net.LabelCrossEntropy(["prob", "label"], "xent")
    model.net.AveragedLoss(xent, "loss")
    model.add_gradient_operators(["loss"])
    brew.optimizer.build_sgd(model, 0.1)
    with pytest.raises(UnsupportedConversion) as info:
        export(model.net, model.param_init_net, inputs={"data": shape, "label": (4,)})
    text = str(info.value)
    assert "Iter is an optimizer counter" in text
    assert "LearningRate is an optimizer schedule" in text
    assert "a gradient op, part of training only" in text


def test_input_shape_is_required_without_value_info():
    net = Net("n")
    net.Relu("x", "y")
    net.add_external_output("y")
    with pytest.raises(UnsupportedConversion, match=r"input 'x': give its shape"):
        export(net, inputs=["x"])


def test_names_are_kept():
    net = Net("names")
    net.add_external_input("input.1", "scale/w")
    net.Mul(["input.1", "scale/w"], "layer1/out:0")
    net.add_external_output("layer1/out:0")
    init = Net("init")
    init.GivenTensorFill([], "scale/w", shape=[3], values=[1.0, 2.0, 3.0])
    model = export(net, init, inputs={"input.1": (3,)})
    assert model.graph.input[0].name == "input.1"
    assert model.graph.initializer[0].name == "scale/w"
    assert model.graph.output[0].name == "layer1/out:0"
