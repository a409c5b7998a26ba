"""torch.nn -> NetDef -> torch.nn on whole models: ResNet-18, an MLP, a CNN with BatchNorm and a
transformer encoder block, against torch itself (float32, max abs error 1e-5)."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from netbrew.converters.module import from_torch, to_module, to_torch  # noqa: E402
from netbrew.errors import UnsupportedConversion  # noqa: E402
from netbrew.executor import Predictor  # noqa: E402

TOL = 1e-5


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class ResNet18(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        widths = [64, 128, 256, 512]
        cin = 64
        for i, w in enumerate(widths):
            stride = 1 if i == 0 else 2
            setattr(
                self, f"layer{i + 1}", nn.Sequential(BasicBlock(cin, w, stride), BasicBlock(w, w))
            )
            cin = w
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(20, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.3),
            nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 5),
        )  # fmt: skip

    def forward(self, x):
        return F.log_softmax(self.net(x), dim=-1)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding="same"), nn.BatchNorm2d(16), nn.GELU(),
            nn.AvgPool2d(2),
        )  # fmt: skip
        self.head = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = self.features(x)
        return F.softmax(self.head(x.view(x.size(0), -1)), dim=1)


class EncoderBlock(nn.Module):
    """Pre-norm transformer encoder block, attention written out with matmul and softmax."""

    def __init__(self, dim: int = 32, heads: int = 4, hidden: int = 64) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x):
        B, T, C = x.shape
        d = C // self.heads
        h = self.ln1(x)
        q = self.q(h).view(B, T, self.heads, d).transpose(1, 2)
        k = self.k(h).view(B, T, self.heads, d).transpose(1, 2)
        v = self.v(h).view(B, T, self.heads, d).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d)
        att = F.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).contiguous().reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


def randomize_batch_norm(model: nn.Module, seed: int = 0) -> nn.Module:
    """Running statistics and affine parameters away from the identity, so BN matters."""
    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=gen) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(n, generator=gen) * 0.5 + 0.75)
            m.bias.data.copy_(torch.randn(n, generator=gen) * 0.1)
    return model.eval()


def run_netdef(init, predict, feeds: dict) -> list[np.ndarray]:
    outputs = Predictor(init, predict).run({k: v.numpy() for k, v in feeds.items()})
    return [outputs[name] for name in predict.external_output]


def check_bridge(model: nn.Module, *inputs, names=None):
    """from_torch vs torch in a Predictor, to_torch and to_module vs torch, and the
    state_dict keys of all four equal."""
    torch.manual_seed(0)
    with torch.no_grad():
        expected = model(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    init, predict = from_torch(model, inputs, input_names=names)
    feed_names = [i for i in predict.external_input if i not in model.state_dict()]
    got = run_netdef(init, predict, dict(zip(feed_names, inputs)))
    for g, e in zip(got, expected, strict=True):
        assert g.shape == tuple(e.shape)
        np.testing.assert_allclose(g, e.numpy(), rtol=0, atol=TOL)

    keys = list(model.state_dict())
    assert [op.output[0] for op in init.op] == keys
    assert list(predict.external_input) == [*feed_names, *keys]

    rebuilt = to_torch(init, predict)
    assert sorted(rebuilt.state_dict()) == sorted(keys)
    with torch.no_grad():
        again = rebuilt(*inputs)
    again = again if isinstance(again, tuple) else (again,)
    for a, e in zip(again, expected, strict=True):
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=0, atol=TOL)

    native = to_module(init, predict)  # netbrew.nn, on NumPy arrays
    assert sorted(native.state_dict()) == sorted(keys)
    mine = native(*(x.numpy() for x in inputs))
    for a, e in zip(mine if isinstance(mine, tuple) else (mine,), expected, strict=True):
        np.testing.assert_allclose(a, e.numpy(), rtol=0, atol=TOL)
    return init, predict, rebuilt


def test_resnet18():
    torch.manual_seed(0)
    model = randomize_batch_norm(ResNet18())
    x = torch.randn(2, 3, 64, 64)
    init, predict, rebuilt = check_bridge(model, x)
    text = str(rebuilt)
    for line in (
        "(conv1): Conv2d(3, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)",
        "(bn1): BatchNorm2d(64",
        "(downsample): Module(",
        "(fc): Linear(in_features=512, out_features=10, bias=True)",
    ):
        assert line in text
    assert isinstance(rebuilt.get_submodule("layer2.0.downsample.0"), nn.Conv2d)
    assert {op.type for op in predict.op} >= {"Conv", "BatchNormalization", "MaxPool", "Gemm"}
    # the same weights load back into the original architecture, and vice versa
    fresh = ResNet18().eval()
    fresh.load_state_dict(rebuilt.state_dict())
    rebuilt.load_state_dict(model.state_dict())
    with torch.no_grad():
        np.testing.assert_allclose(fresh(x).numpy(), model(x).numpy(), rtol=0, atol=TOL)


def test_mlp():
    torch.manual_seed(1)
    _, predict, rebuilt = check_bridge(randomize_batch_norm(MLP()), torch.randn(4, 20))
    assert [type(m).__name__ for m in rebuilt.net.children()] == [
        "Linear", "BatchNorm1d", "Linear", "Linear",
    ]  # fmt: skip
    assert "Dropout" not in {op.type for op in predict.op}  # eval mode: the identity


def test_small_cnn_with_batch_norm_at_other_batch_sizes():
    torch.manual_seed(2)
    model = randomize_batch_norm(SmallCNN())
    init, predict, _ = check_bridge(model, torch.randn(2, 1, 16, 16))
    x = torch.randn(5, 1, 16, 16)  # view(x.size(0), -1) became Reshape [0, -1]
    with torch.no_grad():
        np.testing.assert_allclose(run_netdef(init, predict, {"x": x})[0], model(x), atol=TOL)


def test_transformer_encoder_block():
    torch.manual_seed(3)
    model = EncoderBlock().eval()
    init, predict, rebuilt = check_bridge(model, torch.randn(2, 7, 32), names=["tokens"])
    types = [op.type for op in predict.op]
    assert types.count("LayerNormalization") == 2 and "Softmax" in types and "Gelu" in types
    assert [type(m).__name__ for m in rebuilt.children()] == [
        "LayerNorm", "Linear", "Linear", "Linear", "Linear", "LayerNorm", "Module",
    ]  # fmt: skip
    # B and T were read off the input: the net follows other batch and sequence sizes
    x = torch.randn(3, 5, 32)
    with torch.no_grad():
        expected = model(x).numpy()
        np.testing.assert_allclose(rebuilt(x).numpy(), expected, atol=TOL)
    np.testing.assert_allclose(run_netdef(init, predict, {"tokens": x})[0], expected, atol=TOL)


def test_state_dict_round_trip_through_to_torch():
    torch.manual_seed(4)
    model = randomize_batch_norm(SmallCNN())
    init, predict = from_torch(model, torch.randn(1, 1, 16, 16))
    rebuilt = to_torch(init, predict)
    state = rebuilt.state_dict()
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(state[key].numpy(), value.numpy())
    # training the rebuilt module works: autograd reaches every float parameter
    rebuilt.train()
    loss = rebuilt(torch.randn(4, 1, 16, 16)).pow(2).sum()
    loss.backward()
    assert all(p.grad is not None for p in rebuilt.parameters())


class Unsupported(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pad_conv = nn.Conv2d(3, 3, 3, padding=1, padding_mode="reflect")

    def forward(self, x):
        y = torch.erfinv(torch.tanh(x))
        z = torch.erfinv(y * 0.5)
        return F.pixel_shuffle(self.pad_conv(z), 1) + torch.relu(x)


def test_unsupported_calls_are_reported_all_at_once():
    with pytest.raises(UnsupportedConversion) as info:
        from_torch(Unsupported().eval(), torch.randn(1, 3, 8, 8))
    message = str(info.value)
    assert message.startswith("from_torch: 4 call(s) cannot be converted:")
    assert "torch.erfinv x2 (no converter): nodes erfinv, erfinv_1" in message
    assert "pixel_shuffle x1" in message
    assert "torch.nn.Conv2d x1 (padding_mode='reflect'" in message and "pad_conv" in message
    assert "relu" not in message and "tanh" not in message  # those convert


def test_training_mode_is_refused():
    model = SmallCNN().train()
    with pytest.raises(UnsupportedConversion, match=r"BatchNorm2d x2 .*call \.eval\(\)"):
        from_torch(model, torch.randn(2, 1, 16, 16))
    mlp = MLP().train()
    with pytest.raises(UnsupportedConversion, match=r"Dropout x1 \(dropout in training mode"):
        from_torch(mlp, torch.randn(2, 20))


def test_missing_torch_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match=r"pip install netbrew\[torch\]"):
        from_torch(object(), ())
    with pytest.raises(ImportError, match=r"pip install netbrew\[torch\]"):
        to_torch(None, None)


def test_converted_nets_export_to_onnx_with_their_names():
    ort = pytest.importorskip("onnxruntime")
    from netbrew.converters import onnx as nb_onnx

    torch.manual_seed(5)
    model = EncoderBlock().eval()
    init, predict = from_torch(model, torch.randn(2, 7, 32))
    exported = nb_onnx.export(predict, init, inputs=["x"], opset=21, dynamic_batch=True)
    assert {t.name for t in exported.graph.initializer} >= set(model.state_dict())
    session = ort.InferenceSession(exported.SerializeToString())
    x = torch.randn(3, 7, 32)
    with torch.no_grad():
        expected = model(x).numpy()
    np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0], expected, atol=TOL)
