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

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.schema import kernel, schema


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


Spec = tuple[str, Any, Any]
"""An activation as (lower-case name, alpha or None, beta or None), defaults filled in."""


def activation_specs(names, alphas, betas, defaults: Sequence[str], dirs: int) -> list[Spec]:
    """The activations, len(defaults) per direction, with the alpha/beta each one takes."""
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
        _, a, b = _ACTIVATIONS[name.lower()]
        a = (alphas.pop(0) if alphas else a) if a is not None else None
        b = (betas.pop(0) if betas else b) if b is not None else None
        out.append((name.lower(), a, b))
    return out


def _bind(spec: Spec) -> Callable[[np.ndarray], np.ndarray]:
    fn = _ACTIVATIONS[spec[0]][0]
    return lambda x: fn(x, spec[1], spec[2])


def _gate(pre: np.ndarray, act: Callable, clip: float | None) -> np.ndarray:
    """act(pre), with pre clipped to [-clip, clip] first when clip is set."""
    return act(pre if clip is None else np.clip(pre, -clip, clip))


def _check(name: str, arr: np.ndarray | None, want: tuple[int, ...], what: str) -> None:
    if arr is not None and arr.shape != want:
        raise ShapeError(f"input {name} has shape {list(arr.shape)}, expected {list(want)} {what}")


# Cells: built per direction from R (G*H, H), Rb (G*H,), P (3H,) or None, the activations, clip
# and the op's flag (GRU linear_before_reset, LSTM input_forget). `cell(xw, state)` returns
# (new state, cache): the cache holds the step's intermediates, which the gradient reuses.
def _rnn_cell(r, rb, p, acts, clip, flag):
    def cell(xw, state):
        pre = xw + state[0] @ r.T + rb
        return (_gate(pre, acts[0], clip),), (pre,)

    return cell


def _gru_cell(r, rb, p, acts, clip, linear_before_reset):
    f, g = acts
    hid = r.shape[1]

    def cell(xw, state):
        (h,) = state
        hr = h @ r[: 2 * hid].T + rb[: 2 * hid]
        pz, pr = xw[:, :hid] + hr[:, :hid], xw[:, hid : 2 * hid] + hr[:, hid:]
        z, reset = _gate(pz, f, clip), _gate(pr, f, clip)
        if linear_before_reset:
            lin = h @ r[2 * hid :].T + rb[2 * hid :]
            cand = reset * lin
        else:
            lin = reset * h
            cand = lin @ r[2 * hid :].T + rb[2 * hid :]
        ph = xw[:, 2 * hid :] + cand
        hh = _gate(ph, g, clip)
        return ((1 - z) * hh + z * h,), (pz, pr, ph, z, reset, hh, lin)

    return cell


def _lstm_cell(r, rb, p, acts, clip, input_forget):
    f, g, act_h = acts
    hid = r.shape[1]
    pi, po, pf = (0, 0, 0) if p is None else np.split(p, 3)

    def cell(xw, state):
        h, c = state
        gates = xw + h @ r.T + rb
        a_i = gates[:, :hid] + pi * c
        i = _gate(a_i, f, clip)
        a_f = None if input_forget else gates[:, 2 * hid : 3 * hid] + pf * c
        forget = 1 - i if input_forget else _gate(a_f, f, clip)
        a_c = gates[:, 3 * hid :]
        cand = _gate(a_c, g, clip)
        c_new = forget * c + i * cand
        a_o = gates[:, hid : 2 * hid] + po * c_new
        o = _gate(a_o, f, clip)
        hc = act_h(c_new)
        return (o * hc, c_new), (a_i, a_f, a_c, a_o, i, forget, cand, o, c_new, hc)

    return cell


# kind -> (gates, default activations per direction, cell builder, flag attribute)
_KINDS = {
    "RNN": (1, ("Tanh",), _rnn_cell, None),
    "GRU": (3, ("Sigmoid", "Tanh"), _gru_cell, "linear_before_reset"),
    "LSTM": (4, ("Sigmoid", "Tanh", "Tanh"), _lstm_cell, "input_forget"),
}


class Recurrence(NamedTuple):
    """A checked RNN, GRU or LSTM call: operands in layout 0 and the working dtype."""

    x: np.ndarray  # (T, N, I)
    w: np.ndarray  # (D, G*H, I)
    r: np.ndarray  # (D, G*H, H)
    b: np.ndarray  # (D, 2*G*H), zeros when absent
    p: np.ndarray | None  # (D, 3*H), LSTM peepholes
    states: list[np.ndarray]  # initial states, each (D, N, H), zeros when absent
    lens: np.ndarray  # (N,) int64
    reverse: list[bool]  # per direction
    specs: list[list[Spec]]  # activations per direction
    cells: list[Callable]  # per direction
    dtype: np.dtype  # the caller's
    layout: int


def _check_operands(x, w, r, b, seq_lens, states, *, gates, direction, layout, hidden_size):
    """Raises SchemaError or ShapeError on a bad direction, layout or operand shape."""
    if direction not in _DIRECTIONS:
        raise SchemaError(f"argument direction={direction!r} is not one of {_DIRECTIONS}")
    if layout not in (0, 1):
        raise SchemaError(f"argument layout={layout} must be 0 or 1")
    if x.ndim != 3:
        raise ShapeError(f"input X has shape {list(x.shape)}, expected 3 dims (layout={layout})")
    batch, size = x.shape[0 if layout else 1], x.shape[2]
    dirs, hid = 2 if direction == "bidirectional" else 1, r.shape[-1]
    if hidden_size is not None and hidden_size != hid:
        raise ShapeError(f"argument hidden_size={hidden_size} but R has shape {list(r.shape)}")
    gh = gates * hid
    _check("W", w, (dirs, gh, size), f"(num_directions, {gates}*hidden_size, input_size)")
    _check("R", r, (dirs, gh, hid), f"(num_directions, {gates}*hidden_size, hidden_size)")
    _check("B", b, (dirs, 2 * gh), f"(num_directions, {2 * gates}*hidden_size)")
    _check("sequence_lens", seq_lens, (batch,), "(batch_size,)")
    for name, s in zip(("initial_h", "initial_c"), states):
        want = (batch, dirs, hid) if layout else (dirs, batch, hid)
        _check(name, s, want, f"(layout={layout})")


def prepare(kind: str, x, w, r, b, seq_lens, states, p, attrs: Mapping[str, Any]) -> Recurrence:
    """Checks an op's operands and attributes and builds its per-direction cells.

    `states` are the optional initial states (initial_h, and initial_c for LSTM); the cell's
    first state is the hidden state H that Y collects.
    """
    gates, defaults, make_cell, flag = _KINDS[kind]
    direction, layout = attrs["direction"], attrs["layout"]
    dirs = 2 if direction == "bidirectional" else 1
    specs = activation_specs(
        attrs["activations"], attrs["activation_alpha"], attrs["activation_beta"], defaults, dirs
    )
    _check("P", p, (dirs, 3 * r.shape[-1]), "(num_directions, 3*hidden_size)")
    _check_operands(x, w, r, b, seq_lens, states, gates=gates, direction=direction,
                    layout=layout, hidden_size=attrs["hidden_size"])  # fmt: skip
    dtype = x.dtype
    work = np.float32 if dtype.itemsize < 4 else dtype
    if layout:
        x, states = x.swapaxes(0, 1), [s if s is None else s.swapaxes(0, 1) for s in states]
    steps, batch, _ = x.shape
    x, w, r = (a.astype(work, copy=False) for a in (x, w, r))
    b = np.zeros((dirs, 2 * w.shape[1]), work) if b is None else b.astype(work, copy=False)
    p = None if p is None else p.astype(work, copy=False)
    want = (dirs, batch, r.shape[-1])
    states = [np.zeros(want, work) if s is None else s.astype(work, copy=False) for s in states]
    lens = np.full(batch, steps) if seq_lens is None else seq_lens.astype(np.int64)
    if np.any((lens < 0) | (lens > steps)):
        raise ShapeError(f"input sequence_lens = {lens.tolist()} must lie in [0, {steps}]")
    n = len(defaults)
    specs = [specs[n * d : n * d + n] for d in range(dirs)]
    cells = [
        make_cell(r[d], b[d, w.shape[1] :], None if p is None else p[d],
                  [_bind(s) for s in specs[d]], attrs["clip"], attrs[flag] if flag else 0)
        for d in range(dirs)
    ]  # fmt: skip
    reverse = [direction == "reverse" or d == 1 for d in range(dirs)]
    return Recurrence(x, w, r, b, p, states, lens, reverse, specs, cells, dtype, layout)


def scan(rec: Recurrence, d: int, keep: bool = False):
    """Runs direction d over time.

    Returns:
        (idx, y, final, tape): idx (T, N) the time index of each step of each sequence
        (the reverse direction starts at each sequence's own last step); y (T, N, H) the
        hidden states in step order, zeros past a sequence's end; final the last states;
        tape, when `keep`, per step run the states before it and the cell's cache.
    """
    steps, batch, _ = rec.x.shape
    gh, lens = rec.w.shape[1], rec.lens
    xw = rec.x @ rec.w[d].T + rec.b[d, :gh]  # (T, N, G*H), every step at once
    k = np.arange(steps)[:, None]
    forward = np.broadcast_to(k, xw.shape[:2])
    idx = np.where(k < lens, lens - 1 - k, k) if rec.reverse[d] else forward
    xs = xw[idx, np.arange(batch)]
    state = tuple(s[d] for s in rec.states)
    y = np.zeros((steps, batch, rec.r.shape[-1]), xw.dtype)
    ragged = bool(np.any(lens < steps))
    tape = []
    for t in range(int(lens.max(initial=0))):
        new, cache = rec.cells[d](xs[t], state)
        if keep:
            tape.append((state, cache))
        if ragged:
            live = (t < lens)[:, None]
            new = tuple(np.where(live, n, s) for n, s in zip(new, state))
            y[t] = np.where(live, new[0], 0)
        else:
            y[t] = new[0]
        state = new
    return idx, y, state, tape


def _recurrent(rec: Recurrence) -> tuple[np.ndarray, ...]:
    """(Y, *final states) in the caller's layout and dtype."""
    cols = np.arange(rec.x.shape[1])
    ys, finals = [], []
    for d in range(len(rec.cells)):
        idx, y, state, _ = scan(rec, d)
        out = np.zeros_like(y)
        out[idx, cols] = y
        ys.append(out)
        finals.append(state)
    y = np.stack(ys, axis=1)  # (T, D, N, H)
    finals = [np.stack(f, axis=0) for f in zip(*finals)]  # each (D, N, H)
    if rec.layout:
        y, finals = y.transpose(2, 0, 1, 3), [f.transpose(1, 0, 2) for f in finals]
    return tuple(a.astype(rec.dtype, copy=False) for a in (y, *finals))


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
def rnn_cpu(x, w, r, b=None, sequence_lens=None, initial_h=None, **attrs):
    return _recurrent(prepare("RNN", x, w, r, b, sequence_lens, [initial_h], None, attrs))


@kernel("GRU")
def gru_cpu(x, w, r, b=None, sequence_lens=None, initial_h=None, **attrs):
    return _recurrent(prepare("GRU", x, w, r, b, sequence_lens, [initial_h], None, attrs))


@kernel("LSTM")
def lstm_cpu(x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None, **attrs):
    states = [initial_h, initial_c]
    return _recurrent(prepare("LSTM", x, w, r, b, sequence_lens, states, p, attrs))
