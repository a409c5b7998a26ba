"""End-to-end training: an MLP and a CNN converge on the bundled digits; the demo runs."""

import subprocess
import sys

from netbrew import brew
from netbrew.brew import ModelHelper
from netbrew.demo import split, train, training_model
from netbrew.executor import Workspace
from netbrew.netdef.model_dir import inference_net


def held_out_accuracy(model, ws, x, y, logits_or_prob):
    ws.create_net(inference_net(model.net, ["data"], [logits_or_prob], name="eval"), True)
    ws.feed_blob("data", x)
    ws.run_net("eval")
    return float((ws.fetch_blob(logits_or_prob).argmax(1) == y).mean())


def fit(model, epochs, batch=64):
    x_train, y_train, x_test, y_test = split()
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    ws.feed_blob("data", x_train[:batch])
    ws.feed_blob("label", y_train[:batch])
    ws.create_net(model.net)
    train(model, ws, x_train, y_train, epochs, batch)
    return ws, x_test, y_test


def test_mlp_with_adam_converges():
    model = ModelHelper("mlp")
    flat = brew.flatten(model, "data", "flat")
    h = brew.relu(model, brew.fc(model, flat, "fc1", 64, 64), "h")
    logits = brew.fc(model, h, "fc2", 64, 10)
    _, loss = brew.softmax_with_loss(model, logits, "label", softmax_out="prob")
    model.add_gradient_operators([loss])
    brew.optimizer.build_adam(model, 0.01)
    ws, x, y = fit(model, epochs=8)
    assert float(ws.fetch_blob("loss")) < 0.3
    assert held_out_accuracy(model, ws, x, y, "fc2") >= 0.93


def test_cnn_with_batchnorm_converges():
    model = ModelHelper("bn_cnn")
    c = brew.conv(model, "data", "conv", 1, 8, kernel=3, pad=1, no_bias=True)
    r = brew.relu(model, brew.spatial_bn(model, c, "bn", 8), "relu")
    p = brew.average_pool(model, r, "pool", kernel=2, stride=2)
    logits = brew.fc(model, p, "fc", 8 * 4 * 4, 10)
    prob = brew.softmax(model, logits, "prob")
    loss = model.net.AveragedLoss(model.net.LabelCrossEntropy([prob, "label"], "xent"), "loss")
    model.add_gradient_operators([loss])
    brew.optimizer.build_sgd(model, 0.1, momentum=0.9, policy="step", stepsize=100, gamma=0.5)
    ws, x, y = fit(model, epochs=6)
    assert held_out_accuracy(model, ws, x, y, "prob") >= 0.93


def test_training_loss_decreases_for_demo_lenet():
    model = training_model()
    x_train, y_train, _, _ = split()
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    ws.feed_blob("data", x_train[:64])
    ws.feed_blob("label", y_train[:64])
    ws.create_net(model.net)
    ws.run_net(model.net.name)
    first = float(ws.fetch_blob("loss"))
    losses = []
    for _ in range(60):  # Nesterov's momentum (build_sgd's default) oscillates on one batch
        ws.run_net(model.net.name)
        losses.append(float(ws.fetch_blob("loss")))
    assert min(losses) < first / 10  # memorises one batch


def test_demo_reaches_97_percent(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "netbrew.cli", "demo", "-o", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    line = next(li for li in out.stdout.splitlines() if li.startswith("held-out accuracy"))
    accuracy = float(line.split(":")[1].split("%")[0]) / 100
    assert accuracy >= 0.97, out.stdout
    assert "predictions identical" in out.stdout
    assert "training [" in out.stderr and "loss" in out.stderr
    assert (tmp_path / "demo" / "init_net.pb").exists()
