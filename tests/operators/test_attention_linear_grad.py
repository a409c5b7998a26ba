"""Gradient of LinearAttention against central differences and torch autograd."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand, run_op

B, T, DK, DV = 2, 3, 3, 2
# The recurrence runs in float32 even for float64 inputs (as ONNX's reference does):
# wider steps and a looser floor keep its rounding out of the central differences.
FLOAT32 = {"eps": 1e-2, "atol": 1e-3}


def inputs(rule, hq, hkv, *, past=True, per_head=False):
    decay_width = hkv if per_head else hkv * DK
    decay = rand(B, T, decay_width, seed=5, low=-1, high=0) if "gated" in rule else None
    beta = rand(B, T, 1 if per_head else hkv, seed=6, low=0, high=1) if "delta" in rule else None
    return [
        rand(B, T, hq * DK, seed=1),
        rand(B, T, hkv * DK, seed=2) / 2,
        rand(B, T, hkv * DV, seed=3),
        rand(B, hkv, DK, DV, seed=4) if past else None,
        decay,
        beta,
    ]


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
@pytest.mark.parametrize("hq, hkv", [(2, 2), (4, 2), (3, 1)])
@pytest.mark.parametrize("past", [False, True])
def test_linear_attention_gradient(rule, hq, hkv, past):
    check_gradient(
        "LinearAttention", inputs(rule, hq, hkv, past=past), outputs=2, q_num_heads=hq,
        kv_num_heads=hkv, update_rule=rule, **FLOAT32,
    )  # fmt: skip


@pytest.mark.parametrize("rule", ["gated", "delta", "gated_delta"])
@pytest.mark.parametrize("grad_outputs", [[0], [1]])
def test_linear_attention_gradient_per_head_decay_shared_beta(rule, grad_outputs):
    check_gradient(
        "LinearAttention", inputs(rule, 4, 2, per_head=True), outputs=2,
        grad_outputs=grad_outputs, q_num_heads=4, kv_num_heads=2, update_rule=rule, scale=0.7,
        **FLOAT32,
    )  # fmt: skip


def _torch_reference(values, dy, d_state, hq, hkv):
    """dquery ... dbeta of gated_delta LinearAttention by torch autograd, in float64."""
    torch = pytest.importorskip("torch")
    q, k, v, state, decay, beta = (torch.tensor(x, requires_grad=True) for x in values)
    group, scale = hq // hkv, 1 / np.sqrt(DK)
    s, outs = state, []
    for t in range(T):
        kt, vt = k[:, t].reshape(B, hkv, DK), v[:, t].reshape(B, hkv, DV)
        s = s * torch.exp(decay[:, t].reshape(B, hkv, DK, 1))
        w = beta[:, t].reshape(B, hkv, 1) * (vt - torch.einsum("bhkv,bhk->bhv", s, kt))
        s = s + kt[..., None] * w[:, :, None, :]
        qt = q[:, t].reshape(B, hkv, group, DK)
        outs.append(scale * torch.einsum("bhgk,bhkv->bhgv", qt, s).reshape(B, -1))
    loss = (torch.stack(outs, 1) * torch.tensor(dy)).sum() + (s * torch.tensor(d_state)).sum()
    loss.backward()
    return [x.grad.numpy() for x in (q, k, v, state, decay, beta)]


def test_linear_attention_gradient_matches_torch_autograd():
    values = [x.astype(np.float64) for x in inputs("gated_delta", 4, 2)]
    dy, d_state = rand(B, T, 4 * DV, seed=7), rand(B, 2, DK, DV, seed=8)
    want = _torch_reference(values, dy, d_state, 4, 2)
    got = run_op(
        "LinearAttentionGradient", [*values, dy, d_state], outputs=6, q_num_heads=4,
        kv_num_heads=2, update_rule="gated_delta",
    )  # fmt: skip
    for name, g, w in zip(["dq", "dk", "dv", "dpast", "ddecay", "dbeta"], got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6, err_msg=name)


def test_linear_attention_gradient_skips_unwanted_inputs():
    op = op_def("LinearAttention", ["q", "k", "v", "", "g"], ["o", "s"], q_num_heads=2,
                kv_num_heads=2, update_rule="gated")  # fmt: skip
    (grad_op,) = GRADIENTS["LinearAttention"](op, [None, "ds"], [None, "dk", None, None, "dg"])
    assert grad_op.type == "LinearAttentionGradient"
    assert list(grad_op.input) == ["q", "k", "v", "", "g", "", "", "ds"]
    assert list(grad_op.output) == ["", "dk", "", "", "dg"]


def test_linear_attention_gradient_checks_output_gradients():
    with pytest.raises(OperatorError, match="'dpresent_state' has shape"):
        run_op(
            "LinearAttentionGradient", [*inputs("linear", 2, 2), None, rand(B, 2, DK, DK)],
            outputs=["dq", "", ""], q_num_heads=2, kv_num_heads=2, update_rule="linear",
        )  # fmt: skip
