"""to_torch on NetDefs written by hand or with brew (Caffe2-style names), against netbrew's
own executor on the same parameters."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from netbrew.converters.module import to_torch  # noqa: E402
from netbrew.errors import UnsupportedConversion  # noqa: E402
from netbrew.netdef import Net  # noqa: E402
from netbrew.proto.netbrew_pb2 import NetDef  # noqa: E402

TOL = 1e-5


def test_brew_lenet_gets_layers_under_caffe2_names(lenet_nets, run_predict):
    init, predict = lenet_nets
    module = to_torch(init, predict)
    text = str(module)
    assert "(conv1): Conv2d(1, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))" in text
    assert "(conv2): Conv2d(16, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))" in text
    assert "(fc3): Linear(in_features=128, out_features=64, bias=True)" in text
    assert "(fc4): Linear(in_features=64, out_features=10, bias=True)" in text
    blobs = [op.output[0] for op in init.op]
    assert list(module.state_dict()) == blobs  # conv1_w, conv1_b, ... in init-net order
    assert dict(module.named_parameters())["conv1.weight"] is module.conv1.weight
    x = np.random.default_rng(0).random((3, 1, 8, 8), dtype=np.float32)
    with torch.no_grad():
        got = module(torch.from_numpy(x)).numpy()
    expected = run_predict(predict, {"data": x}, state=module.state_dict())["softmax"]
    np.testing.assert_allclose(got, expected, atol=TOL)
    assert module.input_names == ["data"] and module.output_names == ["softmax"]


def test_caffe2_names_load_and_report_under_their_blob_names(lenet_nets):
    init, predict = lenet_nets
    module = to_torch(init, predict)
    state = {k: torch.full_like(v, 0.01) for k, v in module.state_dict().items()}
    module.load_state_dict(state)
    assert torch.all(module.conv1.weight == 0.01)
    partial = {k: v for k, v in state.items() if k != "fc4_b"}
    result = module.load_state_dict(partial, strict=False)
    assert result.missing_keys == ["fc4_b"] and result.unexpected_keys == []
    with pytest.raises(RuntimeError, match="fc4_b"):
        module.load_state_dict(partial)


def test_loose_reserved_and_nested_names_are_kept(given, run_predict):
    rng = np.random.default_rng(1)
    init = NetDef(name="init")
    for name, shape in [("fc_w", (4, 4)), ("fc_b", (4,)), ("scale", (4,)),
                        ("blocks.0.gamma", (4,)), ("training", (4,))]:  # fmt: skip
        given(init, name, rng.standard_normal(shape))
    net = Net("loose")
    net.add_external_input("x")
    y = net.FC(["x", "fc_w", "fc_b"], "y")
    y = net.Mul([y, "scale"], "y2")
    y = net.Mul([y, "blocks.0.gamma"], "y3")
    net.Add([y, "training"], "y4")
    net.add_external_output("y4")
    module = to_torch(init, net.proto())
    assert sorted(module.state_dict()) == sorted(op.output[0] for op in init.op)
    assert module.get_submodule("blocks.0").gamma.shape == (4,)  # a container at blocks.0
    assert isinstance(module.fc, torch.nn.Linear)
    assert module.training is False  # "training" went elsewhere: it is a torch attribute
    x = rng.standard_normal((2, 4)).astype(np.float32)
    with torch.no_grad():
        got = module(torch.from_numpy(x)).numpy()
    expected = run_predict(net.proto(), {"x": x}, state=module.state_dict())["y4"]
    np.testing.assert_allclose(got, expected, atol=TOL)


def test_ops_without_a_torch_form_run_numpy_kernels_outside_autograd(given, run_predict):
    init = NetDef(name="init")
    given(init, "w", np.linspace(-1, 1, 6))
    net = Net("fallback")
    net.add_external_input("x")
    net.Softplus([net.Mul(["x", "w"], "xw")], "y")
    net.add_external_output("y")
    module = to_torch(init, net.proto())
    x = torch.linspace(-3, 3, 12).reshape(2, 6)
    with torch.no_grad():
        got = module(x).numpy()
    expected = run_predict(net.proto(), {"x": x.numpy()}, state=module.state_dict())["y"]
    np.testing.assert_allclose(got, expected, atol=TOL)
    with pytest.raises(UnsupportedConversion, match=r"Softplus -> y .* torch\.no_grad\(\)"):
        module(x)


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
def test_variadic_ops_broadcast_and_train_in_torch(op, given, run_predict):
    rng = np.random.default_rng(3)
    init = NetDef(name="init")
    given(init, "w", rng.standard_normal((1, 4)))
    net = Net("variadic")
    net.add_external_input("x", "y")
    getattr(net, op)(["x", "w", "y"], "out")
    net.add_external_output("out")
    module = to_torch(init, net.proto())
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 1))
    x, y = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    got = module(x, y)
    got.sum().backward()  # a torch op, so autograd reaches the parameter
    assert module.w.grad is not None and module.w.grad.shape == (1, 4)
    feeds = {"x": x.numpy(), "y": y.numpy()}
    expected = run_predict(net.proto(), feeds, state=module.state_dict())["out"]
    np.testing.assert_allclose(got.detach().numpy(), expected, atol=TOL)


def _window_net(given) -> tuple[NetDef, NetDef, dict]:
    rng = np.random.default_rng(2)
    init = NetDef(name="init")
    given(init, "conv.weight", rng.standard_normal((4, 3, 3, 3)) * 0.3)
    given(init, "convt.weight", rng.standard_normal((4, 2, 3, 3)) * 0.3)
    given(init, "gemm_w", rng.standard_normal((35, 6)))
    net = Net("windows")
    net.add_external_input("x")
    c = net.Conv(["x", "conv.weight"], "c", pads=[0, 1, 2, 1], strides=[2, 1])
    m = net.MaxPool(c, "m", kernel_shape=[3, 3], auto_pad="SAME_UPPER", strides=[2, 2])
    a = net.AveragePool(m, "a", kernel_shape=[2, 2], pads=[0, 0, 1, 1], count_include_pad=0)
    t = net.ConvTranspose([a, "convt.weight"], "t", strides=[2, 2], output_shape=[7, 5])
    g = net.Gemm([net.Flatten(t, "flat", axis=2), "gemm_w"], "g", alpha=0.5)
    first, second = net.Split(g, ["s0", "s1"], axis=0, num_outputs=2)
    idx = net.Constant([], "idx", value=np.array([-1, 0], dtype=np.int64))
    net.Gather([second, idx], "picked", axis=1)
    net.add_external_output("s0", "picked")
    x = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    return init, net.proto(), {"x": x}


def test_functional_ops_match_the_executor(given, run_predict):
    init, predict, feeds = _window_net(given)
    module = to_torch(init, predict)
    assert sorted(module.state_dict()) == ["conv.weight", "convt.weight", "gemm_w"]
    assert isinstance(module.conv, torch.nn.Module) and not isinstance(module.conv, torch.nn.Conv2d)
    with torch.no_grad():
        got = module(torch.from_numpy(feeds["x"]))
    expected = run_predict(predict, feeds, state=module.state_dict())
    for value, name in zip(got, ["s0", "picked"], strict=True):
        np.testing.assert_allclose(value.numpy(), expected[name], atol=TOL)


def test_brew_spatial_bn_becomes_batch_norm_2d(conv_bn_nets, run_predict):
    init, predict = conv_bn_nets
    module = to_torch(init, predict)
    assert isinstance(module.bn1, torch.nn.BatchNorm2d)  # rank 4 from conv1's weight
    assert sorted(module.state_dict()) == sorted(op.output[0] for op in init.op)
    assert "bn1_rm" in module.state_dict() and "bn1.num_batches_tracked" not in module.state_dict()
    with torch.no_grad():
        module.bn1.running_mean.uniform_(-0.2, 0.2)
        module.bn1.running_var.uniform_(0.5, 1.5)
        x = torch.rand(2, 3, 4, 4)
        got = module(x).numpy()
    expected = run_predict(predict, {"data": x.numpy()}, state=module.state_dict())["fc"]
    np.testing.assert_allclose(got, expected, atol=TOL)
