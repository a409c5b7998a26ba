"""Gradient of FlexAttention, with modifier subgraphs differentiated by netbrew's autodiff."""

import numpy as np
import pytest

from netbrew.errors import OperatorError, SchemaError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.operators import GRADIENTS, GradientNotWritten
from netbrew.proto.netbrew_pb2 import NetDef
from netbrew.testing import check_gradient, rand, run_op


def graph(ops, inputs, outputs, name="mod"):
    net = NetDef(name=name, external_input=list(inputs), external_output=list(outputs))
    net.op.extend(ops)
    return net


def qkv(hq=4, hkv=2):
    return [rand(2, hq, 3, 4, seed=1), rand(2, hkv, 5, 4, seed=2), rand(2, hkv, 5, 3, seed=3)]


def const(name, value):
    return op_def("Constant", [], [name], value=np.asarray(value, np.float64))


MODS = {
    "square": graph([op_def("Mul", ["s", "s"], ["s2"])], ["s"], ["s2"]),
    "softcap": graph(
        [
            const("c", 2.0),
            op_def("Div", ["s", "c"], ["t"]),
            op_def("Tanh", ["t"], ["u"]),
            op_def("Mul", ["u", "c"], ["s2"]),
        ],
        ["s"],
        ["s2"],
    ),  # fmt: skip
    "identity": graph([], ["s"], ["s"]),
    "relu_plus": graph(
        [op_def("Relu", ["s"], ["r"]), op_def("Add", ["r", "s"], ["s2"])], ["s"], ["s2"]
    ),
}


@pytest.mark.parametrize("hq, hkv", [(4, 4), (4, 2), (4, 1)])
@pytest.mark.parametrize("scale", [None, 0.3])
def test_flex_attention_gradient_without_modifiers(hq, hkv, scale):
    attrs = {} if scale is None else {"scale": scale}
    check_gradient("FlexAttention", qkv(hq, hkv), **attrs)


@pytest.mark.parametrize("score_mod", [None, "square", "softcap", "identity", "relu_plus"])
@pytest.mark.parametrize("prob_mod", [None, "square", "identity"])
def test_flex_attention_gradient_with_modifiers(score_mod, prob_mod):
    attrs = {
        name: MODS[key] for name, key in (("score_mod", score_mod), ("prob_mod", prob_mod)) if key
    }
    check_gradient("FlexAttention", qkv(), **attrs)


def test_flex_attention_gradient_of_a_modifier_constant_in_its_input():
    """prob_mod ignores the probabilities: Y does not depend on Q and K at all."""
    uniform = graph([op_def("ConstantFill", ["p"], ["u"], value=0.2)], ["p"], ["u"])
    check_gradient("FlexAttention", qkv(), prob_mod=uniform)
    (grad_op,) = GRADIENTS["FlexAttention"](
        op_def("FlexAttention", ["q", "k", "v"], ["y"], prob_mod=uniform), ["dy"], ["dq"]
    )
    dq, dv = run_op("FlexAttentionGradient", [*qkv(), rand(2, 4, 3, 3)], outputs=["dq", "", "dv"],
                    prob_mod=uniform, prob_mod_grad=_arg(grad_op, "prob_mod_grad"))  # fmt: skip
    assert not dq.any() and dv.any()


def _arg(op, name):
    return next(a.n for a in op.arg if a.name == name)


def _net(values, score_mod):
    net = NetDef(name="flex")
    net.op.append(op_def("FlexAttention", ["q", "k", "v"], ["y"], score_mod=score_mod))
    ws = Workspace()
    for name, value in values.items():
        ws.feed_blob(name, value)
    return net, ws


def test_flex_attention_gradient_reads_outer_scope_as_constants():
    """A causal score_mod masks with a bias from the enclosing scope, as models write it."""
    bias = np.where(np.tril(np.ones((3, 5)), 1) > 0, 0.0, -np.inf)  # key 4: no row sees it
    causal = graph([op_def("Add", ["s", "bias"], ["s2"])], ["s"], ["s2"])
    q, k, v = (x.astype(np.float64) for x in qkv())
    values = {"q": q, "k": k, "v": v, "bias": bias}
    net, ws = _net(values, causal)
    grads = add_gradient_ops(net, ["y"], wrt=["q", "k", "v"])
    assert "bias" not in grads  # read by the modifier, so a constant
    ws.run_net_once(net)
    for blob, index in [("q", (0, 1, 2, 3)), ("k", (1, 0, 4, 2)), ("k", (0, 1, 1, 0))]:
        sums = []
        for step in (1e-5, -1e-5):
            moved = {**values, blob: values[blob].copy()}
            moved[blob][index] += step
            forward, fws = _net(moved, causal)
            fws.run_net_once(forward)
            sums.append(fws.fetch_blob("y").sum())
        numeric = (sums[0] - sums[1]) / 2e-5
        np.testing.assert_allclose(ws.fetch_blob(grads[blob])[index], numeric, rtol=1e-6)
    for blob in "kv":
        d = ws.fetch_blob(grads[blob])
        assert not d[:, :, 4].any() and d[:, :, 3].any()


def _if_modifier(flag, then_op="Neg"):
    """score_mod = If(flag, then: then_op(s), else: s * s); the branches capture s by name."""
    then = graph([op_def(then_op, ["s"], ["n"])], [], ["n"], name="then")
    square = graph([op_def("Mul", ["s", "s"], ["n"])], [], ["n"], name="square")
    flag_op = op_def("Constant", [], ["flag"], value=np.array(flag))
    control = op_def("If", ["flag"], ["s2"], then_branch=then, else_branch=square)
    return graph([flag_op, control], ["s"], ["s2"])


@pytest.mark.parametrize("flag", [True, False])
def test_flex_attention_gradient_through_control_flow_in_a_modifier(flag):
    check_gradient("FlexAttention", qkv(), score_mod=_if_modifier(flag))


def test_flex_attention_gradient_rejects_an_op_whose_gradient_is_not_written(monkeypatch):
    monkeypatch.setitem(GRADIENTS._items, "Neg", GradientNotWritten("not written in this test"))
    direct = graph([op_def("Neg", ["s"], ["s2"])], ["s"], ["s2"])
    op = op_def("FlexAttention", ["q", "k", "v"], ["y"], score_mod=direct)
    with pytest.raises(SchemaError, match="FlexAttention score_mod: cannot differentiate.*Neg"):
        GRADIENTS["FlexAttention"](op, ["dy"], ["dq", None, None])
    op = op_def("FlexAttention", ["q", "k", "v"], ["y"], score_mod=_if_modifier(True))
    with pytest.raises(SchemaError, match="FlexAttention score_mod: If then_branch: .*Neg"):
        GRADIENTS["FlexAttention"](op, ["dy"], ["dq", None, None])


def test_flex_attention_gradient_rejects_an_op_without_gradient():
    grad_only = graph([op_def("SoftmaxGradient", ["p", "p"], ["p2"])], ["p"], ["p2"])
    op = op_def("FlexAttention", ["q", "k", "v"], ["y"], prob_mod=grad_only)
    with pytest.raises(SchemaError, match="FlexAttention prob_mod: .*SoftmaxGradient"):
        GRADIENTS["FlexAttention"](op, ["dy"], ["dq", "dk", "dv"])


def test_flex_attention_gradient_needs_the_backward_subgraphs():
    with pytest.raises(OperatorError, match="'score_mod_grad' is missing"):
        run_op("FlexAttentionGradient", [*qkv(), rand(2, 4, 3, 3)], outputs=3,
               score_mod=MODS["square"])  # fmt: skip


def test_flex_attention_gradient_half_precision():
    q, k, v = qkv()
    dy = rand(2, 4, 3, 3, seed=7)
    wide = run_op("FlexAttentionGradient", [q, k, v, dy], outputs=3)
    half = run_op("FlexAttentionGradient", [x.astype(np.float16) for x in (q, k, v, dy)],
                  outputs=3)  # fmt: skip
    for h, w in zip(half, wide):
        assert h.dtype == np.float16
        np.testing.assert_allclose(h, w, rtol=2e-2, atol=3e-3)
