"""Issue 25's acceptance: a custom LSTM, greedy decoding to an end token, a data-dependent
branch, and a loop stacking per-step outputs, each through script, eager, Predictor, the
dag runtime and ONNX (onnxruntime)."""

import numpy as np
import pytest
from script_checks import check_all_ways

import netbrew
import netbrew.nn.functional as F
from netbrew import nn
from netbrew.converters import onnx as nb_onnx
from netbrew.netdef import load_net, save_net


def ops_of(net, kind):
    return [op for op in net.op if op.type == kind]


# -- a custom LSTM: a Python loop over time with its own gate math --------------------------


class GateLSTMCell(nn.Module):
    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.ih = nn.Linear(input_size, 4 * hidden_size)
        self.hh = nn.Linear(hidden_size, 4 * hidden_size, bias=False)
        self.peephole = nn.Parameter(
            np.random.default_rng(3).normal(size=hidden_size).astype(np.float32)
        )

    @netbrew.script
    def forward(self, x, h, c):
        gates = self.ih(x) + self.hh(h)
        n = self.hidden_size
        i = F.sigmoid(gates[:, 0:n] + self.peephole * c)
        f = F.sigmoid(gates[:, n : 2 * n] + 1.0)
        g = F.tanh(gates[:, 2 * n : 3 * n])
        o = F.sigmoid(gates[:, 3 * n :])
        c = f * c + i * g
        h = o * F.tanh(c)
        return h, c


class CustomLSTM(nn.Module):
    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.cell = GateLSTMCell(input_size, hidden_size)

    @netbrew.script
    def forward(self, x):
        h = F.zeros(x.shape[1], self.hidden_size)
        c = F.zeros(x.shape[1], self.hidden_size)
        outputs = []
        for t in range(x.shape[0]):
            h, c = self.cell(x[t], h, c)
            outputs.append(h)
        return F.stack(outputs), h, c


@pytest.mark.parametrize("steps,batch", [(5, 3), (1, 1), (9, 2)])
def test_custom_lstm(steps, batch):
    nn.manual_seed(0)
    model = CustomLSTM(4, 6)
    x = np.random.default_rng(steps).normal(size=(steps, batch, 4)).astype(np.float32)
    check_all_ways(model.forward, [x], model.forward.eager(x))
    predict = model.forward.predict_net
    assert len(ops_of(predict, "Loop")) == 1
    assert "cell.ih.weight" in predict.external_input  # parameters named by module path


def test_custom_lstm_sequence_length_is_dynamic():
    nn.manual_seed(1)
    model = CustomLSTM(3, 5)
    x = np.random.default_rng(0).normal(size=(4, 2, 3)).astype(np.float32)
    model.forward(x)
    init, predict = model.forward.init_net, model.forward.predict_net
    longer = np.random.default_rng(1).normal(size=(11, 2, 3)).astype(np.float32)
    out = netbrew.Predictor(init, predict).run({"x": longer})
    np.testing.assert_allclose(
        out["output_0"], model.forward.eager(longer)[0], rtol=1e-6, atol=1e-6
    )
    assert out["output_0"].shape == (11, 2, 5)


# -- greedy decoding that stops at an end token -----------------------------------------------


class GreedyDecoder(nn.Module):
    def __init__(self, vocab: int, hidden: int, end_token: int) -> None:
        super().__init__()
        self.end_token = end_token
        self.embed = nn.Embedding(vocab, hidden)
        self.rec = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, vocab)

    @netbrew.script
    def forward(self, h, start: int, max_len: int):
        token = F.zeros(1, dtype=np.int64) + start
        tokens = []
        for _step in range(max_len):
            h = F.tanh(self.embed(token) + self.rec(h))
            token = F.argmax(self.out(h), 1)
            tokens.append(token)
            if token == self.end_token:
                break
        return F.cat(tokens), h


def test_greedy_decoding_stops_at_end_token():
    nn.manual_seed(4)
    vocab = 7
    probe = GreedyDecoder(vocab, 8, end_token=-1)
    rng = np.random.default_rng(0)
    starts = [rng.normal(size=(1, 8)).astype(np.float32) * 3 for _ in range(8)]
    runs = [probe.forward.eager(h, 0, 12)[0] for h in starts]
    end = int(runs[0][2])  # the first run ends at its third token
    decoder = GreedyDecoder(vocab, 8, end_token=end)
    decoder.load_state_dict(probe.state_dict())
    lengths = set()
    for h in starts:
        expected = decoder.forward.eager(h, 0, 12)
        lengths.add(len(expected[0]))
        check_all_ways(decoder.forward, [h, 0, 12], expected)
    assert len(lengths) > 1, "inputs should stop after different numbers of steps"
    assert decoder.forward(starts[0], 0, 12)[0][-1] == end


# -- a data-dependent branch: different inputs, different branches, one saved model ------


@netbrew.script
def route(x, w):
    score = x.mean()
    if score > 0.5:
        y = F.relu(x @ w)
    elif score < -0.5:
        y = F.sigmoid(x @ w) * 2.0
    else:
        y = x @ w - 1.0
    if y.sum() > 3.0:
        return y * 0.5, score
    return y, score


def test_data_dependent_branch_in_one_saved_model(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 3)).astype(np.float32)
    base = np.abs(rng.normal(size=(2, 4))).astype(np.float32)
    inputs = [base + 1.0, -base - 1.0, base - base.mean(), base * 3.0]
    route(inputs[0], w)
    save_net(route.init_net, tmp_path / "init.pb")
    save_net(route.predict_net, tmp_path / "predict.pb")
    init, predict = load_net(tmp_path / "init.pb"), load_net(tmp_path / "predict.pb")
    model = nb_onnx.export(predict, init, inputs={"x": inputs[0], "w": w})
    taken = set()
    for x in inputs:
        expected = route.eager(x, w)
        taken.add((float(x.mean()) > 0.5, float(x.mean()) < -0.5, float(expected[0].sum()) > 1.5))
        check_all_ways(route, [x, w], expected, onnx_model=model)
        got = netbrew.Predictor(init, predict).run({"x": x, "w": w})
        np.testing.assert_allclose(got["output_0"], expected[0], rtol=1e-6, atol=1e-6)
    assert len(taken) >= 3
    assert len(ops_of(predict, "If")) == 2


# -- a loop stacking per-step outputs ---------------------------------------------------------


@netbrew.script
def decay_scan(x, n: int, rate: float):
    acc = F.zeros(x.shape[1])
    steps = []
    for i in range(1, n):
        acc = acc * rate + x[i] - x[i - 1]
        steps.append(acc)
    return F.stack(steps, 1), F.cat(steps), acc


@pytest.mark.parametrize("n", [2, 5])
def test_loop_stacks_per_step_outputs(n):
    x = np.random.default_rng(n).normal(size=(6, 3)).astype(np.float32)
    check_all_ways(decay_scan, [x, n, 0.25], decay_scan.eager(x, n, 0.25))
    assert decay_scan(x, n, 0.25)[0].shape == (3, n - 1)


@netbrew.script
def halve_until_small(x, limit: float):
    steps = 0
    while x.max() > limit:
        x = x * 0.5
        steps = steps + 1
    return x, steps


@pytest.mark.parametrize("scale", [0.5, 3.0, 100.0])
def test_while_loop_with_data_dependent_trip_count(scale):
    x = np.linspace(0.1, scale, 5).astype(np.float32)
    expected = halve_until_small.eager(x, 1.0)
    check_all_ways(halve_until_small, [x, 1.0], expected)
