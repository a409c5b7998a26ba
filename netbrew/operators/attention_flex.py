"""FlexAttention (ONNX domain ai.onnx.preview, version 1): attention with modifier subgraphs.

Scores = (Q sqrt(scale)) (K sqrt(scale))^T, cast to the softmax precision (float32 for
float16 / bfloat16 inputs unless softmax_precision says otherwise), then score_mod(Scores),
softmax over the keys, prob_mod(Probs), and Y = Probs V cast to V's dtype. The modifiers
are subgraphs of one input and one output that may read the enclosing scope.
The gradient (FlexAttentionGradient, in attention_flex_grad) differentiates the modifiers
with netbrew's autodiff; blobs they read from the enclosing scope count as constants.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.attention import SOFTMAX_TYPES
from netbrew.operators.control_flow import run_subgraph
from netbrew.operators.schema import kernel, schema

schema(
    "FlexAttention",
    inputs=["Q", "K", "V"],
    attrs={"scale": None, "score_mod": None, "prob_mod": None, "softmax_precision": None},
    dtypes="float",
    wants_scope=True,
    doc="Y = prob_mod(softmax(score_mod(Q K^T * scale))) V (ONNX domain ai.onnx.preview); "
    "Q (B, Hq, L, E), K (B, Hkv, S, E), V (B, Hkv, S, Ev), Hq a multiple of Hkv; scale "
    "defaults to 1/sqrt(E); Y (B, Hq, L, Ev) in V's dtype",
)


def modify(net, x: np.ndarray, scope, what: str) -> np.ndarray:
    """Runs a modifier subgraph on `x`; its output must keep x's shape."""
    (out,) = run_subgraph(net, [x], scope, f"FlexAttention {what}")
    out = np.asarray(out)
    if out.shape != x.shape:
        raise ShapeError(
            f"FlexAttention {what} returned shape {list(out.shape)}, expected {list(x.shape)}"
        )
    return out.astype(x.dtype, copy=False)


class FlexState(NamedTuple):
    """FlexAttention up to its score_mod; FlexAttentionGradient recomputes it with this code."""

    k: np.ndarray  # K repeated to Q's heads
    v: np.ndarray  # V repeated to Q's heads
    compute: np.dtype  # the softmax precision
    root: np.generic  # sqrt(scale) in Q's dtype; Q and K are each scaled by it
    scores: np.ndarray  # (Q root) (K root)^T in the softmax precision


def flex_state(q, k, v, scale, softmax_precision) -> FlexState:
    """Checks FlexAttention's inputs and computes its unmodified scores."""
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ShapeError(
            f"inputs Q {list(q.shape)}, K {list(k.shape)}, V {list(v.shape)} must all be 4-D"
        )
    if k.shape[:3] != v.shape[:3] or q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise ShapeError(
            f"inputs Q {list(q.shape)}, K {list(k.shape)}, V {list(v.shape)} disagree: "
            "expected (B, Hq, L, E), (B, Hkv, S, E), (B, Hkv, S, Ev)"
        )
    heads, kv_heads = q.shape[1], k.shape[1]
    if heads % kv_heads:
        raise ShapeError(f"Q has {heads} heads, not a multiple of K/V's {kv_heads} heads")
    if heads != kv_heads:
        k = np.repeat(k, heads // kv_heads, axis=1)
        v = np.repeat(v, heads // kv_heads, axis=1)
    if softmax_precision is not None:
        if softmax_precision not in SOFTMAX_TYPES:
            raise SchemaError(
                f"argument 'softmax_precision' is {softmax_precision}, expected one of "
                f"{sorted(SOFTMAX_TYPES)}"
            )
        compute = np.dtype(SOFTMAX_TYPES[softmax_precision])
    else:
        compute = np.dtype(np.float32) if q.dtype.itemsize < 4 else q.dtype
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[3])
    root = q.dtype.type(np.sqrt(np.float32(scale)))
    scores = np.matmul(q * root, np.swapaxes(k * root, 2, 3)).astype(compute)
    return FlexState(k, v, compute, root, scores)


def flex_softmax(scores: np.ndarray) -> np.ndarray:
    """Softmax over the keys (a row of -inf gives NaN, as ONNX's reference does)."""
    with np.errstate(invalid="ignore"):
        e = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
        return e / np.sum(e, axis=-1, keepdims=True)


@kernel("FlexAttention")
def flex_attention_cpu(q, k, v, *, scale, score_mod, prob_mod, softmax_precision, scope):
    st = flex_state(q, k, v, scale, softmax_precision)
    scores = st.scores
    if score_mod is not None:
        scores = modify(score_mod, scores, scope, "score_mod")
    probs = flex_softmax(scores)
    if prob_mod is not None:
        probs = modify(prob_mod, probs, scope, "prob_mod")
    return (np.matmul(probs, st.v.astype(st.compute)).astype(v.dtype),)
