"""Elementwise-chain fusion: a run of elementwise ops, each the only reader of the one
before, becomes one FusedElementwise op evaluated in a single buffer."""

from __future__ import annotations

from collections import Counter

from netbrew.netdef.passes._graph import copy_net, readers
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef


def _on_cpu(op: OperatorDef, net: NetDef) -> bool:
    option = op.device_option if op.HasField("device_option") else net.device_option
    return option.device_type == 0  # FusedElementwise has a CPU kernel only


def _next_step(net: NetDef, used, live_out, i: int, fusible) -> int | None:
    """The op that may follow op i in a chain: op i's output is not a net output and is
    read by that op alone (in any of its slots; for Clip, as its input, not a bound)."""
    if (i, 0) in live_out:
        return None
    who = set(used.get((i, 0), []))
    if len(who) != 1:
        return None
    (j,) = who
    op, name = net.op[j], net.op[i].output[0]
    if not (fusible(op) and _on_cpu(op, net)):
        return None
    if op.type == "Clip" and name in op.input[1:]:
        return None
    return j


def _chain_from(net: NetDef, used, live_out, i: int, taken: set[int], fusible) -> list[int]:
    """The longest chain starting at op i whose fused op may run where its last op ran:
    no other op in between overwrites a blob a step reads from outside the chain."""
    chain = [i]
    outside = {b for b in net.op[i].input if b}
    while True:
        j = _next_step(net, used, live_out, chain[-1], fusible)
        if j is None or j in taken:
            return chain
        between = net.op[chain[-1] + 1 : j]
        if any(outside.intersection(op.output) for op in between):
            return chain
        outside |= {b for b in net.op[j].input if b and b != net.op[chain[-1]].output[0]}
        chain.append(j)


def fuse_elementwise(net: NetDef) -> NetDef:
    """Rewrites chains such as `t = Add(x, b); u = Relu(t); y = Mul(u, s)` as
    `y = FusedElementwise(x, b, s)`.

    A chain is two or more ops of netbrew.operators.fused_elementwise.STEP_SLOTS (Add,
    Sub, Mul, Div, Relu, Sigmoid, Tanh, Exp, Clip, LeakyRelu, ...) on the CPU, where
    each op reads the previous one's output, that output has no other reader and is not
    a net output, and no op in between overwrites a blob the chain reads. The fused op
    takes the last op's place and writes its output; the intermediate blobs are no
    longer written. Its numbers equal the chain's, and so does its gradient
    (fused_elementwise_grad), though the pass is meant for inference.

    Args:
        net: the NetDef; not modified.

    Returns:
        A new NetDef.
    """
    from netbrew.operators.fused_elementwise import fuse_chain, fusible  # late: see _graph

    used, live_out = readers(net)
    writes = Counter(b for op in net.op for b in op.output if b)
    external = {*net.external_input, *net.external_output}
    taken: set[int] = set()
    fused: dict[int, OperatorDef] = {}
    for i, op in enumerate(net.op):
        if i in taken or not fusible(op) or not _on_cpu(op, net):
            continue
        chain = _chain_from(net, used, live_out, i, taken, fusible)
        if len(chain) < 2:
            continue
        taken.update(chain)
        steps = [net.op[k] for k in chain]
        # intermediate names written once are recorded, so export writes them again
        blobs = [
            s.output[0] if writes[s.output[0]] == 1 and s.output[0] not in external else ""
            for s in steps[:-1]
        ]
        fused[chain[-1]] = fuse_chain(steps, blobs)
    ops = [fused.get(i, op) for i, op in enumerate(net.op) if i not in taken or i in fused]
    return copy_net(net, ops)
