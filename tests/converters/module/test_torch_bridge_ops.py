"""from_torch on one torch call at a time, and back through to_torch: each case runs the module
in torch, the converted NetDef in a netbrew Predictor and the rebuilt torch module, and
compares the three (float32, max abs error 1e-5)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from netbrew.converters.module import from_torch, to_torch  # noqa: E402
from netbrew.executor import Predictor  # noqa: E402

TOL = 1e-5


class Fn(nn.Module):
    """A module whose forward is a function of its inputs (and of the module)."""

    def __init__(self, fn, **layers) -> None:
        super().__init__()
        self.fn = fn
        for name, layer in layers.items():
            setattr(self, name, layer)

    def forward(self, x):
        return self.fn(self, x)


class Fn2(Fn):
    def forward(self, x, y):
        return self.fn(self, x, y)


def _as_tuple(value):
    return value if isinstance(value, tuple) else (value,)


def check(model: nn.Module, *inputs) -> tuple:
    model.eval()
    with torch.no_grad():
        expected = _as_tuple(model(*inputs))
    init, predict = from_torch(model, inputs)
    names = [b for b in predict.external_input if b not in model.state_dict()]
    got = Predictor(init, predict).run({n: x.numpy() for n, x in zip(names, inputs)})
    for name, e in zip(predict.external_output, expected, strict=True):
        assert got[name].shape == tuple(e.shape), name
        assert got[name].dtype == e.numpy().dtype, name
        np.testing.assert_allclose(got[name], e.numpy(), rtol=0, atol=TOL, err_msg=name)
    rebuilt = to_torch(init, predict)
    assert sorted(rebuilt.state_dict()) == sorted(model.state_dict())
    with torch.no_grad():
        again = _as_tuple(rebuilt(*inputs))
    for a, e in zip(again, expected, strict=True):
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=0, atol=TOL)
    return init, predict, rebuilt


def rand(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))


CASES = {
    "relu_forms": (Fn(lambda m, x: F.relu(x) + torch.relu(x) * x.relu()), [rand(2, 5)]),
    "gelu_tanh": (nn.GELU(approximate="tanh"), [rand(3, 4)]),
    "activations": (
        Fn(
            lambda m, x: torch.sigmoid(x) * torch.tanh(x) - F.silu(x) + F.leaky_relu(x, 0.2)
            + F.elu(x) + F.relu6(x * 4) + F.hardtanh(x) + m.act(x) + m.six(x * 5) + m.elu(x),
            act=nn.LeakyReLU(0.1), six=nn.ReLU6(), elu=nn.ELU(0.5),
        ),
        [rand(2, 6)],
    ),
    "unary_math": (
        Fn(
            lambda m, x: torch.exp(x * 0.1) + torch.sqrt(x.abs() + 1) + torch.log(x.abs() + 1)
            + torch.erf(x) - x.neg() + torch.reciprocal(x.abs() + 1)
        ),
        [rand(4, 3)],
    ),
    "softmax_dims": (
        Fn(lambda m, x: F.softmax(x, dim=0) + x.softmax(-1) + torch.log_softmax(x, 1) + m.s(x),
           s=nn.Softmax(dim=1)),
        [rand(3, 5)],
    ),
    "scalars": (Fn(lambda m, x: (2 - x) * 3 / (x.abs() + 1) + x**2 - 0.5 * x), [rand(2, 4)]),
    "int_to_float": (Fn(lambda m, i: i / 2 + i * 1.5), [torch.arange(6).reshape(2, 3)]),
    "flatten_forms": (
        Fn(lambda m, x: torch.cat(
            [torch.flatten(x, 1), x.flatten(2).flatten(1), x.reshape(x.shape[0], -1), m.f(x)], 1
        ), f=nn.Flatten()),
        [rand(2, 3, 4, 5)],
    ),
    "flatten_middle": (Fn(lambda m, x: (torch.flatten(x), x.flatten(1, 2))), [rand(2, 3, 4, 5)]),
    "permute_transpose": (
        Fn(lambda m, x: (x.permute(0, 2, 3, 1).transpose(1, 2).contiguous(), x[0, 0].T,
                         torch.transpose(x, 0, -1), x.mT)),
        [rand(2, 3, 4, 5)],
    ),
    "getitem": (
        Fn(lambda m, x: (x[:, 0], x[..., -1], x[1:, :, None], x[:, 1:3, ::2], x[0, ..., 1:],
                         x[:, : x.shape[1] - 1], x[x.argmax(0)[0]])),
        [rand(3, 4, 5)],
    ),
    "chunk_split_unbind": (
        Fn(lambda m, x: (lambda c, s, u: (c[0] * c[1] + c[2], s[0], s[1], u[0], u[1]))(
            x.chunk(3, dim=-1), torch.split(x, [2, 4], dim=1), x.unbind(0))),
        [rand(2, 6)],
    ),
    "cat_stack": (
        Fn(lambda m, x: (torch.stack([x, x * 2], dim=1), torch.cat([x, x], dim=-1))),
        [rand(2, 3)],
    ),
    "unsqueeze_squeeze": (
        Fn(lambda m, x: (x.unsqueeze(1).squeeze(1), x.unsqueeze(-1), x.squeeze(), x.squeeze(0))),
        [rand(2, 1, 4)],
    ),
    "reductions": (
        Fn(lambda m, x: (x.mean(dim=(2, 3), keepdim=True), torch.sum(x, 1), x.mean(), x.sum(-1),
                         x.argmax(), torch.argmax(x, 1, keepdim=True))),
        [rand(2, 3, 4, 5)],
    ),
    "expand": (
        Fn(lambda m, x: (x[:, :1].expand(-1, 5, -1), x[:1].expand_as(x), x[:, :1].expand(2, 5, 3))),
        [rand(2, 5, 3)],
    ),
    "sizes_and_constants": (
        Fn(lambda m, x: x.view(x.size(0) * x.size(1), -1) + torch.arange(x.shape[-1])),
        [rand(2, 3, 4)],
    ),
    "casts_and_comparisons": (
        Fn(lambda m, x: ((x * 3).long(), (x > 0).float(), x.to(torch.float64), x < 0.5,
                         (x * 2).int() == 1)),
        [rand(6)],
    ),
    "functional_layers": (
        Fn(
            lambda m, x: F.layer_norm(F.linear(x, m.w, m.b), (6,), m.g, None, 1e-3)
            + x @ m.w.t() * m.scale,
            w=nn.Parameter(rand(6, 6)), b=nn.Parameter(rand(6)), g=nn.Parameter(rand(6)),
            scale=nn.Parameter(torch.tensor(0.5)),
        ),
        [rand(3, 6)],
    ),
    "functional_windows": (
        Fn(lambda m, x: (
            F.conv2d(x, m.w, padding=1, stride=2), F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
            F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), F.adaptive_avg_pool2d(x, (2, 2)),
            F.adaptive_max_pool2d(x, 1), F.dropout(x, 0.5, training=False),
        ), w=nn.Parameter(rand(4, 3, 3, 3))),
        [rand(2, 3, 8, 8)],
    ),
    "conv1d_groups_dilation": (
        nn.Conv1d(4, 6, 3, stride=2, dilation=2, groups=2), [rand(2, 4, 11)]
    ),
    "conv2d_same_even_kernel": (nn.Conv2d(3, 4, 4, padding="same", bias=False), [rand(1, 3, 7, 7)]),
    "conv_transpose2d": (
        nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
        [rand(2, 4, 5, 5)],
    ),
    "pools": (
        nn.Sequential(nn.MaxPool2d(2, ceil_mode=True), nn.AvgPool2d(3, 1, 1, ceil_mode=True),
                      nn.AdaptiveAvgPool2d(3)),
        [rand(2, 3, 11, 11)],
    ),
    "pool1d": (nn.Sequential(nn.MaxPool1d(3, 2, 1), nn.AvgPool1d(2)), [rand(2, 3, 12)]),
    "batch_norm_1d_on_sequences": (nn.BatchNorm1d(4), [rand(2, 4, 6)]),
    "batch_norm_no_affine": (nn.BatchNorm2d(3, affine=False), [rand(2, 3, 4, 4)]),
    "layer_norm_variants": (
        Fn(lambda m, x: m.a(x) + m.b(x) + m.c(x),
           a=nn.LayerNorm(5, elementwise_affine=False), b=nn.LayerNorm((4, 5)),
           c=nn.LayerNorm(5, bias=False)),
        [rand(2, 4, 5)],
    ),
    "embedding": (
        Fn(lambda m, i: m.emb(i) + F.embedding(i, m.emb.weight), emb=nn.Embedding(10, 4)),
        [torch.tensor([[1, 2, 9], [0, 0, 3]])],
    ),
    "identity_dropout": (
        nn.Sequential(nn.Identity(), nn.Dropout(0.5), nn.Linear(3, 2)), [rand(2, 3)]
    ),
    "linear_3d_without_bias": (nn.Linear(4, 3, bias=False), [rand(2, 5, 4)]),
    "shared_layer": (
        Fn(lambda m, x: m.lin(torch.relu(m.lin(x))), lin=nn.Linear(4, 4)), [rand(2, 4)]
    ),
    "two_inputs": (
        Fn2(lambda m, x, y: torch.matmul(x, y) + torch.bmm(x, y)), [rand(2, 3, 4), rand(2, 4, 5)]
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")
def test_torch_call(name):
    model, inputs = CASES[name]
    check(model, *inputs)


class WithState(nn.Module):
    """A parameter and a buffer read functionally, and a tensor attribute outside state_dict."""

    def __init__(self) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.full((4,), 2.0))
        self.register_buffer("offset", torch.arange(4.0))
        self.register_buffer("scratch", torch.ones(4), persistent=False)
        self.table = torch.linspace(0, 1, 4)

    def forward(self, x):
        return x * self.gamma + self.offset - self.scratch * x + self.table


def test_parameters_buffers_and_constants():
    init, predict, rebuilt = check(WithState(), rand(3, 4))
    assert [op.output[0] for op in init.op] == ["gamma", "offset"]
    assert sum(op.type == "Constant" for op in predict.op) == 2  # scratch and table
    # a NetDef does not tell parameters from buffers: float blobs come back as Parameters
    assert isinstance(rebuilt.gamma, nn.Parameter) and isinstance(rebuilt.offset, nn.Parameter)


def test_tied_weights_keep_both_keys():
    model = Fn(lambda m, i: m.head(m.emb(i)), emb=nn.Embedding(7, 4), head=nn.Linear(4, 7))
    model.head.weight = model.emb.weight
    init, predict, rebuilt = check(model, torch.tensor([[1, 2], [3, 6]]))
    assert sorted(op.output[0] for op in init.op) == ["emb.weight", "head.bias", "head.weight"]


def test_graph_names_follow_fx_and_state_dict():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(2 * 4 * 4, 3))
    init, predict = from_torch(model.eval(), torch.randn(1, 1, 6, 6), input_names=["image"])
    assert [(op.type, list(op.input), list(op.output)) for op in predict.op] == [
        ("Conv", ["image", "0.weight", "0.bias"], ["_0"]),
        ("Relu", ["_0"], ["_1"]),
        ("Flatten", ["_1"], ["_2"]),
        ("Gemm", ["_2", "3.weight", "3.bias"], ["_3"]),
    ]
    assert list(predict.external_output) == ["_3"]
    assert [op.type for op in init.op] == ["GivenTensorFill"] * 4
    assert [v.name for v in predict.value_info] == ["image"]
