"""Attention: ONNX's scaled dot-product attention (opset 25 semantics).

Q, K and V are 4-D (batch, heads, seq, head_size) or 3-D (batch, seq, heads * head_size)
with the head counts given by q_num_heads / kv_num_heads. With fewer KV heads than query
heads (GQA / MQA) each KV head serves q_num_heads / kv_num_heads consecutive query heads.
The additive bias composes the mask (boolean: True attends; numeric: added), the causal
frontier, the sliding window and the padding given by nonpad_kv_seqlen; a query row that
can attend no key yields zeros, never NaN. Arithmetic runs in Q's dtype, as ONNX's
reference does, except the softmax when softmax_precision names another type.
The gradient (AttentionGradient, in attention_grad) reruns attention_state, the forward up
to the value product, and differentiates every output.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import ml_dtypes
import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.schema import kernel, schema

schema(
    "Attention",
    inputs=["Q", "K", "V", "attn_mask?", "past_key?", "past_value?", "nonpad_kv_seqlen?"],
    outputs=["Y", "present_key?", "present_value?", "qk_matmul_output?"],
    attrs={
        "is_causal": 0,
        "kv_num_heads": None,
        "q_num_heads": None,
        "qk_matmul_output_mode": 0,
        "scale": None,
        "softcap": 0.0,
        "softmax_precision": None,
        "left_window_size": -1,
        "right_window_size": -1,
    },
    dtypes={0: "float", 1: "float", 2: "float", 3: "any", 4: "float", 5: "float", 6: "int"},
    doc="Y = softmax(softcap(Q K^T * scale) + bias) V; Q (B, Hq, Sq, D) or (B, Sq, Hq*D), "
    "K (B, Hkv, Skv, D), V (B, Hkv, Skv, Dv); present_key/value = concat(past, K/V) on the "
    "sequence axis; bias from attn_mask, is_causal, left/right_window_size and "
    "nonpad_kv_seqlen; scale defaults to 1/sqrt(D); qk_matmul_output per "
    "qk_matmul_output_mode (0 raw, 1 softcapped, 2 plus bias, 3 probabilities)",
)

SOFTMAX_TYPES = {1: np.float32, 10: np.float16, 11: np.float64, 16: ml_dtypes.bfloat16}


def split_heads(x: np.ndarray, heads: int | None, slot: str, attr: str) -> np.ndarray:
    """(B, S, H*D) -> (B, H, S, D)."""
    if heads is None or heads <= 0:
        raise SchemaError(f"input {slot!r} is 3-D, so argument {attr!r} must be set (positive)")
    b, s, hidden = x.shape
    if hidden % heads:
        raise ShapeError(
            f"input {slot!r} has hidden size {hidden}, not divisible by {attr}={heads}"
        )
    return x.reshape(b, s, heads, hidden // heads).transpose(0, 2, 1, 3)


def _check_4d(q, k, v, q_num_heads, kv_num_heads) -> None:
    for slot, x, attr, want in (
        ("Q", q, "q_num_heads", q_num_heads),
        ("K", k, "kv_num_heads", kv_num_heads),
    ):
        if want is not None and want != x.shape[1]:
            raise ShapeError(f"{attr}={want} but input {slot!r} has {x.shape[1]} heads")
    if q.shape[0] != k.shape[0] or k.shape[:2] != v.shape[:2] or k.shape[2] != v.shape[2]:
        raise ShapeError(
            f"inputs Q {list(q.shape)}, K {list(k.shape)}, V {list(v.shape)} disagree: "
            "expected (B, Hq, Sq, D), (B, Hkv, Skv, D), (B, Hkv, Skv, Dv)"
        )
    if q.shape[3] != k.shape[3]:
        raise ShapeError(f"head size of Q ({q.shape[3]}) differs from K's ({k.shape[3]})")
    if q.shape[1] % k.shape[1]:
        raise ShapeError(f"Q has {q.shape[1]} heads, not a multiple of K/V's {k.shape[1]} heads")


def _frontier(sq: int, skv: int, offset: int | np.ndarray) -> np.ndarray:
    """diff[(b,) i, j] = absolute query position (offset + i) minus key position j."""
    i = np.arange(sq).reshape(sq, 1)
    j = np.arange(skv).reshape(1, skv)
    if np.ndim(offset):
        return (i + np.reshape(offset, (-1, 1, 1)) - j)[:, None]  # (B, 1, Sq, Skv)
    return i + int(offset) - j


def build_bias(dtype, sq, skv, attn_mask, is_causal, left, right, offset, nonpad) -> np.ndarray:
    """The additive bias (0 or -inf, plus a numeric mask), broadcastable to (B, H, Sq, Skv)."""
    zero, ninf = dtype.type(0), dtype.type(-np.inf)
    bias = np.zeros((sq, skv), dtype)
    if attn_mask is not None:
        if attn_mask.ndim == 0 or attn_mask.ndim > 4:
            raise ShapeError(f"input 'attn_mask' has rank {attn_mask.ndim}, expected 1 to 4")
        width = attn_mask.shape[-1]
        if width > skv:
            raise ShapeError(
                f"input 'attn_mask' has {width} key positions, more than the "
                f"total sequence length {skv}"
            )
        if attn_mask.dtype == np.bool_:
            mask = np.where(attn_mask, zero, ninf)
        else:
            mask = attn_mask.astype(dtype)
        if width < skv:
            pad = [(0, 0)] * (mask.ndim - 1) + [(0, skv - width)]
            mask = np.pad(mask, pad, constant_values=ninf)
        bias = bias + mask
    allowed = None
    if is_causal or left >= 0 or right >= 0 or np.ndim(offset):
        diff = _frontier(sq, skv, offset)
        allowed = np.ones(diff.shape, bool)
        if is_causal:
            allowed &= diff >= 0
        if left >= 0:
            allowed &= diff <= left
        if right >= 0:
            allowed &= -diff <= right
    if nonpad is not None:
        valid = (np.arange(skv) < nonpad.reshape(-1, 1)).reshape(-1, 1, 1, skv)
        allowed = valid if allowed is None else allowed & valid
    if allowed is not None:
        bias = bias + np.where(allowed, zero, ninf)
    return bias


def _softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; a row of -inf gives zeros."""
    top = np.max(x, axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), x.dtype.type(0), top)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - top)
    total = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(total == 0, x.dtype.type(1), total)


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(a, b).astype(a.dtype, copy=False)


class AttentionState(NamedTuple):
    """The forward's intermediates; AttentionGradient recomputes them with the same code."""

    rank: int  # of Q, K and V as given: 3 (heads packed in the last axis) or 4
    q: np.ndarray  # (B, Hq, Sq, D)
    present_k: np.ndarray  # (B, Hkv, T, D), T = past length + Skv
    present_v: np.ndarray  # (B, Hkv, T, Dv)
    past_len: int
    bias: np.ndarray  # broadcastable to (B, Hq, Sq, T)
    root: np.generic  # sqrt(scale) in Q's dtype; Q and K are each scaled by it
    qk: np.ndarray  # raw scores (B, Hq, Sq, T)
    capped: np.ndarray  # softcapped scores
    logits: np.ndarray  # capped + bias
    probs: np.ndarray  # softmax in Q's dtype, zero on rows that attend no key


def _heads_4d(q, k, v, q_num_heads, kv_num_heads) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q, K and V as (B, H, S, D), checked against each other and the head counts."""
    rank = q.ndim
    if rank not in (3, 4) or k.ndim != rank or v.ndim != rank:
        raise ShapeError(
            f"inputs Q, K, V have ranks {q.ndim}, {k.ndim}, {v.ndim}; expected all 3 or all 4"
        )
    if rank == 3:
        q = split_heads(q, q_num_heads, "Q", "q_num_heads")
        k = split_heads(k, kv_num_heads, "K", "kv_num_heads")
        v = split_heads(v, kv_num_heads, "V", "kv_num_heads")
    _check_4d(q, k, v, None if rank == 3 else q_num_heads, None if rank == 3 else kv_num_heads)
    return q, k, v


def merge_heads(x: np.ndarray) -> np.ndarray:
    """(B, H, S, D) -> (B, S, H*D), the inverse of split_heads."""
    return x.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], -1)


def repeat_heads(x: np.ndarray, groups: int) -> np.ndarray:
    """Each KV head repeated for the `groups` consecutive query heads it serves."""
    return np.repeat(x, groups, axis=1) if groups > 1 else x


def _check_args(past_key, past_value, nonpad, left, right, mode) -> None:
    if (past_key is None) != (past_value is None):
        raise SchemaError("inputs 'past_key' and 'past_value' must be given together")
    if nonpad is not None and past_key is not None:
        raise SchemaError("input 'nonpad_kv_seqlen' cannot be combined with 'past_key'")
    for flag, value in {"left_window_size": left, "right_window_size": right}.items():
        if value < -1:
            raise SchemaError(f"argument {flag!r} is {value}, expected -1 or >= 0")
    if mode not in (0, 1, 2, 3):
        raise SchemaError(f"argument 'qk_matmul_output_mode' is {mode}, expected 0 to 3")


def _concat_past(k, v, past_key, past_value) -> tuple[np.ndarray, np.ndarray, int]:
    """(present_key, present_value, past length): the past prepended on the sequence axis."""
    if past_key is None:
        return k, v, 0
    for slot, past, cur in (("past_key", past_key, k), ("past_value", past_value, v)):
        if past.ndim != 4 or past.shape[:2] + past.shape[3:] != cur.shape[:2] + cur.shape[3:]:
            raise ShapeError(
                f"input {slot!r} has shape {list(past.shape)}, expected "
                f"({cur.shape[0]}, {cur.shape[1]}, past_len, {cur.shape[3]})"
            )
    k = np.concatenate([past_key, k], axis=2)
    v = np.concatenate([past_value, v], axis=2)
    return k, v, past_key.shape[2]


def _nonpad_lengths(nonpad: np.ndarray, batch: int) -> np.ndarray:
    nonpad = np.asarray(nonpad).reshape(-1).astype(np.int64)
    if nonpad.size != batch:
        raise ShapeError(
            f"input 'nonpad_kv_seqlen' has {nonpad.size} entries, expected batch size {batch}"
        )
    return nonpad


def _scores(q, k, root, bias, softcap, softmax_precision) -> tuple[np.ndarray, ...]:
    """(qk, capped, logits, probs) of Q (B, Hq, Sq, D) against K repeated to Hq heads."""
    dtype = q.dtype
    qk = _matmul(q * root, np.swapaxes(k, 2, 3) * root)
    capped = qk
    if softcap > 0:
        capped = np.tanh(qk / dtype.type(softcap)) * dtype.type(softcap)
    logits = capped + bias
    wide = logits
    if softmax_precision is not None:
        if softmax_precision not in SOFTMAX_TYPES:
            raise SchemaError(
                f"argument 'softmax_precision' is {softmax_precision}, expected one of "
                f"{sorted(SOFTMAX_TYPES)} (FLOAT, FLOAT16, DOUBLE, BFLOAT16)"
            )
        wide = logits.astype(SOFTMAX_TYPES[softmax_precision])
    probs = _softmax(wide)
    empty = np.isneginf(np.max(bias, axis=-1, keepdims=True))
    probs = np.where(empty, probs.dtype.type(0), probs).astype(dtype)
    return qk, capped, logits, probs


def attention_state(
    q, k, v, attn_mask, past_key, past_value, nonpad_kv_seqlen, *,
    is_causal, kv_num_heads, q_num_heads, qk_matmul_output_mode, scale, softcap,
    softmax_precision, left_window_size, right_window_size,
) -> AttentionState:  # fmt: skip
    """Checks Attention's inputs and computes everything up to the value product."""
    rank = q.ndim
    q, k, v = _heads_4d(q, k, v, q_num_heads, kv_num_heads)
    _check_args(
        past_key, past_value, nonpad_kv_seqlen, left_window_size, right_window_size,
        qk_matmul_output_mode,
    )  # fmt: skip
    present_k, present_v, past_len = _concat_past(k, v, past_key, past_value)
    offset: int | np.ndarray = past_len
    sq, skv = q.shape[2], present_k.shape[2]
    if nonpad_kv_seqlen is not None:
        nonpad_kv_seqlen = _nonpad_lengths(nonpad_kv_seqlen, q.shape[0])
        offset = nonpad_kv_seqlen - sq
    bias = build_bias(
        q.dtype, sq, skv, attn_mask, is_causal, left_window_size, right_window_size, offset,
        nonpad_kv_seqlen,
    )  # fmt: skip
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[3])
    root = q.dtype.type(math.sqrt(scale))
    groups = q.shape[1] // present_k.shape[1]
    scores = _scores(q, repeat_heads(present_k, groups), root, bias, softcap, softmax_precision)
    return AttentionState(rank, q, present_k, present_v, past_len, bias, root, *scores)


@kernel("Attention")
def attention_cpu(
    q, k, v, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None, **attrs
):
    st = attention_state(q, k, v, attn_mask, past_key, past_value, nonpad_kv_seqlen, **attrs)
    groups = st.q.shape[1] // st.present_v.shape[1]
    y = _matmul(st.probs, repeat_heads(st.present_v, groups)).astype(q.dtype, copy=False)
    if st.rank == 3:
        y = merge_heads(y)
    qk_out = (st.qk, st.capped, st.logits, st.probs)[attrs["qk_matmul_output_mode"]]
    return y, st.present_k, st.present_v, qk_out.astype(q.dtype, copy=False)
