"""Building training models as Caffe2 programs did: optimizers inside a name scope,
parameters registered with AddParameter, save_model of a softmax_with_loss model, and a
model-wide arg_scope order. Numbers are checked against NumPy."""

import numpy as np
import pytest

import netbrew as nb
from netbrew import brew
from netbrew.brew import ModelHelper
from netbrew.caffe2.python import model_helper, optimizer, workspace
from netbrew.executor import Workspace
from netbrew.netdef.scope import name_scope

X = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
T = np.random.default_rng(1).normal(size=(6, 1)).astype(np.float32)


def _sgd_steps(w, b, steps, lr=0.1, momentum=0.0):
    """Caffe2's momentum SGD (lr folded into the momentum buffer) on mean((Xw + b - T)^2)."""
    mw, mb = np.zeros_like(w), np.zeros_like(b)
    for _ in range(steps):
        diff = X @ w.T + b - T
        gw, gb = 2 * diff.T @ X / diff.size, 2 * diff.sum(0) / diff.size
        if momentum:
            mw, mb = momentum * mw + lr * gw, momentum * mb + lr * gb
            w, b = w - mw, b - mb
        else:
            w, b = w - lr * gw, b - lr * gb
    return w, b


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_an_optimizer_built_in_a_name_scope_trains(momentum):
    model = ModelHelper("scoped", seed=0)
    with name_scope("gpu_0"):
        fc = brew.fc(model, "x", "fc", 3, 1)
        diff = model.net.Sub([fc, "t"], "diff")
        model.net.ReduceMean([model.net.Mul([diff, diff], "sq")], "loss", keepdims=0)
        model.add_gradient_operators(["gpu_0/loss"])
        brew.optimizer.build_sgd(model, 0.1, momentum=momentum, nesterov=False)
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    w0, b0 = ws.fetch_blob("gpu_0/fc_w"), ws.fetch_blob("gpu_0/fc_b")
    ws.feed_blob("gpu_0/x", X)
    ws.feed_blob("gpu_0/t", T)
    ws.create_net(model.net)
    ws.run_net(model.net.name, num_iter=3)
    assert not any("gpu_0/gpu_0" in b for b in ws.blobs())
    np.testing.assert_array_equal(ws.fetch_blob("gpu_0/optimizer_iteration"), [3])
    w, b = _sgd_steps(w0, b0, 3, momentum=momentum)
    np.testing.assert_allclose(ws.fetch_blob("gpu_0/fc_w"), w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ws.fetch_blob("gpu_0/fc_b"), b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("build", ["momentum", "adam"])
def test_added_parameters_get_optimizer_state_of_their_own_shape(build):
    workspace.ResetWorkspace()
    model = model_helper.ModelHelper(name="toy")
    model.param_init_net.GaussianFill([], "W", shape=[1, 3], mean=0.0, std=0.1)
    model.param_init_net.ConstantFill([], "B", shape=[1], value=0.0)
    model.AddParameter("W")
    model.AddParameter("B")
    pred = model.net.FC(["X", "W", "B"], "pred")
    model.net.AveragedLoss(model.net.SquaredL2Distance([pred, "Y"], "dist"), "loss")
    model.AddGradientOperators(["loss"])
    if build == "adam":
        optimizer.build_adam(model, 0.05)
    else:
        optimizer.build_sgd(model, 0.05, momentum=0.9)
    workspace.FeedBlob("X", X)
    workspace.FeedBlob("Y", T)
    workspace.RunNetOnce(model.param_init_net)
    workspace.RunNetOnce(model.net)
    states = [b for b in workspace.Blobs() if b.startswith("W_")]
    assert states and all(workspace.FetchBlob(b).shape == (1, 3) for b in states)


def test_save_model_keeps_only_the_softmax_of_softmax_with_loss(tmp_path):
    model = ModelHelper(name="clf", seed=0)
    fc = brew.fc(model, "data", "fc", 4, 3)
    softmax, loss = brew.softmax_with_loss(model, fc, "label")
    model.add_gradient_operators([loss])
    brew.optimizer.build_sgd(model, 0.1)
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    ws.feed_blob("data", np.random.default_rng(2).random((8, 4), dtype=np.float32))
    ws.feed_blob("label", np.zeros(8, np.int32))
    ws.run_net_once(model.net)
    nb.save_model(tmp_path, ws, model, inputs=["data"], outputs=[softmax])
    predictor = nb.load_model(tmp_path)
    assert "label" not in predictor.input_names
    x = np.random.default_rng(3).random((2, 4), dtype=np.float32)
    logits = x @ ws.fetch_blob("fc_w").T + ws.fetch_blob("fc_b")
    want = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    np.testing.assert_allclose(predictor.run({"data": x})[softmax], want, rtol=1e-5)


def test_a_model_wide_nhwc_order_is_refused_by_layout_helpers():
    model = model_helper.ModelHelper(name="nhwc", arg_scope={"order": "NHWC"})
    brew.fc(model, "x", "fc", 3, 2)  # no layout: builds as in Caffe2
    with pytest.raises(ValueError, match="order='NHWC' is not supported .*model's arg_scope"):
        brew.conv(model, "data", "c", 4, 3, 3)


def test_caffe2_add_weight_decay_and_missing_builders():
    model = ModelHelper("wd", seed=0)
    brew.fc(model, "x", "fc", 3, 1)
    model.net.ReduceMean([model.net.Mul(["fc", "fc"], "sq")], "loss", keepdims=0)
    model.add_gradient_operators(["loss"])
    optimizer.add_weight_decay(model, 0.5)
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    ws.feed_blob("x", X)
    ws.run_net_once(model.net)
    w, b = ws.fetch_blob("fc_w"), ws.fetch_blob("fc_b")
    y = X @ w.T + b
    want = 2 * (y.T @ X) / y.size + 0.5 * w  # the bias takes no decay
    np.testing.assert_allclose(ws.fetch_blob("fc_w_grad"), want, rtol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob("fc_b_grad"), 2 * y.sum(0) / y.size, rtol=1e-5)
    with pytest.raises(AttributeError, match="build_adagrad is not available in netbrew"):
        optimizer.build_adagrad  # noqa: B018
