"""Gradients of RotaryEmbedding and CausalConvWithState (SwiGLU's lives beside its kernel).

    RotaryEmbedding(X, cos_cache, sin_cache, position_ids) -> Y
        backward: RotaryEmbeddingGradient(X, cos_cache, sin_cache, dY, position_ids)
            -> (dX, dcos_cache, dsin_cache)
    CausalConvWithState(input, weight, bias, past_state) -> (output, present_state)
        backward: CausalConvWithStateGradient(input, weight, bias, past_state, doutput,
            dpresent_state) -> (dinput, dweight, dbias, dpast_state)

Both recompute what they need with the forward's own helpers. The rotation is orthogonal, so
dX is dY rotated by the negated angles; rows of the caches that position_ids reads several
times collect the sum of their gradients. In CausalConvWithState the casts of the
pre-activation to the input's dtype (and to float32 for the activation) count as the
identity; either output may carry a gradient, an absent one counts as zero.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.attention_extras import (
    _sigmoid,
    causal_conv_padded,
    causal_conv_pre,
    causal_conv_windows,
    rotary_dim,
    rotary_layout,
    rotary_pairs,
    rotary_restore,
    rotary_tables,
    rotate,
)
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.schema import get_schema, gradient, kernel, schema

schema(
    "RotaryEmbeddingGradient",
    inputs=["X", "cos_cache", "sin_cache", "dY", "position_ids?"],
    outputs=["dX", "dcos_cache?", "dsin_cache?"],
    attrs=dict(get_schema("RotaryEmbedding").attrs),
    dtypes={0: "float", 1: "float", 2: "float", 3: "float", 4: "int"},
    onnx=False,
    output_mask=True,
    doc="with (x1, x2) and (d1, d2) the rotated pairs of X and dY, and cos, sin the cache "
    "rows per token: dX = dY with (d1, d2) -> (cos d1 + sin d2, cos d2 - sin d1), the "
    "unrotated features copied; dcos = sum over heads of d1 x1 + d2 x2, dsin = sum over "
    "heads of d2 x1 - d1 x2, scattered (summed) to the cache rows position_ids names; "
    "RotaryEmbedding's attributes and defaults",
)

schema(
    "CausalConvWithStateGradient",
    inputs=["input", "weight", "bias?", "past_state?", "doutput?", "dpresent_state?"],
    outputs=["dinput", "dweight?", "dbias?", "dpast_state?"],
    attrs={"activation": "none"},
    dtypes="float",
    onnx=False,
    output_mask=True,
    doc="with P = concat(past_state or zeros, input), A the pre-activation and dA = doutput "
    "* act'(A) (silu'(a) = s (1 + a (1 - s)), s = sigmoid(a)): dP[b, c, t + i] += "
    "weight[c, 0, i] dA[b, c, t], plus dpresent_state on P's last k-1 positions; dinput, "
    "dpast_state = dP split after k-1 positions; dweight[c, 0, i] = sum_{b,t} dA[b, c, t] "
    "P[b, c, t + i]; dbias = sum of dA over b and t; default activation='none'",
)


@gradient("RotaryEmbedding")
def rotary_embedding_grad(op, g_out, g_in):
    wanted = [g or "" for g in g_in[:3]]
    if not any(wanted):
        return []
    ins = [*op.input[:3], g_out[0], *op.input[3:]]
    return [op_def("RotaryEmbeddingGradient", ins, wanted, **copy_attrs(op))]


def _to_cache(per_token: np.ndarray, cache: np.ndarray, position_ids) -> np.ndarray:
    """A (B, S, R/2) table gradient in the cache's shape: summed into the rows read."""
    if position_ids is None:
        return per_token.astype(cache.dtype, copy=False)
    full = np.zeros(cache.shape, per_token.dtype)
    np.add.at(full, position_ids, per_token)
    return full.astype(cache.dtype, copy=False)


@kernel("RotaryEmbeddingGradient")
def rotary_embedding_gradient_cpu(
    x, cos_cache, sin_cache, dy, position_ids=None, *,
    interleaved, num_heads, rotary_embedding_dim, output_mask,
) -> tuple[np.ndarray | None, ...]:  # fmt: skip
    work = rotary_layout(x, num_heads)
    rot = rotary_dim(work, rotary_embedding_dim)
    cos, sin = rotary_tables(cos_cache, sin_cache, position_ids, *work.shape[:2], rot)
    d_work = rotary_layout(dy, num_heads, "dY")
    if d_work.shape != work.shape:
        raise ShapeError(f"input 'dY' has shape {list(dy.shape)}, expected X's {list(x.shape)}")
    mask = tuple(output_mask) + (False,) * (3 - len(output_mask))
    dx = d_cos = d_sin = None
    if mask[0]:
        dx = rotate(d_work, cos, -sin, rot, interleaved)  # R(-angle) = R(angle)^T
        dx = rotary_restore(dx, x).astype(x.dtype, copy=False)
    if mask[1] or mask[2]:
        acc = np.promote_types(x.dtype, np.float32)
        x1, x2 = rotary_pairs(work.astype(acc), rot, interleaved)
        d1, d2 = rotary_pairs(d_work.astype(acc), rot, interleaved)
        d_cos = _to_cache((d1 * x1 + d2 * x2).sum(axis=2), cos_cache, position_ids)
        d_sin = _to_cache((d2 * x1 - d1 * x2).sum(axis=2), sin_cache, position_ids)
    return dx, d_cos, d_sin


@gradient("CausalConvWithState")
def causal_conv_with_state_grad(op, g_out, g_in):
    wanted = [g or "" for g in g_in[:4]]
    if not any(wanted):
        return []
    ins = list(op.input) + [""] * (4 - len(op.input)) + [g or "" for g in g_out[:2]]
    ins += [""] * (6 - len(ins))
    return [op_def("CausalConvWithStateGradient", ins, wanted, **copy_attrs(op))]


def _d_pre(padded, weight, bias, d_out, activation: str, dtype) -> np.ndarray:
    """The float64 gradient of the pre-activation, through the activation."""
    d = d_out.astype(np.float64)
    if activation == "none":
        return d
    wide = causal_conv_pre(padded, weight, bias).astype(dtype).astype(np.float32)
    s = _sigmoid(wide).astype(np.float64)
    return d * s * (1 + wide.astype(np.float64) * (1 - s))


@kernel("CausalConvWithStateGradient")
def causal_conv_with_state_gradient_cpu(
    x, weight, bias=None, past_state=None, d_out=None, d_present=None, *,
    activation, output_mask,
) -> tuple[np.ndarray | None, ...]:  # fmt: skip
    padded = causal_conv_padded(x, weight, bias, past_state, activation)
    length, k = x.shape[2], weight.shape[2]
    state_shape = (*x.shape[:2], k - 1)
    for slot, grad, want in (
        ("doutput", d_out, x.shape),
        ("dpresent_state", d_present, state_shape),
    ):
        if grad is not None and grad.shape != want:
            raise ShapeError(f"input {slot!r} has shape {list(grad.shape)}, expected {list(want)}")
    d_pre = (
        np.zeros(x.shape, np.float64)
        if d_out is None
        else _d_pre(padded, weight, bias, d_out, activation, x.dtype)
    )
    mask = tuple(output_mask) + (False,) * (4 - len(output_mask))
    dx = dw = db = d_past = None
    if mask[0] or mask[3]:
        d_padded = np.zeros(padded.shape, np.float64)
        taps = weight[:, 0].astype(np.float64)
        for i in range(k):  # output t read P[t + i] through tap i
            d_padded[:, :, i : i + length] += taps[:, i, None] * d_pre
        if d_present is not None:
            d_padded[:, :, padded.shape[2] - (k - 1) :] += d_present
        dx = d_padded[:, :, k - 1 :].astype(x.dtype)
        state_dtype = x.dtype if past_state is None else past_state.dtype
        d_past = d_padded[:, :, : k - 1].astype(state_dtype)
    if mask[1]:
        windows = causal_conv_windows(padded, k).astype(np.float64)
        dw = np.einsum("bclk,bcl->ck", windows, d_pre)[:, None, :].astype(weight.dtype)
    if mask[2]:
        db = d_pre.sum(axis=(0, 2)).astype(x.dtype if bias is None else bias.dtype)
    return dx, dw, db, d_past
