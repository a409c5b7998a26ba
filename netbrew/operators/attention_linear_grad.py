"""Gradient of LinearAttention: backpropagation through the recurrence, token by token.

    LinearAttention(query, key, value, past_state, decay, beta) -> (output, present_state)
    backward: LinearAttentionGradient(query, key, value, past_state, decay, beta, doutput,
                                      dpresent_state)
        -> (dquery, dkey, dvalue, dpast_state, ddecay, dbeta)

The forward recurrence is rerun with the same code, keeping the state before each step; the
backward walks the steps in reverse in float32, as the forward does. With S_a = exp(g) S
(or S), w = beta (v - S_a^T k) (or v) and S' = S_a + k w^T, o = scale S'^T q:

    dq = scale S' do,  dS' += scale q do^T,  dk = dS' w,  dw = dS'^T k
    delta rules: dv = beta dw, dbeta = sum(dw (v - S_a^T k)), dS_a += -k dv^T,
                 dk += -S_a dv;  otherwise dv = dw
    gated rules: dg = exp(g) sum_v(dS_a S) (summed over dk for a per-head decay),
                 dS = exp(g) dS_a
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.attention_linear import (
    LinearInputs,
    _heads,
    linear_inputs,
    linear_recurrence,
)
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.schema import get_schema, gradient, kernel, schema

_IN = ["query", "key", "value", "past_state?", "decay?", "beta?"]

schema(
    "LinearAttentionGradient",
    inputs=[*_IN, "doutput?", "dpresent_state?"],
    outputs=["dquery", "dkey", "dvalue", "dpast_state?", "ddecay?", "dbeta?"],
    attrs=dict(get_schema("LinearAttention").attrs),
    dtypes="float",
    onnx=False,
    output_mask=True,
    doc="backpropagation through LinearAttention's recurrence in float32, steps in reverse: "
    "with S' = S_a + k w^T and o = scale S'^T q: dq = scale S' do, dS' += scale q do^T, "
    "dk = dS' w, dv = beta dS'^T k (beta = 1 without a delta rule), dbeta and the delta "
    "term's S_a, k gradients, ddecay = exp(g) sum(dS_a S) and dS = exp(g) dS_a; "
    "dpast_state = the gradient of the initial state; LinearAttention's attributes",
)


@gradient("LinearAttention")
def linear_attention_grad(op, g_out, g_in):
    wanted = [g or "" for g in g_in[:6]]
    if not any(wanted):
        return []
    ins = list(op.input) + [""] * (len(_IN) - len(op.input)) + [g or "" for g in g_out[:2]]
    ins += [""] * (len(_IN) + 2 - len(ins))
    return [op_def("LinearAttentionGradient", ins, wanted, **copy_attrs(op))]


def _step_back(inp: LinearInputs, t: int, s_prev, s_next, d_o, ds, grads) -> np.ndarray:
    """Backpropagates step t into `grads` (dq, dk, dv, dg, dbeta); returns dS before it."""
    qg, k, v, decay, beta = inp[:5]
    dq, dk, dv, dg, db = grads
    dq[:, :, :, t] = np.einsum("bhkv,bhgv->bhgk", s_next, d_o)
    ds = ds + np.einsum("bhgk,bhgv->bhkv", qg[:, :, :, t], d_o)
    s_a = s_prev * decay[:, :, t, :, None] if decay is not None else s_prev
    k_t, w = k[:, :, t], v[:, :, t]
    if beta is not None:
        resid = w - np.einsum("bhkv,bhk->bhv", s_a, k_t)
        w = beta[:, :, t] * resid
    dk[:, :, t] = np.einsum("bhkv,bhv->bhk", ds, w)
    dw = np.einsum("bhkv,bhk->bhv", ds, k_t)
    if beta is None:
        dv[:, :, t] = dw
    else:
        dv[:, :, t] = beta[:, :, t] * dw
        db[:, :, t] = np.sum(dw * resid, axis=-1, keepdims=True)
        ds = ds - k_t[..., None] * dv[:, :, t, None, :]
        dk[:, :, t] -= np.einsum("bhkv,bhv->bhk", s_a, dv[:, :, t])
    if decay is not None:
        a = decay[:, :, t]  # (B, H, 1 or dk)
        da = np.sum(ds * s_prev, axis=-1)
        dg[:, :, t] = (da.sum(axis=-1, keepdims=True) if a.shape[-1] == 1 else da) * a
        ds = ds * a[..., None]
    return ds


def _backward(inp: LinearInputs, states: list, d_o: np.ndarray, d_state: np.ndarray):
    """(dqg, dk, dv, d initial state, dlog-decay, dbeta per KV head) in float32."""
    k = inp.k
    grads = (
        np.zeros_like(inp.qg),
        np.zeros_like(k),
        np.zeros_like(inp.v),
        None if inp.decay is None else np.zeros(inp.decay.shape, np.float32),
        None if inp.beta is None else np.zeros((*k.shape[:3], 1), np.float32),
    )
    ds = d_state
    for t in reversed(range(k.shape[2])):
        ds = _step_back(inp, t, states[t], states[t + 1], d_o[:, :, :, t], ds, grads)
    return (*grads[:3], ds, *grads[3:])


def _packed(x: np.ndarray, like: np.ndarray) -> np.ndarray:
    """(B, H, T, D) -> (B, T, H*D) in the dtype of `like`, the input it is the gradient of."""
    b, h, t, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, t, h * d).astype(like.dtype, copy=False)


def _output_grads(inp: LinearInputs, d_out, d_state, batch: int, steps: int, q_heads: int):
    """The output gradients as float32 (B, Hkv, G, T, dv) times scale, and (B, Hkv, dk, dv)."""
    shape_o = (*inp.qg.shape[:4], inp.v.shape[3])
    if d_out is None:
        d_o = np.zeros(shape_o, np.float32)
    else:
        d_o = _heads(d_out, q_heads, "doutput", batch, steps).reshape(shape_o)
        d_o = d_o * np.float32(inp.scale)
    if d_state is None:
        return d_o, np.zeros(inp.state.shape, np.float32)
    if d_state.shape != inp.state.shape:
        raise ShapeError(
            f"input 'dpresent_state' has shape {list(d_state.shape)}, expected "
            f"{list(inp.state.shape)}"
        )
    return d_o, d_state.astype(np.float32)


@kernel("LinearAttentionGradient")
def linear_attention_gradient_cpu(
    query, key, value, past_state=None, decay=None, beta=None, d_out=None, d_state=None, *,
    chunk_size, kv_num_heads, q_num_heads, scale, update_rule, output_mask,
) -> tuple[np.ndarray | None, ...]:  # fmt: skip
    inp = linear_inputs(
        query, key, value, past_state, decay, beta, kv_num_heads=kv_num_heads,
        q_num_heads=q_num_heads, scale=scale, update_rule=update_rule,
    )  # fmt: skip
    states: list[np.ndarray] = []
    linear_recurrence(inp, states)
    batch, steps = query.shape[:2]
    d_o, d_s = _output_grads(inp, d_out, d_state, batch, steps, q_num_heads)
    dqg, dk, dv, d_past, dg, db = _backward(inp, states, d_o, d_s)
    mask = tuple(output_mask) + (False,) * (6 - len(output_mask))
    out: list[np.ndarray | None] = [None] * 6
    if mask[0]:
        out[0] = _packed(dqg.reshape(batch, q_num_heads, steps, inp.qg.shape[4]), query)
    out[1] = _packed(dk, key) if mask[1] else None
    out[2] = _packed(dv, value) if mask[2] else None
    if mask[3] and past_state is not None:
        out[3] = d_past.astype(past_state.dtype)
    if mask[4] and decay is not None:
        out[4] = _packed(dg, decay)
    if mask[5] and beta is not None:
        out[5] = _packed(db.sum(axis=1, keepdims=True) if beta.shape[2] == 1 else db, beta)
    return tuple(out)
