"""netbrew.netdef.draw: Graphviz drawings of nets (shapes, subnet clusters, devices)."""

import shutil

import numpy as np
import pytest

from netbrew import brew
from netbrew.brew import ModelHelper
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.proto.netbrew_pb2 import PROTO_CUDA, DeviceOption, NetDef, TensorShape

pytest.importorskip("graphviz")
from netbrew.netdef import draw as draw_mod  # noqa: E402
from netbrew.netdef.draw import CUDA_FILL, draw, to_graphviz  # noqa: E402

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot not installed")


def training_model():
    model = ModelHelper("train")
    fc1 = brew.fc(model, "x", "fc1", 4, 8)
    relu = brew.relu(model, fc1, "relu1")
    fc2 = brew.fc(model, relu, "fc2", 8, 3)
    brew.softmax_with_loss(model, fc2, "label")
    model.add_gradient_operators(["loss"])
    return model


def small_net():
    net = NetDef(name="small", external_input=["x", "w"], external_output=["y"])
    net.op.extend([op_def("MatMul", ["x", "w"], ["h"], name="mm"), op_def("Relu", ["h"], ["y"])])
    net.value_info.extend(
        [
            TensorShape(name="x", dims=[0, 4], dim_names=["batch", ""]),
            TensorShape(name="h", dims=[2, 3]),
        ]
    )
    return net


def test_dot_source_ops_blobs_and_value_info_shapes(tmp_path):
    out = draw(small_net(), tmp_path / "net.dot")
    text = out.read_text()
    assert out == tmp_path / "net.dot"
    assert "#0 MatMul\nmm" in text.replace("\\n", "\n") and "#1 Relu" in text
    assert "shape=box" in text and "shape=ellipse" in text
    assert "float[batch,4]" in text and "float[2,3]" in text
    assert "float[" not in draw(small_net(), tmp_path / "n.dot", shapes=False).read_text()


def test_value_info_argument_and_workspace_shapes():
    net = small_net()
    source = to_graphviz(net, value_info={"y": (2, 3)}).source
    assert "[2,3]" in source
    ws = Workspace()
    ws.feed_blob("y", np.zeros((5, 7), np.float64))
    assert "float64[5,7]" in to_graphviz(net, workspace=ws).source


def test_minimal_mode_has_no_blob_nodes():
    source = to_graphviz(small_net(), minimal=True).source
    assert "ellipse" not in source and "shape=box" in source
    assert "h float[2,3]" in source  # the edge names the blob it carries and its shape


def test_if_branches_draw_as_clusters():
    then = NetDef(name="then", external_output=["t"])
    then.op.append(op_def("Add", ["x", "y"], ["t"]))
    other = NetDef(name="else", external_output=["e"])
    other.op.append(op_def("Concat", ["x", "y"], ["e"], axis=0))
    net = NetDef(name="cond")
    net.op.append(op_def("If", ["c"], ["out"], then_branch=then, else_branch=other))
    source = to_graphviz(net).source
    assert source.count("subgraph cluster_") == 2
    assert "#0 If: then_branch" in source and "#0 If: else_branch" in source
    assert "#0 Add" in source and "#0 Concat" in source and "lhead=cluster_1" in source


def test_loop_body_cluster():
    body = NetDef(name="body", external_input=["i", "c"], external_output=["c"])
    body.op.append(op_def("Identity", ["c"], ["c2"]))
    net = NetDef(name="loop")
    net.op.append(op_def("Loop", ["n", "c"], [], body=body))
    source = to_graphviz(net, minimal=True).source
    assert "subgraph cluster_1" in source and "#0 Loop: body" in source


def test_cuda_ops_get_their_colour_and_a_legend():
    net = small_net()
    net.op[0].device_option.CopyFrom(DeviceOption(device_type=PROTO_CUDA))
    source = to_graphviz(net).source
    assert source.count(CUDA_FILL) == 1 and "CUDA op" in source
    net.device_option.CopyFrom(DeviceOption(device_type=PROTO_CUDA))  # net-wide default
    assert to_graphviz(net).source.count(CUDA_FILL) == 2
    assert "CUDA" not in to_graphviz(small_net()).source


def test_without_dot_writes_the_dot_file_and_the_hint(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(draw_mod.shutil, "which", lambda name: None)
    out = draw(small_net(), tmp_path / "net.svg")
    assert out == tmp_path / "net.dot" and out.read_text().startswith("digraph")
    assert not (tmp_path / "net.svg").exists()
    assert "apt-get install graphviz" in capsys.readouterr().err


def test_unknown_format_is_refused(tmp_path):
    with pytest.raises(ValueError, match="cannot draw to .jpeg"):
        draw(small_net(), tmp_path / "net.jpeg")


@needs_dot
def test_squeezenet_svg_names_every_op_type_and_shapes(squeezenet_dir, tmp_path):
    from netbrew.converters import caffe2

    init, net = caffe2.load(squeezenet_dir / "init_net.pb", squeezenet_dir / "predict_net.pb")
    ws = Workspace()
    ws.run_net_once(init)
    ws.feed_blob("data", np.zeros((1, 3, 224, 224), np.float32))
    ws.run_net_once(net)
    svg = draw(net, tmp_path / "squeezenet.svg", workspace=ws).read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    for op_type in {op.type for op in net.op}:
        assert op_type in svg
    prob = ",".join(str(d) for d in ws.fetch_blob("prob").shape)
    assert "float[1,3,224,224]" in svg and f"float[{prob}]" in svg


@needs_dot
def test_training_net_with_gradients_svg(tmp_path):
    model = training_model()
    svg = draw(model.net, tmp_path / "train.svg").read_text()
    assert "<svg" in svg and "fc1_w_grad" in svg
    assert "SoftmaxWithLossGradient" in svg and "FCGradient" in svg
    png = draw(model.net, tmp_path / "train.png", minimal=True)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
