"""Gradient of FlexAttention, its modifier subgraphs differentiated by netbrew's own autodiff.

    FlexAttention(Q, K, V) -> Y     (attributes score_mod, prob_mod: subgraphs x -> y)
    backward: FlexAttentionGradient(Q, K, V, dY) -> (dQ, dK, dV)

At gradient-building time each modifier m gets a backward subgraph (x, dy) -> dx, the
vector-Jacobian product of m at x: a copy of m followed by add_gradient_ops(y, wrt=[x]) with
the seed of ones replaced by dy, so dx = (dm/dx)^T dy for whatever ops m holds. A modifier
whose output does not depend on its input gets a subgraph of zeros (ops with no gradient in
math, NoGradient, pass none, as autodiff has them do). The gradient op reruns the forward
(modifiers included), then goes back through prob_mod, the softmax and score_mod.

Blobs that a modifier reads from the enclosing scope are not inputs of FlexAttention, so
they are constants here: they get no gradient through it (a trained score bias belongs in
Attention's float attn_mask, which gets one). Control flow inside a modifier (If, Loop,
Scan, whose subgraphs may capture the modifier's input by name) is differentiated through
its own gradient ops. A modifier holding an op whose gradient is not written
(gradient_not_written; an op with subgraphs counts as reading the modifier's input) or not
registered makes the maker raise SchemaError naming FlexAttention, the modifier and the op,
instead of silently passing no gradient.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.netdef.net import op_def
from netbrew.operators.attention_flex import flex_softmax, flex_state, modify
from netbrew.operators.attention_grad import group_sum
from netbrew.operators.control_flow import run_subgraph
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.schema import GRADIENTS, GradientNotWritten, gradient, kernel, schema
from netbrew.proto.netbrew_pb2 import NetDef

MODIFIERS = ("score_mod", "prob_mod")

schema(
    "FlexAttentionGradient",
    inputs=["Q", "K", "V", "dY"],
    outputs=["dQ", "dK", "dV"],
    attrs={
        "scale": None,
        "score_mod": None,
        "prob_mod": None,
        "softmax_precision": None,
        "score_mod_grad": None,
        "prob_mod_grad": None,
    },
    dtypes="float",
    onnx=False,
    output_mask=True,
    wants_scope=True,
    doc="with S the scores, P = softmax(score_mod(S)), P' = prob_mod(P) and Kr/Vr repeated "
    "to Q's heads: dV = P'^T dY, dP = prob_mod_grad(P, dY Vr^T), dM = P * (dP - sum(dP * P, "
    "keys)), dS = score_mod_grad(S, dM), dQ = scale dS Kr, dK = scale dS^T Q, dK and dV "
    "summed over each KV head's group; *_grad: subgraphs (x, dy) -> dx built by the maker, "
    "required when the modifier is set; FlexAttention's other attributes and defaults",
)


def _on_path(net: NetDef, source: str, sink: str) -> list:
    """The ops of `net` that read a value computed from `source` and feed `sink`. An op with
    subgraphs (If, Loop, Scan) counts as reading it: its branches may capture it by name."""
    reached, from_source = {source}, []
    for op in net.op:
        nested = any(a.HasField("n") or len(a.nets) for a in op.arg)
        if nested or any(b in reached for b in op.input):
            reached.update(op.output)
            from_source.append(op)
    needed, path = {sink}, []
    for op in reversed(from_source):
        if any(b in needed for b in op.output):
            needed.update(op.input)
            path.append(op)
    return path[::-1]


def _check_differentiable(net: NetDef, source: str, sink: str, what: str) -> None:
    for op in _on_path(net, source, sink):
        maker = GRADIENTS.get(op.type)
        if isinstance(maker, GradientNotWritten):
            raise SchemaError(
                f"FlexAttention {what}: cannot differentiate through its {op.type} op "
                f"({maker.reason}); rewrite the modifier without it, or cut the gradient "
                "with StopGradient before FlexAttention"
            )


def _fresh(net: NetDef, base: str) -> str:
    """A blob name that `net` does not use."""
    used = set(net.external_input) | {b for op in net.op for b in (*op.input, *op.output)}
    name = base
    while name in used:
        name += "_"
    return name


def _seed_with(back: NetDef, first_new: int, y: str, dy: str) -> None:
    """Makes the gradient of `y` the input `dy` instead of autodiff's seed of ones."""
    for index in range(first_new, len(back.op)):
        op = back.op[index]
        if op.type == "ConstantFill" and list(op.input) == [y]:
            back.op[index].CopyFrom(op_def("Identity", [dy], list(op.output)))
            back.op[index].is_gradient_op = True
            return
    raise SchemaError(f"autodiff gave {y!r} no seed op to replace")  # autodiff changed


def vjp_net(net: NetDef, what: str) -> NetDef:
    """The subgraph (x, dy) -> (dmodifier/dx)^T dy of a one-input, one-output modifier."""
    if len(net.external_input) != 1 or len(net.external_output) != 1:
        raise SchemaError(
            f"FlexAttention {what} must take one input and give one output, not "
            f"{len(net.external_input)} and {len(net.external_output)}"
        )
    x, y = net.external_input[0], net.external_output[0]
    _check_differentiable(net, x, y, what)
    back = NetDef()
    back.CopyFrom(net)
    dy = _fresh(net, f"{y}_vjp_seed")
    try:
        grads = add_gradient_ops(back, [y], wrt=[x])
    except SchemaError as e:
        raise SchemaError(f"FlexAttention {what}: {e}") from None
    if x in grads:
        _seed_with(back, len(net.op), y, dy)
    else:  # the output is constant in x: the product is zero
        del back.op[:]
        grads = {x: _fresh(net, f"{x}_zero_grad")}
        back.op.append(op_def("ConstantFill", [x], [grads[x]], value=0.0))
    back.name = f"{net.name or what}_vjp"
    back.external_input[:] = [x, dy]
    back.external_output[:] = [grads[x]]
    return back


@gradient("FlexAttention")
def flex_attention_grad(op, g_out, g_in):
    wanted = [g or "" for g in g_in[:3]]
    if not any(wanted):
        return []
    attrs = copy_attrs(op)
    for name in MODIFIERS:
        if attrs.get(name) is not None:
            attrs[f"{name}_grad"] = vjp_net(attrs[name], name)
    return [op_def("FlexAttentionGradient", [*op.input[:3], g_out[0]], wanted, **attrs)]


def _vjp(grad_net, x: np.ndarray, dy: np.ndarray, scope, what: str) -> np.ndarray:
    """Runs a modifier's backward subgraph; its output must have x's shape."""
    if grad_net is None:
        raise SchemaError(f"argument '{what}_grad' is missing, but {what} is set")
    (dx,) = run_subgraph(grad_net, [x, dy.astype(x.dtype, copy=False)], scope, f"{what}_grad")
    dx = np.asarray(dx)
    if dx.shape != x.shape:
        raise ShapeError(f"{what}_grad returned shape {list(dx.shape)}, expected {list(x.shape)}")
    return dx.astype(x.dtype, copy=False)


@kernel("FlexAttentionGradient")
def flex_attention_gradient_cpu(
    q, k, v, dy, *, scale, score_mod, prob_mod, softmax_precision, score_mod_grad,
    prob_mod_grad, scope, output_mask,
) -> tuple[np.ndarray | None, ...]:  # fmt: skip
    st = flex_state(q, k, v, scale, softmax_precision)
    wide = np.promote_types(st.compute, np.float32)
    if dy.shape != st.scores.shape[:3] + v.shape[3:]:
        want = [*st.scores.shape[:3], v.shape[3]]
        raise ShapeError(f"input 'dY' has shape {list(dy.shape)}, expected {want}")
    modified = st.scores if score_mod is None else modify(score_mod, st.scores, scope, "score_mod")
    probs = flex_softmax(modified)
    final = probs if prob_mod is None else modify(prob_mod, probs, scope, "prob_mod")
    g = dy.astype(wide)
    d_final = g @ np.swapaxes(st.v.astype(wide), 2, 3)
    d_probs = (
        d_final if prob_mod is None else _vjp(prob_mod_grad, probs, d_final, scope, "prob_mod")
    )
    p, d_p = probs.astype(wide), d_probs.astype(wide)
    d_mod = p * (d_p - np.sum(d_p * p, axis=-1, keepdims=True))
    d_s = d_mod if score_mod is None else _vjp(score_mod_grad, st.scores, d_mod, scope, "score_mod")
    d_s, root = d_s.astype(wide, copy=False), wide.type(st.root)
    dq = dk = dv = None
    if output_mask[0]:
        dq = ((d_s @ (st.k.astype(wide) * root)) * root).astype(q.dtype)
    if len(output_mask) > 1 and output_mask[1]:
        dk_rep = (np.swapaxes(d_s, 2, 3) @ (q.astype(wide) * root)) * root
        dk = group_sum(dk_rep, k.shape[1]).astype(k.dtype)
    if len(output_mask) > 2 and output_mask[2]:
        dv = group_sum(np.swapaxes(final.astype(wide), 2, 3) @ g, k.shape[1]).astype(v.dtype)
    return dq, dk, dv
