"""to_module: NetDefs as netbrew.nn Modules, checked against netbrew's executor, and traced
back into NetDefs with the same parameter names and outputs."""

from __future__ import annotations

import numpy as np
import pytest

from netbrew import brew, nn
from netbrew.brew import ModelHelper
from netbrew.converters.module import to_module, trace
from netbrew.converters.module.from_torch import add_fill
from netbrew.demo import lenet
from netbrew.executor import Predictor, Workspace
from netbrew.netdef import Net
from netbrew.proto.netbrew_pb2 import NetDef

TOL = 1e-5


def run_net(init: NetDef, predict: NetDef, feeds: dict) -> dict:
    ws = Workspace()
    ws.run_net_once(init)
    for key, value in feeds.items():
        ws.feed_blob(key, value)
    ws.run_net_once(predict)
    return {o: ws.fetch_blob(o) for o in (predict.external_output or predict.op[-1].output)}


def brew_lenet() -> tuple[NetDef, NetDef]:
    model = ModelHelper(name="lenet", seed=0)
    brew.softmax(model, lenet(model), "softmax")
    return model.param_init_net.proto(), model.net.proto()


def digits(n: int = 5) -> np.ndarray:
    return np.random.default_rng(0).random((n, 1, 8, 8), dtype=np.float32)


def test_brew_lenet_as_a_module():
    init, predict = brew_lenet()
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
    expected = run_net(init, predict, {"data": x})["softmax"]
    np.testing.assert_allclose(module(x), expected, rtol=0, atol=TOL)


def test_tracing_the_module_gives_back_the_net():
    init, predict = brew_lenet()
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
    np.testing.assert_allclose(got, run_net(init, predict, {"data": x})["softmax"], atol=TOL)
    assert {op.type for op in predict2.op} >= {"Conv", "MaxPool", "Gemm", "Softmax"}


def test_load_state_dict_by_blob_names():
    init, predict = brew_lenet()
    module = to_module(init, predict)
    state = {k: np.full_like(v, 0.02) for k, v in module.state_dict().items()}
    module.load_state_dict(state)
    assert np.all(module.conv1.weight == 0.02)
    partial = {k: v for k, v in state.items() if k != "fc4_b"}
    result = module.load_state_dict(partial, strict=False)
    assert result.missing_keys == ["fc4_b"] and result.unexpected_keys == []
    with pytest.raises(nn.StateDictError, match="missing key 'fc4_b'"):
        module.load_state_dict(partial)


def _given(init: NetDef, name: str, array) -> None:
    add_fill(init, name, np.asarray(array, dtype=np.float32))


def test_ops_without_a_netbrew_layer_run_functionally():
    rng = np.random.default_rng(3)
    init = NetDef(name="init")
    _given(init, "block.conv3d.weight", rng.standard_normal((2, 1, 2, 2, 2)))
    _given(init, "block.conv3d.bias", rng.standard_normal(2))
    _given(init, "head.weight", rng.standard_normal((3, 2 * 3 * 3 * 3)))
    _given(init, "head.bias", rng.standard_normal(3))
    _given(init, "alpha", [0.5])
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
    np.testing.assert_allclose(module(v), run_net(init, net.proto(), {"v": v})["y"], atol=TOL)


def test_brew_spatial_bn_as_batch_norm_and_traced_back():
    model = ModelHelper(name="convbn", seed=0)
    conv = brew.conv(model, "data", "conv1", 3, 8, kernel=3, pad=1, no_bias=True)
    bn = brew.spatial_bn(model, conv, "bn1", 8, is_test=True)
    brew.fc(model, brew.relu(model, bn, "relu1"), "fc", 8 * 4 * 4, 5)
    init, predict = model.param_init_net.proto(), model.net.proto()
    module = to_module(init, predict)
    assert isinstance(module.bn1, nn.BatchNorm2d) and isinstance(module.conv1, nn.Conv2d)
    assert list(module.state_dict()) == [op.output[0] for op in init.op]
    module.bn1.running_mean[:] = np.linspace(-0.2, 0.2, 8)
    module.bn1.running_var[:] = np.linspace(0.5, 1.5, 8)
    x = np.random.default_rng(4).random((2, 3, 4, 4), dtype=np.float32)
    ws = Workspace()
    for key, value in module.state_dict().items():
        ws.feed_blob(key, value)
    ws.feed_blob("data", x)
    ws.run_net_once(predict)
    np.testing.assert_allclose(module(x), ws.fetch_blob("fc"), rtol=0, atol=TOL)
    init2, predict2 = trace(module, x, input_names=["data"], output_names=["fc"])
    assert sorted(op.output[0] for op in init2.op) == sorted(module.state_dict())
    got = Predictor(init2, predict2).run({"data": x})["fc"]
    np.testing.assert_allclose(got, ws.fetch_blob("fc"), rtol=0, atol=TOL)
