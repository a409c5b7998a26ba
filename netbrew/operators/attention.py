"""Attention: ONNX's scaled dot-product attention (opset 25 semantics).

Q, K and V are 4-D (batch, heads, seq, head_size) or 3-D (batch, seq, heads * head_size)
with the head counts given by q_num_heads / kv_num_heads. With fewer KV heads than query
heads (GQA / MQA) each KV head serves q_num_heads / kv_num_heads consecutive query heads.
The additive bias composes the mask (boolean: True attends; numeric: added), the causal
frontier, the sliding window and the padding given by nonpad_kv_seqlen; a query row that
can attend no key yields zeros, never NaN. Arithmetic runs in Q's dtype, as ONNX's
reference does, except the softmax when softmax_precision names another type.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.schema import kernel, no_gradient, schema

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
no_gradient("Attention", "gradient not implemented (build attention from MatMul and Softmax)")

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


@kernel("Attention")
def attention_cpu(
    q, k, v, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None, *,
    is_causal, kv_num_heads, q_num_heads, qk_matmul_output_mode, scale, softcap,
    softmax_precision, left_window_size, right_window_size,
):  # fmt: skip
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
    if (past_key is None) != (past_value is None):
        raise SchemaError("inputs 'past_key' and 'past_value' must be given together")
    if nonpad_kv_seqlen is not None and past_key is not None:
        raise SchemaError("input 'nonpad_kv_seqlen' cannot be combined with 'past_key'")
    windows = {"left_window_size": left_window_size, "right_window_size": right_window_size}
    for flag, value in windows.items():
        if value < -1:
            raise SchemaError(f"argument {flag!r} is {value}, expected -1 or >= 0")
    if qk_matmul_output_mode not in (0, 1, 2, 3):
        raise SchemaError(
            f"argument 'qk_matmul_output_mode' is {qk_matmul_output_mode}, expected 0 to 3"
        )
    dtype = q.dtype
    batch, sq = q.shape[0], q.shape[2]
    offset: int | np.ndarray = 0
    if past_key is not None:
        for slot, past, cur in (("past_key", past_key, k), ("past_value", past_value, v)):
            if past.ndim != 4 or past.shape[:2] + past.shape[3:] != cur.shape[:2] + cur.shape[3:]:
                raise ShapeError(
                    f"input {slot!r} has shape {list(past.shape)}, expected "
                    f"({cur.shape[0]}, {cur.shape[1]}, past_len, {cur.shape[3]})"
                )
        offset = past_key.shape[2]
        k = np.concatenate([past_key, k], axis=2)
        v = np.concatenate([past_value, v], axis=2)
    present_k, present_v = k, v
    skv = k.shape[2]
    if nonpad_kv_seqlen is not None:
        nonpad_kv_seqlen = np.asarray(nonpad_kv_seqlen).reshape(-1).astype(np.int64)
        if nonpad_kv_seqlen.size != batch:
            raise ShapeError(
                f"input 'nonpad_kv_seqlen' has {nonpad_kv_seqlen.size} entries, expected "
                f"batch size {batch}"
            )
        offset = nonpad_kv_seqlen - sq
    bias = build_bias(
        dtype, sq, skv, attn_mask, is_causal, left_window_size, right_window_size, offset,
        nonpad_kv_seqlen,
    )  # fmt: skip
    groups = q.shape[1] // k.shape[1]
    if groups > 1:
        k = np.repeat(k, groups, axis=1)
        v = np.repeat(v, groups, axis=1)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[3])
    root = dtype.type(math.sqrt(scale))
    qk = _matmul(q * root, np.swapaxes(k, 2, 3) * root)
    capped = qk
    if softcap > 0:
        capped = np.tanh(qk / dtype.type(softcap)) * dtype.type(softcap)
    logits = capped + bias
    qk_out = (qk, capped, logits)[qk_matmul_output_mode] if qk_matmul_output_mode < 3 else None
    if softmax_precision is not None:
        if softmax_precision not in SOFTMAX_TYPES:
            raise SchemaError(
                f"argument 'softmax_precision' is {softmax_precision}, expected one of "
                f"{sorted(SOFTMAX_TYPES)} (FLOAT, FLOAT16, DOUBLE, BFLOAT16)"
            )
        logits = logits.astype(SOFTMAX_TYPES[softmax_precision])
    probs = _softmax(logits)
    empty = np.isneginf(np.max(bias, axis=-1, keepdims=True))
    probs = np.where(empty, probs.dtype.type(0), probs).astype(dtype)
    if qk_out is None:
        qk_out = probs
    y = _matmul(probs, v).astype(dtype, copy=False)
    if rank == 3:
        y = y.transpose(0, 2, 1, 3).reshape(batch, sq, -1)
    return y, present_k, present_v, qk_out.astype(dtype, copy=False)
