"""Edges of the module bridge, each checked against netbrew's executor or torch: negative
axes and indices, bounds-free Clip, BatchNorm state (counters, buffers, plain state
dicts), parameter names the modules use themselves, and If/Loop bodies reading outer
blobs."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import netbrew as nb  # noqa: E402
import netbrew.nn.functional as F  # noqa: E402
from netbrew import brew  # noqa: E402
from netbrew.brew import ModelHelper  # noqa: E402
from netbrew.converters.module import from_torch, to_module, to_torch  # noqa: E402
from netbrew.netdef import Net  # noqa: E402
from netbrew.proto.netbrew_pb2 import NetDef  # noqa: E402

CONVERTERS = [to_torch, to_module]


def _forward(module, *arrays):
    if isinstance(module, torch.nn.Module):
        with torch.no_grad():
            return np.asarray(module(*(torch.from_numpy(np.asarray(a)) for a in arrays)))
    return np.asarray(module(*arrays))


def _one_op(op_type, inputs, **attrs):
    net = Net(op_type.lower())
    net.add_external_input(*inputs)
    getattr(net, op_type)(list(inputs), "y", **attrs)
    net.add_external_output("y")
    return net


@pytest.mark.parametrize("convert", CONVERTERS)
@pytest.mark.parametrize("axis", [-3, -2, -1, 0, 1, 3])
def test_flatten_counts_a_negative_axis_from_the_end(convert, axis, run_predict):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    net = _one_op("Flatten", ["x"], axis=axis)
    expected = run_predict(net.proto(), {"x": x})["y"]
    got = _forward(convert(None, net), x)
    assert got.shape == expected.shape == (int(np.prod(x.shape[:axis])), -1)[:1] + got.shape[1:]
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("convert", CONVERTERS)
def test_clip_without_bounds_is_the_identity(convert):
    x = np.array([-3.5, 0.25, 7.0], np.float32)
    np.testing.assert_array_equal(_forward(convert(None, _one_op("Clip", ["x"])), x), x)


def test_embedding_takes_negative_indices_as_gather_does(given, run_predict):
    init, net = NetDef(name="init"), Net("emb")
    given(init, "table", np.arange(20, dtype=np.float32).reshape(5, 4))
    net.add_external_input("table", "ids")
    net.Gather(["table", "ids"], "y", axis=0)
    net.add_external_output("y")
    ids = np.array([[0, -1], [-5, 2]], np.int64)
    module = to_torch(init, net)
    assert isinstance(module.get_submodule("table"), torch.nn.Embedding)
    expected = run_predict(net.proto(), {"ids": ids}, init=init)["y"]
    np.testing.assert_array_equal(_forward(module, ids), expected)
    np.testing.assert_array_equal(expected[0, 1], [16, 17, 18, 19])


def test_functional_batch_norm_keeps_its_statistics_as_buffers(run_predict):
    """spatial_bn on an input of unknown rank runs functionally; its running statistics
    are buffers, so a forward with autograd on works and an optimizer leaves them."""
    model = ModelHelper(name="bn_on_data", seed=0)
    brew.spatial_bn(model, "data", "bn0", 3, is_test=True)
    init, predict = model.param_init_net.proto(), model.net.proto()
    module = to_torch(init, predict)
    assert sorted(n for n, _ in module.named_buffers()) == ["bn0_rm", "bn0_rv"]
    assert sorted(n for n, _ in module.named_parameters()) == ["bn0_b", "bn0_s"]
    x = np.random.default_rng(0).normal(size=(2, 3, 4, 4)).astype(np.float32)
    got = module(torch.from_numpy(x))  # autograd on
    got.sum().backward()
    expected = run_predict(predict, {"data": x}, init=init)["bn0"]
    np.testing.assert_allclose(got.detach().numpy(), expected, rtol=1e-5, atol=1e-6)


def test_batch_norm_counter_stays_with_its_layer_through_from_torch():
    torch.manual_seed(0)
    source = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4))
    init, predict = from_torch(source.eval(), torch.randn(2, 3, 8, 8))
    module = to_torch(init, predict)
    assert list(module.state_dict()) == list(source.state_dict())
    source.train(), module.train()
    x = torch.randn(4, 3, 8, 8)
    for _ in range(2):
        source(x), module(x)
    for key, value in source.state_dict().items():
        torch.testing.assert_close(module.state_dict()[key], value, rtol=1e-5, atol=1e-6)
    assert int(module.state_dict()["1.num_batches_tracked"]) == 2


def test_to_module_batch_norm_trains_without_a_counter(conv_bn_nets):
    init, predict = conv_bn_nets
    module = to_module(init, predict).train()
    x = np.random.default_rng(0).normal(size=(2, 3, 4, 4)).astype(np.float32)
    before = np.array(module.state_dict()["bn1_rm"])
    module(x)
    assert not np.array_equal(module.state_dict()["bn1_rm"], before)
    assert "num_batches_tracked" not in " ".join(module.state_dict())


def test_a_plain_dict_loads_strictly_into_a_batch_norm_net(conv_bn_nets):
    init, predict = conv_bn_nets
    module = to_torch(init, predict)
    state = {k: v.clone() + 1 for k, v in module.state_dict().items()}  # no _metadata
    module.load_state_dict(state)  # strict
    for key, value in module.state_dict().items():
        torch.testing.assert_close(value, state[key])
    bad = dict(state, extra=torch.zeros(1))
    with pytest.raises(RuntimeError, match="Unexpected key.*extra"):
        module.load_state_dict(bad)


@pytest.mark.parametrize("convert", CONVERTERS)
@pytest.mark.parametrize(
    "name", ["net_name", "input_names", "output_names", "_steps", "_device", "_renames"]
)
def test_parameters_may_take_the_modules_own_attribute_names(convert, name):
    init, net = Net("init"), Net("scale")
    init.Constant([], name, value=np.array([1.0, 2.0, 3.0], np.float32))
    net.add_external_input("x", name)
    net.Mul(["x", name], "y")
    net.add_external_output("y")
    module = convert(init, net)
    assert list(module.state_dict()) == [name]
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(_forward(module, x), [1.0, 2.0, 3.0])
    assert module.input_names == ["x"] and module.output_names == ["y"]


@nb.script
def _repeat(x, w, n: int):
    for _ in range(n):
        x = F.tanh(x @ w)
    if n > 2:
        x = x * w[0]
    return x


@pytest.mark.parametrize("convert", CONVERTERS)
def test_loop_and_if_bodies_read_outer_blobs(convert):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 4)).astype(np.float32)
    w = rng.normal(size=(4, 4)).astype(np.float32)
    _repeat(x, w, 1)  # compiles the nets
    types = {op.type for op in _repeat.predict_net.op}
    assert {"Loop", "If"} <= types
    module = convert(_repeat.init_net, _repeat.predict_net)
    for n in (1, 3):
        expected = np.asarray(_repeat(x, w, n))
        np.testing.assert_allclose(_forward(module, x, w, np.array(n)), expected, rtol=1e-6)


def test_adaptive_pool_keeps_a_none_size():
    source = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d((2, None)))
    x = torch.randn(1, 2, 4, 6)
    init, predict = from_torch(source, x)
    out = nb.Predictor(init, predict).run({predict.external_input[0]: x.numpy()})
    np.testing.assert_allclose(next(iter(out.values())), source(x).numpy(), rtol=1e-6)


def test_a_boolean_mask_index_picks_the_entries_where_it_holds():
    class Masked(torch.nn.Module):
        def forward(self, x):
            return x[x > 0] * 2

    x = torch.randn(3, 5)
    init, predict = from_torch(Masked(), x)
    for value in (x, torch.randn(4, 2)):
        out = nb.Predictor(init, predict).run({predict.external_input[0]: value.numpy()})
        np.testing.assert_array_equal(next(iter(out.values())), Masked()(value).numpy())


def test_from_torch_gives_a_to_torch_module_back_as_its_netdef(lenet_nets, run_predict):
    init, predict = lenet_nets
    module = to_torch(init, predict)
    x = torch.from_numpy(np.random.default_rng(2).random((4, 1, 8, 8), dtype=np.float32))
    optimizer = torch.optim.SGD(module.parameters(), lr=0.5)
    module(x).sum().backward()
    optimizer.step()  # the weights move away from the init net's
    new_init, new_predict = from_torch(module, x)
    assert [op.type for op in new_predict.op] == [op.type for op in predict.op]
    assert [op.output[0] for op in new_init.op] == list(module.state_dict())
    with torch.no_grad():
        want = module(x).numpy()
    got = run_predict(new_predict, {"data": x.numpy()}, init=new_init)["softmax"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="would rename them"):
        from_torch(module, x, input_names=["image"])
