"""Optimizers as ops: SGD (plain, momentum, weight decay, LR policies) and Adam vs NumPy."""

import numpy as np
import pytest

from netbrew import brew
from netbrew.brew import ModelHelper
from netbrew.executor import Workspace


def quadratic_model(build, **kwargs):
    """loss = mean((x · wᵀ + b - target)^2) for one FC layer."""
    model = ModelHelper("q")
    w0 = np.array([[0.5, -0.25]], np.float32)
    fc = brew.fc(model, "x", "fc", 2, 1, weight_init=brew.FromArray(w0))
    diff = model.net.Sub([fc, "target"], "diff")
    sq = model.net.Mul([diff, diff], "sq")
    model.net.ReduceMean([sq], "loss", keepdims=0)
    model.add_gradient_operators(["loss"])
    build(model, **kwargs)
    return model


def run_steps(model, steps, x, t):
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    ws.feed_blob("x", x)
    ws.feed_blob("target", t)
    ws.create_net(model.net)
    history = []
    for _ in range(steps):
        ws.run_net(model.net.name)
        history.append((ws.fetch_blob("fc_w").copy(), ws.fetch_blob("fc_b").copy()))
    return ws, history


def reference_grads(w, b, x, t):
    diff = x @ w.T + b - t
    return 2 * diff.T @ x / len(x), 2 * diff.sum(0) / len(x)


X = np.array([[1.0, 2.0], [0.5, -1.0], [-1.5, 0.25]], np.float32)
T = np.array([[1.0], [0.0], [-1.0]], np.float32)


@pytest.mark.parametrize("nesterov", [None, False])
@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_sgd_matches_numpy(momentum, weight_decay, nesterov):
    # nesterov=None: build_sgd's default, which is Nesterov's momentum as in Caffe2.
    lr = 0.1
    args = {} if nesterov is None else {"nesterov": nesterov}
    model = quadratic_model(
        brew.optimizer.build_sgd, base_learning_rate=lr, momentum=momentum,
        weight_decay=weight_decay, **args,
    )  # fmt: skip
    _, history = run_steps(model, 5, X, T)
    w, b = np.array([[0.5, -0.25]]), np.zeros(1)
    mw, mb = np.zeros_like(w), np.zeros_like(b)
    for got_w, got_b in history:
        gw, gb = reference_grads(w, b, X, T)
        gw = gw + weight_decay * w
        if momentum:
            new_w, new_b = momentum * mw + lr * gw, momentum * mb + lr * gb
            if nesterov is False:
                w, b = w - new_w, b - new_b
            else:  # Caffe2's Nesterov step: (1 + momentum) * m_new - momentum * m
                w = w - ((1 + momentum) * new_w - momentum * mw)
                b = b - ((1 + momentum) * new_b - momentum * mb)
            mw, mb = new_w, new_b
        else:
            w, b = w - lr * gw, b - lr * gb
        np.testing.assert_allclose(got_w, w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_b, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "policy,args,multiplier",
    [
        ("fixed", {}, lambda i: 1.0),
        ("step", {"stepsize": 2, "gamma": 0.5}, lambda i: 0.5 ** (i // 2)),
        ("exp", {"gamma": 0.9}, lambda i: 0.9**i),
        ("inv", {"gamma": 0.1, "power": 0.75}, lambda i: (1 + 0.1 * i) ** -0.75),
    ],
)
def test_learning_rate_policies(policy, args, multiplier):
    model = quadratic_model(brew.optimizer.build_sgd, base_learning_rate=0.2, policy=policy, **args)
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    ws.feed_blob("x", X)
    ws.feed_blob("target", T)
    ws.create_net(model.net)
    for step in range(5):
        ws.run_net(model.net.name)
        iteration = int(ws.fetch_blob("optimizer_iteration")[0])
        assert iteration == step + 1
        np.testing.assert_allclose(ws.fetch_blob("lr")[0], -0.2 * multiplier(iteration), rtol=1e-6)


def test_adam_matches_numpy():
    lr, b1, b2, eps = 0.05, 0.9, 0.999, 1e-8
    model = quadratic_model(brew.optimizer.build_adam, base_learning_rate=lr, epsilon=eps)
    ws, history = run_steps(model, 6, X, T)
    w, b = np.array([[0.5, -0.25]]), np.zeros(1)
    state = {"w": [np.zeros_like(w), np.zeros_like(w)], "b": [np.zeros_like(b)] * 2}
    for step, (got_w, got_b) in enumerate(history, start=1):
        gw, gb = reference_grads(w, b, X, T)
        t = step + 1  # Caffe2's Adam reads the counter after Iter, then adds one
        correction = np.sqrt(1 - b2**t) / (1 - b1**t)
        for key, g in (("w", gw), ("b", gb)):
            m1, m2 = state[key]
            m1 = b1 * m1 + (1 - b1) * g
            m2 = b2 * m2 + (1 - b2) * g * g
            state[key] = [m1, m2]
        w = w - lr * correction * state["w"][0] / (np.sqrt(state["w"][1]) + eps)
        b = b - lr * correction * state["b"][0] / (np.sqrt(state["b"][1]) + eps)
        np.testing.assert_allclose(got_w, w, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(got_b, b, rtol=1e-4, atol=1e-6)
    assert set(model.optimizer_state) >= {"fc_w_first_moment", "fc_b_second_moment"}
    assert not model.get_computed_params()


def test_optimizer_needs_gradients():
    model = ModelHelper("m")
    brew.fc(model, "x", "fc", 2, 1)
    with pytest.raises(ValueError, match="call add_gradient_operators"):
        brew.optimizer.build_sgd(model, 0.1)


def test_params_hold_only_parameters_and_each_has_a_gradient():
    # Caffe2's tutorials read `for p in model.params: model.param_to_grad[p]`.
    model = quadratic_model(brew.optimizer.build_sgd, base_learning_rate=0.1, momentum=0.9)
    assert model.params == ["fc_w", "fc_b"]
    assert {p: model.param_to_grad[p] for p in model.params} == {
        "fc_w": "fc_w_grad",
        "fc_b": "fc_b_grad",
    }
    assert model.optimizer_state == ["optimizer_iteration", "fc_w_momentum", "fc_b_momentum"]
    assert set(model.get_checkpoint_blobs()) == {*model.params, *model.optimizer_state}
