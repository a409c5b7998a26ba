"""Def-use facts shared by the passes: who wrote the version of a blob each op reads."""

from __future__ import annotations

from collections.abc import Iterable

from netbrew.netdef.autodiff import captured_reads
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef

# Collectives talk to the other ranks: every rank must run each one, in the same order.
SIDE_EFFECTS = frozenset({"Save", "Print", "Allreduce", "Broadcast", "Allgather"})
"""Op types kept even when nothing reads their outputs."""


def copy_net(net: NetDef, ops: Iterable[OperatorDef]) -> NetDef:
    """A copy of `net` (name, type, external inputs and outputs...) holding `ops`."""
    out = NetDef()
    out.CopyFrom(net)
    del out.op[:]
    out.op.extend(ops)
    return out


def subnets(op: OperatorDef) -> list[NetDef]:
    """The NetDefs an op holds as arguments (If's branches, Loop's and Scan's bodies)."""
    nets = []
    for arg in op.arg:
        nets.extend(arg.nets)
        if arg.HasField("n"):
            nets.append(arg.n)
    return nets


def op_schema(op_type: str):
    """The op's schema, or None for an unknown op (imported late: operators import netdef)."""
    from netbrew.operators import SCHEMAS

    return SCHEMAS.get(op_type)


def reads(op: OperatorDef) -> list[str]:
    """What `op` reads: its inputs, control inputs, and the outer blobs its subgraphs read
    by name (If and Loop bodies), so no pass takes a blob a body still needs."""
    found = [b for b in [*op.input, *op.control_input] if b]
    if any(a.HasField("n") or a.nets for a in op.arg):
        found += captured_reads(op)
    return found


def is_opaque(op: OperatorDef) -> bool:
    """Ops that refer to blobs by name beyond their inputs and outputs (subgraphs reading
    outer values, Save/Load keyed by names), or unknown ops: passes leave them alone."""
    spec = op_schema(op.type)
    return spec is None or spec.wants_scope or spec.wants_names


def reads_scope(op: OperatorDef) -> bool:
    """Ops whose subgraphs may read any outer blob (If, Loop, Scan), or unknown ops."""
    spec = op_schema(op.type)
    return spec is None or spec.wants_scope


def readers(net: NetDef) -> tuple[dict[tuple[int, int], list[int]], set[tuple[int, int]]]:
    """Maps each op output (op index, output index) to the ops reading that version.

    Returns:
        (readers, live_out): live_out holds the outputs that are the final version of an
        external output.
    """
    last: dict[str, tuple[int, int]] = {}
    used: dict[tuple[int, int], list[int]] = {}
    for i, op in enumerate(net.op):
        for name in reads(op):
            if name in last:
                used.setdefault(last[name], []).append(i)
        for k, name in enumerate(op.output):
            if name:
                last[name] = (i, k)
                used.setdefault((i, k), [])
    live_out = {last[n] for n in net.external_output if n in last}
    return used, live_out


def sole_reader(net: NetDef, used, live_out, i: int) -> int | None:
    """The one op reading op i's single output, if exactly one does and it is not a net output."""
    op = net.op[i]
    if len(op.output) != 1 or (i, 0) in live_out:
        return None
    who = used.get((i, 0), [])
    return who[0] if len(who) == 1 else None


def can_write_early(net: NetDef, producer: int, consumer: int, name: str) -> bool:
    """Whether op `producer` may write `name` (now written by `consumer`): no op between
    them touches that name, unless it is the producer's own output (an in-place chain)."""
    if net.op[producer].output[0] == name:
        return True
    return all(
        name not in reads(op) and name not in op.output for op in net.op[producer + 1 : consumer]
    )
