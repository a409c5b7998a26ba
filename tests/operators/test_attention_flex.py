"""FlexAttention with and without score_mod / prob_mod subgraphs, against float64 NumPy."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.proto.netbrew_pb2 import NetDef
from netbrew.testing import check_op, rand, run_op


def graph(ops, inputs, outputs):
    net = NetDef(name="mod", external_input=list(inputs), external_output=list(outputs))
    net.op.extend(ops)
    return net


def reference(q, k, v, *, scale=None, score=None, prob=None):
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scale = 1 / np.sqrt(q.shape[3]) if scale is None else scale
    s = np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k) * scale
    s = score(s) if score else s
    p = np.exp(s - s.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)
    p = prob(p) if prob else p
    return ((p @ v).astype(v.dtype),)


def qkv(hq=4, hkv=2, dtype=np.float32):
    return [rand(2, hq, 3, 8, seed=1, dtype=dtype), rand(2, hkv, 5, 8, seed=2, dtype=dtype),
            rand(2, hkv, 5, 6, seed=3, dtype=dtype)]  # fmt: skip


@pytest.mark.parametrize("hq, hkv", [(4, 4), (4, 2), (4, 1)])
@pytest.mark.parametrize("scale", [None, 0.2])
def test_flex_attention(hq, hkv, scale):
    attrs = {} if scale is None else {"scale": scale}
    check_op(
        "FlexAttention", qkv(hq, hkv), **attrs,
        reference=lambda *a: reference(*a, scale=scale),
    )  # fmt: skip


def test_flex_attention_half_computes_softmax_in_float32():
    check_op("FlexAttention", qkv(dtype=np.float16), atol=2e-3, rtol=2e-3, reference=reference)


def test_flex_attention_modifiers_read_outer_scope():
    score_mod = graph([op_def("Add", ["s", "bias"], ["s2"])], ["s"], ["s2"])
    prob_mod = graph([op_def("Mul", ["p", "p"], ["p2"])], ["p"], ["p2"])
    bias = rand(3, 5, seed=9)
    ws = Workspace()
    for name, value in zip(["q", "k", "v", "bias"], [*qkv(), bias]):
        ws.feed_blob(name, value)
    ws.run_operator_once(
        op_def("FlexAttention", ["q", "k", "v"], ["y"], score_mod=score_mod, prob_mod=prob_mod)
    )
    (want,) = reference(*qkv(), score=lambda s: s + bias, prob=lambda p: p * p)
    np.testing.assert_allclose(ws.fetch_blob("y"), want, rtol=1e-5, atol=1e-6)


def test_flex_attention_errors():
    with pytest.raises(OperatorError, match="not a multiple"):
        run_op("FlexAttention", qkv(hq=3, hkv=2))
    bad = graph([op_def("ReduceSum", ["s"], ["r"], keepdims=1)], ["s"], ["r"])
    with pytest.raises(OperatorError, match="score_mod returned shape"):
        run_op("FlexAttention", qkv(), score_mod=bad)
