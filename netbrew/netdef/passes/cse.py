"""Common-subexpression elimination: compute each identical op once."""

from __future__ import annotations

from collections import Counter

from netbrew.netdef.passes._graph import SIDE_EFFECTS, copy_net, is_opaque, op_schema
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef


def _mergeable(op: OperatorDef, writes: Counter, net: NetDef) -> bool:
    spec = op_schema(op.type)
    return (
        spec is not None
        and not spec.rng  # two draws are two different numbers
        and op.type not in SIDE_EFFECTS
        and bool(op.output)
        and all(b and writes[b] == 1 and b not in net.external_input for b in op.output)
    )


def eliminate_common_subexpressions(net: NetDef) -> NetDef:
    """Merges ops with the same type, input versions, arguments and device.

    Only ops whose outputs are each written once in the net (and are not external inputs)
    take part, so the first op's outputs hold the same values wherever the later op's
    were read; the later op is dropped and its readers renamed. A duplicate writing an
    external output is kept (the net must still produce that name). Nets with ops that
    refer to blobs by name (control flow, Save/Load) are returned unchanged.

    Args:
        net: the NetDef; not modified.

    Returns:
        A new NetDef.
    """
    if any(is_opaque(op) for op in net.op):
        return copy_net(net, net.op)
    writes = Counter(b for op in net.op for b in op.output if b)
    outputs = set(net.external_output)
    version: Counter = Counter()
    rename: dict[str, str] = {}
    seen: dict[tuple, OperatorDef] = {}
    ops = []
    for op in net.op:
        op_new = OperatorDef()
        op_new.CopyFrom(op)
        for j, b in enumerate(op_new.input):
            op_new.input[j] = rename.get(b, b)
        for j, b in enumerate(op_new.control_input):
            op_new.control_input[j] = rename.get(b, b)
        if _mergeable(op_new, writes, net):
            key = (
                op_new.type,
                tuple((b, version[b]) for b in op_new.input),
                tuple(sorted(a.SerializeToString(deterministic=True) for a in op_new.arg)),
                op_new.device_option.SerializeToString(deterministic=True),
                op_new.engine,
                op_new.domain,
                len(op_new.output),
                tuple(not b for b in op_new.output),
            )
            first = seen.get(key)
            if first is not None and not outputs & set(op_new.output):
                for mine, theirs in zip(op_new.output, first.output):
                    if mine:
                        rename[mine] = theirs
                continue
            seen.setdefault(key, op_new)
        version.update(b for b in op_new.output if b)
        ops.append(op_new)
    return copy_net(net, ops)
