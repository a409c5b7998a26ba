"""Gradient of Attention, computed by one op that recomputes the forward's probabilities.

    Attention(Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen)
        -> (Y, present_key, present_value, qk_matmul_output)
    backward: AttentionGradient(Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen,
                                dY, dpresent_key, dpresent_value, dqk_matmul_output)
        -> (dQ, dK, dV, dattn_mask, dpast_key, dpast_value)

Every output may carry a gradient; absent ones count as zero. The softmax_precision cast is
treated as the identity, and the gradient runs in Q's dtype (float32 for narrower types).
A boolean attn_mask selects keys rather than weighting them: its gradient is zeros in Q's
dtype, a float so that autodiff can sum it where several layers share one mask.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.attention import (
    AttentionState,
    attention_state,
    merge_heads,
    repeat_heads,
    split_heads,
)
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.schema import get_schema, gradient, kernel, schema
from netbrew.operators.sum_reduce_like import sum_to_shape

_IN = ["Q", "K", "V", "attn_mask?", "past_key?", "past_value?", "nonpad_kv_seqlen?"]
_GRAD_IN = ["dY?", "dpresent_key?", "dpresent_value?", "dqk_matmul_output?"]

schema(
    "AttentionGradient",
    inputs=_IN + _GRAD_IN,
    outputs=["dQ", "dK", "dV", "dattn_mask?", "dpast_key?", "dpast_value?"],
    attrs=dict(get_schema("Attention").attrs),
    dtypes={**{i: "float" for i in range(11)}, 3: "any", 6: "int"},
    onnx=False,
    output_mask=True,
    doc="with P = Attention's probabilities, Kr/Vr = present K/V repeated to Hq heads: "
    "dP = dY Vr^T, dL = P * (dP - sum(dP * P, keys)), dS = dL * (1 - tanh^2(S / softcap)) "
    "(plus dqk_matmul_output at the stage qk_matmul_output_mode names), dQ = scale dS Kr, "
    "dK = scale dS^T Q and dV = P^T dY summed over each KV head's group, plus dpresent_key/"
    "value, split at the past length into dpast_key/value and dK/dV; dattn_mask = dL summed "
    "to the mask's shape (zeros in Q's dtype for a boolean mask); Attention's attributes and "
    "defaults",
)


@gradient("Attention")
def attention_grad(op, g_out, g_in):
    wanted = [g or "" for g in g_in[:6]]
    if not any(wanted):
        return []
    ins = list(op.input) + [""] * (len(_IN) - len(op.input))
    ins += [g or "" for g in g_out] + [""] * (len(_GRAD_IN) - len(g_out))
    outs = wanted + [""] * (6 - len(wanted))
    return [op_def("AttentionGradient", ins, outs, **copy_attrs(op))]


def group_sum(x: np.ndarray, kv_heads: int) -> np.ndarray:
    """(B, Hq, S, D) -> (B, Hkv, S, D): the sum over the query heads each KV head served."""
    b, hq = x.shape[:2]
    return x.reshape(b, kv_heads, hq // kv_heads, *x.shape[2:]).sum(axis=2)


def _d_scores(st: AttentionState, d_probs, d_qk, mode: int, softcap: float, acc):
    """(dL, dS): gradients of the biased logits and of the raw scores Q K^T * scale."""
    probs = st.probs.astype(acc, copy=False)
    if d_qk is not None and mode == 3:
        d_probs = d_probs + d_qk
    d_logits = probs * (d_probs - np.sum(d_probs * probs, axis=-1, keepdims=True))
    if d_qk is not None and mode == 2:  # a -inf logit stays -inf whatever the scores do
        d_logits = d_logits + np.where(np.isneginf(st.logits), acc.type(0), d_qk)
    d_capped = d_logits + d_qk if d_qk is not None and mode == 1 else d_logits
    d_raw = d_capped
    if softcap > 0:
        t = np.tanh(st.qk.astype(acc, copy=False) / acc.type(softcap))
        d_raw = d_capped * (1 - t * t)
    if d_qk is not None and mode == 0:
        d_raw = d_raw + d_qk
    return d_logits, d_raw


def _d_mask(mask: np.ndarray, d_logits: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The mask's gradient: dL summed to its shape, the key positions it was padded by dropped."""
    if mask.dtype == np.bool_:
        return np.zeros(mask.shape, dtype)
    padded = mask.shape[:-1] + (d_logits.shape[-1],)
    return sum_to_shape(d_logits, padded)[..., : mask.shape[-1]].astype(mask.dtype)


def _check_output_grads(st: AttentionState, dy, d_present_k, d_present_v, d_qk) -> None:
    """Checks each given output gradient against the shape of the output it belongs to."""
    b, hq, sq, _ = st.q.shape
    dv = st.present_v.shape[3]
    y_shape = (b, sq, hq * dv) if st.rank == 3 else (b, hq, sq, dv)
    for slot, grad, want in (
        ("dY", dy, y_shape),
        ("dpresent_key", d_present_k, st.present_k.shape),
        ("dpresent_value", d_present_v, st.present_v.shape),
        ("dqk_matmul_output", d_qk, st.qk.shape),
    ):
        if grad is not None and grad.shape != tuple(want):
            raise ShapeError(
                f"input {slot!r} has shape {list(grad.shape)}, expected {list(want)} (the "
                "shape of the output it is the gradient of)"
            )


def _as_4d(dy, st: AttentionState, acc) -> np.ndarray | None:
    """dY as (B, Hq, Sq, Dv) in the accumulation dtype."""
    if dy is None:
        return None
    if st.rank == 3:
        dy = split_heads(dy, st.q.shape[1], "dY", "q_num_heads")
    return dy.astype(acc, copy=False)


def _split_past(full, d_present, st: AttentionState, past, cur):
    """(d_past, d_current) of a present key/value gradient, each in its input's layout."""
    if d_present is not None:
        full = full + d_present
    d_past = full[:, :, : st.past_len].astype(past.dtype) if past is not None else None
    d_cur = full[:, :, st.past_len :]
    d_cur = merge_heads(d_cur) if st.rank == 3 else d_cur
    return d_past, d_cur.astype(cur.dtype, copy=False)


@kernel("AttentionGradient")
def attention_gradient_cpu(
    q, k, v, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None,
    dy=None, d_present_k=None, d_present_v=None, d_qk=None, *,
    output_mask: tuple[bool, ...], **attrs: Any,
) -> tuple[np.ndarray | None, ...]:  # fmt: skip
    st = attention_state(q, k, v, attn_mask, past_key, past_value, nonpad_kv_seqlen, **attrs)
    _check_output_grads(st, dy, d_present_k, d_present_v, d_qk)
    acc = np.promote_types(q.dtype, np.float32)
    wanted = tuple(output_mask) + (False,) * (6 - len(output_mask))
    kv_heads = st.present_k.shape[1]
    groups = st.q.shape[1] // kv_heads
    dy4 = _as_4d(dy, st, acc)
    v_rep = repeat_heads(st.present_v, groups).astype(acc, copy=False)
    d_probs = np.zeros(st.qk.shape, acc) if dy4 is None else dy4 @ np.swapaxes(v_rep, 2, 3)
    d_qk = None if d_qk is None else d_qk.astype(acc, copy=False)
    d_logits, d_raw = _d_scores(
        st, d_probs, d_qk, attrs["qk_matmul_output_mode"], attrs["softcap"], acc
    )
    root = acc.type(st.root)
    out: list[np.ndarray | None] = [None] * 6
    if wanted[0]:
        k_rep = repeat_heads(st.present_k, groups).astype(acc, copy=False)
        dq = (d_raw @ (k_rep * root)) * root
        out[0] = (merge_heads(dq) if st.rank == 3 else dq).astype(q.dtype, copy=False)
    if wanted[1] or wanted[4]:
        dk = group_sum(np.swapaxes(d_raw, 2, 3) @ (st.q.astype(acc) * root) * root, kv_heads)
        out[4], out[1] = _split_past(dk, d_present_k, st, past_key, k)
    if wanted[2] or wanted[5]:
        probs = st.probs.astype(acc, copy=False)
        dv = np.zeros(st.present_v.shape, acc)
        if dy4 is not None:
            dv = group_sum(np.swapaxes(probs, 2, 3) @ dy4, kv_heads)
        out[5], out[2] = _split_past(dv, d_present_v, st, past_value, v)
    if wanted[3] and attn_mask is not None:
        out[3] = _d_mask(attn_mask, d_logits, q.dtype)
    return tuple(out)
