"""LinearAttention: the recurrent (linear, gated, delta, gated-delta) attention of ONNX opset 27.

The state S (B, H_kv, d_k, d_v) is updated token by token, in float32:

    linear:       S = S + k v^T
    gated:        S = exp(g) S + k v^T
    delta:        S = S + k (beta (v - S^T k))^T
    gated_delta:  S = exp(g) S, then as delta
    o = scale * S^T q           (each KV head's state serves q_num_heads / kv_num_heads queries)

query, key, value, decay and beta arrive packed as (B, T, heads * dim).
The gradient (LinearAttentionGradient, in attention_linear_grad) reruns linear_recurrence,
keeping each step's state, and backpropagates through the steps in reverse.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.schema import REQUIRED, kernel, schema

RULES = ("linear", "gated", "delta", "gated_delta")

schema(
    "LinearAttention",
    inputs=["query", "key", "value", "past_state?", "decay?", "beta?"],
    outputs=["output", "present_state"],
    attrs={
        "chunk_size": 64,
        "kv_num_heads": REQUIRED,
        "q_num_heads": REQUIRED,
        "scale": 0.0,
        "update_rule": "gated_delta",
    },
    dtypes="float",
    doc="output (B, T, Hq*dv) = scale * q_t^T S_t per token with the recurrent state S "
    "(B, Hkv, dk, dv) updated by update_rule (linear, gated, delta, gated_delta; default "
    "gated_delta); query (B, T, Hq*dk), key (B, T, Hkv*dk), value (B, T, Hkv*dv); decay "
    "(B, T, Hkv*dk or Hkv) in log space; beta (B, T, Hkv or 1); scale 0 means 1/sqrt(dk); "
    "present_state = final S",
)


def _heads(x: np.ndarray, heads: int, slot: str, batch: int, steps: int) -> np.ndarray:
    """(B, T, H*D) -> float32 (B, H, T, D)."""
    if x.ndim != 3 or x.shape[:2] != (batch, steps):
        raise ShapeError(
            f"input {slot!r} has shape {list(x.shape)}, expected ({batch}, {steps}, heads * dim)"
        )
    if x.shape[2] % heads:
        raise ShapeError(f"input {slot!r} last dim {x.shape[2]} is not divisible by {heads} heads")
    return x.reshape(batch, steps, heads, -1).transpose(0, 2, 1, 3).astype(np.float32)


class LinearInputs(NamedTuple):
    """LinearAttention's inputs split into heads, in float32; LinearAttentionGradient reuses it."""

    qg: np.ndarray  # (B, Hkv, G, T, dk): the G query heads each KV head serves
    k: np.ndarray  # (B, Hkv, T, dk)
    v: np.ndarray  # (B, Hkv, T, dv)
    decay: np.ndarray | None  # exp(decay), (B, Hkv, T, 1 or dk)
    beta: np.ndarray | None  # (B, Hkv or 1, T, 1)
    state: np.ndarray  # the initial state (B, Hkv, dk, dv)
    scale: float


def _check_rule(update_rule, q_num_heads, kv_num_heads, decay, beta) -> None:
    if update_rule not in RULES:
        raise SchemaError(f"argument 'update_rule' is {update_rule!r}, expected one of {RULES}")
    if q_num_heads <= 0 or kv_num_heads <= 0 or q_num_heads % kv_num_heads:
        raise SchemaError(
            f"q_num_heads ({q_num_heads}) must be a positive multiple of kv_num_heads "
            f"({kv_num_heads})"
        )
    gated, delta = update_rule in ("gated", "gated_delta"), update_rule in ("delta", "gated_delta")
    for slot, value_in, needed in (("decay", decay, gated), ("beta", beta, delta)):
        if needed and value_in is None:
            raise SchemaError(f"update_rule {update_rule!r} needs input {slot!r}")
        if not needed and value_in is not None:
            raise SchemaError(f"update_rule {update_rule!r} takes no input {slot!r}")


def _gates(decay, beta, batch, steps, kv_num_heads, d_k):
    """(exp(decay) as (B, H, T, 1|dk), beta as (B, H|1, T, 1)), each None when absent."""
    if decay is not None:
        if decay.ndim != 3 or decay.shape[2] not in (kv_num_heads, kv_num_heads * d_k):
            raise ShapeError(
                f"input 'decay' has shape {list(decay.shape)}, expected ({batch}, {steps}, "
                f"{kv_num_heads} or {kv_num_heads * d_k})"
            )
        decay = np.exp(_heads(decay, kv_num_heads, "decay", batch, steps))  # (B, H, T, 1|dk)
    if beta is not None:
        if beta.ndim != 3 or beta.shape[2] not in (kv_num_heads, 1):
            raise ShapeError(
                f"input 'beta' has shape {list(beta.shape)}, expected ({batch}, {steps}, "
                f"{kv_num_heads} or 1)"
            )
        beta = _heads(beta, beta.shape[2], "beta", batch, steps)  # (B, H|1, T, 1)
    return decay, beta


def linear_inputs(
    query, key, value, past_state, decay, beta, *, kv_num_heads, q_num_heads, scale, update_rule
) -> LinearInputs:
    """Checks LinearAttention's inputs and splits them into heads."""
    _check_rule(update_rule, q_num_heads, kv_num_heads, decay, beta)
    if query.ndim != 3:
        raise ShapeError(f"input 'query' has shape {list(query.shape)}, expected (B, T, Hq*dk)")
    batch, steps = query.shape[:2]
    q = _heads(query, q_num_heads, "query", batch, steps)
    k = _heads(key, kv_num_heads, "key", batch, steps)
    v = _heads(value, kv_num_heads, "value", batch, steps)
    d_k, d_v = q.shape[3], v.shape[3]
    if k.shape[3] != d_k:
        raise ShapeError(f"key head size {k.shape[3]} differs from query head size {d_k}")
    decay, beta = _gates(decay, beta, batch, steps, kv_num_heads, d_k)
    want = (batch, kv_num_heads, d_k, d_v)
    if past_state is not None:
        if past_state.shape != want:
            raise ShapeError(
                f"input 'past_state' has shape {list(past_state.shape)}, expected {list(want)}"
            )
        state = past_state.astype(np.float32)
    else:
        state = np.zeros(want, np.float32)
    group = q_num_heads // kv_num_heads
    qg = q.reshape(batch, kv_num_heads, group, steps, d_k)
    return LinearInputs(qg, k, v, decay, beta, state, scale or 1.0 / math.sqrt(d_k))


def linear_recurrence(inp: LinearInputs, states: list | None = None):
    """(scaled outputs (B, Hkv, G, T, dv), final state); `states` collects the state
    before each step (before its decay) and the final one, for the gradient."""
    qg, k, v, decay, beta, state = inp[:6]
    out = np.empty(qg.shape[:4] + v.shape[3:], np.float32)
    for t in range(k.shape[2]):
        if states is not None:
            states.append(state)
        if decay is not None:
            state = state * decay[:, :, t, :, None]
        v_t = v[:, :, t]
        if beta is not None:
            v_t = beta[:, :, t] * (v_t - np.einsum("bhkv,bhk->bhv", state, k[:, :, t]))
        state = state + k[:, :, t, :, None] * v_t[:, :, None, :]
        out[:, :, :, t] = np.einsum("bhgk,bhkv->bhgv", qg[:, :, :, t], state)
    if states is not None:
        states.append(state)
    out *= np.float32(inp.scale)
    return out, state


@kernel("LinearAttention")
def linear_attention_cpu(
    query, key, value, past_state=None, decay=None, beta=None, *,
    chunk_size, kv_num_heads, q_num_heads, scale, update_rule,
):  # fmt: skip
    inp = linear_inputs(
        query, key, value, past_state, decay, beta, kv_num_heads=kv_num_heads,
        q_num_heads=q_num_heads, scale=scale, update_rule=update_rule,
    )  # fmt: skip
    out, state = linear_recurrence(inp)
    batch, steps, d_v = *query.shape[:2], inp.v.shape[3]
    output = out.reshape(batch, q_num_heads, steps, d_v).transpose(0, 2, 1, 3)
    output = output.reshape(batch, steps, q_num_heads * d_v).astype(query.dtype)
    state_dtype = past_state.dtype if past_state is not None else query.dtype
    return output, state.astype(state_dtype)
