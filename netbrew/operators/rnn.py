"""RNN, GRU and LSTM (ONNX, one layer): one loop over time steps, shared by all three.

Shapes (D = 2 for direction="bidirectional", else 1; G gates: RNN 1, GRU 3 in order z r h,
LSTM 4 in order i o f c): W (D, G*H, I), R (D, G*H, H), B (D, 2*G*H) = [Wb, Rb], P (D, 3*H)
(LSTM peepholes i o f). layout=0: X (T, N, I), Y (T, D, N, H), initial_h/c, Y_h, Y_c (D, N, H);
layout=1: X (N, T, I), Y (N, T, D, H), initial_h/c, Y_h, Y_c (N, D, H).

sequence_lens (N,) shortens sequences: steps past a sequence's end leave its state unchanged and
write zeros into Y, and the reverse direction starts at each sequence's own last step.
Activations (case-insensitive) take their alpha/beta from activation_alpha/beta in order, only
the ones that use them consuming a value; the others get ONNX's defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.schema import kernel, no_gradient, schema


def _sigmoid(x, a, b):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


# name -> (f(x, alpha, beta), default alpha or None if unused, default beta or None if unused)
_ACTIVATIONS = {
    "relu": (lambda x, a, b: np.maximum(x, 0), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "sigmoid": (_sigmoid, None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x >= a, x, 0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0))), 1.0, None),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)), None, None),
    "softplus": (lambda x, a, b: np.logaddexp(0, x), None, None),
}
_DIRECTIONS = ("forward", "reverse", "bidirectional")
_COMMON = {
    "activation_alpha": None,
    "activation_beta": None,
    "activations": None,
    "clip": None,
    "direction": "forward",
    "hidden_size": None,
    "layout": 0,
}
_FLOAT, _INT = "float", "int"


def _activations(names, alphas, betas, defaults: Sequence[str], dirs: int) -> list[Callable]:
    """The activation functions, len(defaults) per direction, with their alpha/beta bound."""
    n = len(defaults)
    names = [str(s) for s in names] if names else list(defaults) * dirs
    if len(names) == n and dirs == 2:
        names = names * 2
    if len(names) < n * dirs:
        raise SchemaError(
            f"argument activations={names} has {len(names)} names, expected {n * dirs} "
            f"({n} per direction: {', '.join(defaults)} by default)"
        )
    alphas, betas = list(alphas or []), list(betas or [])
    out = []
    for name in names[: n * dirs]:
        if name.lower() not in _ACTIVATIONS:
            raise SchemaError(
                f"argument activations: unknown activation {name!r}; expected one of "
                "Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, "
                "HardSigmoid, Elu, Softsign, Softplus"
            )
        fn, a, b = _ACTIVATIONS[name.lower()]
        a = (alphas.pop(0) if alphas else a) if a is not None else None
        b = (betas.pop(0) if betas else b) if b is not None else None
        out.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    return out


def _gate(pre: np.ndarray, act: Callable, clip: float | None) -> np.ndarray:
    """act(pre), with pre clipped to [-clip, clip] first when clip is set."""
    return act(pre if clip is None else np.clip(pre, -clip, clip))


def _check(name: str, arr: np.ndarray | None, want: tuple[int, ...], what: str) -> None:
    if arr is not None and arr.shape != want:
        raise ShapeError(f"input {name} has shape {list(arr.shape)}, expected {list(want)} {what}")


def _recurrent(x, w, r, b, seq_lens, states, cell, *, gates, direction, layout, hidden_size):
    """Checks the operands and runs `cell(d, xw_t, state) -> state` over time.

    `states` are the optional initial states (initial_h, and initial_c for LSTM);
    the cell's first state is the hidden state H that Y collects.

    Returns:
        (Y, *final states), in the layout asked for.
    """
    if direction not in _DIRECTIONS:
        raise SchemaError(f"argument direction={direction!r} is not one of {_DIRECTIONS}")
    if layout not in (0, 1):
        raise SchemaError(f"argument layout={layout} must be 0 or 1")
    if x.ndim != 3:
        raise ShapeError(f"input X has shape {list(x.shape)}, expected 3 dims (layout={layout})")
    dtype = x.dtype
    work = np.float32 if dtype.itemsize < 4 else dtype
    if layout:
        x = x.swapaxes(0, 1)
    steps, batch, size = x.shape
    dirs = 2 if direction == "bidirectional" else 1
    hid = r.shape[-1]
    if hidden_size is not None and hidden_size != hid:
        raise ShapeError(f"argument hidden_size={hidden_size} but R has shape {list(r.shape)}")
    gh = gates * hid
    _check("W", w, (dirs, gh, size), f"(num_directions, {gates}*hidden_size, input_size)")
    _check("R", r, (dirs, gh, hid), f"(num_directions, {gates}*hidden_size, hidden_size)")
    _check("B", b, (dirs, 2 * gh), f"(num_directions, {2 * gates}*hidden_size)")
    _check("sequence_lens", seq_lens, (batch,), "(batch_size,)")
    want = (dirs, batch, hid)
    for name, s in zip(("initial_h", "initial_c"), states):
        _check(name, s, (batch, dirs, hid) if layout else want, f"(layout={layout})")
    states = [s.swapaxes(0, 1) if layout and s is not None else s for s in states]
    x, w, r = (a.astype(work, copy=False) for a in (x, w, r))
    b = np.zeros((dirs, 2 * gh), work) if b is None else b.astype(work, copy=False)
    states = [np.zeros(want, work) if s is None else s.astype(work, copy=False) for s in states]
    lens = np.full(batch, steps) if seq_lens is None else seq_lens.astype(np.int64)
    if np.any((lens < 0) | (lens > steps)):
        raise ShapeError(f"input sequence_lens = {lens.tolist()} must lie in [0, {steps}]")
    cols = np.arange(batch)
    ys, finals = [], []
    for d in range(dirs):
        xw = x @ w[d].T + b[d, :gh]  # (T, N, G*H), every step at once
        k = np.arange(steps)[:, None]
        reverse = direction == "reverse" or d == 1
        idx = np.where(k < lens, lens - 1 - k, k) if reverse else np.broadcast_to(k, xw.shape[:2])
        xs = xw[idx, cols]
        state = tuple(s[d] for s in states)
        y = np.zeros((steps, batch, hid), work)
        ragged = bool(np.any(lens < steps))
        for t in range(int(lens.max(initial=0))):
            new = cell(d, xs[t], state)
            if ragged:
                live = (t < lens)[:, None]
                new = tuple(np.where(live, n, s) for n, s in zip(new, state))
                y[t] = np.where(live, new[0], 0)
            else:
                y[t] = new[0]
            state = new
        out = np.zeros_like(y)
        out[idx, cols] = y
        ys.append(out)
        finals.append(state)
    y = np.stack(ys, axis=1)  # (T, D, N, H)
    finals = [np.stack(f, axis=0) for f in zip(*finals)]  # each (D, N, H)
    if layout:
        y, finals = y.transpose(2, 0, 1, 3), [f.transpose(1, 0, 2) for f in finals]
    return tuple(a.astype(dtype, copy=False) for a in (y, *finals))


def _split_bias(b: np.ndarray | None, d: int, gh: int, dtype) -> np.ndarray:
    return np.zeros(gh, dtype) if b is None else b[d, gh:].astype(dtype, copy=False)


_IO = ["X", "W", "R", "B?", "sequence_lens?", "initial_h?"]
_TYPES = {0: _FLOAT, 1: _FLOAT, 2: _FLOAT, 3: _FLOAT, 4: _INT, 5: _FLOAT}
schema(
    "RNN",
    inputs=_IO,
    outputs=["Y?", "Y_h?"],
    attrs=_COMMON,
    dtypes=_TYPES,
    doc="H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb), f=Tanh; X (T, N, I), W (D, H, I), "
    "R (D, H, H), B (D, 2H) -> Y (T, D, N, H), Y_h (D, N, H); direction=forward, layout=0",
)
schema(
    "GRU",
    inputs=_IO,
    outputs=["Y?", "Y_h?"],
    attrs={**_COMMON, "linear_before_reset": 0},
    dtypes=_TYPES,
    doc="z, r = f(X W_{z,r}^T + H R_{z,r}^T + b); h = g(X W_h^T + (r * H) R_h^T + b_h) (or "
    "r * (H R_h^T + Rb_h) if linear_before_reset); H = (1 - z) h + z H; f=Sigmoid, g=Tanh; "
    "W (D, 3H, I), R (D, 3H, H), B (D, 6H) -> Y (T, D, N, H), Y_h (D, N, H)",
)
schema(
    "LSTM",
    inputs=[*_IO, "initial_c?", "P?"],
    outputs=["Y?", "Y_h?", "Y_c?"],
    attrs={**_COMMON, "input_forget": 0},
    dtypes={**_TYPES, 6: _FLOAT, 7: _FLOAT},
    doc="i, f = f(X W^T + H R^T + P (.) C + b), c = g(...), C = f C + i c, o = f(... + Po C), "
    "H = o h(C); f=Sigmoid, g=h=Tanh; W (D, 4H, I), R (D, 4H, H), B (D, 8H), P (D, 3H) -> "
    "Y (T, D, N, H), Y_h, Y_c (D, N, H); gates in order i o f c",
)


@kernel("RNN")
def rnn_cpu(x, w, r, b=None, sequence_lens=None, initial_h=None, *, activations=None,
            activation_alpha=None, activation_beta=None, clip=None, direction="forward",
            hidden_size=None, layout=0):  # fmt: skip
    dirs = 2 if direction == "bidirectional" else 1
    acts = _activations(activations, activation_alpha, activation_beta, ["Tanh"], dirs)
    hid = r.shape[-1]

    def cell(d, xw, state):
        rb = _split_bias(b, d, hid, xw.dtype)
        return (_gate(xw + state[0] @ r[d].T.astype(xw.dtype) + rb, acts[d], clip),)

    return _recurrent(x, w, r, b, sequence_lens, [initial_h], cell, gates=1,
                      direction=direction, layout=layout, hidden_size=hidden_size)  # fmt: skip


@kernel("GRU")
def gru_cpu(x, w, r, b=None, sequence_lens=None, initial_h=None, *, activations=None,
            activation_alpha=None, activation_beta=None, clip=None, direction="forward",
            hidden_size=None, layout=0, linear_before_reset=0):  # fmt: skip
    dirs = 2 if direction == "bidirectional" else 1
    acts = _activations(activations, activation_alpha, activation_beta, ["Sigmoid", "Tanh"], dirs)
    hid = r.shape[-1]

    def cell(d, xw, state):
        (h,) = state
        f, g = acts[2 * d : 2 * d + 2]
        rd, rb = r[d].astype(xw.dtype, copy=False), _split_bias(b, d, 3 * hid, xw.dtype)
        hr = h @ rd[: 2 * hid].T + rb[: 2 * hid]
        z = _gate(xw[:, :hid] + hr[:, :hid], f, clip)
        reset = _gate(xw[:, hid : 2 * hid] + hr[:, hid:], f, clip)
        if linear_before_reset:
            cand = reset * (h @ rd[2 * hid :].T + rb[2 * hid :])
        else:
            cand = (reset * h) @ rd[2 * hid :].T + rb[2 * hid :]
        hh = _gate(xw[:, 2 * hid :] + cand, g, clip)
        return ((1 - z) * hh + z * h,)

    return _recurrent(x, w, r, b, sequence_lens, [initial_h], cell, gates=3,
                      direction=direction, layout=layout, hidden_size=hidden_size)  # fmt: skip


@kernel("LSTM")
def lstm_cpu(x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None, *,
             activations=None, activation_alpha=None, activation_beta=None, clip=None,
             direction="forward", hidden_size=None, input_forget=0, layout=0):  # fmt: skip
    dirs = 2 if direction == "bidirectional" else 1
    names = ["Sigmoid", "Tanh", "Tanh"]
    acts = _activations(activations, activation_alpha, activation_beta, names, dirs)
    hid = r.shape[-1]
    _check("P", p, (dirs, 3 * hid), "(num_directions, 3*hidden_size)")

    def cell(d, xw, state):
        h, c = state
        f, g, act_h = acts[3 * d : 3 * d + 3]
        gates = xw + h @ r[d].T.astype(xw.dtype) + _split_bias(b, d, 4 * hid, xw.dtype)
        pi, po, pf = (0, 0, 0) if p is None else np.split(p[d].astype(xw.dtype), 3)
        i = _gate(gates[:, :hid] + pi * c, f, clip)
        forget = 1 - i if input_forget else _gate(gates[:, 2 * hid : 3 * hid] + pf * c, f, clip)
        c = forget * c + i * _gate(gates[:, 3 * hid :], g, clip)
        o = _gate(gates[:, hid : 2 * hid] + po * c, f, clip)
        return o * act_h(c), c

    return _recurrent(x, w, r, b, sequence_lens, [initial_h, initial_c], cell, gates=4,
                      direction=direction, layout=layout, hidden_size=hidden_size)  # fmt: skip


for _op in ("RNN", "GRU", "LSTM"):
    no_gradient(_op, "not implemented: backpropagation through time is not written yet")
