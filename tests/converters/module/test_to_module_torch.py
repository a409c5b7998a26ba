"""torch.nn -> NetDef -> netbrew.nn (to_module) -> NetDef (trace): the numbers stay torch's
(float32, max abs 1e-5) and the state_dict keys stay the same in every direction."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tnn = torch.nn
F = torch.nn.functional

from netbrew import nn  # noqa: E402
from netbrew.converters.module import from_torch, to_module, to_torch, trace  # noqa: E402
from netbrew.executor import Predictor  # noqa: E402

TOL = 1e-5


class Block(tnn.Module):
    """A residual block with a projection shortcut, then a classifier head."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = tnn.Conv2d(3, 8, 3, 2, 1, bias=False)
        self.bn1 = tnn.BatchNorm2d(8)
        self.conv2 = tnn.Conv2d(8, 8, 3, 1, 1, bias=False)
        self.bn2 = tnn.BatchNorm2d(8)
        self.downsample = tnn.Sequential(tnn.Conv2d(3, 8, 1, 2, bias=False), tnn.BatchNorm2d(8))
        self.pool = tnn.AdaptiveAvgPool2d(1)
        self.fc = tnn.Linear(8, 4)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)) + self.downsample(x))
        return self.fc(torch.flatten(self.pool(out), 1))


class Attention(tnn.Module):
    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.norm = tnn.LayerNorm(dim)
        self.q, self.k, self.v = tnn.Linear(dim, dim), tnn.Linear(dim, dim), tnn.Linear(dim, dim)
        self.out = tnn.Linear(dim, dim)
        self.ff = tnn.Sequential(tnn.Linear(dim, 32), tnn.GELU(), tnn.Linear(32, dim))

    def forward(self, x):
        B, T, C = x.shape
        d = C // self.heads
        h = self.norm(x)
        q, k, v = (p(h).view(B, T, self.heads, d).transpose(1, 2) for p in (self.q, self.k, self.v))
        att = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1)
        x = x + self.out((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + self.ff(x)


def _mlp():
    return tnn.Sequential(tnn.Linear(6, 16), tnn.BatchNorm1d(16), tnn.ReLU(), tnn.Linear(16, 3))


def _stats(model):
    gen = torch.Generator().manual_seed(0)
    for m in model.modules():
        if isinstance(m, tnn.modules.batchnorm._BatchNorm):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
    return model.eval()


MODELS = {
    "mlp": (_mlp, (4, 6)),
    "residual_cnn": (Block, (2, 3, 16, 16)),
    "attention": (Attention, (2, 5, 16)),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_torch_to_netdef_to_module_and_back(name):
    make, shape = MODELS[name]
    torch.manual_seed(0)
    model = _stats(make())
    x = torch.randn(*shape)
    with torch.no_grad():
        expected = model(x).numpy()
    init, predict = from_torch(model, x)
    module = to_module(init, predict)
    keys = list(model.state_dict())
    assert sorted(op.output[0] for op in init.op) == sorted(keys)
    assert sorted(module.state_dict()) == sorted(keys)
    assert sorted(to_torch(init, predict).state_dict()) == sorted(keys)
    np.testing.assert_allclose(module(x.numpy()), expected, rtol=0, atol=TOL)

    init2, predict2 = trace(module, x.numpy(), input_names=module.input_names)
    assert sorted(op.output[0] for op in init2.op if op.output[0] in keys) == sorted(keys)
    got = Predictor(init2, predict2).run({module.input_names[0]: x.numpy()})
    np.testing.assert_allclose(got[predict2.external_output[0]], expected, rtol=0, atol=TOL)


def test_layers_follow_the_torch_module_tree():
    torch.manual_seed(0)
    model = _stats(Block())
    init, predict = from_torch(model, torch.randn(1, 3, 16, 16))
    module = to_module(init, predict)
    assert isinstance(module.conv1, nn.Conv2d) and isinstance(module.bn2, nn.BatchNorm2d)
    assert isinstance(module.get_submodule("downsample.0"), nn.Conv2d)
    assert isinstance(module.fc, nn.Linear)
    text = str(module)
    assert "(downsample): Module(" in text and "(fc): Linear(in_features=8, out_features=4" in text
