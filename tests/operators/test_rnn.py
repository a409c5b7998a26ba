"""RNN, GRU and LSTM against a per-sequence, per-step NumPy reference written here."""

import numpy as np
import pytest

from netbrew.errors import OperatorError, SchemaError
from netbrew.testing import check_op, rand

T, N, I, H = 4, 3, 2, 3
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


# name -> f(x, alpha, beta)
ACTS = {
    "Tanh": lambda x, a, b: np.tanh(x),
    "Sigmoid": lambda x, a, b: sigmoid(x),
    "Relu": lambda x, a, b: np.maximum(x, 0),
    "Affine": lambda x, a, b: a * x + b,
    "LeakyRelu": lambda x, a, b: np.where(x >= 0, x, a * x),
    "HardSigmoid": lambda x, a, b: np.clip(a * x + b, 0, 1),
    "ScaledTanh": lambda x, a, b: a * np.tanh(b * x),
}


def step(kind, x, h, c, w, r, b, p, acts, clip, lbr, input_forget):
    """One time step of one sequence; x (I,), h and c (H,)."""
    cl = (lambda v: v) if clip is None else (lambda v: np.clip(v, -clip, clip))
    wb, rb = np.split(b, 2)
    if kind == "RNN":
        return acts[0](cl(w @ x + r @ h + wb + rb)), None
    if kind == "GRU":
        f, g = acts
        wz, wr, wh = np.split(w, 3)
        rz, rr, rh = np.split(r, 3)
        wbz, wbr, wbh = np.split(wb, 3)
        rbz, rbr, rbh = np.split(rb, 3)
        z = f(cl(wz @ x + rz @ h + wbz + rbz))
        rt = f(cl(wr @ x + rr @ h + wbr + rbr))
        if lbr:
            hh = g(cl(wh @ x + rt * (rh @ h + rbh) + wbh))
        else:
            hh = g(cl(wh @ x + rh @ (rt * h) + rbh + wbh))
        return (1 - z) * hh + z * h, None
    f, g, hf = acts
    pre = w @ x + r @ h + wb + rb
    gi, go, gf, gc = np.split(pre, 4)
    pi, po, pf = np.split(p, 3)
    i = f(cl(gi + pi * c))
    ft = 1 - i if input_forget else f(cl(gf + pf * c))
    c = ft * c + i * g(cl(gc))
    o = f(cl(go + po * c))
    return o * hf(c), c


def reference(kind, x, w, r, b=None, lens=None, h0=None, c0=None, p=None, *, direction="forward",
              layout=0, acts=None, clip=None, lbr=0, input_forget=0):  # fmt: skip
    """Returns (Y, Y_h, Y_c) in the given layout."""
    x = x.swapaxes(0, 1) if layout else x
    h0 = h0.swapaxes(0, 1) if layout and h0 is not None else h0
    c0 = c0.swapaxes(0, 1) if layout and c0 is not None else c0
    steps, batch, _ = x.shape
    dirs, hid = w.shape[0], r.shape[-1]
    g = GATES[kind]
    b = np.zeros((dirs, 2 * g * hid), x.dtype) if b is None else b
    p = np.zeros((dirs, 3 * hid), x.dtype) if p is None else p
    h0 = np.zeros((dirs, batch, hid), x.dtype) if h0 is None else h0
    c0 = np.zeros((dirs, batch, hid), x.dtype) if c0 is None else c0
    lens = [steps] * batch if lens is None else list(lens)
    y = np.zeros((steps, dirs, batch, hid), x.dtype)
    yh, yc = h0.copy(), c0.copy()
    per_dir = len(DEFAULT_ACTS[kind])
    for d in range(dirs):
        a = acts[d * per_dir : (d + 1) * per_dir]
        for n in range(batch):
            h, c = h0[d, n], c0[d, n]
            order = range(lens[n])
            if direction == "reverse" or d == 1:
                order = reversed(order)
            for t in order:
                h, c2 = step(kind, x[t, n], h, c, w[d], r[d], b[d], p[d], a, clip, lbr,
                             input_forget)  # fmt: skip
                c = c2 if c2 is not None else c
                y[t, d, n] = h
            yh[d, n], yc[d, n] = h, c
    if layout:
        return y.transpose(2, 0, 1, 3), yh.transpose(1, 0, 2), yc.transpose(1, 0, 2)
    return y, yh, yc


def operands(kind, dirs, seed=0, layout=0, bias=True):
    g = GATES[kind]
    x = rand(N, T, I, seed=seed) if layout else rand(T, N, I, seed=seed)
    w = rand(dirs, g * H, I, seed=seed + 1)
    r = rand(dirs, g * H, H, seed=seed + 2)
    b = rand(dirs, 2 * g * H, seed=seed + 3) if bias else None
    return x, w, r, b


def state(dirs, layout, seed):
    return rand(N, dirs, H, seed=seed) if layout else rand(dirs, N, H, seed=seed)


LENS = np.array([4, 2, 0], dtype=np.int32)
# (direction, layout, sequence_lens, initial state, clip, activations, alpha, beta)
CASES = {
    "forward": ("forward", 0, None, False, None, None, None, None),
    "reverse_lens": ("reverse", 0, LENS, True, None, None, None, None),
    "bidirectional_lens_layout1": ("bidirectional", 1, LENS, True, None, None, None, None),
    "bidirectional_clip": ("bidirectional", 0, None, True, 0.3, None, None, None),
    "forward_layout1": ("forward", 1, np.array([1, 4, 3], np.int64), True, None, None, None, None),
}


def _acts(kind, dirs, names, alpha, beta):
    if names is None:
        names = DEFAULT_ACTS[kind] * dirs
    alpha, beta = list(alpha or []), list(beta or [])
    out = []
    for name in names:
        a = alpha.pop(0) if name in ("Affine", "LeakyRelu", "HardSigmoid", "ScaledTanh") else None
        bb = beta.pop(0) if name in ("Affine", "HardSigmoid", "ScaledTanh") else None
        out.append(lambda v, f=ACTS[name], a=a, bb=bb: f(v, a, bb))
    return out


def _run(kind, case, extra_attrs=None, lbr=0, input_forget=0, peep=False, acts=None):
    direction, layout, lens, init, clip, names, alpha, beta = case
    names, alpha, beta = acts or (names, alpha, beta)
    dirs = 2 if direction == "bidirectional" else 1
    x, w, r, b = operands(kind, dirs, layout=layout)
    h0 = state(dirs, layout, 7) if init else None
    c0 = state(dirs, layout, 8) if init and kind == "LSTM" else None
    p = rand(dirs, 3 * H, seed=9) if peep else None
    inputs = [x, w, r, b, lens, h0] + ([c0, p] if kind == "LSTM" else [])
    attrs = dict(direction=direction, layout=layout, hidden_size=H, **(extra_attrs or {}))
    if clip is not None:
        attrs["clip"] = clip
    if names is not None:
        attrs["activations"] = names
    for key, val in (("activation_alpha", alpha), ("activation_beta", beta)):
        if val:
            attrs[key] = val
    ref_acts = _acts(kind, dirs, names, alpha, beta)
    n_out = 3 if kind == "LSTM" else 2

    def ref(*args):
        out = reference(kind, x, w, r, b, lens, h0, c0, p, direction=direction, layout=layout,
                        acts=ref_acts, clip=clip, lbr=lbr, input_forget=input_forget)  # fmt: skip
        return out[:n_out]

    check_op(kind, inputs, ref, **attrs)


@pytest.mark.parametrize("case", CASES)
def test_rnn(case):
    _run("RNN", CASES[case])


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("lbr", [0, 1])
def test_gru(case, lbr):
    _run("GRU", CASES[case], {"linear_before_reset": lbr}, lbr=lbr)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("input_forget", [0, 1])
def test_lstm_peepholes(case, input_forget):
    _run("LSTM", CASES[case], {"input_forget": input_forget}, input_forget=input_forget, peep=True)


ACT_CASES = {
    "RNN": (["Relu", "Affine"], [0.5], [0.1]),
    "GRU": (["HardSigmoid", "LeakyRelu", "Sigmoid", "ScaledTanh"], [0.3, 0.2, 0.7], [0.4, 1.5]),
    "LSTM": (
        ["Sigmoid", "Affine", "Tanh", "HardSigmoid", "Tanh", "ScaledTanh"],
        [0.9, 0.2, 1.1],
        [0.1, 0.5, 0.8],
    ),  # fmt: skip
}


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_activations_with_alpha_beta(kind):
    _run(kind, CASES["bidirectional_lens_layout1"], acts=ACT_CASES[kind])


def test_rnn_default_two_activations_forward():
    # ONNX's RNN default lists two names; a one-direction RNN uses the first
    x, w, r, b = operands("RNN", 1)
    check_op("RNN", [x, w, r, b], lambda *a: reference("RNN", x, w, r, b, acts=_acts(
        "RNN", 1, None, None, None))[:2], activations=["Tanh", "Tanh"])  # fmt: skip


def test_lstm_only_y_c_and_float64():
    x, w, r, b = (a.astype(np.float64) for a in operands("LSTM", 1))
    acts = _acts("LSTM", 1, None, None, None)
    check_op("LSTM", [x, w, r, b], lambda *a: reference("LSTM", x, w, r, b, acts=acts),
             outputs=3)  # fmt: skip


@pytest.mark.parametrize(
    "inputs, attrs, match",
    [
        (operands("RNN", 1), {"direction": "sideways"}, "direction"),
        (operands("RNN", 1), {"direction": "bidirectional"}, "W has shape"),
        (operands("RNN", 1), {"hidden_size": 5}, "hidden_size=5"),
        (operands("RNN", 1), {"activations": ["Swish"]}, "unknown activation"),
        ([*operands("RNN", 1), np.array([5, 1, 1], np.int32)], {}, "sequence_lens"),
    ],
)
def test_errors(inputs, attrs, match):
    with pytest.raises((OperatorError, SchemaError), match=match):
        check_op("RNN", inputs, lambda *a: (a[0],), **attrs)
