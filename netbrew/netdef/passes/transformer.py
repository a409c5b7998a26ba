"""Transformer-layer passes: the patterns an exported BERT-style encoder layer is written in,
rewritten into fewer ops for the CPU (netbrew.operators.fused_transformer).

    fold_attention_scale   MatMul(Q, K) / c before the Softmax: 1/c folded into the weights
                           Q (or K) is computed from
    fuse_gelu              x / sqrt 2 -> Erf -> + 1 -> * x -> * 0.5   becomes   Gelu(x)
    fuse_matmul_bias       MatMul(A, W) -> Add(b) (-> Gelu)   becomes   MatMulBias(A, W, b)
    fuse_skip_layer_norm   Add(x, skip) -> LayerNormalization   becomes
                           SkipLayerNormalization(x, skip, scale, bias)

`fuse_transformer` runs them in that order (each feeds the next). On the BERT-base layer of
benchmarks/zoo.py the net `netbrew bench` runs goes from 25 ops to 18, and a run from 13.2
to 12.0 ms (medians, interleaved in one process; 0.90x, mins 0.91x). Leaving one pass out
at a time (60 interleaved runs each, 2 shared cores): fuse_gelu is worth 0.6 ms (with it,
the GELU joins its MatMul's bias pass), fuse_matmul_bias 0.35 ms, fuse_skip_layer_norm
0.15 ms; fold_attention_scale's one elementwise pass over (12, 128, 128), 0.05 ms, is
below the noise. Each leaves an op alone unless every value it removes has the one reader the
pattern names and is not a net output, and the fused op's inputs keep their values until
it runs; CPU ops only (the fused ops have no CUDA kernel).
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.netdef.args import args_dict, make_arg
from netbrew.netdef.passes._graph import can_write_early, copy_net, readers, sole_reader
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef

_SHAPE_OPS = ("Transpose", "Reshape", "Identity", "Squeeze", "Unsqueeze", "Flatten")
"""Ops that only move values: a scalar factor passes through them unchanged."""


class _Graph:
    """Def-use facts of one net for the matchers: readers, net outputs, written names,
    the parameters, and the writer of each op input's version."""

    def __init__(self, net: NetDef, params: dict | None):
        self.net = net
        self.params = params or {}
        self.used, self.live_out = readers(net)
        self.written = {name for op in net.op for name in op.output if name}
        self.writer: list[dict[str, tuple[int, int]]] = []
        last: dict[str, tuple[int, int]] = {}
        for i, op in enumerate(net.op):
            self.writer.append({name: last[name] for name in op.input if name in last})
            last.update((name, (i, k)) for k, name in enumerate(op.output) if name)

    def only_reader(self, i: int) -> int | None:
        """The one op reading op i's single output (not a net output), if it is a CPU op."""
        j = sole_reader(self.net, self.used, self.live_out, i)
        if j is None or not on_cpu(self.net.op[j]) or self.net.op[j].control_input:
            return None
        return j

    def producer(self, j: int, name: str) -> int | None:
        """The CPU op that wrote the version of `name` op j reads, if op j alone reads that
        output (once) and it is not a net output."""
        found = self.writer[j].get(name)
        if found is None or found in self.live_out or self.used.get(found) != [j]:
            return None
        i = found[0]
        ok = on_cpu(self.net.op[i]) and not self.net.op[j].control_input
        return i if ok and list(self.net.op[j].input).count(name) == 1 else None

    def constant(self, name: str) -> np.ndarray | None:
        """A parameter's value when no op writes it, else None."""
        if not name or name in self.written or name not in self.params:
            return None
        return np.asarray(self.params[name])

    def scalar(self, name: str) -> float | None:
        """A float constant of one element and rank 0 or 1, which no operand's broadcast
        against it can grow (a [1, 1, 1] one would lift a rank-2 operand to rank 3)."""
        value = self.constant(name)
        if value is None or value.size != 1 or value.ndim > 1 or value.dtype.kind != "f":
            return None
        return float(value.reshape(()))

    def untouched(self, names, first: int, last: int) -> bool:
        """Whether no op from `first` up to (not including) `last` writes any of `names`."""
        return not any(set(names) & set(op.output) for op in self.net.op[first:last])


def on_cpu(op: OperatorDef) -> bool:
    return op.device_option.device_type == 0


def _fuse(net: NetDef, params: dict | None, match) -> NetDef:
    """Replaces each pattern `match(graph, i)` finds at a CPU op i, (op indices, new op),
    by the new op, placed where the pattern's last op ran; a pattern that shares an op
    with one already taken is skipped."""
    g = _Graph(net, params)
    fused: dict[int, OperatorDef] = {}
    dropped: set[int] = set()
    for i, op in enumerate(net.op):
        found = match(g, i) if on_cpu(op) else None
        if found is None or any(s in dropped or s in fused for s in found[0]):
            continue
        steps, new = found
        fused[max(steps)] = new
        dropped.update(s for s in steps if s != max(steps))
    return copy_net(net, [fused.get(i, op) for i, op in enumerate(net.op) if i not in dropped])


def _new_op(op_type: str, inputs, output: str, like: OperatorDef, **attrs) -> OperatorDef:
    """An op `op_type` writing `output`, with the name and device of `like` (an op of the
    pattern it replaces)."""
    new = OperatorDef(type=op_type, input=list(inputs), output=[output], name=like.name)
    new.device_option.CopyFrom(like.device_option)
    new.arg.extend(make_arg(k, v) for k, v in attrs.items())
    return new


def _other(op: OperatorDef, name: str) -> str | None:
    """The other input of a two-input op that reads `name` once, else None."""
    if len(op.input) != 2 or list(op.input).count(name) != 1 or args_dict(op.arg):
        return None
    return op.input[1] if op.input[0] == name else op.input[0]


def _near(value: float | None, target: float) -> bool:
    return value is not None and math.isclose(value, target, rel_tol=1e-6)


def fuse_gelu(net: NetDef, params: dict | None = None) -> NetDef:
    """Rewrites the exact GELU written out, as torch.onnx exports nn.GELU() at opsets before
    20, `d = Div(x, sqrt 2); e = Erf(d); a = Add(e, 1); m = Mul(x, a); y = Mul(m, 0.5)`, as
    `y = Gelu(x)`. Also taken: Mul(x, 1 / sqrt 2) for the Div, and the product in the other
    groupings, `Mul(Mul(x, 0.5), a)` and `Mul(x, Mul(a, 0.5))`; operands of Add and Mul in
    either order. The constants are scalar params that no op writes.

    Args:
        net: the NetDef; not modified.
        params: parameter values by name (the constants among them).

    Returns:
        A new NetDef.
    """
    return _fuse(net, params, _gelu_match)


def _gelu_match(g: _Graph, k: int):
    """(op indices, Gelu op) for the GELU around Erf op k, else None."""
    op = g.net.op[k]
    if op.type != "Erf" or len(op.input) != 1:
        return None
    match = _gelu_chain(g, k)
    if match is None:
        return None
    x, steps = match
    if not g.untouched([x], min(steps), max(steps)):
        return None
    last = g.net.op[max(steps)]
    return steps, _new_op("Gelu", [x], last.output[0], last)


def _gelu_chain(g: _Graph, k: int) -> tuple[str, list[int]] | None:
    """(x, op indices) of the GELU around Erf op k, else None."""
    net = g.net
    d = g.producer(k, net.op[k].input[0])
    if d is None:
        return None
    x = _gelu_input(g, net.op[d])
    add = g.only_reader(k)
    if x is None or add is None or net.op[add].type != "Add":
        return None
    a = net.op[add].output[0]
    if not _near(g.scalar(_other(net.op[add], net.op[k].output[0]) or ""), 1.0):
        return None
    r1 = g.only_reader(add)
    if r1 is None or net.op[r1].type != "Mul" or _other(net.op[r1], a) is None:
        return None
    u = _other(net.op[r1], a)
    steps = [d, k, add, r1]
    if u == x or _near(g.scalar(u), 0.5):  # (x * a) * 0.5 or (a * 0.5) * x
        r2 = g.only_reader(r1)
        if r2 is None or net.op[r2].type != "Mul":
            return None
        v = _other(net.op[r2], net.op[r1].output[0])
        if not (v == x and u != x or u == x and _near(g.scalar(v or ""), 0.5)):
            return None
        return x, [*steps, r2]
    h = g.producer(r1, u)  # (x * 0.5) * a
    if h is None or net.op[h].type != "Mul" or _other(net.op[h], x) is None:
        return None
    if not _near(g.scalar(_other(net.op[h], x)), 0.5) or not g.untouched([x], h, d):
        return None
    return x, [h, *steps]


def _gelu_input(g: _Graph, op: OperatorDef) -> str | None:
    """x, when `op` is Div(x, sqrt 2) or Mul(x, 1 / sqrt 2) (either order)."""
    if op.type == "Div" and len(op.input) == 2 and not args_dict(op.arg):
        return op.input[0] if _near(g.scalar(op.input[1]), math.sqrt(2.0)) else None
    if op.type == "Mul" and len(op.input) == 2 and not args_dict(op.arg):
        for x, c in (op.input, op.input[::-1]):
            if _near(g.scalar(c), 1.0 / math.sqrt(2.0)):
                return x
    return None


def fuse_matmul_bias(net: NetDef, params: dict | None = None) -> NetDef:
    """Rewrites `t = MatMul(a, w); y = Add(t, b)` (or Add(b, t)) as
    `y = MatMulBias(a, w, b)`, and with an exact Gelu reading y, `z = Gelu(y)`, as
    `z = MatMulBias(a, w, b, activation="Gelu")`.

    w and b are params no op writes; b is a row, shaped (N,) or (1, ..., 1, N) for w's N
    output columns, so the Add only adds it to each row of the product. The fused op runs
    where the last op of the pattern ran, so it applies when no op in between writes a or w.

    Args:
        net: the NetDef; not modified.
        params: parameter values by name (the weights and bias among them).

    Returns:
        A new NetDef.
    """
    return _fuse(net, params, _matmul_bias_match)


def _matmul_bias_match(g: _Graph, i: int):
    """(op indices, MatMulBias op) for MatMul op i and the Add (and Gelu) after it."""
    net, op = g.net, g.net.op[i]
    if op.type != "MatMul" or len(op.input) != 2:
        return None
    w = g.constant(op.input[1])
    j = g.only_reader(i)
    if w is None or w.ndim < 2 or j is None or net.op[j].type != "Add":
        return None
    bias = _other(net.op[j], op.output[0])
    b = g.constant(bias or "")
    if b is None or b.ndim == 0 or b.shape[-1] != w.shape[-1] or b.size != w.shape[-1]:
        return None
    steps, attrs = [i, j], {}
    k = g.only_reader(j)
    if k is not None and _is_exact_gelu(net.op[k], net.op[j].output[0]):
        steps.append(k)
        attrs["activation"] = "Gelu"
    if not g.untouched(op.input, i + 1, steps[-1]):
        return None
    out = net.op[steps[-1]].output[0]
    return steps, _new_op("MatMulBias", [*op.input, bias], out, op, **attrs)


def _is_exact_gelu(op: OperatorDef, x: str) -> bool:
    return (
        op.type == "Gelu"
        and list(op.input) == [x]
        and args_dict(op.arg).get("approximate", "none") == "none"
    )


def fuse_skip_layer_norm(net: NetDef, params: dict | None = None) -> NetDef:
    """Rewrites `s = Add(x, skip); y = LayerNormalization(s, scale, bias)` as
    `y = SkipLayerNormalization(x, skip, scale, bias)` (the residual connection before a
    post-LayerNorm transformer block), when the LayerNormalization is the sum's only reader,
    reads it only as X and writes Y alone (no Mean, InvStdDev), and no op between them
    writes x or skip.

    Args:
        net: the NetDef; not modified.
        params: unused (the passes share one signature).

    Returns:
        A new NetDef.
    """
    return _fuse(net, params, _skip_layer_norm_match)


def _skip_layer_norm_match(g: _Graph, i: int):
    """(op indices, SkipLayerNormalization op) for Add op i and the LayerNormalization
    after it, else None."""
    op = g.net.op[i]
    if op.type != "Add" or len(op.input) != 2 or args_dict(op.arg):
        return None
    j = g.only_reader(i)
    if j is None or g.net.op[j].type != "LayerNormalization":
        return None
    norm = g.net.op[j]
    if list(norm.input).count(op.output[0]) != 1 or norm.input[0] != op.output[0]:
        return None
    if any(norm.output[1:]) or not g.untouched(op.input, i + 1, j):
        return None
    new = _new_op("SkipLayerNormalization", [*op.input, *norm.input[1:]], norm.output[0], norm)
    new.arg.extend(norm.arg)
    return [i, j], new


def fold_attention_scale(net: NetDef, params: dict) -> tuple[NetDef, dict]:
    """Folds the attention scale, `s = MatMul(q, k); y = Div(s, c)` (or Mul(s, c)) with c a
    scalar param, into the weights one operand is computed from, and drops the Div: the
    MatMul writes y.

    From an operand the pass walks back through ops that commute with the factor until it
    reaches a param, which it scales: Transpose, Reshape and the other shape-only ops;
    Add(v, bias) (scaling bias, going on through v); MatMul(v, W) (scaling W); and Split
    along the last axis, after which only the columns of the split output the walk came
    from are scaled (BERT's fused qkv projection: MatMul, Add, Split, Reshape, Transpose).
    Each value on the way must have one reader and not be a net output. Scaled params are
    new ones (`<name>__scaled<n>`); the old stay for their other readers.

    Args:
        net: the NetDef; not modified.
        params: parameter values by name; not modified.

    Returns:
        (new NetDef, new params).
    """
    g = _Graph(net, params)
    out = NetDef()
    out.CopyFrom(net)
    new_params = dict(params)
    dropped: set[int] = set()
    for j, op in enumerate(net.op):
        if op.type not in ("Div", "Mul") or not on_cpu(op) or len(op.input) != 2:
            continue
        i = g.producer(j, op.input[0])
        c = g.scalar(op.input[1])
        if i is None or c is None or c == 0.0 or args_dict(op.arg):
            continue
        if net.op[i].type != "MatMul" or not on_cpu(net.op[i]) or op.input[0] == op.input[1]:
            continue
        if not can_write_early(net, i, j, op.output[0]):
            continue
        factor = 1.0 / c if op.type == "Div" else c
        for operand in (1, 0):
            edits = _scale_plan(g, i, operand, None)
            if edits is not None:
                _apply(out, new_params, edits, factor)
                out.op[i].output[0] = op.output[0]
                dropped.add(j)
                break
    return copy_net(out, [o for n, o in enumerate(out.op) if n not in dropped]), new_params


def _scale_plan(g: _Graph, j: int, slot: int, columns: tuple[int, int] | None):
    """The (op index, input slot, columns) of the params to scale so that op j's input
    `slot` is scaled, columns (lo, hi) of the last axis only when given; None when the
    walk fails."""
    net = g.net
    name = net.op[j].input[slot]
    value = g.constant(name)
    if value is not None:
        if value.dtype.kind != "f" or (columns and value.ndim == 0):
            return None
        if columns and value.shape[-1] < columns[1]:
            return None
        return [(j, slot, columns)]
    i = g.producer(j, name)
    if i is None:
        return None
    op = net.op[i]
    if op.type in _SHAPE_OPS and columns is None:
        return _scale_plan(g, i, 0, None)
    if op.type == "Add" and _other(op, op.input[0]) is not None:
        for v, b in ((0, 1), (1, 0)):
            bias = g.constant(op.input[b])
            if bias is None or g.constant(op.input[v]) is not None:
                continue
            if columns and (bias.ndim == 0 or bias.shape[-1] == 1):
                return None  # a broadcast bias cannot be scaled in part
            rest = _scale_plan(g, i, v, columns)
            return None if rest is None else [(i, b, columns), *rest]
        return None
    if op.type == "MatMul" and len(op.input) == 2:
        w = g.constant(op.input[1])
        if w is not None and w.ndim >= 2:
            return _scale_plan(g, i, 1, columns)
        return None if columns else _scale_plan(g, i, 0, None)
    if op.type == "Split" and columns is None:
        span = _split_columns(g, i, name)
        return None if span is None else _scale_plan(g, i, 0, span)
    return None


def _split_columns(g: _Graph, i: int, name: str) -> tuple[int, int] | None:
    """(lo, hi) of the last axis that Split op i writes to output `name`, when it splits
    along the last axis into sizes it states (its split input or attribute)."""
    op = g.net.op[i]
    attrs = args_dict(op.arg)
    if set(attrs) - {"axis", "split"} or list(op.output).count(name) != 1:
        return None
    rank = _rank(g.net, op.input[0])
    axis = attrs.get("axis", 0)
    if not (axis == -1 or rank is not None and axis == rank - 1):
        return None
    sizes = attrs.get("split")
    if len(op.input) > 1 and op.input[1]:
        found = g.constant(op.input[1])
        sizes = None if found is None else [int(s) for s in found.reshape(-1)]
    if sizes is None or len(sizes) != len(op.output):
        return None
    k = list(op.output).index(name)
    return sum(sizes[:k]), sum(sizes[: k + 1])


def _rank(net: NetDef, name: str) -> int | None:
    for info in net.value_info:
        if info.name == name:
            return len(info.dims)
    return None


def _apply(net: NetDef, params: dict, edits, factor: float) -> None:
    """Scales the params the edits name (columns (lo, hi) of the last axis, or all) into new
    params, and points the ops' inputs at them."""
    for i, slot, columns in edits:
        old = net.op[i].input[slot]
        value = np.array(params[old], copy=True)
        part = value if columns is None else value[..., columns[0] : columns[1]]
        part *= np.asarray(factor, dtype=value.dtype)
        n = 0
        while f"{old}__scaled{n}" in params:
            n += 1
        params[f"{old}__scaled{n}"] = value
        net.op[i].input[slot] = f"{old}__scaled{n}"
        if old in net.external_input:
            net.external_input.append(f"{old}__scaled{n}")


def fuse_transformer(net: NetDef, params: dict) -> tuple[NetDef, dict]:
    """fold_attention_scale, fuse_gelu, fuse_matmul_bias, fuse_skip_layer_norm, in turn.

    Returns:
        (new NetDef, new params); neither input is modified.
    """
    net, params = fold_attention_scale(net, params)
    net = fuse_gelu(net, params)
    net = fuse_matmul_bias(net, params)
    return fuse_skip_layer_norm(net, params), params
