"""Gradient of Attention against central differences and against torch's autograd."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.operators import GRADIENTS
from netbrew.proto.netbrew_pb2 import NetDef
from netbrew.testing import check_gradient, rand, run_op

B, HQ, SQ, SKV, D, DV = 2, 4, 3, 4, 4, 3


def qkv(hkv=HQ, sq=SQ, skv=SKV):
    return [rand(B, HQ, sq, D, seed=1), rand(B, hkv, skv, D, seed=2), rand(B, hkv, skv, DV, seed=3)]


@pytest.mark.parametrize("hkv", [4, 2, 1])  # MHA, GQA, MQA
@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("scale", [None, 0.3])
@pytest.mark.parametrize("softcap", [0.0, 1.5])
def test_attention_gradient_4d(hkv, causal, scale, softcap):
    attrs = {} if scale is None else {"scale": scale}
    check_gradient("Attention", qkv(hkv), is_causal=causal, softcap=softcap, **attrs)


@pytest.mark.parametrize("hq, hkv", [(2, 2), (4, 2), (2, 1)])
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_gradient_3d(hq, hkv, causal):
    q, k, v = rand(B, SQ, hq * D, seed=1), rand(B, SKV, hkv * D, seed=2), rand(B, SKV, hkv * DV)
    check_gradient(
        "Attention", [q, k, v], outputs=3, is_causal=causal, q_num_heads=hq, kv_num_heads=hkv
    )


@pytest.mark.parametrize(
    "mask",
    [
        rand(SQ, SKV, seed=4),  # float, broadcast over batch and heads
        rand(B, 1, SQ, 2, seed=4),  # float, shorter than the keys: padded with -inf
        rand(HQ, SQ, SKV, seed=4),  # float, per head
        rand(SKV, seed=4),  # float, rank 1
        rand(HQ, SQ, SKV, seed=4) > -0.5,  # bool, per head
        np.array([True, False, True, True]),  # bool, rank 1
    ],
)
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_gradient_masks(mask, causal):
    check_gradient("Attention", [*qkv(hkv=2), mask], is_causal=causal)


def test_attention_gradient_bool_mask_gets_zeros():
    mask = rand(SQ, SKV, seed=4) > 0
    (grad_op,) = GRADIENTS["Attention"](
        op_def("Attention", ["q", "k", "v", "m"], ["y"]), ["dy"], [None, None, "dv", "dm"]
    )
    assert grad_op.type == "AttentionGradient" and list(grad_op.output)[2:4] == ["dv", "dm"]
    dv, dm = run_op("AttentionGradient", [*qkv(), mask, None, None, None, rand(B, HQ, SQ, DV)],
                    outputs=["", "", "dv", "dm"])  # fmt: skip
    assert dm.dtype == np.float32 and dm.shape == mask.shape and not dm.any()
    assert dv.shape == (B, HQ, SKV, DV)


@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("grad_outputs", [[0], [1, 2], [0, 1, 2]])
@pytest.mark.parametrize("rank", [3, 4])
def test_attention_gradient_past_kv(causal, grad_outputs, rank):
    q, k, v = qkv(hkv=2, sq=2, skv=2)
    past_k, past_v = rand(B, 2, 3, D, seed=5), rand(B, 2, 3, DV, seed=6)
    attrs = {}
    if rank == 3:  # packed heads; past and present stay 4-D
        q, k, v = (x.transpose(0, 2, 1, 3).reshape(B, 2, -1) for x in (q, k, v))
        attrs = {"q_num_heads": HQ, "kv_num_heads": 2}
    check_gradient(
        "Attention", [q, k, v, None, past_k, past_v], outputs=3, grad_outputs=grad_outputs,
        is_causal=causal, **attrs,
    )  # fmt: skip


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("grad_outputs", [[3], [0, 3]])
def test_attention_gradient_qk_matmul_output(mode, grad_outputs):
    # A full-width float mask and no causal frontier: mode 2's output must stay finite.
    check_gradient(
        "Attention", [*qkv(hkv=2), rand(SQ, SKV, seed=4)], outputs=4, grad_outputs=grad_outputs,
        softcap=2.0, qk_matmul_output_mode=mode,
    )  # fmt: skip


@pytest.mark.parametrize("mode", [0, 1, 3])
def test_attention_gradient_qk_matmul_output_causal(mode):
    check_gradient(
        "Attention", qkv(hkv=2), outputs=4, grad_outputs=[0, 3], is_causal=1,
        qk_matmul_output_mode=mode, scale=0.5,
    )  # fmt: skip


@pytest.mark.parametrize("left, right, causal", [(1, -1, 1), (2, 1, 0), (-1, 0, 0)])
def test_attention_gradient_windows_and_nonpad(left, right, causal):
    nonpad = np.array([4, 2], np.int64)  # batch 1 has a row with no key: zero gradient
    check_gradient(
        "Attention", [*qkv(skv=5), None, None, None, nonpad], is_causal=causal,
        left_window_size=left, right_window_size=right,
    )  # fmt: skip


@pytest.mark.parametrize("precision, tolerances", [(11, {}), (1, {"eps": 1e-2, "atol": 1e-3})])
def test_attention_gradient_softmax_precision(precision, tolerances):
    # A float32 softmax in a float64 forward adds rounding noise to the central differences.
    check_gradient("Attention", qkv(hkv=2), is_causal=1, softmax_precision=precision, **tolerances)


def _sdpa_reference(q, k, v, dy, mask, causal, scale):
    """dQ, dK, dV (and dmask for a float mask) from torch's autograd, in float64."""
    torch = pytest.importorskip("torch")
    sdpa = torch.nn.functional.scaled_dot_product_attention
    tq, tk, tv = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (q, k, v))
    tm = None
    if mask is not None:
        tm = torch.tensor(mask, requires_grad=mask.dtype != np.bool_)
    y = sdpa(tq, tk, tv, attn_mask=tm, is_causal=bool(causal), scale=scale,
             enable_gqa=q.shape[1] != k.shape[1])  # fmt: skip
    y.backward(torch.tensor(dy))
    grads = [t.grad.numpy() for t in (tq, tk, tv)]
    return grads + ([tm.grad.numpy()] if tm is not None and tm.requires_grad else [])


@pytest.mark.parametrize(
    "hkv, mask, causal",
    [
        (2, None, 1),  # GQA, causal
        (4, rand(B, HQ, SQ, SKV, seed=4, dtype=np.float64), 0),  # additive float mask
        (1, rand(SQ, SKV, seed=4) > -0.5, 0),  # MQA, boolean mask
    ],
)
def test_attention_gradient_matches_torch_sdpa(hkv, mask, causal):
    q, k, v = (x.astype(np.float64) for x in qkv(hkv))
    dy = rand(B, HQ, SQ, DV, seed=7, dtype=np.float64)
    want = _sdpa_reference(q, k, v, dy, mask, causal, 0.5)  # exact as a float32 argument
    outputs = ["dq", "dk", "dv"] + (["dm"] if len(want) == 4 else [])
    got = run_op("AttentionGradient", [q, k, v, mask, None, None, None, dy], outputs=outputs,
                 is_causal=causal, scale=0.5)  # fmt: skip
    for name, g, w in zip(outputs, got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=name)


def _two_layers(values):
    net = NetDef(name="two_layers")
    net.op.extend([
        op_def("Attention", ["q", "k", "v", "mask"], ["h"], is_causal=1),
        op_def("Attention", ["h", "k", "v", "mask"], ["y"]),
    ])  # fmt: skip
    ws = Workspace()
    for name, value in values.items():
        ws.feed_blob(name, value)
    return net, ws


def test_attention_gradient_through_autodiff_with_a_shared_bool_mask():
    """Two layers read one boolean mask; autodiff sums its two (zero) partial gradients."""
    k, v = rand(B, HQ, SKV, DV, seed=2, dtype=np.float64), rand(B, HQ, SKV, DV, seed=3)
    values = {"q": rand(B, HQ, SQ, DV, seed=1, dtype=np.float64), "k": k, "v": v,
              "mask": rand(SQ, SKV, seed=4) > -0.5}  # fmt: skip
    net, ws = _two_layers(values)
    grads = add_gradient_ops(net, ["y"])
    ws.run_net_once(net)
    d_mask = ws.fetch_blob(grads["mask"])
    assert d_mask.dtype == np.float64 and d_mask.shape == (SQ, SKV) and not d_mask.any()
    d_q = ws.fetch_blob(grads["q"])
    for index in [(0, 0, 0, 0), (1, 3, 2, 1), (0, 2, 1, 2)]:  # sum(y) by central differences
        sums = []
        for step in (1e-4, -1e-4):
            moved = {**values, "q": values["q"].copy()}
            moved["q"][index] += step
            forward, fws = _two_layers(moved)
            fws.run_net_once(forward)
            sums.append(fws.fetch_blob("y").sum())
        np.testing.assert_allclose(d_q[index], (sums[0] - sums[1]) / 2e-4, rtol=1e-5)


@pytest.mark.parametrize(
    "slot, shape, message",
    [(7, (B, HQ, SQ, DV + 1), "'dY' has shape"), (8, (B, HQ, SKV, D + 1), "'dpresent_key'")],
)
def test_attention_gradient_errors(slot, shape, message):
    inputs = [*qkv(), None, None, None, None, None, None, None]
    inputs[slot] = rand(*shape)
    with pytest.raises(OperatorError, match=message):
        run_op("AttentionGradient", inputs, outputs=["dq", "dk", "dv"])


def test_attention_gradient_half_precision():
    q, k, v = qkv(hkv=2)
    dy = rand(B, HQ, SQ, DV, seed=7)
    wide = run_op("AttentionGradient", [q, k, v, None, None, None, None, dy], outputs=3,
                  is_causal=1)  # fmt: skip
    half = [x.astype(np.float16) for x in (q, k, v, dy)]
    got = run_op("AttentionGradient", [*half[:3], None, None, None, None, half[3]], outputs=3,
                 is_causal=1)  # fmt: skip
    for g, w in zip(got, wide):
        assert g.dtype == np.float16
        np.testing.assert_allclose(g, w, rtol=2e-2, atol=5e-3)
