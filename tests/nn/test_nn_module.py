"""netbrew.nn.Module: registration, iteration, modes, state_dict, printing, containers."""

from collections import OrderedDict

import numpy as np
import pytest

from netbrew import nn
from netbrew.nn import functional as F


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.scale = nn.Parameter(np.ones(4))
        self.register_buffer("steps", np.zeros((), np.int64))
        self.register_buffer("cache", np.zeros(2, np.float32), persistent=False)
        self.note = "plain attribute"

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(4 * 4 * 4, 3))

    def forward(self, x):
        return self.head(self.block(x))


def test_attributes_register_parameters_buffers_and_modules():
    net = Net()
    block = net.block
    assert list(block._parameters) == ["scale"]
    assert list(block._modules) == ["conv", "bn"]
    assert list(block._buffers) == ["steps", "cache"]
    assert block.note == "plain attribute" and "note" not in block._parameters
    assert isinstance(block.scale, nn.Parameter) and block.scale.dtype == np.float32
    names = [n for n, _ in net.named_parameters()]
    assert names == [
        "block.scale",
        "block.conv.weight",
        "block.conv.bias",
        "block.bn.weight",
        "block.bn.bias",
        "head.1.weight",
        "head.1.bias",
    ]
    assert len(list(net.parameters())) == 7
    assert [n for n, _ in net.named_buffers()] == [
        "block.steps",
        "block.cache",
        "block.bn.running_mean",
        "block.bn.running_var",
        "block.bn.num_batches_tracked",
    ]
    assert [n for n, _ in net.named_children()] == ["block", "head"]
    assert [n for n, _ in net.named_modules()] == [
        "",
        "block",
        "block.conv",
        "block.bn",
        "head",
        "head.0",
        "head.1",
    ]
    assert len(list(net.modules())) == 7 and list(net.children())[0] is block


def test_reassigning_and_deleting_attributes():
    m = nn.Linear(2, 3)
    m.weight = nn.Parameter(np.zeros((3, 2)))
    assert np.all(m.weight == 0)
    with pytest.raises(TypeError, match="cannot assign 'ndarray' as parameter 'weight'"):
        m.weight = np.zeros((3, 2))
    m.bias = None
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    m.extra = nn.ReLU()
    assert "extra" in m._modules
    m.extra = nn.Parameter(np.ones(1))  # a Parameter replaces the module of that name
    assert "extra" not in m._modules and "extra" in m._parameters
    del m.extra
    assert "extra" not in m._parameters


def test_assignment_before_init_and_bad_names_fail():
    class Broken(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(np.ones(1))

    with pytest.raises(AttributeError, match=r"before Module.__init__\(\) call"):
        Broken()
    m = nn.Module()
    with pytest.raises(KeyError, match="without"):
        m.register_buffer("a.b", np.ones(1))
    m.x = 1
    with pytest.raises(KeyError, match="already exists"):
        m.register_parameter("x", None)
    with pytest.raises(TypeError, match="not a Module subclass"):
        m.add_module("child", object())


def test_shared_parameters_are_listed_once():
    lin = nn.Linear(3, 3)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias"]
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_train_eval_set_every_module():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert net.block.bn.training
    with pytest.raises(ValueError, match="boolean"):
        net.train("no")


def test_state_dict_order_and_memory_sharing():
    net = Net()
    keys = list(net.state_dict())
    assert keys == [
        "block.scale",
        "block.steps",
        "block.conv.weight",
        "block.conv.bias",
        "block.bn.weight",
        "block.bn.bias",
        "block.bn.running_mean",
        "block.bn.running_var",
        "block.bn.num_batches_tracked",
        "head.1.weight",
        "head.1.bias",
    ]  # the non-persistent buffer "cache" is left out
    state = net.state_dict()
    assert type(state["head.1.weight"]) is np.ndarray
    state["head.1.bias"][0] = 42.0
    assert net.head[1].bias[0] == 42.0


def test_load_state_dict_round_trip_and_casts():
    src, dst = Net(), Net()
    state = {k: v * 2 if v.dtype.kind == "f" else v + 5 for k, v in src.state_dict().items()}
    state["block.bn.running_var"] = state["block.bn.running_var"].astype(np.float64)
    keep = dst.head[1].weight
    result = dst.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert dst.head[1].weight is keep  # copied in place
    for k, v in dst.state_dict().items():
        np.testing.assert_array_equal(v, state[k])
        assert v.dtype == src.state_dict()[k].dtype
    x = np.random.default_rng(0).standard_normal((2, 1, 4, 4)).astype(np.float32)
    src.load_state_dict(dst.state_dict())
    np.testing.assert_array_equal(src(x), dst(x))


def test_load_state_dict_reports_every_problem():
    net = Net()
    state = dict(net.state_dict())
    del state["block.conv.bias"]
    state["block.extra"] = np.ones(1)
    state["head.1.weight"] = np.ones((3, 5), np.float32)
    with pytest.raises(nn.StateDictError) as err:
        net.load_state_dict(state)
    msg = str(err.value)
    assert "missing key 'block.conv.bias'" in msg
    assert "unexpected key 'block.extra'" in msg
    assert "size mismatch for 'head.1.weight': expected shape [3, 64]" in msg
    assert "got [3, 5]" in msg
    state["head.1.weight"] = np.ones((3, 64), np.float32)
    result = net.load_state_dict(state, strict=False)
    assert result.missing_keys == ["block.conv.bias"]
    assert result.unexpected_keys == ["block.extra"]
    np.testing.assert_array_equal(net.head[1].weight, 1.0)
    state["head.1.weight"] = np.ones(3, np.float32)
    with pytest.raises(nn.StateDictError, match="size mismatch"):
        net.load_state_dict(state, strict=False)  # shapes are checked even when not strict


def test_parameter_is_a_float32_array():
    p = nn.Parameter([1, 2, 3])
    assert p.dtype == np.float32 and p.requires_grad
    assert type(p * 2) is np.ndarray and type(p.data) is np.ndarray
    assert np.shares_memory(p.data, p)
    assert nn.Parameter(np.zeros(2, np.float16)).dtype == np.float16
    assert nn.Parameter(np.zeros(2), dtype=np.float64).dtype == np.float64
    frozen = nn.Parameter(np.zeros(2), requires_grad=False)
    assert not frozen[:1].requires_grad
    assert repr(nn.Parameter([1.0])).startswith("Parameter containing:\narray([1.]")
    assert nn.Parameter().shape == (0,)


def test_repr_without_torch():
    net = Net()
    assert repr(net) == (
        "Net(\n"
        "  (block): Block(\n"
        "    (conv): Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
        "    (bn): BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, "
        "track_running_stats=True)\n"
        "  )\n"
        "  (head): Sequential(\n"
        "    (0): Flatten(start_dim=1, end_dim=-1)\n"
        "    (1): Linear(in_features=64, out_features=3, bias=True)\n"
        "  )\n"
        ")"
    )


def _torch_twins(tnn):
    """The same architecture in netbrew.nn and torch.nn, for printing."""

    def build(m):
        return m.Sequential(
            m.Conv2d(1, 16, 3, padding=1),
            m.Conv2d(4, 8, (3, 1), stride=2, dilation=2, groups=2, bias=False),
            m.Conv1d(2, 3, 3, padding="same"),
            m.ConvTranspose2d(2, 3, 3, stride=2, output_padding=1),
            m.BatchNorm2d(16),
            m.BatchNorm1d(8, momentum=None, affine=False, track_running_stats=False),
            m.LayerNorm(8),
            m.LayerNorm([2, 3], elementwise_affine=False),
            m.ModuleList([m.Linear(2, 3) for _ in range(3)] + [m.Linear(3, 3, bias=False)]),
            m.ModuleDict({"act": m.ReLU(), "gelu": m.GELU("tanh")}),
            m.Softmax(dim=1),
            m.Sigmoid(),
            m.Tanh(),
            m.MaxPool2d(2),
            m.MaxPool2d((3, 2), stride=1, padding=1, ceil_mode=True),
            m.AvgPool2d(2),
            m.AdaptiveAvgPool2d((1, 1)),
            m.AdaptiveAvgPool2d(1),
            m.Dropout(),
            m.Flatten(),
            m.Embedding(10, 3, padding_idx=0),
            m.Identity(),
            m.Sequential(),
            m.ModuleList(),
        )

    return build(nn), build(tnn)


def test_repr_matches_pytorch():
    torch = pytest.importorskip("torch")
    ours, theirs = _torch_twins(torch.nn)
    assert repr(ours) == repr(theirs)


def test_state_dict_keys_and_shapes_match_pytorch():
    torch = pytest.importorskip("torch")
    ours, theirs = _torch_twins(torch.nn)
    mine = {k: (v.shape, v.dtype.kind) for k, v in ours.state_dict().items()}
    ref = {
        k: (tuple(v.shape), "i" if v.dtype == torch.int64 else "f")
        for k, v in theirs.state_dict().items()
    }
    assert list(mine) == list(ref)
    assert mine == ref
    ours.load_state_dict(theirs.state_dict())  # torch tensors load directly
    np.testing.assert_array_equal(ours[0].weight, theirs[0].weight.detach().numpy())


def test_sequential_indexing_len_iteration():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    seq = nn.Sequential(a, b, c)
    assert len(seq) == 3 and list(seq) == [a, b, c]
    assert seq[0] is a and seq[-1] is c
    sub = seq[1:]
    assert isinstance(sub, nn.Sequential) and list(sub) == [b, c]
    assert list(sub._modules) == ["1", "2"]
    with pytest.raises(IndexError, match="out of range"):
        seq[3]
    named = nn.Sequential(OrderedDict([("fc", a), ("act", b)]))
    assert named.fc is a and [n for n, _ in named.named_children()] == ["fc", "act"]
    seq[1] = nn.Tanh()
    assert isinstance(seq[1], nn.Tanh)
    del seq[0]
    assert list(seq._modules) == ["0", "1"] and seq[1] is c
    seq.append(nn.Sigmoid())
    x = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(seq(x), 1 / (1 + np.exp(-c(np.tanh(x)))), rtol=1e-6)


def test_module_list_and_dict():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(2)])
    layers.append(nn.ReLU())
    layers.insert(0, nn.Tanh())
    assert len(layers) == 4 and isinstance(layers[0], nn.Tanh)
    assert [n for n, _ in layers.named_parameters()] == [
        "1.weight",
        "1.bias",
        "2.weight",
        "2.bias",
    ]
    del layers[0]
    assert isinstance(layers[-1], nn.ReLU) and len(layers[:2]) == 2
    d = nn.ModuleDict({"a": nn.Linear(1, 1)})
    d["b"] = nn.ReLU()
    assert list(d) == ["a", "b"] and "a" in d and len(d) == 2
    assert [k for k, _ in d.items()] == ["a", "b"]
    assert isinstance(d.pop("b"), nn.ReLU) and list(d.keys()) == ["a"]


def test_apply_and_requires_grad():
    net = Net()
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Net" and seen.count("Linear") == 1
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_forward_missing():
    with pytest.raises(NotImplementedError, match='missing "forward"'):
        nn.Module()(1)


def test_get_submodule_by_dotted_path():
    model = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.ReLU(), nn.Linear(3, 1)))
    assert model.get_submodule("") is model
    assert model.get_submodule("1.1") is model[1][1]
    with pytest.raises(AttributeError, match=r"no submodule '2' \(looking up '1.2'\)"):
        model.get_submodule("1.2")


def test_a_reassigned_parameter_keeps_its_place_as_in_torch():

    layer = nn.Linear(2, 3)
    layer.weight = nn.Parameter(np.zeros((3, 2), np.float32))
    assert list(layer.state_dict()) == ["weight", "bias"]
    assert [n for n, _ in layer.named_parameters()] == ["weight", "bias"]
    np.testing.assert_array_equal(layer.state_dict()["weight"], np.zeros((3, 2)))
