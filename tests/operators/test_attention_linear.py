"""LinearAttention against a float64 recurrence written per batch, head and token."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op


def reference(q, k, v, past=None, decay=None, beta=None, *, hq, hkv, scale=0.0):
    b, t, _ = q.shape
    dk, dv = q.shape[2] // hq, v.shape[2] // hkv
    state = np.zeros((b, hkv, dk, dv)) if past is None else past.astype(np.float64)
    out = np.zeros((b, t, hq, dv))
    scale = scale or 1 / np.sqrt(dk)
    for bi in range(b):
        for h in range(hkv):
            s = state[bi, h].copy()
            for ti in range(t):
                kt = k[bi, ti, h * dk : (h + 1) * dk].astype(np.float64)
                vt = v[bi, ti, h * dv : (h + 1) * dv].astype(np.float64)
                if decay is not None:
                    per_head = decay.shape[2] == hkv
                    g = decay[bi, ti, h] if per_head else decay[bi, ti, h * dk : (h + 1) * dk]
                    s = s * np.exp(np.reshape(g, (-1, 1)))
                if beta is not None:
                    vt = beta[bi, ti, h if beta.shape[2] > 1 else 0] * (vt - s.T @ kt)
                s = s + np.outer(kt, vt)
                for g in range(hq // hkv):
                    qh = h * (hq // hkv) + g
                    out[bi, ti, qh] = scale * (q[bi, ti, qh * dk : (qh + 1) * dk] @ s)
            state[bi, h] = s
    return out.reshape(b, t, -1).astype(q.dtype), state.astype(q.dtype)


B, T, DK, DV = 2, 5, 4, 3


def qkv(hq, hkv):
    return [
        rand(B, T, hq * DK, seed=1),
        rand(B, T, hkv * DK, seed=2) / 2,
        rand(B, T, hkv * DV, seed=3),
    ]


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
@pytest.mark.parametrize("hq, hkv", [(2, 2), (4, 2), (3, 1)])
@pytest.mark.parametrize("with_past", [False, True])
def test_linear_attention(rule, hq, hkv, with_past):
    past = rand(B, hkv, DK, DV, seed=4) if with_past else None
    decay = rand(B, T, hkv * DK, seed=5, low=-1, high=0) if "gated" in rule else None
    beta = rand(B, T, hkv, seed=6, low=0, high=1) if "delta" in rule else None
    check_op(
        "LinearAttention", [*qkv(hq, hkv), past, decay, beta], q_num_heads=hq,
        kv_num_heads=hkv, update_rule=rule, atol=1e-5, rtol=1e-4,
        reference=lambda *a: reference(*a, hq=hq, hkv=hkv),
    )  # fmt: skip


def test_linear_attention_per_head_decay_shared_beta_and_scale():
    decay = rand(B, T, 2, seed=5, low=-1, high=0)
    beta = rand(B, T, 1, seed=6, low=0, high=1)
    check_op(
        "LinearAttention", [*qkv(2, 2), None, decay, beta], q_num_heads=2, kv_num_heads=2,
        scale=0.5, atol=1e-5, rtol=1e-4,
        reference=lambda *a: reference(*a, hq=2, hkv=2, scale=0.5),
    )  # fmt: skip


@pytest.mark.parametrize(
    "extra, attrs, message",
    [
        ([], {"update_rule": "gated"}, "needs input 'decay'"),
        ([None, None, rand(B, T, 2)], {"update_rule": "linear"}, "takes no input 'beta'"),
        ([], {"update_rule": "softmax"}, "update_rule"),
        ([], {"update_rule": "linear", "q_num_heads": 3}, "positive multiple"),
        ([rand(B, 2, DK, 2)], {"update_rule": "linear"}, "past_state"),
    ],
)
def test_linear_attention_errors(extra, attrs, message):
    attrs = {"q_num_heads": 2, "kv_num_heads": 2, **attrs}
    with pytest.raises(OperatorError, match=message):
        run_op("LinearAttention", [*qkv(2, 2), *extra], outputs=2, **attrs)
