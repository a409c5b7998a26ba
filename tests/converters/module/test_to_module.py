"""to_module: NetDefs as netbrew.nn Modules, checked against netbrew's executor, and traced
back into NetDefs with the same parameter names and outputs."""

from __future__ import annotations

import numpy as np
import pytest

from netbrew import nn
from netbrew.converters.module import to_module, trace
from netbrew.executor import Predictor
from netbrew.netdef import Net
from netbrew.proto.netbrew_pb2 import NetDef

TOL = 1e-5


def digits(n: int = 5) -> np.ndarray:
    return np.random.default_rng(0).random((n, 1, 8, 8), dtype=np.float32)


def test_brew_lenet_as_a_module(lenet_nets, run_predict):
    init, predict = lenet_nets
    module = to_module(init, predict)
    text = str(module)
    for line in (
        "(conv1): Conv2d(1, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))",
        "(conv2): Conv2d(16, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))",
        "(fc3): Linear(in_features=128, out_features=64, bias=True)",
        "(fc4): Linear(in_features=64, out_features=10, bias=True)",
    ):
        assert line in text
    assert isinstance(module.conv1, nn.Conv2d) and isinstance(module.fc4, nn.Linear)
    blobs = [op.output[0] for op in init.op]
    assert list(module.state_dict()) == blobs
    assert [name for name, _ in module.named_parameters()] == blobs
    x = digits()
    expected = run_predict(predict, {"data": x}, init=init)["softmax"]
    np.testing.assert_allclose(module(x), expected, rtol=0, atol=TOL)


def test_tracing_the_module_gives_back_the_net(lenet_nets, run_predict):
    init, predict = lenet_nets
    module = to_module(init, predict)
    x = digits(3)
    init2, predict2 = trace(
        module, x, input_names=module.input_names, output_names=module.output_names
    )
    assert [op.output[0] for op in init2.op] == [op.output[0] for op in init.op]
    assert list(predict2.external_input) == [
        "data", *(op.output[0] for op in init.op),
    ]  # fmt: skip
    got = Predictor(init2, predict2).run({"data": x})["softmax"]
    expected = run_predict(predict, {"data": x}, init=init)["softmax"]
    np.testing.assert_allclose(got, expected, atol=TOL)
    assert {op.type for op in predict2.op} >= {"Conv", "MaxPool", "Gemm", "Softmax"}


def test_load_state_dict_by_blob_names(lenet_nets):
    init, predict = lenet_nets
    module = to_module(init, predict)
    state = {k: np.full_like(v, 0.02) for k, v in module.state_dict().items()}
    module.load_state_dict(state)
    assert np.all(module.conv1.weight == 0.02)
    partial = {k: v for k, v in state.items() if k != "fc4_b"}
    result = module.load_state_dict(partial, strict=False)
    assert result.missing_keys == ["fc4_b"] and result.unexpected_keys == []
    with pytest.raises(nn.StateDictError, match="missing key 'fc4_b'"):
        module.load_state_dict(partial)


def test_ops_without_a_netbrew_layer_run_functionally(given, run_predict):
    rng = np.random.default_rng(3)
    init = NetDef(name="init")
    given(init, "block.conv3d.weight", rng.standard_normal((2, 1, 2, 2, 2)))
    given(init, "block.conv3d.bias", rng.standard_normal(2))
    given(init, "head.weight", rng.standard_normal((3, 2 * 3 * 3 * 3)))
    given(init, "head.bias", rng.standard_normal(3))
    given(init, "alpha", [0.5])
    net = Net("volumes")
    net.add_external_input("v")
    c = net.Conv(["v", "block.conv3d.weight", "block.conv3d.bias"], "c", pads=[0, 0, 0, 1, 1, 1])
    r = net.Mul([net.Relu(c, "r"), "alpha"], "scaled")
    net.Gemm([net.Flatten(r, "flat"), "head.weight", "head.bias"], "y", transB=1)
    net.add_external_output("y")
    module = to_module(init, net.proto())
    assert isinstance(module.head, nn.Linear)  # Gemm with transB=1: a layer
    assert not isinstance(module.block.conv3d, nn.Conv2d)  # no Conv3d in netbrew.nn
    assert sorted(module.state_dict()) == sorted(op.output[0] for op in init.op)
    v = rng.standard_normal((2, 1, 3, 3, 3)).astype(np.float32)
    expected = run_predict(net.proto(), {"v": v}, init=init)["y"]
    np.testing.assert_allclose(module(v), expected, atol=TOL)


def test_brew_spatial_bn_as_batch_norm_and_traced_back(conv_bn_nets, run_predict):
    init, predict = conv_bn_nets
    module = to_module(init, predict)
    assert isinstance(module.bn1, nn.BatchNorm2d) and isinstance(module.conv1, nn.Conv2d)
    assert list(module.state_dict()) == [op.output[0] for op in init.op]
    module.bn1.running_mean[:] = np.linspace(-0.2, 0.2, 8)
    module.bn1.running_var[:] = np.linspace(0.5, 1.5, 8)
    x = np.random.default_rng(4).random((2, 3, 4, 4), dtype=np.float32)
    expected = run_predict(predict, {"data": x}, state=module.state_dict())["fc"]
    np.testing.assert_allclose(module(x), expected, rtol=0, atol=TOL)
    init2, predict2 = trace(module, x, input_names=["data"], output_names=["fc"])
    assert sorted(op.output[0] for op in init2.op) == sorted(module.state_dict())
    got = Predictor(init2, predict2).run({"data": x})["fc"]
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOL)


def test_layers_print_as_they_were_built():
    """Float arguments stored as float32 (BN's momentum as 1 - momentum) print as written."""
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, momentum=0.1), nn.ReLU()).eval()
    x = np.ones((1, 3, 6, 6), np.float32)
    rebuilt = to_module(*trace(model, (x,)))
    for name in ("0", "1"):
        assert repr(rebuilt.get_submodule(name)) == repr(model.get_submodule(name))
