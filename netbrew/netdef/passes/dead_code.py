"""Dead-code elimination: drop ops whose outputs nothing needed reads."""

from __future__ import annotations

from netbrew.netdef.passes._graph import SIDE_EFFECTS, copy_net, is_opaque, reads, reads_scope
from netbrew.proto.netbrew_pb2 import NetDef


def eliminate_dead_code(net: NetDef) -> NetDef:
    """Keeps the ops that external outputs need, plus ops with side effects.

    A backward liveness scan: an op stays when it writes a blob that is live after it
    (an external output, or read by a later kept op), when it has side effects (Save,
    Print, or no outputs at all), or when it reads blobs by name (control flow, Load);
    everything before a control-flow op is kept, since its subgraphs may read any blob.

    Args:
        net: the NetDef; not modified.

    Returns:
        A new NetDef without the dead ops.
    """
    live = set(net.external_output)
    keep_all = False
    kept = []
    for op in reversed(net.op):
        outs = {b for b in op.output if b}
        needed = (
            keep_all or op.type in SIDE_EFFECTS or not outs or is_opaque(op) or bool(outs & live)
        )
        if not needed:
            continue
        keep_all = keep_all or reads_scope(op)
        live -= outs
        live |= set(reads(op))
        kept.append(op)
    return copy_net(net, reversed(kept))
