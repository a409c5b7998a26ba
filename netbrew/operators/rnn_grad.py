"""Gradients of RNN, GRU and LSTM: backpropagation through time.

    RNN(X, W, R, B, sequence_lens, initial_h) -> (Y, Y_h)
        backward: RNNGradient(X, W, R, B, sequence_lens, initial_h, dY, dY_h)
                  -> (dX, dW, dR, dB, dinitial_h)
    GRU: the same slots as RNN, through GRUGradient.
    LSTM(X, W, R, B, sequence_lens, initial_h, initial_c, P) -> (Y, Y_h, Y_c)
        backward: LSTMGradient(X, ..., P, dY, dY_h, dY_c)
                  -> (dX, dW, dR, dB, dinitial_h, dinitial_c, dP)

Every slot is optional: absent output gradients count as zeros, and only the named input
gradients are written. The gradient op reruns the forward (the same cells as rnn.py, in the
same working dtype) keeping each step's states and gate intermediates, then walks the steps
backwards. sequence_lens is integer and gets no gradient.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.rnn import (
    _COMMON,
    _FLOAT,
    _INT,
    _KINDS,
    Recurrence,
    Spec,
    _sigmoid,
    prepare,
    scan,
)
from netbrew.operators.schema import gradient, kernel, schema

_OUTPUTS = {
    "RNN": ["dX", "dW", "dR", "dB", "dinitial_h"],
    "GRU": ["dX", "dW", "dR", "dB", "dinitial_h"],
    "LSTM": ["dX", "dW", "dR", "dB", "dinitial_h", "dinitial_c", "dP"],
}
_INPUTS = {
    "RNN": ["X", "W", "R", "B?", "sequence_lens?", "initial_h?", "dY?", "dY_h?"],
    "GRU": ["X", "W", "R", "B?", "sequence_lens?", "initial_h?", "dY?", "dY_h?"],
    "LSTM": ["X", "W", "R", "B?", "sequence_lens?", "initial_h?", "initial_c?", "P?"]
    + ["dY?", "dY_h?", "dY_c?"],
}
_DOCS = {
    "RNN": "backpropagation through time of RNN: with H recomputed, dpre_t = (dY_t + dpre_{t+1} "
    "R) f'(pre_t), dX_t = dpre_t W, dW = sum dpre_t^T X_t, dR = sum dpre_t^T H_{t-1}, dB = "
    "[dWb, dRb] with dWb = dRb = sum dpre_t, dinitial_h = dpre_1 R; dY (T, D, N, H), dY_h "
    "(D, N, H)",
    "GRU": "backpropagation through time of GRU: with z, r, h~ recomputed, dh~ = dH (1 - z), "
    "dz = dH (H_{t-1} - h~), dH_{t-1} = dH z + the gate paths; dX, dW, dR, dB, dinitial_h "
    "from dY (T, D, N, H), dY_h (D, N, H)",
    "LSTM": "backpropagation through time of LSTM: with gates recomputed, do = dH h(C), dC += "
    "dH o h'(C), di = dC c~, df = dC C_{t-1}, dC_{t-1} = dC f + peephole paths; dX, dW, dR, "
    "dB, dinitial_h, dinitial_c, dP from dY (T, D, N, H), dY_h, dY_c (D, N, H)",
}
for _kind, _extra in (
    ("RNN", {}),
    ("GRU", {"linear_before_reset": 0}),
    ("LSTM", {"input_forget": 0}),
):
    schema(
        f"{_kind}Gradient",
        inputs=_INPUTS[_kind],
        outputs=[f"{name}?" for name in _OUTPUTS[_kind]],
        attrs={**_COMMON, **_extra},
        dtypes={i: _INT if i == 4 else _FLOAT for i in range(len(_INPUTS[_kind]))},
        onnx=False,
        output_mask=True,
        doc=_DOCS[_kind] + f"; same attributes as {_kind}",
    )


def _sigmoid_grad(x, a, b):
    s = _sigmoid(x, a, b)
    return s * (1 - s)


# name -> f'(x, alpha, beta), matching rnn._ACTIVATIONS; x is the (clipped) pre-activation
_DERIVATIVES = {
    "relu": lambda x, a, b: x > 0,
    "tanh": lambda x, a, b: 1 - np.tanh(x) ** 2,
    "sigmoid": _sigmoid_grad,
    "affine": lambda x, a, b: np.full_like(x, a),
    "leakyrelu": lambda x, a, b: np.where(x >= 0, 1, a),
    "thresholdedrelu": lambda x, a, b: x >= a,
    "scaledtanh": lambda x, a, b: a * b * (1 - np.tanh(b * x) ** 2),
    "hardsigmoid": lambda x, a, b: np.where((a * x + b > 0) & (a * x + b < 1), a, 0),
    "elu": lambda x, a, b: np.where(x >= 0, 1, a * np.exp(np.minimum(x, 0))),
    "softsign": lambda x, a, b: 1 / (1 + np.abs(x)) ** 2,
    "softplus": lambda x, a, b: _sigmoid(x, a, b),
}


def _derivative(spec: Spec, clip: float | None) -> Callable[[np.ndarray], np.ndarray]:
    """d act(clip(pre)) / d pre: zero where clip cut the pre-activation off."""
    fn, alpha, beta = _DERIVATIVES[spec[0]], spec[1], spec[2]

    def derivative(pre: np.ndarray) -> np.ndarray:
        if clip is None:
            return np.asarray(fn(pre, alpha, beta), pre.dtype)
        inside = np.abs(pre) <= clip
        return np.where(inside, fn(np.clip(pre, -clip, clip), alpha, beta), 0).astype(pre.dtype)

    return derivative


class _Sums:
    """One direction's parameter gradients, summed over the steps."""

    def __init__(self, r: np.ndarray, peepholes: bool):
        self.dr = np.zeros_like(r)
        self.drb = np.zeros(r.shape[0], r.dtype)
        self.dp = np.zeros(3 * r.shape[1], r.dtype) if peepholes else None

    def add(self, rows: slice, d_pre: np.ndarray, h: np.ndarray) -> None:
        """Adds the step's gradient of `h R[rows]^T + Rb[rows]`, given d_pre of that sum."""
        self.dr[rows] += d_pre.T @ h
        self.drb[rows] += d_pre.sum(axis=0)


# Backward cells mirror rnn.py's cells: built per direction from R, P, the activations'
# derivatives and the op's flag, `back(grads, state, cache, sums)` takes the gradients of the
# step's new states, adds the step's parameter gradients to `sums`, and returns (d xw, the
# gradients of the states before the step).
def _rnn_back(r, p, derivs, flag):
    def back(grads, state, cache, sums):
        d_pre = grads[0] * derivs[0](cache[0])
        sums.add(slice(None), d_pre, state[0])
        return d_pre, (d_pre @ r,)

    return back


def _gru_back(r, p, derivs, linear_before_reset):
    df, dg = derivs
    hid = r.shape[1]
    zr, rows_h = slice(0, 2 * hid), slice(2 * hid, None)

    def back(grads, state, cache, sums):
        (dh,), (h,) = grads, state
        pz, pr, ph, z, reset, hh, lin = cache
        d_ph = dh * (1 - z) * dg(ph)
        d_pz = dh * (h - hh) * df(pz)
        dh_prev = dh * z
        if linear_before_reset:  # h~ = g(xw_h + reset * (h R_h^T + Rb_h))
            d_lin = d_ph * reset
            d_reset = d_ph * lin
            sums.add(rows_h, d_lin, h)
            dh_prev = dh_prev + d_lin @ r[rows_h]
        else:  # h~ = g(xw_h + (reset * h) R_h^T + Rb_h)
            d_lin = d_ph @ r[rows_h]
            d_reset = d_lin * h
            sums.add(rows_h, d_ph, lin)
            dh_prev = dh_prev + d_lin * reset
        d_zr = np.concatenate([d_pz, d_reset * df(pr)], axis=1)
        sums.add(zr, d_zr, h)
        return np.concatenate([d_zr, d_ph], axis=1), (dh_prev + d_zr @ r[zr],)

    return back


def _lstm_back(r, p, derivs, input_forget):
    df, dg, d_act_h = derivs
    pi, po, pf = (0, 0, 0) if p is None else np.split(p, 3)

    def back(grads, state, cache, sums):
        (dh, dc), (h, c) = grads, state
        a_i, a_f, a_c, a_o, i, forget, cand, o, c_new, hc = cache
        d_ao = dh * hc * df(a_o)
        dc = dc + dh * o * d_act_h(c_new) + d_ao * po  # o's peephole reads the new C
        d_forget = dc * c
        d_i = dc * cand - d_forget if input_forget else dc * cand  # forget = 1 - i
        d_af = np.zeros_like(dc) if input_forget else d_forget * df(a_f)
        d_ai = d_i * df(a_i)
        dc_prev = dc * forget + d_ai * pi + d_af * pf
        d_gates = np.concatenate([d_ai, d_ao, d_af, dc * i * dg(a_c)], axis=1)  # i o f c
        sums.add(slice(None), d_gates, h)
        if sums.dp is not None:
            sums.dp += np.concatenate([(d_ai * c).sum(0), (d_ao * c_new).sum(0), (d_af * c).sum(0)])
        return d_gates, (d_gates @ r, dc_prev)

    return back


_BACKS = {"RNN": _rnn_back, "GRU": _gru_back, "LSTM": _lstm_back}


def _derivatives(kind: str, specs: Sequence[Spec], clip: float | None) -> list[Callable]:
    # LSTM's third activation, h(C), is applied to the cell state unclipped
    return [
        _derivative(s, None if kind == "LSTM" and k == 2 else clip) for k, s in enumerate(specs)
    ]


def _backward_direction(kind: str, rec: Recurrence, d: int, attrs, dys, d_final):
    """Backpropagates through direction d.

    Args:
        dys: (T, N, H), the gradient of this direction's part of Y, in time order.
        d_final: the gradients of its final states, each (N, H).

    Returns:
        (d_xw (T, N, G*H) in time order, gradients of the initial states, _Sums).
    """
    idx, _, _, tape = scan(rec, d, keep=True)
    steps, batch, _ = rec.x.shape
    cols, lens = np.arange(batch), rec.lens
    flag_name = _KINDS[kind][3]  # GRU linear_before_reset, LSTM input_forget
    flag = attrs[flag_name] if flag_name else 0
    derivs = _derivatives(kind, rec.specs[d], attrs["clip"])
    p = None if rec.p is None else rec.p[d]
    back = _BACKS[kind](rec.r[d], p, derivs, flag)
    sums = _Sums(rec.r[d], p is not None)
    dys = dys[idx, cols]  # step order
    ragged = bool(np.any(lens < steps))
    d_xs = np.zeros((steps, batch, rec.w.shape[1]), rec.x.dtype)
    carry = list(d_final)
    for t in reversed(range(len(tape))):
        grads = [carry[0] + dys[t], *carry[1:]]
        if ragged:  # a finished sequence's state passes through unchanged and Y is zero
            live = (t < lens)[:, None]
            grads = [np.where(live, g, 0) for g in grads]
            passed = [np.where(live, 0, g) for g in carry]
        state, cache = tape[t]
        d_xs[t], prev = back(grads, state, cache, sums)
        carry = [a + b for a, b in zip(prev, passed)] if ragged else list(prev)
    d_xw = np.empty_like(d_xs)
    d_xw[idx, cols] = d_xs
    return d_xw, carry, sums


def _output_grads(kind: str, rec: Recurrence, d_outputs: Sequence[np.ndarray | None]):
    """dY as (T, D, N, H) and the final states' gradients as (D, N, H), zeros where absent."""
    steps, batch, _ = rec.x.shape
    dirs, hid = rec.r.shape[0], rec.r.shape[-1]
    layout = rec.layout
    shapes = [(batch, steps, dirs, hid) if layout else (steps, dirs, batch, hid)]
    shapes += [(batch, dirs, hid) if layout else (dirs, batch, hid)] * (len(d_outputs) - 1)
    names = ["dY", "dY_h", "dY_c"]
    out = []
    for name, g, shape in zip(names, d_outputs, shapes):
        if g is None:
            g = np.zeros(shape, rec.x.dtype)
        elif g.shape != shape:
            raise ShapeError(
                f"{kind}Gradient: input {name} has shape {list(g.shape)}, expected "
                f"{list(shape)} (the shape of {name[1:]}, layout={layout})"
            )
        g = g.astype(rec.x.dtype, copy=False)
        if layout:
            g = g.transpose(1, 2, 0, 3) if g.ndim == 4 else g.swapaxes(0, 1)
        out.append(g)
    return out[0], out[1:]


def _gradient(kind: str, inputs: list, d_outputs: list, attrs: Mapping[str, Any]) -> tuple:
    """The kernel of {kind}Gradient: outputs in slot order, None where not named."""
    x, w, r, b, seq_lens, *rest = inputs
    n_states = 2 if kind == "LSTM" else 1
    p = rest[2] if kind == "LSTM" else None
    sources = [x, w, r, b, *rest]  # the forward input of each output slot
    mask = tuple(attrs["output_mask"]) + (False,) * (len(sources) - len(attrs["output_mask"]))
    for slot, (name, src) in enumerate(zip(_OUTPUTS[kind], sources)):
        if mask[slot] and src is None:
            raise SchemaError(
                f"{kind}Gradient: output {name} is named but input {name[1:]} is missing"
            )
    rec = prepare(kind, x, w, r, b, seq_lens, rest[:n_states], p, attrs)
    dy, d_finals = _output_grads(kind, rec, d_outputs)
    dx = np.zeros(rec.x.shape[:2] + (w.shape[-1],), rec.x.dtype)
    dw, db, dr = np.zeros_like(rec.w), np.zeros_like(rec.b), np.zeros_like(rec.r)
    dp = None if p is None else np.zeros_like(rec.p)
    d_init = [np.zeros_like(s) for s in rec.states]
    gh = rec.w.shape[1]
    for d in range(rec.w.shape[0]):
        d_xw, carry, sums = _backward_direction(
            kind, rec, d, attrs, dy[:, d], [f[d] for f in d_finals]
        )
        dx += d_xw @ rec.w[d]
        dw[d] = np.tensordot(d_xw, rec.x, axes=([0, 1], [0, 1]))
        db[d, :gh], db[d, gh:], dr[d] = d_xw.sum(axis=(0, 1)), sums.drb, sums.dr
        if dp is not None:
            dp[d] = sums.dp
        for s, c in zip(d_init, carry):
            s[d] = c
    if rec.layout:
        dx, d_init = dx.swapaxes(0, 1), [s.swapaxes(0, 1) for s in d_init]
    results = [dx, dw, dr, db, *d_init] + ([dp] if kind == "LSTM" else [])
    return tuple(
        g.astype(src.dtype, copy=False) if want else None
        for g, src, want in zip(results, sources, mask)
    )


def _maker(kind: str):
    """One {kind}Gradient op reading the forward inputs and the outputs' gradients."""
    n_in, n_out = (8, 3) if kind == "LSTM" else (6, 2)

    def maker(op, g_out, g_in):
        g_in = [*g_in, *[None] * (n_in - len(g_in))]
        g_out = [*g_out, *[None] * (n_out - len(g_out))]
        wanted = [g or "" for k, g in enumerate(g_in) if k != 4]  # no sequence_lens slot
        if not any(g_out) or not any(wanted):
            return []
        ins = [*op.input, *[""] * (n_in - len(op.input)), *(g or "" for g in g_out)]
        return [op_def(f"{kind}Gradient", ins, wanted, **copy_attrs(op))]

    maker.__name__ = maker.__qualname__ = f"{kind.lower()}_grad"
    return maker


for _kind in ("RNN", "GRU", "LSTM"):
    gradient(_kind)(_maker(_kind))


Opt = np.ndarray | None
Grads = tuple[np.ndarray | None, ...]


@kernel("RNNGradient")
def rnn_gradient_cpu(x: np.ndarray, w: np.ndarray, r: np.ndarray, b: Opt = None,
                     sequence_lens: Opt = None, initial_h: Opt = None, dy: Opt = None,
                     dy_h: Opt = None, **attrs: Any) -> Grads:  # fmt: skip
    return _gradient("RNN", [x, w, r, b, sequence_lens, initial_h], [dy, dy_h], attrs)


@kernel("GRUGradient")
def gru_gradient_cpu(x: np.ndarray, w: np.ndarray, r: np.ndarray, b: Opt = None,
                     sequence_lens: Opt = None, initial_h: Opt = None, dy: Opt = None,
                     dy_h: Opt = None, **attrs: Any) -> Grads:  # fmt: skip
    return _gradient("GRU", [x, w, r, b, sequence_lens, initial_h], [dy, dy_h], attrs)


@kernel("LSTMGradient")
def lstm_gradient_cpu(x: np.ndarray, w: np.ndarray, r: np.ndarray, b: Opt = None,
                      sequence_lens: Opt = None, initial_h: Opt = None, initial_c: Opt = None,
                      p: Opt = None, dy: Opt = None, dy_h: Opt = None, dy_c: Opt = None,
                      **attrs: Any) -> Grads:  # fmt: skip
    inputs = [x, w, r, b, sequence_lens, initial_h, initial_c, p]
    return _gradient("LSTM", inputs, [dy, dy_h, dy_c], attrs)
