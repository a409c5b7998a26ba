"""Reverse-mode autodiff on NetDefs, as Caffe2's AddGradientOperators.

Gradients are ordinary ops appended to the net, so a training net is just a bigger
NetDef. Each op's gradient maker (registered with `@gradient`) writes the gradients of
its inputs; where a blob feeds several ops its partial gradients are summed. Blobs
written more than once (in place, or reassigned) are tracked by version, so each
version gets its own gradient.

    grads = add_gradient_ops(net, ["loss"], wrt=["fc_w", "fc_b"])
    grads["fc_w"]  # -> "fc_w_grad"

Ops with subgraphs (If, Loop, Scan, SequenceMap) also read, by name, blobs of the scope
they run in (`captured_reads`). Autodiff counts those as inputs after the declared ones,
so a path from a parameter into a branch is seen; a maker registered with
`@gradient(..., captures=True)` gets one more g_in entry for each and writes their
gradients, the others get g_in for the declared inputs only (captured blobs are then
constants to that op).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from netbrew.errors import SchemaError
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef

Version = tuple[str, int]


def grad_name(blob: str) -> str:
    """The gradient blob of `blob`: `<blob>_grad`."""
    return f"{blob}_grad"


def subgraph_reads(net: NetDef) -> list[str]:
    """The blobs that `net`, run as a subgraph, reads from its enclosing scope, in order.

    A blob counts when an op (or a nested subgraph, or the output list) reads it before
    any op of `net` writes it and it is not one of `net`'s formal inputs."""
    local, found = set(net.external_input), {}
    for op in net.op:
        for blob in (*op.input, *captured_reads(op)):
            if blob and blob not in local:
                found.setdefault(blob, None)
        local.update(op.output)
    for blob in net.external_output:
        if blob and blob not in local:
            found.setdefault(blob, None)
    return list(found)


def captured_reads(op: OperatorDef) -> list[str]:
    """The outer-scope blobs that the subgraphs of `op` (NetDef arguments) read by name,
    in order of first read; empty for an op without subgraphs."""
    found: dict[str, None] = {}
    for arg in op.arg:
        nets = [arg.n] if arg.HasField("n") else list(arg.nets)
        for net in nets:
            found.update(dict.fromkeys(subgraph_reads(net)))
    return list(found)


def _versions(net: NetDef) -> tuple[list[list[Version]], list[list[Version]], dict[str, int]]:
    """SSA versions of each op's inputs (declared, then captured: see captured_reads) and
    outputs, plus each blob's final version."""
    current: dict[str, int] = defaultdict(int)
    ins, outs = [], []
    for op in net.op:
        ins.append([(b, current[b]) for b in (*op.input, *captured_reads(op))])
        row = []
        for b in op.output:
            current[b] += 1
            row.append((b, current[b]))
        outs.append(row)
    return ins, outs, dict(current)


def _needed(net: NetDef, ins, outs, losses: set[Version], wrt: set[str] | None) -> set[Version]:
    """Versions on a path from a `wrt` blob (or anything, if None) to a loss."""
    reaches_loss = set(losses)
    for i in reversed(range(len(net.op))):
        if any(v in reaches_loss for v in outs[i]):
            reaches_loss.update(v for v in ins[i] if v[0])
    if wrt is None:
        return reaches_loss
    from_wrt = {(b, 0) for b in wrt}
    for i in range(len(net.op)):
        if any(v in from_wrt for v in ins[i]):
            from_wrt.update(outs[i])
    return reaches_loss & from_wrt


def add_gradient_ops(
    net,
    losses: Sequence[str],
    *,
    wrt: Iterable[str] | None = None,
    seeds: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Appends the backward pass of `net` for the sum of `losses`.

    Args:
        net: a Net or NetDef, edited in place.
        losses: scalar (or any-shaped) blobs; each is seeded with a gradient of ones.
        wrt: the blobs whose gradients are wanted (e.g. parameters). Only ops between
            them and the losses get gradient ops. None means every blob upstream.
        seeds: loss -> a blob holding that loss's gradient, used instead of ones (for a
            vector-Jacobian product, as the backward subgraphs of control flow need).

    Returns:
        Map from each blob to its gradient blob (the gradient of the blob's value as first
        read, which for parameters is the one the optimizer wants).

    Raises:
        SchemaError: some ops on the path from a wanted blob to a loss have no gradient
            built (none registered, or marked gradient_not_written); all are listed. Ops
            with no gradient in math (NoGradient: Shape, ArgMax, comparisons) stop the
            walk without an error.
    """
    from netbrew.operators import GRADIENTS, GradientNotWritten, NoGradient

    proto: NetDef = net.proto() if hasattr(net, "proto") else net
    forward = list(proto.op)
    ins, outs, final = _versions(proto)
    loss_versions = {(b, final.get(b, 0)) for b in losses}
    needed = _needed(proto, ins, outs, loss_versions, set(wrt) if wrt is not None else None)

    partial: dict[Version, list[str]] = defaultdict(list)
    names: dict[Version, str] = {}
    new_ops: list[OperatorDef] = []

    seeds = dict(seeds or {})
    if not set(seeds) <= set(losses):
        stray = sorted(set(seeds) - set(losses))
        raise ValueError(f"seeds name blobs that are not losses: {stray}; losses: {losses}")
    for loss, version in sorted(loss_versions):
        if loss in seeds:
            partial[(loss, version)].append(seeds[loss])
            continue
        seed = OperatorDef(type="ConstantFill", input=[loss], output=[grad_name(loss)])
        seed.arg.add(name="value", f=1.0)
        new_ops.append(seed)
        partial[(loss, version)].append(grad_name(loss))

    def finalize(v: Version) -> str | None:
        parts = partial.pop(v, [])
        if not parts:
            return None
        if len(parts) > 1:
            new_ops.append(OperatorDef(type="Sum", input=parts, output=[grad_name(v[0])]))
        names[v] = grad_name(v[0]) if len(parts) > 1 else parts[0]
        return names[v]

    missing: list[str] = []
    for index in reversed(range(len(forward))):
        op = forward[index]
        g_out = [finalize(v) for v in outs[index]]
        want = [v if v[0] and v in needed else None for v in ins[index]]
        if all(g is None for g in g_out) or all(w is None for w in want):
            continue
        maker = GRADIENTS.get(op.type)
        if isinstance(maker, NoGradient):
            continue
        if maker is None or isinstance(maker, GradientNotWritten):
            why = f" ({maker.reason})" if maker is not None else ""
            missing.append(f"op #{index} {op.type}" + (f" {op.name!r}" if op.name else "") + why)
            for v in want:  # keep walking as if it had one, to report every such op at once
                if v is not None:
                    partial[v].append(f"<missing {grad_name(v[0])}>")
            continue
        if not getattr(maker, "captures", False):
            want = want[: len(op.input)]  # captured blobs are constants to this op
            if all(w is None for w in want):
                continue
        g_in = []
        for v in want:
            g_in.append(None if v is None else _fresh_name(v, partial, set(g_out) | set(g_in)))
        grad_ops = maker(op, g_out, g_in)
        _check_reads(grad_ops, index, op, maker, ins[index], outs[index], final)
        new_ops.extend(grad_ops)
        written = {o for grad_op in grad_ops for o in grad_op.output}
        for v, name in zip(want, g_in):
            if name is not None and name in written:  # makers skip int inputs (labels...)
                partial[v].append(name)
    if missing:
        raise SchemaError(
            f"net {proto.name!r}: {len(missing)} op(s) on the path to the loss have no "
            f"gradient: {', '.join(missing)}. Register a gradient, or cut the path with "
            "StopGradient."
        )
    for v in list(partial):
        finalize(v)
    for grad_op in new_ops:
        grad_op.is_gradient_op = True
    proto.op.extend(new_ops)
    result: dict[str, str] = {}
    for (blob, _), name in sorted(names.items(), key=lambda item: -item[0][1]):
        result[blob] = name  # the earliest version wins
    return result


def _fresh_name(v: Version, partial: dict[Version, list[str]], taken: set) -> str:
    """A name for a new partial gradient of `v`: `<blob>_grad` when free, else numbered.

    It must not clash with a partial still waiting to be summed, nor with a gradient the
    same maker reads (an op written in place has one blob as input and output)."""
    live = {name for names in partial.values() for name in names} | taken
    k = len(partial.get(v, ()))
    while True:
        name = grad_name(v[0]) if k == 0 else f"{grad_name(v[0])}_{k}"
        if name not in live:
            return name
        k += 1


def _check_reads(grad_ops, index, op, maker, ins, outs, final) -> None:
    """A gradient op that reads a forward blob overwritten later would see the wrong value."""
    wanted = {b: ver for b, ver in ins} | {b: ver for b, ver in outs}
    in_place = set(op.input) & set(op.output)
    for grad_op in grad_ops:
        # a gradient op with subgraphs (IfGradient...) reads forward blobs by name too
        for blob in (*grad_op.input, *captured_reads(grad_op)):
            if blob in in_place and not getattr(maker, "inplace_safe", False):
                raise SchemaError(
                    f"op #{index} {op.type}: its gradient needs input {blob!r}, which the op "
                    "overwrites in place; write the output to another blob"
                )
            if blob in wanted and final.get(blob, 0) != wanted[blob]:
                raise SchemaError(
                    f"op #{index} {op.type}: its gradient reads {blob!r} as this op saw it, "
                    "but a later op overwrites it; give that later output another name"
                )
