"""RotaryEmbedding, SwiGLU and CausalConvWithState against NumPy references written out."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op


def rope_reference(x, cos, sin, pos=None, *, interleaved=0, dim=0, heads=None):
    """Rotates each (x[a], x[b]) pair of every token and head, one pair at a time."""
    work = x.transpose(0, 2, 1, 3) if x.ndim == 4 else x.reshape(*x.shape[:2], heads, -1)
    out = work.astype(np.float64)
    rot = dim or work.shape[-1]
    for bi in range(work.shape[0]):
        for s in range(work.shape[1]):
            c = cos[pos[bi, s]] if pos is not None else cos[bi, s]
            n = sin[pos[bi, s]] if pos is not None else sin[bi, s]
            for p in range(rot // 2):
                a, b = (2 * p, 2 * p + 1) if interleaved else (p, p + rot // 2)
                x1, x2 = work[bi, s, :, a].astype(np.float64), work[bi, s, :, b]
                out[bi, s, :, a] = c[p] * x1 - n[p] * x2
                out[bi, s, :, b] = n[p] * x1 + c[p] * x2
    out = out.transpose(0, 2, 1, 3) if x.ndim == 4 else out.reshape(x.shape)
    return (out.astype(x.dtype),)


def caches(rows, half, seed=7):
    theta = rand(rows, half, seed=seed, low=0, high=6)
    return np.cos(theta), np.sin(theta)


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("dim", [0, 4])
def test_rotary_embedding_position_ids(interleaved, dim):
    x = rand(2, 3, 5, 8)  # (B, H, S, D)
    cos, sin = caches(10, (dim or 8) // 2)
    pos = np.array([[0, 1, 2, 3, 4], [9, 2, 2, 0, 7]], np.int64)
    check_op(
        "RotaryEmbedding", [x, cos, sin, pos], interleaved=interleaved, rotary_embedding_dim=dim,
        reference=lambda *a: rope_reference(*a, interleaved=interleaved, dim=dim),
    )  # fmt: skip


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_3d_without_position_ids(interleaved):
    x = rand(2, 5, 3 * 6)  # (B, S, H*D)
    cos, sin = (c.reshape(2, 5, 3) for c in caches(10, 3))
    check_op(
        "RotaryEmbedding", [x, cos, sin], num_heads=3, interleaved=interleaved,
        reference=lambda *a: rope_reference(*a, interleaved=interleaved, heads=3),
    )  # fmt: skip


@pytest.mark.parametrize(
    "inputs, attrs, message",
    [
        ([rand(2, 5, 12), *caches(5, 3)], {}, "num_heads"),
        ([rand(2, 3, 5, 8), *caches(5, 3), np.zeros((2, 5), np.int64)], {}, "expected"),
        ([rand(2, 3, 5, 8), *caches(5, 4), np.full((2, 5), 5, np.int64)], {}, r"\[0, 5\)"),
        ([rand(2, 3, 5, 8), *caches(5, 4)], {"rotary_embedding_dim": 3}, "even"),
    ],
)
def test_rotary_embedding_errors(inputs, attrs, message):
    with pytest.raises(OperatorError, match=message):
        run_op("RotaryEmbedding", inputs, **attrs)


@pytest.mark.parametrize("alpha", [1.0, 1.702])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_swiglu(alpha, dtype):
    a, b = rand(3, 4, dtype=dtype, low=-4, high=4), rand(3, 4, dtype=dtype, seed=1)

    def ref(a, b):
        a64 = a.astype(np.float64)
        return ((a64 / (1 + np.exp(-alpha * a64)) * b).astype(dtype),)

    check_op("SwiGLU", [a, b], alpha=alpha, reference=ref)


def test_swiglu_needs_equal_shapes():
    with pytest.raises(OperatorError, match="does not broadcast"):
        run_op("SwiGLU", [rand(3, 4), rand(1, 4)])


def conv_reference(x, w, bias=None, past=None, *, activation="none"):
    k = w.shape[2]
    past = np.zeros((*x.shape[:2], k - 1), x.dtype) if past is None else past
    padded = np.concatenate([past, x], axis=2).astype(np.float64)
    out = np.zeros(x.shape)
    for t in range(x.shape[2]):
        for i in range(k):
            out[:, :, t] += w[:, 0, i] * padded[:, :, t + i]
    if bias is not None:
        out += bias[:, None]
    if activation != "none":
        out = out / (1 + np.exp(-out))
    return out.astype(x.dtype), padded[:, :, x.shape[2] :].astype(x.dtype)


@pytest.mark.parametrize("k", [1, 3, 6])  # k - 1 > length: the state keeps old positions
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("with_past", [False, True])
@pytest.mark.parametrize("activation", ["none", "silu", "swish"])
def test_causal_conv_with_state(k, with_bias, with_past, activation):
    x, w = rand(2, 3, 4), rand(3, 1, k, seed=1)
    bias = rand(3, seed=2) if with_bias else None
    past = rand(2, 3, k - 1, seed=3) if with_past else None
    check_op(
        "CausalConvWithState", [x, w, bias, past], activation=activation,
        reference=lambda *a: conv_reference(*a, activation=activation),
    )  # fmt: skip


@pytest.mark.parametrize(
    "inputs, attrs, message",
    [
        ([rand(2, 3, 4), rand(3, 1, 2)], {"activation": "relu"}, "activation"),
        ([rand(2, 3, 4), rand(2, 1, 2)], {}, "weight"),
        ([rand(2, 3, 4), rand(3, 1, 2), None, rand(2, 3, 2)], {}, "past_state"),
        ([rand(3, 4), rand(3, 1, 2)], {}, r"\(B, C, L\)"),
    ],
)
def test_causal_conv_with_state_errors(inputs, attrs, message):
    with pytest.raises(OperatorError, match=message):
        run_op("CausalConvWithState", inputs, outputs=2, **attrs)
