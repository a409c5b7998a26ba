"""Training through the frontend: a netbrew.nn CNN traced in train mode, trained with brew's
loss, autodiff and SGD on the bundled digits, then loaded back into the Module."""

import time
import types

import numpy as np
import pytest

from netbrew import brew, nn
from netbrew.converters.module.trace import to_model_helper, trace
from netbrew.demo import split
from netbrew.executor import Workspace
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.netdef.model_dir import inference_net, load_model, save_model
from netbrew.nn import functional as F

BATCH = 64


class DigitNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(32 * 2 * 2, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 10)
        )

    def forward(self, x):
        return self.classifier(self.features(x))


def test_train_traced_module_on_digits_and_load_weights_back(tmp_path):
    start = time.perf_counter()
    nn.manual_seed(0)
    net = DigitNet().train()
    x_train, y_train, x_test, y_test = split()
    init_net, predict_net = trace(
        net, x_train[:BATCH], input_names=["data"], output_names=["logits"]
    )
    model = to_model_helper(net, init_net, predict_net)
    _, loss = model.net.SoftmaxWithLoss(["logits", "label"], ["softmax", "loss"])
    model.add_gradient_operators([loss])
    brew.optimizer.build_sgd(model, 0.05, momentum=0.9)
    assert "features.0.weight" in model.param_to_grad
    assert "features.1.running_mean" not in model.param_to_grad

    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    ws.feed_blob("data", x_train[:BATCH])
    ws.feed_blob("label", y_train[:BATCH])
    ws.create_net(model.net)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(10):
        order = rng.permutation(len(y_train))
        for begin in range(0, len(y_train) - BATCH + 1, BATCH):
            idx = order[begin : begin + BATCH]
            ws.feed_blob("data", x_train[idx])
            ws.feed_blob("label", y_train[idx])
            ws.run_net(model.net.name)
            losses.append(float(ws.fetch_blob("loss")))
    assert np.mean(losses[-20:]) < 0.25 * np.mean(losses[:20])

    ws.create_net(inference_net(model.net, ["data"], ["logits"], name="digits_eval"))
    ws.feed_blob("data", x_test)
    ws.run_net("digits_eval")
    logits = ws.fetch_blob("logits")
    accuracy = float((logits.argmax(axis=1) == y_test).mean())
    assert accuracy >= 0.95, accuracy

    folder = save_model(tmp_path / "digits", ws, model, inputs=["data"], outputs=["logits"])
    shipped = load_model(folder).run({"data": x_test})["logits"]
    # the Predictor folds BatchNorm into the conv, which moves the last float bits
    np.testing.assert_allclose(shipped, logits, rtol=1e-5, atol=2e-5)

    steps = len(losses)
    assert int(ws.fetch_blob("features.1.num_batches_tracked")) == steps
    net.load_state_dict({key: ws.fetch_blob(key) for key in net.state_dict()})
    assert int(net.features[1].num_batches_tracked) == steps
    eager = net.eval()(x_test)
    np.testing.assert_array_equal(eager.argmax(axis=1), logits.argmax(axis=1))
    np.testing.assert_allclose(eager, logits, rtol=1e-5, atol=1e-5)
    assert time.perf_counter() - start < 30  # about 1-2 s on the reference machine


def _loss_models(m, fn):
    """Two small models ending in cross_entropy, for module namespace m and functions fn."""

    class Cnn(m.Module):
        def __init__(self):
            super().__init__()
            self.conv = m.Conv2d(3, 6, 3, padding=1)
            self.bn = m.BatchNorm2d(6)
            self.pool = m.AvgPool2d(2)
            self.up = m.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1)
            self.gap = m.AdaptiveAvgPool2d(1)
            self.fc = m.Linear(4, 5)

        def forward(self, x, target):
            h = self.pool(fn.relu(self.bn(self.conv(x))))
            h = self.gap(fn.sigmoid(self.up(h)))
            return fn.cross_entropy(self.fc(fn.flatten(h, 1)), target)

    class Tokens(m.Module):
        def __init__(self):
            super().__init__()
            self.embed = m.Embedding(11, 8)
            self.norm = m.LayerNorm(8)
            self.mlp = m.Linear(8, 8)
            self.act = m.GELU()
            self.out = m.Linear(8, 3)

        def forward(self, tokens, target):
            h = self.embed(tokens)
            h = self.act(self.mlp(self.norm(h))) + h
            logits = self.out(fn.tanh(h))  # (N, T, 3)
            return fn.cross_entropy(fn.permute(logits, (0, 2, 1)), target)

    return Cnn, Tokens


RNG = np.random.default_rng(0)
LOSS_CASES = [
    (0, (RNG.standard_normal((4, 3, 8, 8)).astype(np.float32), RNG.integers(0, 5, 4))),
    (1, (RNG.integers(0, 11, (4, 6)), RNG.integers(0, 3, (4, 6)))),
]


@pytest.mark.parametrize("which, inputs", LOSS_CASES, ids=["cnn", "tokens"])
def test_traced_gradients_match_pytorch_autograd(which, inputs):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    torch_fn = types.SimpleNamespace(
        relu=tf.relu,
        sigmoid=tf.sigmoid,
        tanh=tf.tanh,
        cross_entropy=tf.cross_entropy,
        flatten=torch.flatten,
        permute=torch.permute,
    )
    ours = _loss_models(nn, F)[which]().train()
    theirs = _loss_models(torch.nn, torch_fn)[which]().train()
    ours.load_state_dict(theirs.state_dict())
    init_net, predict_net = trace(ours, inputs)
    grads = add_gradient_ops(predict_net, ["output"], wrt=[n for n, _ in ours.named_parameters()])
    ws = Workspace()
    ws.run_net_once(init_net)
    for name, value in zip(predict_net.external_input, inputs):
        ws.feed_blob(name, value)
    ws.run_net_once(predict_net)
    loss = theirs(*(torch.from_numpy(v) for v in inputs))
    loss.backward()
    np.testing.assert_allclose(ws.fetch_blob("output"), loss.item(), rtol=1e-6)
    for name, param in theirs.named_parameters():
        np.testing.assert_allclose(
            ws.fetch_blob(grads[name]), param.grad.numpy(), rtol=1e-4, atol=1e-7, err_msg=name
        )
