"""Transformer building blocks beside Attention: RotaryEmbedding, SwiGLU, CausalConvWithState.

RotaryEmbedding rotates pairs of features of each head by position-dependent angles (the
pairs are the two halves of the rotated part, or neighbours when interleaved). SwiGLU is the
gated activation A * sigmoid(alpha * A) * B. CausalConvWithState is a depthwise causal 1-D
convolution that carries its last k - 1 input positions as state. All three have gradients:
SwiGLU's below, the others in attention_extras_grad (which reuses the helpers here).
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.arithmetic_grad import parsed_attrs
from netbrew.operators.schema import gradient, kernel, schema

schema(
    "RotaryEmbedding",
    inputs=["X", "cos_cache", "sin_cache", "position_ids?"],
    attrs={"interleaved": 0, "num_heads": None, "rotary_embedding_dim": 0},
    dtypes={0: "float", 1: "float", 2: "float", 3: "int"},
    doc="Y = X with its first rotary_embedding_dim (default head_size) features per head "
    "rotated: (x1, x2) -> (cos x1 - sin x2, sin x1 + cos x2); X (B, H, S, D) or "
    "(B, S, num_heads*D); caches (max_pos, R/2) indexed by position_ids (B, S), else "
    "(B, S, R/2); Y same shape and dtype as X",
)


def rotary_layout(x: np.ndarray, num_heads: int | None, slot: str = "X") -> np.ndarray:
    """X (B, H, S, D) or (B, S, num_heads*D) as a (B, S, H, D) view."""
    if x.ndim == 4:
        return x.transpose(0, 2, 1, 3)
    if x.ndim != 3:
        raise ShapeError(f"input {slot!r} has rank {x.ndim}, expected 3 or 4")
    if not num_heads or num_heads <= 0:
        raise SchemaError(f"input {slot!r} is 3-D, so argument 'num_heads' must be set (positive)")
    if x.shape[2] % num_heads:
        raise ShapeError(
            f"input {slot!r} has hidden size {x.shape[2]}, not divisible by num_heads={num_heads}"
        )
    return x.reshape(x.shape[0], x.shape[1], num_heads, -1)


def rotary_restore(work: np.ndarray, like: np.ndarray) -> np.ndarray:
    """(B, S, H, D) back to the layout of `like`, the X it came from."""
    out = work.transpose(0, 2, 1, 3) if like.ndim == 4 else work.reshape(like.shape)
    return np.ascontiguousarray(out)


def rotary_dim(work: np.ndarray, rotary_embedding_dim: int) -> int:
    head = work.shape[3]
    rot = rotary_embedding_dim or head
    if rot % 2 or rot > head:
        raise ShapeError(
            f"rotary_embedding_dim {rot} must be even and at most the head size {head}"
        )
    return rot


def rotary_tables(cos_cache, sin_cache, position_ids, batch: int, seq: int, rot: int):
    """The (B, S, R/2) cos and sin per token: the caches, or their rows at position_ids."""
    if position_ids is not None:
        if position_ids.shape != (batch, seq):
            raise ShapeError(
                f"input 'position_ids' has shape {list(position_ids.shape)}, expected "
                f"[{batch}, {seq}]"
            )
        for slot, cache in (("cos_cache", cos_cache), ("sin_cache", sin_cache)):
            if cache.ndim != 2:
                raise ShapeError(
                    f"input {slot!r} must be 2-D with position_ids, not {cache.ndim}-D"
                )
            low, high = (position_ids.min(), position_ids.max()) if position_ids.size else (0, 0)
            if position_ids.size and not 0 <= low <= high < len(cache):
                raise ShapeError(f"position_ids must lie in [0, {len(cache)}) to index {slot!r}")
        cos_cache, sin_cache = cos_cache[position_ids], sin_cache[position_ids]
    for slot, cache in (("cos_cache", cos_cache), ("sin_cache", sin_cache)):
        if cache.shape != (batch, seq, rot // 2):
            raise ShapeError(
                f"input {slot!r} gives shape {list(cache.shape)} per token, expected "
                f"[{batch}, {seq}, {rot // 2}] (rotary_embedding_dim / 2 = {rot // 2})"
            )
    return cos_cache, sin_cache


def rotary_pairs(work: np.ndarray, rot: int, interleaved: int) -> tuple[np.ndarray, np.ndarray]:
    """The two members (x1, x2) of each rotated pair: neighbours, or the two halves."""
    part = work[..., :rot]
    return (part[..., 0::2], part[..., 1::2]) if interleaved else np.split(part, 2, axis=-1)


def rotate(work, cos, sin, rot: int, interleaved: int) -> np.ndarray:
    """(x1, x2) -> (cos x1 - sin x2, sin x1 + cos x2) on (B, S, H, D); cos, sin (B, S, R/2)."""
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    x1, x2 = rotary_pairs(work, rot, interleaved)
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    out = work.copy()
    if interleaved:
        out[..., 0:rot:2], out[..., 1:rot:2] = real, imag
    else:
        out[..., : rot // 2], out[..., rot // 2 : rot] = real, imag
    return out


@kernel("RotaryEmbedding")
def rotary_embedding_cpu(
    x, cos_cache, sin_cache, position_ids=None, *, interleaved, num_heads, rotary_embedding_dim
):
    work = rotary_layout(x, num_heads)
    rot = rotary_dim(work, rotary_embedding_dim)
    cos, sin = rotary_tables(cos_cache, sin_cache, position_ids, *work.shape[:2], rot)
    return (rotary_restore(rotate(work, cos, sin, rot, interleaved), x),)


schema(
    "SwiGLU",
    inputs=["A", "B"],
    attrs={"alpha": 1.0},
    dtypes="float",
    doc="Y = A * sigmoid(alpha * A) * B (alpha=1.0); A, B and Y same shape and dtype "
    "(no broadcasting)",
)


def _check_same(a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape or a.dtype != b.dtype:
        raise ShapeError(
            f"inputs 'A' {a.dtype}{list(a.shape)} and 'B' {b.dtype}{list(b.shape)} must have "
            "the same shape and dtype (SwiGLU does not broadcast)"
        )


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


@kernel("SwiGLU")
def swiglu_cpu(a: np.ndarray, b: np.ndarray, alpha: float) -> tuple[np.ndarray]:
    _check_same(a, b)
    return ((a * _sigmoid(a * a.dtype.type(alpha)) * b).astype(a.dtype, copy=False),)


schema(
    "SwiGLUGradient",
    inputs=["A", "B", "dY"],
    outputs=["dA", "dB"],
    attrs={"alpha": 1.0},
    onnx=False,
    output_mask=True,
    doc="dA = dY * B * s * (1 + alpha * A * (1 - s)), dB = dY * A * s, s = sigmoid(alpha * A)",
)


@kernel("SwiGLUGradient")
def swiglu_gradient_cpu(a, b, dy, alpha, output_mask=(True, True)) -> tuple:
    _check_same(a, b)
    s = _sigmoid(a * a.dtype.type(alpha))
    da = dy * b * s * (1 + a.dtype.type(alpha) * a * (1 - s)) if output_mask[0] else None
    db = dy * a * s if len(output_mask) > 1 and output_mask[1] else None
    return da, db


@gradient("SwiGLU")
def swiglu_grad(op, g_out, g_in):
    alpha = parsed_attrs(op)["alpha"]
    return [op_def("SwiGLUGradient", [*op.input, g_out[0]], [g or "" for g in g_in], alpha=alpha)]


schema(
    "CausalConvWithState",
    inputs=["input", "weight", "bias?", "past_state?"],
    outputs=["output", "present_state"],
    attrs={"activation": "none"},
    dtypes="float",
    doc="output[b, c, t] = act(bias[c] + sum_i weight[c, 0, i] * P[b, c, t + i]), "
    "P = concat(past_state or zeros (B, C, k-1), input) on the last axis; input (B, C, L), "
    "weight (C, 1, k); present_state = last k-1 positions of P; act: none, silu or swish",
)


def causal_conv_padded(x, weight, bias, past_state, activation) -> np.ndarray:
    """Checks CausalConvWithState's inputs; returns P = concat(past_state or zeros, input)."""
    if activation not in ("none", "silu", "swish"):
        raise SchemaError(
            f"argument 'activation' is {activation!r}, expected 'none', 'silu' or 'swish'"
        )
    if x.ndim != 3:
        raise ShapeError(f"input 'input' has shape {list(x.shape)}, expected (B, C, L)")
    batch, channels, _ = x.shape
    if weight.ndim != 3 or weight.shape[:2] != (channels, 1) or weight.shape[2] < 1:
        raise ShapeError(
            f"input 'weight' has shape {list(weight.shape)}, expected ({channels}, 1, k)"
        )
    k = weight.shape[2]
    if bias is not None and bias.shape != (channels,):
        raise ShapeError(f"input 'bias' has shape {list(bias.shape)}, expected ({channels},)")
    if past_state is None:
        past_state = np.zeros((batch, channels, k - 1), x.dtype)
    elif past_state.shape != (batch, channels, k - 1):
        raise ShapeError(
            f"input 'past_state' has shape {list(past_state.shape)}, expected "
            f"({batch}, {channels}, {k - 1})"
        )
    return np.concatenate([past_state.astype(x.dtype, copy=False), x], axis=2)


def causal_conv_windows(padded: np.ndarray, k: int) -> np.ndarray:
    """The (B, C, L, k) windows of P each output position reads."""
    return np.lib.stride_tricks.sliding_window_view(padded, k, axis=2)


def causal_conv_pre(padded, weight, bias) -> np.ndarray:
    """The float64 pre-activation bias[c] + sum_i weight[c, 0, i] * P[b, c, t + i]."""
    windows = causal_conv_windows(padded, weight.shape[2])
    acc = np.einsum("bclk,ck->bcl", windows.astype(np.float64), weight[:, 0].astype(np.float64))
    if bias is not None:
        acc += bias.astype(np.float64)[:, None]
    return acc


@kernel("CausalConvWithState")
def causal_conv_with_state_cpu(x, weight, bias=None, past_state=None, *, activation):
    padded = causal_conv_padded(x, weight, bias, past_state, activation)
    out = causal_conv_pre(padded, weight, bias).astype(x.dtype)
    if activation != "none":
        wide = out.astype(np.float32)
        out = (wide * _sigmoid(wide)).astype(x.dtype)
    k = weight.shape[2]
    return out, np.ascontiguousarray(padded[:, :, padded.shape[2] - (k - 1) :])
