"""brew helpers: the ops and parameters each emits, arg_scope, and the numbers they give."""

import inspect

import numpy as np
import pytest

from netbrew import brew
from netbrew.brew import ModelHelper, Tags
from netbrew.executor import Workspace


def run(model, **feeds):
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    for name, value in feeds.items():
        ws.feed_blob(name, value)
    ws.run_net_once(model.net)
    return ws


HELPERS = [
    brew.fc, brew.conv, brew.conv_transpose, brew.relu, brew.leaky_relu, brew.prelu,
    brew.sigmoid, brew.tanh, brew.softmax, brew.max_pool, brew.average_pool,
    brew.global_avg_pool, brew.global_max_pool, brew.spatial_bn, brew.layer_norm,
    brew.dropout, brew.concat, brew.flatten, brew.reshape, brew.transpose, brew.sum,
    brew.add_weight_decay, brew.softmax_with_loss, brew.accuracy,
]  # fmt: skip


@pytest.mark.parametrize("helper", HELPERS, ids=lambda h: h.__name__)
def test_docstring_lists_emitted_ops(helper):
    assert "Emits:" in inspect.getdoc(helper)


def test_fc_matches_numpy_and_names_params():
    model = ModelHelper("m")
    brew.fc(model, "x", "fc1", dim_in=4, dim_out=3)
    assert model.get_params() == ["fc1_w", "fc1_b"]
    assert model.param_tags["fc1_w"] == {Tags.WEIGHT}
    x = np.random.default_rng(0).normal(size=(2, 4)).astype(np.float32)
    ws = run(model, x=x)
    w, b = ws.fetch_blob("fc1_w"), ws.fetch_blob("fc1_b")
    assert w.shape == (3, 4) and np.all(b == 0) and np.abs(w).max() <= np.sqrt(3 / 4)
    np.testing.assert_allclose(ws.fetch_blob("fc1"), x @ w.T + b, rtol=1e-5)


def test_conv_pool_shapes_and_arg_scope():
    model = ModelHelper("m")
    with brew.arg_scope([brew.conv], weight_init=brew.ConstantInit(0.5), pad=1):
        c = brew.conv(model, "x", "c", 2, 4, kernel=3)
        c2 = brew.conv(model, c, "c2", 4, 4, kernel=3, group=2, pad=0)
    p = brew.max_pool(model, c2, "p", kernel=2, stride=2)
    a = brew.average_pool(model, c, "a", kernel=2, stride=2)
    g = brew.global_avg_pool(model, p, "g")
    brew.global_max_pool(model, a, "gm")
    ws = run(model, x=np.ones((1, 2, 6, 6), np.float32))
    assert ws.fetch_blob("c").shape == (1, 4, 6, 6)
    assert ws.fetch_blob("c2").shape == (1, 4, 4, 4)
    assert ws.fetch_blob(p).shape == (1, 4, 2, 2) and ws.fetch_blob(g).shape == (1, 4, 1, 1)
    assert ws.fetch_blob("c_w").shape == (4, 2, 3, 3) and np.all(ws.fetch_blob("c_w") == 0.5)
    assert ws.fetch_blob("c2_w").shape == (4, 2, 3, 3)
    assert ws.fetch_blob("c")[0, 0, 2, 2] == 0.5 * 18  # interior: 2 channels x 9 taps


def test_conv_transpose_doubles_size():
    model = ModelHelper("m")
    brew.conv_transpose(model, "x", "up", 3, 2, kernel=2, stride=2)
    ws = run(model, x=np.ones((1, 3, 4, 4), np.float32))
    assert ws.fetch_blob("up").shape == (1, 2, 8, 8)
    assert ws.fetch_blob("up_w").shape == (3, 2, 2, 2)


def test_activations():
    model = ModelHelper("m")
    x = np.array([[-2.0, -0.5, 0.5, 2.0]], np.float32)
    brew.relu(model, "x", "relu")
    brew.leaky_relu(model, "x", "leaky", alpha=0.1)
    brew.prelu(model, "x4", "prelu", num_channels=1, spatial_dims=2)
    brew.sigmoid(model, "x", "sig")
    brew.tanh(model, "x", "tanh")
    brew.softmax(model, "x", "sm")
    ws = run(model, x=x, x4=x.reshape(1, 1, 2, 2))
    np.testing.assert_allclose(ws.fetch_blob("relu"), np.maximum(x, 0))
    np.testing.assert_allclose(ws.fetch_blob("leaky"), np.where(x > 0, x, 0.1 * x))
    np.testing.assert_allclose(
        ws.fetch_blob("prelu").reshape(1, 4), np.where(x > 0, x, 0.25 * x), rtol=1e-6
    )
    np.testing.assert_allclose(ws.fetch_blob("sig"), 1 / (1 + np.exp(-x)), rtol=1e-6)
    np.testing.assert_allclose(ws.fetch_blob("tanh"), np.tanh(x), rtol=1e-6)
    np.testing.assert_allclose(ws.fetch_blob("sm"), np.exp(x) / np.exp(x).sum(), rtol=1e-6)


def test_spatial_bn_training_updates_running_stats_and_test_mode_uses_them():
    x = np.random.default_rng(0).normal(2.0, 3.0, size=(8, 2, 3, 3)).astype(np.float32)
    model = ModelHelper("m")
    brew.spatial_bn(model, "x", "bn", 2, momentum=0.5)
    assert set(model.get_computed_params()) == {"bn_rm", "bn_rv"}
    ws = run(model, x=x)
    mean = x.mean(axis=(0, 2, 3))
    y = ws.fetch_blob("bn")
    np.testing.assert_allclose(y.mean(axis=(0, 2, 3)), 0, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob("bn_rm"), 0.5 * mean, rtol=1e-5)
    test_model = ModelHelper("t")
    brew.spatial_bn(test_model, "x", "bn", 2, is_test=True)
    ws2 = run(test_model, x=x)
    np.testing.assert_allclose(ws2.fetch_blob("bn"), x / np.sqrt(1 + 1e-5), rtol=1e-5)


def test_layer_norm_dropout_arrays():
    x = np.random.default_rng(1).normal(size=(4, 6)).astype(np.float32)
    model = ModelHelper("m")
    brew.layer_norm(model, "x", "ln", 6)
    brew.dropout(model, "x", "drop", ratio=0.5, seed=3)
    brew.dropout(model, "x", "keep", is_test=True)
    brew.concat(model, ["x", "x"], "cat", axis=1)
    brew.flatten(model, "cat", "flat")
    brew.reshape(model, "x", "r", shape=[3, -1])
    brew.transpose(model, "x", "t")
    brew.sum(model, ["x", "x", "x"], "s")
    ws = run(model, x=x)
    ln = ws.fetch_blob("ln")
    np.testing.assert_allclose(ln.mean(axis=1), 0, atol=1e-5)
    drop, mask = ws.fetch_blob("drop"), ws.fetch_blob("drop_mask")
    np.testing.assert_allclose(drop, np.where(mask, x * 2, 0), rtol=1e-6)
    assert 0 < mask.mean() < 1
    np.testing.assert_array_equal(ws.fetch_blob("keep"), x)
    assert ws.fetch_blob("cat").shape == (4, 12) and ws.fetch_blob("r").shape == (3, 8)
    np.testing.assert_array_equal(ws.fetch_blob("t"), x.T)
    np.testing.assert_allclose(ws.fetch_blob("s"), 3 * x, rtol=1e-6)


def test_initializers():
    model = ModelHelper("m")
    pretrained = np.arange(6, dtype=np.float32).reshape(2, 3)
    brew.fc(model, "x", "a", 3, 2, weight_init=brew.FromArray(pretrained))
    brew.fc(model, "x", "b", 3, 2, weight_init=("GaussianFill", {"std": 0.0, "mean": 1.5}))
    brew.fc(model, "x300", "c", 300, 200, weight_init=brew.MSRAInit())
    ws = run(model, x=np.ones((1, 3), np.float32), x300=np.ones((1, 300), np.float32))
    np.testing.assert_array_equal(ws.fetch_blob("a_w"), pretrained)
    np.testing.assert_array_equal(ws.fetch_blob("b_w"), np.full((2, 3), 1.5, np.float32))
    assert abs(ws.fetch_blob("c_w").std() - np.sqrt(2 / 200)) < 0.01  # fan_out = numel / 300
    with pytest.raises(ValueError, match=r"'d_w': array has shape \[2, 3\], expected \[2, 4\]"):
        brew.fc(model, "x", "d", 4, 2, weight_init=brew.FromArray(pretrained))


def test_duplicate_parameter_is_refused():
    model = ModelHelper("m")
    brew.fc(model, "x", "fc", 3, 2)
    with pytest.raises(ValueError, match="already has a parameter 'fc_w'"):
        brew.fc(model, "x", "fc", 3, 2)


def test_init_params_false_leaves_trained_weights_alone():
    # Caffe2's tutorials build a test model with init_params=False and run its init net;
    # before the flag existed that re-randomised the trained weights.
    train = ModelHelper("train", seed=0)
    brew.fc(train, "data", "fc", dim_in=3, dim_out=2)
    test = ModelHelper("test", init_params=False)
    brew.fc(test, "data", "fc", dim_in=3, dim_out=2)
    assert test.params == ["fc_w", "fc_b"] and not test.param_init_net.ops
    ws = Workspace()
    ws.run_net_once(train.param_init_net)
    trained = ws.fetch_blob("fc_w").copy()
    ws.run_net_once(test.param_init_net)
    np.testing.assert_array_equal(ws.fetch_blob("fc_w"), trained)
    ws.feed_blob("data", np.ones((1, 3), np.float32))
    ws.run_net_once(test.net)
    np.testing.assert_allclose(ws.fetch_blob("fc"), trained.sum(1)[None] + ws.fetch_blob("fc_b"))


def test_parameters_made_in_a_name_scope_are_filled_under_that_name():
    from netbrew.netdef import name_scope

    model = ModelHelper("scoped", seed=0)
    with name_scope("block"):
        brew.fc(model, "data", "fc", dim_in=3, dim_out=2)
    assert model.params == ["block/fc_w", "block/fc_b"]
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    assert ws.fetch_blob("block/fc_w").shape == (2, 3)
    assert not ws.has_blob("block/block/fc_w")
