"""nb.compare: netbrew's run of a model against onnxruntime's or onnx's reference run,
blob by blob, and the first divergence when a kernel computes something else."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import netbrew as nb
from netbrew.errors import NetbrewError
from netbrew.operators.schema import KERNELS
from netbrew.testing import rand


def small_model():
    """Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm, weights as initializers."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.normal(size=(4, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.normal(size=(5, 4)).astype(np.float32), "fc_w"),
        numpy_helper.from_array(rng.normal(size=5).astype(np.float32), "fc_b"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["conv"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["conv"], ["relu"], name="relu1"),
        helper.make_node("GlobalAveragePool", ["relu"], ["pool"]),
        helper.make_node("Flatten", ["pool"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


INPUTS = {"x": rand(2, 3, 8, 8)}


@pytest.fixture
def wrong_relu(monkeypatch):
    """netbrew's Relu made to leak 1% of its negative inputs."""
    relu = KERNELS[("Relu", "cpu")]
    monkeypatch.setitem(
        KERNELS._items, ("Relu", "cpu"), lambda x: (relu(x)[0] + 0.01 * np.minimum(x, 0),)
    )


@pytest.mark.parametrize("against", ["onnxruntime", "reference"])
def test_agreeing_runs_compare_every_blob(against):
    if against == "onnxruntime":
        pytest.importorskip("onnxruntime")
    report = nb.compare(small_model(), INPUTS, against=against)
    assert report.ok and report.first is None
    assert [d.name for d in report.diffs] == ["conv", "relu", "pool", "flat", "y"]
    assert report.diffs[0].op == "op #0 Conv 'conv1'"
    assert "every compared blob agrees" in str(report)


@pytest.mark.parametrize("against", ["onnxruntime", "reference"])
def test_a_wrong_kernel_is_the_first_divergence(wrong_relu, against):
    if against == "onnxruntime":
        pytest.importorskip("onnxruntime")
    report = nb.compare(small_model(), INPUTS, against=against)
    first = report.first
    assert first.name == "relu" and first.op == "op #1 Relu 'relu1'"
    assert report.inputs_agreed(first)  # the Conv before it agreed: the Relu is wrong
    assert not report.inputs_agreed(next(d for d in report.diffs if d.name == "pool"))
    text = str(report)
    assert "first divergence: 'relu', written by op #1 Relu 'relu1' (its inputs agreed)" in text
    assert 0.0 < first.max_abs < 0.1


def test_a_netdef_against_its_onnx_export(wrong_relu, monkeypatch):
    pytest.importorskip("onnxruntime")
    net, init = nb.Net("mlp"), nb.Net("mlp_init")
    init.GivenTensorFill([], "w", shape=[4, 6], values=rand(4, 6).ravel().tolist())
    init.GivenTensorFill([], "b", shape=[4], values=rand(4, seed=1).ravel().tolist())
    net.FC(["x", "w", "b"], "h").Relu([], "r").Tanh([], "y")
    net.add_external_input("x", "w", "b")
    net.add_external_output("y")
    x = {"x": rand(3, 6, seed=2)}
    monkeypatch.undo()  # export with the right Relu
    exported = nb.converters.onnx.export(net, init, inputs=x)
    report = nb.compare((init.proto(), net.proto()), x, against=exported)
    assert report.ok and {d.name for d in report.diffs} >= {"r", "y"}
    relu = KERNELS[("Relu", "cpu")]
    monkeypatch.setitem(KERNELS._items, ("Relu", "cpu"), lambda v: (relu(v)[0] + 1.0,))
    report = nb.compare((init.proto(), net.proto()), x, against=exported)
    assert report.first.name == "r" and report.inputs_agreed(report.first)


def test_shape_mismatches_and_bad_arguments_are_reported():
    from netbrew.parity import _diff

    d = _diff("b", "op #0 X", (), np.zeros((2, 3)), np.zeros((3, 2)), 1e-4, 1e-5)
    assert not d.ok and d.reason == "shapes differ: [2, 3] against [3, 2]"
    d = _diff("b", "op #0 X", (), np.array([np.nan, 1.0]), np.array([np.nan, 1.0]), 0, 0)
    assert d.ok
    d = _diff("b", "op #0 X", (), np.array([np.nan, 1.0]), np.array([0.0, 1.0]), 0, 0)
    assert not d.ok and d.max_abs == np.inf
    net = nb.Net("n")
    net.Relu(["x"], "y")
    with pytest.raises(NetbrewError, match="pass its ONNX export as `against`"):
        nb.compare((None, net.proto()), {"x": rand(2)}, against="onnxruntime")
    with pytest.raises(NetbrewError, match="against must be 'onnxruntime' or 'reference'"):
        nb.compare(small_model(), INPUTS, against=42)


def test_the_command_line_prints_the_report_and_fails_on_a_divergence(
    tmp_path, capsys, monkeypatch
):
    import onnx

    from netbrew.cli import main

    model, x = tmp_path / "small.onnx", tmp_path / "x.npy"
    onnx.save(small_model(), model)
    np.save(x, INPUTS["x"])
    args = ["compare", str(model), "--input", f"x={x}", "--against", "reference"]
    assert main(args) == 0
    assert "every compared blob agrees" in capsys.readouterr().out
    relu = KERNELS[("Relu", "cpu")]
    monkeypatch.setitem(KERNELS._items, ("Relu", "cpu"), lambda v: (relu(v)[0] * 2,))
    assert main(args) == 1
    assert "first divergence: 'relu'" in capsys.readouterr().out


def test_against_the_torch_module_to_torch_builds(monkeypatch):
    torch = pytest.importorskip("torch")
    report = nb.compare(small_model(), INPUTS, against="torch")
    assert report.ok and [d.name for d in report.diffs] == ["conv", "relu", "pool", "flat", "y"]
    module = nb.converters.module.to_torch(*nb.converters.onnx.import_model(small_model()))
    with torch.no_grad():
        blobs = module.blobs(torch.from_numpy(INPUTS["x"]))
    assert torch.equal(blobs["y"], module(torch.from_numpy(INPUTS["x"])))
    relu = KERNELS[("Relu", "cpu")]
    monkeypatch.setitem(KERNELS._items, ("Relu", "cpu"), lambda v: (relu(v)[0] - 1.0,))
    report = nb.compare(small_model(), INPUTS, against="torch")
    assert report.first.name == "relu" and report.peer == "torch (to_torch)"


def test_a_failing_op_ends_the_comparison_and_is_named(monkeypatch):
    def broken(x):
        raise ValueError("the kernel broke")

    monkeypatch.setitem(KERNELS._items, ("Relu", "cpu"), broken)
    report = nb.compare(small_model(), INPUTS, against="reference")
    assert not report.ok and report.first is None
    assert [d.name for d in report.diffs] == ["conv"]
    assert report.netbrew_error.startswith("op #1 Relu 'relu1' failed on cpu")
    text = str(report)
    assert "netbrew stopped: op #1 Relu 'relu1' failed on cpu" in text
    assert "every compared blob agrees up to there" in text
