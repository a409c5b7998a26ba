"""RNN, GRU and LSTM gradients (backpropagation through time): central differences over every
attribute, PyTorch's nn.RNN/GRU/LSTM, and training through autodiff and brew."""

import numpy as np
import pytest

from netbrew import brew
from netbrew.brew import ModelHelper
from netbrew.brew.initializers import FromArray
from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import Net, op_def
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand, run_op

T, N, I, H = 3, 3, 2, 2
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
N_OUT = {"RNN": 2, "GRU": 2, "LSTM": 3}
FLAG = {"GRU": "linear_before_reset", "LSTM": "input_forget"}
LENS = np.array([2, 3, 0], np.int32)  # ragged, the longest not first, one empty sequence
KIND_FLAGS = [("RNN", 0), ("GRU", 0), ("GRU", 1), ("LSTM", 0), ("LSTM", 1)]


def make_inputs(kind, direction="forward", layout=0, *, bias=True, lens=LENS, init=True,
                peep=True, dtype=np.float64, seed=0):  # fmt: skip
    """The op's inputs in slot order, None for absent ones."""
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[kind]
    x = rand(N, T, I, seed=seed) if layout else rand(T, N, I, seed=seed)
    w = rand(dirs, g * H, I, seed=seed + 1)
    r = rand(dirs, g * H, H, seed=seed + 2)
    b = rand(dirs, 2 * g * H, seed=seed + 3) if bias else None
    shape = (N, dirs, H) if layout else (dirs, N, H)
    h0 = rand(*shape, seed=seed + 4) if init else None
    inputs = [x, w, r, b, lens, h0]
    if kind == "LSTM":
        c0 = rand(*shape, seed=seed + 5) if init else None
        inputs += [c0, rand(dirs, 3 * H, seed=seed + 6) if peep else None]
    return [a.astype(dtype) if a is not None and a.dtype.kind == "f" else a for a in inputs]


def grad_check(kind, inputs, **attrs):
    attrs.setdefault("outputs", N_OUT[kind])
    check_gradient(kind, inputs, rtol=1e-4, atol=1e-6, hidden_size=H, **attrs)


def flag_attrs(kind, flag):
    return {FLAG[kind]: flag} if kind in FLAG else {}


@pytest.mark.parametrize("kind, flag", KIND_FLAGS)
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_directions_layouts_ragged_lens(kind, flag, direction, layout):
    # with B, initial states, ragged sequence_lens and (LSTM) peepholes
    inputs = make_inputs(kind, direction, layout)
    grad_check(kind, inputs, direction=direction, layout=layout, **flag_attrs(kind, flag))


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["reverse", "bidirectional"])
def test_only_x_w_r(kind, direction):
    # the forward op lists three inputs: no B, sequence_lens or initial states
    inputs = make_inputs(kind, direction, bias=False, lens=None, init=False, peep=False)
    grad_check(kind, inputs[:3], direction=direction)


@pytest.mark.parametrize("input_forget", [0, 1])
def test_lstm_initial_states_without_peepholes(input_forget):
    inputs = make_inputs("LSTM", "bidirectional", 1, peep=False)[:7]
    grad_check("LSTM", inputs, direction="bidirectional", layout=1, input_forget=input_forget)


@pytest.mark.parametrize("kind, flag", KIND_FLAGS)
def test_clip(kind, flag):
    inputs = make_inputs(kind, "bidirectional", seed=3)
    attrs = dict(direction="bidirectional", **flag_attrs(kind, flag))
    clipped = run_op(kind, inputs, outputs=1, clip=0.4, **attrs)[0]
    assert not np.allclose(clipped, run_op(kind, inputs, outputs=1, **attrs)[0])  # clip bites
    grad_check(kind, inputs, clip=0.4, **attrs)


# (activations of both directions, activation_alpha, activation_beta)
ACTIVATIONS = {
    "RNN-relu-leakyrelu": (["Relu", "LeakyRelu"], [0.2], None),
    "RNN-affine-scaledtanh": (["Affine", "ScaledTanh"], [0.7, 1.3], [0.1, 0.8]),
    "RNN-softsign-elu": (["Softsign", "Elu"], [0.9], None),
    "RNN-softplus-thresholdedrelu": (["Softplus", "ThresholdedRelu"], [0.3], None),
    "GRU-hardsigmoid-softsign": (
        ["HardSigmoid", "Softsign", "Sigmoid", "ScaledTanh"],
        [0.3, 1.2],
        [0.6, 0.9],
    ),  # fmt: skip
    "GRU-tanh-relu": (["Tanh", "Relu", "Sigmoid", "Affine"], [0.5], [0.2]),
    "LSTM-hardsigmoid-affine-elu": (
        ["HardSigmoid", "Affine", "Elu", "Sigmoid", "LeakyRelu", "Softsign"],
        [0.25, 0.8, 1.1, 0.3],
        [0.5, 0.1],
    ),
    "LSTM-sigmoid-scaledtanh-softplus": (
        ["Sigmoid", "ScaledTanh", "Softplus"] * 2,
        [1.4, 0.6],
        [0.7, 1.2],
    ),
}


@pytest.mark.parametrize("case", ACTIVATIONS)
@pytest.mark.parametrize("flag", [0, 1])
def test_activations_with_alpha_beta(case, flag):
    kind = case.split("-")[0]
    names, alpha, beta = ACTIVATIONS[case]
    attrs = dict(direction="bidirectional", layout=1, activations=names, **flag_attrs(kind, flag))
    for key, value in (("activation_alpha", alpha), ("activation_beta", beta)):
        if value:
            attrs[key] = value
    grad_check(kind, make_inputs(kind, "bidirectional", 1, seed=5), **attrs)


@pytest.mark.parametrize(
    "kind, output, listed",
    [("RNN", 0, 1), ("RNN", 1, 2), ("GRU", 0, 1), ("GRU", 1, 2), ("GRU", 0, 2),
     ("LSTM", 0, 1), ("LSTM", 1, 2), ("LSTM", 2, 3), ("LSTM", 1, 3)],
)  # fmt: skip
def test_gradient_from_one_output(kind, output, listed):
    # `listed` outputs on the op, only `output` gets a gradient; the others' are absent
    inputs = make_inputs(kind, "bidirectional", seed=7)
    grad_check(kind, inputs, direction="bidirectional", outputs=listed, grad_outputs=[output])


def run_gradient(kind, inputs, d_outputs, **attrs):
    """Runs {kind}Gradient through the registered maker; returns the input gradients."""
    names = ["" if a is None else f"in{i}" for i, a in enumerate(inputs)]
    forward = op_def(kind, names, [f"out{k}" for k in range(len(d_outputs))], **attrs)
    g_out = [f"out{k}_grad" for k in range(len(d_outputs))]
    g_in = [f"{n}_grad" if n and i != 4 else None for i, n in enumerate(names)]
    ws = Workspace()
    for name, value in zip(names + g_out, [*inputs, *d_outputs]):
        if name:
            ws.feed_blob(name, value)
    ops = GRADIENTS[kind](forward, g_out, g_in)
    assert [op.type for op in ops] == [f"{kind}Gradient"]
    ws.run_operator_once(ops[0])
    return [None if g is None else ws.fetch_blob(g) for g in g_in]


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_float32_gives_float32_close_to_float64(kind):
    inputs = make_inputs(kind, "bidirectional", 1, dtype=np.float32)
    outs = run_op(kind, inputs, outputs=N_OUT[kind], direction="bidirectional", layout=1)
    d_outputs = [rand(*o.shape, seed=20 + k) for k, o in enumerate(outs)]
    single = run_gradient(kind, inputs, d_outputs, direction="bidirectional", layout=1)
    wide = [a.astype(np.float64) if a is not None and a.dtype.kind == "f" else a for a in inputs]
    double = run_gradient(kind, wide, [d.astype(np.float64) for d in d_outputs],
                          direction="bidirectional", layout=1)  # fmt: skip
    for i, (s, d) in enumerate(zip(single, double)):
        if i == 4:
            assert s is None
            continue
        assert s.dtype == np.float32 and s.shape == inputs[i].shape, f"input {i}"
        np.testing.assert_allclose(s, d, rtol=1e-4, atol=1e-5, err_msg=f"input {i}")


def test_gradient_op_direct_and_its_errors():
    x, w, r, b, lens, h0 = make_inputs("GRU", lens=None)
    dy = rand(T, 1, N, H, seed=9, dtype=np.float64)
    dx, dh0 = run_op("GRUGradient", [x, w, r, b, None, h0, dy], outputs=["dx", "", "", "", "dh0"])
    # an absent dY_h counts as zeros
    zeros = run_gradient("GRU", [x, w, r, b, None, h0], [dy, np.zeros_like(h0)])
    np.testing.assert_array_equal(dx, zeros[0])
    np.testing.assert_array_equal(dh0, zeros[5])
    with pytest.raises(OperatorError, match="output dB is named but input B is missing"):
        run_op("RNNGradient", make_inputs("RNN")[:3] + [None, None, None, dy[..., :1]],
               outputs=["", "", "", "db"])  # fmt: skip
    with pytest.raises(OperatorError, match=r"input dY_h has shape \[3, 2\], expected \[1, 3, 2\]"):
        run_op("LSTMGradient", make_inputs("LSTM") + [None, dy[0, 0]], outputs=["dx"])


def test_maker_skips_sequence_lens_and_absent_slots():
    maker = GRADIENTS["LSTM"]
    forward = op_def("LSTM", ["x", "w", "r", "b", "lens"], ["y"], hidden_size=H)
    assert maker(forward, ["y_grad"], [None, None, None, None, "lens_grad"]) == []
    assert maker(forward, [None], ["x_grad", None, None, None, None]) == []
    (op,) = maker(forward, ["y_grad"], ["x_grad", None, "r_grad", None, None])
    assert op.type == "LSTMGradient"
    assert list(op.input) == ["x", "w", "r", "b", "lens", "", "", "", "y_grad", "", ""]
    assert list(op.output) == ["x_grad", "", "r_grad", "", "", "", ""]


# ONNX's gate of each PyTorch gate: LSTM torch i f g o = ONNX i o f c at 0 2 3 1; GRU torch
# r z n = ONNX z r h at 1 0 2 (torch's n is linear_before_reset=1)
TORCH_GATES = {"RNN": [0], "GRU": [1, 0, 2], "LSTM": [0, 2, 3, 1]}


def to_torch(torch, kind, module, w, r, b):
    rows = np.concatenate([np.arange(k * H, (k + 1) * H) for k in TORCH_GATES[kind]])
    gh = GATES[kind] * H
    with torch.no_grad():
        for d in range(w.shape[0]):
            suffix = "_reverse" if d else ""
            for name, value in (("weight_ih", w[d]), ("weight_hh", r[d]),
                                ("bias_ih", b[d, :gh]), ("bias_hh", b[d, gh:])):  # fmt: skip
                getattr(module, f"{name}_l0{suffix}").copy_(torch.from_numpy(value[rows]))
    return rows


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_matches_torch(kind, bidirectional, batch_first):
    torch = pytest.importorskip("torch")
    direction, layout = ("bidirectional" if bidirectional else "forward"), int(batch_first)
    inputs = make_inputs(kind, direction, layout, lens=None, peep=False, seed=11)
    x, w, r, b, _, *states = inputs
    cls = {"RNN": torch.nn.RNN, "GRU": torch.nn.GRU, "LSTM": torch.nn.LSTM}[kind]
    module = cls(I, H, batch_first=batch_first, bidirectional=bidirectional).double()
    rows = to_torch(torch, kind, module, w, r, b)
    attrs = dict(direction=direction, layout=layout, hidden_size=H)
    attrs.update(linear_before_reset=1) if kind == "GRU" else None
    outs = run_op(kind, inputs[:-1] if kind == "LSTM" else inputs, outputs=N_OUT[kind], **attrs)
    d_outputs = [rand(*o.shape, seed=30 + k, dtype=np.float64) for k, o in enumerate(outs)]

    # torch: Y (T, N, D*H) or batch_first (N, T, D*H); states (D, N, H) in either layout
    def torch_y(y):
        y = torch.from_numpy(np.ascontiguousarray(y))
        return (y.flatten(2) if layout else y.permute(0, 2, 1, 3).flatten(2)).contiguous()

    def torch_state(s):
        return torch.from_numpy(np.ascontiguousarray(s.swapaxes(0, 1) if layout else s))

    tx = torch.from_numpy(x).requires_grad_()
    t_states = [torch_state(s).requires_grad_() for s in states[:2] if s is not None]
    y, final = module(tx, tuple(t_states) if kind == "LSTM" else t_states[0])
    finals = list(final) if kind == "LSTM" else [final]
    np.testing.assert_allclose(torch_y(outs[0]).numpy(), y.detach().numpy(), atol=1e-12)
    loss = (y * torch_y(d_outputs[0])).sum()
    loss = loss + sum((f * torch_state(d)).sum() for f, d in zip(finals, d_outputs[1:]))
    loss.backward()

    got = run_gradient(kind, inputs[:-1] if kind == "LSTM" else inputs, d_outputs, **attrs)
    gh = GATES[kind] * H
    want = {0: tx.grad.numpy()}
    for k, t in enumerate(t_states):
        want[5 + k] = t.grad.numpy().swapaxes(0, 1) if layout else t.grad.numpy()
    for d in range(w.shape[0]):
        suffix = "_reverse" if d else ""
        grads = {n: getattr(module, f"{n}_l0{suffix}").grad.numpy()
                 for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}  # fmt: skip
        pairs = [
            (got[1][d][rows], grads["weight_ih"]),
            (got[2][d][rows], grads["weight_hh"]),
            (got[3][d, :gh][rows], grads["bias_ih"]),
            (got[3][d, gh:][rows], grads["bias_hh"]),
        ]
        for a, e in pairs:
            np.testing.assert_allclose(a, e, rtol=1e-7, atol=1e-10)
    for i, e in want.items():
        np.testing.assert_allclose(got[i], e, rtol=1e-7, atol=1e-10, err_msg=f"input {i}")


def lstm_net():
    """LSTM -> (Y weighted and summed, Y_h averaged) -> two losses."""
    net = Net("lstm_loss")
    y, y_h, _ = net.LSTM(["x", "w", "r", "b", "", "h0"], ["y", "y_h", "y_c"], hidden_size=H,
                         direction="bidirectional")  # fmt: skip
    net.ReduceSum(net.Mul([y, "ry"], "y_weighted"), "loss_y", keepdims=0)
    net.ReduceMean(y_h, "loss_h", keepdims=0)
    return net


def run_net(net, values):
    ws = Workspace()
    for name, value in values.items():
        ws.feed_blob(name, value)
    ws.run_net_once(net)
    return ws


def test_add_gradient_ops_through_lstm():
    # float32: autodiff seeds the losses' gradients as float32; the differences run in float64
    x, w, r, b, _, h0 = make_inputs("LSTM", "bidirectional", lens=None, dtype=np.float32)[:6]
    values = dict(x=x, w=w, r=r, b=b, h0=h0, ry=rand(T, 2, N, H, seed=40))
    wide = {k: v.astype(np.float64) for k, v in values.items()}
    net = lstm_net()
    grads = add_gradient_ops(net, ["loss_y", "loss_h"], wrt=["w", "r", "b"])
    assert {"w", "r", "b"} <= set(grads) and "x" not in grads and "h0" not in grads
    assert sum(op.type == "LSTMGradient" for op in net.proto().op) == 1
    ws = run_net(net, values)

    def loss(name, value):
        ws2 = run_net(lstm_net(), {**wide, name: value})
        return float(ws2.fetch_blob("loss_y") + ws2.fetch_blob("loss_h"))

    for name in ("w", "r", "b"):
        analytic = ws.fetch_blob(grads[name])
        assert analytic.shape == values[name].shape
        for j in (0, 5, analytic.size - 1):
            plus, minus = wide[name].copy(), wide[name].copy()
            plus.flat[j] += 1e-6
            minus.flat[j] -= 1e-6
            numeric = (loss(name, plus) - loss(name, minus)) / 2e-6
            np.testing.assert_allclose(analytic.flat[j], numeric, rtol=1e-4, atol=1e-6)


def test_brew_sgd_trains_lstm_weights():
    model = ModelHelper("lstm_regression", seed=0)
    g = GATES["LSTM"]
    params = [model.create_param(name, a.shape, FromArray(a))
              for name, a in (("w", rand(1, g * H, I, seed=1)), ("r", rand(1, g * H, H, seed=2)),
                              ("b", np.zeros((1, 2 * g * H), np.float32)))]  # fmt: skip
    _, y_h = model.net.LSTM(["data", *params], ["y", "y_h"], hidden_size=H)
    diff = model.net.Sub([y_h, "target"], "diff")
    loss = model.net.ReduceMean(model.net.Mul([diff, diff], "sq"), "loss", keepdims=0)
    model.add_gradient_operators([loss])
    assert set(model.param_to_grad) == {"w", "r", "b"}
    brew.optimizer.build_sgd(model, 0.5)
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    before = {p: ws.fetch_blob(p).copy() for p in ("w", "r", "b")}
    ws.feed_blob("data", rand(T, N, I, seed=3))
    ws.feed_blob("target", rand(1, N, H, seed=4, low=-0.5, high=0.5))
    ws.create_net(model.net)
    ws.run_net(model.net.name)
    first = float(ws.fetch_blob("loss"))
    ws.run_net(model.net.name, num_iter=60)
    assert float(ws.fetch_blob("loss")) < first / 3
    for p, value in before.items():
        assert not np.allclose(ws.fetch_blob(p), value), f"{p} did not change"
