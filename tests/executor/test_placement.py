"""The placement pass on CPU: devices per op, explicit copies, fallbacks, strict mode."""

import numpy as np
import pytest

from netbrew.cuda import DeviceError
from netbrew.errors import DeviceFallbackWarning
from netbrew.executor import placement, plan_placement
from netbrew.netdef import Net, device_scope


@pytest.fixture
def cuda_kernels(monkeypatch):
    """Pretends that exactly these op types have CUDA kernels."""

    def install(*types):
        monkeypatch.setattr(placement, "has_kernel", lambda t, d: d == "cpu" or t in types)

    return install


def mlp():
    net = Net("mlp")
    net.add_external_input("x", "w", "b")
    net.Gemm(["x", "w", "b"], "h", transB=1)
    net.Relu("h", "r")
    net.Softmax("r", "y")
    net.add_external_output("y")
    return net


def test_gpu_ops_get_copies_where_blobs_cross(cuda_kernels):
    cuda_kernels("Gemm", "Relu")
    with pytest.warns(DeviceFallbackWarning, match="Softmax x1"):
        placed = plan_placement(mlp(), device="cuda:0", params=["w", "b"], params_device="cuda:0")
    ops = [(op.type, list(op.input), d) for op, d in zip(placed.net.op, placed.devices)]
    assert ops == [
        ("CopyCPUToGPU", ["x"], "cuda:0"),
        ("Gemm", ["x__cuda0", "w", "b"], "cuda:0"),
        ("Relu", ["h"], "cuda:0"),
        ("CopyGPUToCPU", ["r"], "cuda:0"),
        ("Softmax", ["r__cpu"], "cpu"),
    ]
    assert placed.copies == [("x", "cpu", "cuda:0"), ("r", "cuda:0", "cpu")]
    assert [op.device_option.device_type for op in placed.net.op] == [1, 1, 1, 1, 0]


def test_fallbacks_warn_once_listing_every_op(cuda_kernels):
    cuda_kernels("Relu")
    with pytest.warns(DeviceFallbackWarning, match="2 op\\(s\\) have no CUDA kernel.*Gemm x1"):
        placed = plan_placement(mlp(), device="cuda:0")
    assert placed.fallbacks == {"Gemm": 1, "Softmax": 1}
    text = str(placed)
    assert "cuda:0   r = Relu(h__cuda0)" in text
    assert "CPU fallbacks (no CUDA kernel): Gemm x1, Softmax x1" in text
    assert "h: cpu -> cuda:0" in text


def test_strict_refuses_listing_every_missing_kernel(cuda_kernels):
    cuda_kernels("Relu")
    net = mlp()
    net.Softmax("y", "z")
    with pytest.raises(DeviceError, match=r"3 op\(s\) have no CUDA kernel.*Gemm x1, Softmax x2"):
        plan_placement(net, device="cuda:0", strict=True)


def test_device_options_on_ops_and_nets_choose_the_device(cuda_kernels):
    cuda_kernels("Relu", "Gemm", "Softmax")
    net = Net("mixed")
    net.add_external_input("x")
    with device_scope("cuda:1"):
        net.Relu("x", "a")
    net.Softmax("a", "b")  # no device option: the `device` argument (CPU by default)
    placed = plan_placement(net)
    assert placed.devices == ["cuda:1", "cuda:1", "cuda:1", "cpu"]
    assert [op.type for op in placed.net.op] == ["CopyCPUToGPU", "Relu", "CopyGPUToCPU", "Softmax"]


def test_a_copy_is_reused_until_its_blob_is_written_again(cuda_kernels):
    cuda_kernels("Relu", "Sigmoid")
    net = Net("reuse")
    net.add_external_input("x")
    net.Relu("x", "a")
    net.Sigmoid("x", "b")
    net.Neg("x", "x")  # on the CPU: x changes there
    net.Relu("x", "c")
    with pytest.warns(DeviceFallbackWarning, match="Neg x1"):
        placed = plan_placement(net, device="cuda:0")
    copies = [op for op in placed.net.op if op.type == "CopyCPUToGPU"]
    assert len(copies) == 2 and placed.fallbacks == {"Neg": 1}


def test_cpu_placement_changes_nothing_but_the_device_options():
    net = mlp()
    placed = plan_placement(net)
    assert [op.type for op in placed.net.op] == ["Gemm", "Relu", "Softmax"]
    assert set(placed.devices) == {"cpu"} and not placed.copies


def test_a_placed_net_saves_and_exports_its_copies(cuda_kernels, tmp_path):
    from netbrew.converters.onnx import export

    cuda_kernels("Relu")
    net = Net("copies")
    net.add_external_input("x")
    net.Relu("x", "y")
    net.add_external_output("y")
    placed = plan_placement(net, device="cuda:0")
    model = export(placed.net, Net("init"), inputs={"x": (2,)})
    assert [n.op_type for n in model.graph.node] == ["Identity", "Relu"]
    from onnx.reference import ReferenceEvaluator

    x = np.array([-1.0, 2.0], np.float32)
    assert ReferenceEvaluator(model).run(None, {"x": x})[0].tolist() == [0.0, 2.0]


def test_a_workspace_places_a_gpu_net_when_it_creates_it(cuda_kernels, monkeypatch):
    """The copies appear in the created net; here the kernels are CPU stand-ins."""
    from netbrew.executor import Workspace
    from netbrew.operators import KERNELS

    cuda_kernels("Relu")
    monkeypatch.setitem(KERNELS._items, ("Relu", "cuda"), KERNELS[("Relu", "cpu")])
    for op in ("CopyCPUToGPU", "CopyGPUToCPU"):
        monkeypatch.setitem(KERNELS._items, (op, "cuda"), KERNELS[(op, "cpu")])
    monkeypatch.setattr("netbrew.executor.compiled.CompiledOp.device_id", None)
    net = Net("gpu")
    net.add_external_input("x")
    with device_scope("cuda:0"):
        net.Relu("x", "y")
    net.Neg("y", "z")
    ws = Workspace()
    ws.feed_blob("x", np.array([-1.0, 2.0], np.float32))
    ws.create_net(net)
    created = [c.op.type for c in ws.get_net("gpu").ops]
    assert created == ["CopyCPUToGPU", "Relu", "CopyGPUToCPU", "Neg"]
    ws.run_net("gpu")
    assert ws.fetch_blob("z").tolist() == [0.0, -2.0]


def test_the_zoo_and_the_demo_have_a_cuda_kernel_for_every_op():
    """What strict=True on a GPU needs: no op of the six light-zoo models (after the GPU's
    inference passes) nor of the demo's nets lacks a CUDA kernel."""
    import sys
    from pathlib import Path

    from netbrew.converters.onnx import import_model
    from netbrew.demo import training_model
    from netbrew.executor import Workspace
    from netbrew.executor.placement import missing_kernels
    from netbrew.executor.predictor import optimize_for_inference

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        from zoo import MODELS, model_path
    finally:
        sys.path.pop(0)
    for name in MODELS:
        init, predict = import_model(model_path(name))
        ws = Workspace()
        ws.run_net_once(init)
        net = optimize_for_inference(predict, ws, device="cuda:0")
        assert not missing_kernels(net, "cuda:0"), name
    model = training_model()
    for net in (model.param_init_net, model.net):
        assert not missing_kernels(net.proto(), "cuda:0"), net.name
