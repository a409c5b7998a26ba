"""Attention against a float64 NumPy reference that builds its mask position by position."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op


def reference(
    q, k, v, mask=None, past_k=None, past_v=None, nonpad=None, *, causal=0, scale=None,
    softcap=0.0, left=-1, right=-1, mode=0, q_heads=None, kv_heads=None,
):  # fmt: skip
    """(Y, present_key, present_value, qk_matmul_output) in float64, cast to q's dtype."""
    dtype, rank = q.dtype, q.ndim
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    if rank == 3:
        q = q.reshape(q.shape[0], q.shape[1], q_heads, -1).transpose(0, 2, 1, 3)
        k = k.reshape(k.shape[0], k.shape[1], kv_heads, -1).transpose(0, 2, 1, 3)
        v = v.reshape(v.shape[0], v.shape[1], kv_heads, -1).transpose(0, 2, 1, 3)
    past = 0
    if past_k is not None:
        past = past_k.shape[2]
        k = np.concatenate([past_k, k], axis=2)
        v = np.concatenate([past_v, v], axis=2)
    present_k, present_v = k, v
    b, hq, sq, d = q.shape
    skv = k.shape[2]
    group = hq // k.shape[1]
    bias = np.zeros((b, hq, sq, skv))
    if mask is not None:
        m = np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask.astype(np.float64)
        m = np.pad(m, [(0, 0)] * (m.ndim - 1) + [(0, skv - m.shape[-1])], constant_values=-np.inf)
        bias = bias + m
    for bi in range(b):
        offset = past if nonpad is None else nonpad[bi] - sq
        for i in range(sq):
            for j in range(skv):
                p = offset + i
                ok = (not causal or j <= p) and (left < 0 or p - j <= left)
                ok = ok and (right < 0 or j - p <= right) and (nonpad is None or j < nonpad[bi])
                if not ok:
                    bias[bi, :, i, j] = -np.inf
    scale = 1 / np.sqrt(d) if scale is None else scale
    qk = np.einsum("bhid,bhjd->bhij", q, np.repeat(k, group, axis=1)) * scale
    capped = softcap * np.tanh(qk / softcap) if softcap > 0 else qk
    logits = capped + bias
    with np.errstate(invalid="ignore"):
        e = np.exp(logits - logits.max(-1, keepdims=True))
        probs = e / e.sum(-1, keepdims=True)
    probs = np.where(np.isneginf(bias.max(-1, keepdims=True)), 0.0, probs)
    y = probs @ np.repeat(v, group, axis=1)
    if rank == 3:
        y = y.transpose(0, 2, 1, 3).reshape(b, sq, -1)
    qk_out = (qk, capped, logits, probs)[mode]
    return tuple(x.astype(dtype) for x in (y, present_k, present_v, qk_out))


def qkv(b=2, hq=4, hkv=4, sq=3, skv=5, d=8, dv=6, dtype=np.float32):
    return (
        rand(b, hq, sq, d, dtype=dtype, seed=1),
        rand(b, hkv, skv, d, dtype=dtype, seed=2),
        rand(b, hkv, skv, dv, dtype=dtype, seed=3),
    )


def _first(n):
    return lambda *a, **kw: reference(*a, **kw)[:n]


@pytest.mark.parametrize("hkv", [4, 2, 1])  # MHA, GQA, MQA
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_4d(hkv, causal):
    inputs = qkv(hkv=hkv)
    check_op(
        "Attention", list(inputs), is_causal=causal,
        reference=lambda *x: reference(*x, causal=causal)[:1],
    )  # fmt: skip


def test_attention_3d_heads():
    q, k, v = rand(2, 3, 4 * 8, seed=1), rand(2, 5, 2 * 8, seed=2), rand(2, 5, 2 * 6, seed=3)
    check_op(
        "Attention", [q, k, v], q_num_heads=4, kv_num_heads=2, scale=0.3,
        reference=lambda *x: reference(*x, q_heads=4, kv_heads=2, scale=0.3)[:1],
    )  # fmt: skip


@pytest.mark.parametrize(
    "mask",
    [
        rand(3, 5, seed=4),  # float, broadcast over batch and heads
        rand(2, 1, 3, 3, seed=4),  # shorter than the key length: padded with -inf
        rand(4, 3, 5, seed=4) > 0,  # bool, per head
        np.array([True, False, True, True, False]),  # rank 1
    ],
)
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_mask(mask, causal):
    check_op(
        "Attention", [*qkv(), mask], is_causal=causal,
        reference=lambda *x: reference(*x, causal=causal)[:1],
    )  # fmt: skip


def test_attention_past_and_present():
    q, k, v = qkv(hkv=2, sq=2, skv=2)
    past_k, past_v = rand(2, 2, 3, 8, seed=5), rand(2, 2, 3, 6, seed=6)
    check_op(
        "Attention", [q, k, v, None, past_k, past_v], is_causal=1, outputs=3,
        reference=lambda *x: reference(*x, causal=1)[:3],
    )  # fmt: skip


@pytest.mark.parametrize("left, right, causal", [(1, -1, 1), (2, 1, 0), (-1, 0, 0)])
def test_attention_windows_and_nonpad(left, right, causal):
    nonpad = np.array([4, 2], np.int64)  # batch 1 has rows with no key: zeros
    check_op(
        "Attention", [*qkv(sq=3, skv=6), None, None, None, nonpad],
        is_causal=causal, left_window_size=left, right_window_size=right,
        reference=lambda q, k, v, m, pk, pv, n: reference(
            q, k, v, nonpad=n, causal=causal, left=left, right=right
        )[:1],
    )  # fmt: skip


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_attention_qk_matmul_output(mode):
    mask = rand(3, 5, seed=4)
    got = check_op(
        "Attention", [*qkv(), mask], softcap=2.0, qk_matmul_output_mode=mode,
        outputs=["y", "", "", "qk"],
        reference=lambda *x: reference(*x, softcap=2.0, mode=mode)[::3],
    )  # fmt: skip
    assert got[1].shape == (2, 4, 3, 5)


def test_attention_fully_masked_row_is_zero():
    mask = np.ones((3, 5), bool)
    mask[1] = False
    y, probs = run_op(
        "Attention", [*qkv(), mask], qk_matmul_output_mode=3, outputs=["y", "", "", "p"]
    )
    assert not np.isnan(y).any() and np.all(y[:, :, 1] == 0) and np.all(probs[:, :, 1] == 0)


@pytest.mark.parametrize("dtype, precision", [(np.float16, None), (np.float16, 1)])
def test_attention_half_precision(dtype, precision):
    attrs = {} if precision is None else {"softmax_precision": precision}
    check_op(
        "Attention", list(qkv(dtype=dtype)), is_causal=1, atol=3e-3, rtol=3e-3, **attrs,
        reference=lambda *x: reference(*x, causal=1)[:1],
    )  # fmt: skip


@pytest.mark.parametrize(
    "inputs, attrs, message",
    [
        (qkv(hq=3, hkv=2), {}, "not a multiple"),
        ([rand(2, 3, 8)] * 3, {}, "q_num_heads"),
        ([rand(2, 3, 8)] * 3, {"q_num_heads": 3, "kv_num_heads": 3}, "not divisible"),
        ([*qkv(), None, rand(2, 4, 1, 8)], {}, "together"),
        ([*qkv(), rand(3, 9)], {}, "more than the total"),
        (qkv(), {"qk_matmul_output_mode": 4}, "qk_matmul_output_mode"),
        (qkv(), {"softmax_precision": 7}, "softmax_precision"),
    ],
)
def test_attention_errors(inputs, attrs, message):
    with pytest.raises(OperatorError, match=message):
        run_op("Attention", list(inputs), **attrs)
