"""Constant folding: evaluate ops whose inputs are all known, replace them by Constant ops."""

from __future__ import annotations

import numpy as np

from netbrew.netdef.net import op_def
from netbrew.netdef.passes._graph import SIDE_EFFECTS, copy_net, is_opaque, op_schema
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef


def _foldable(op: OperatorDef) -> bool:
    spec = op_schema(op.type)
    return (
        spec is not None
        and not spec.rng  # random ops give new numbers each run
        and not is_opaque(op)
        and op.type not in SIDE_EFFECTS
        and bool(op.output)
        and not op.is_gradient_op
    )


def _storable(value: object) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind in "biufc"


def fold_constants(net: NetDef, constants: dict[str, np.ndarray] | None = None) -> NetDef:
    """Replaces ops computed from constants alone by Constant ops holding their results.

    Constants are the outputs of Constant ops, the blobs given in `constants` (e.g. the
    parameters of an inference net) and, as the scan goes on, the outputs of folded ops.
    An op is folded when every input is a constant and its schema has no random stream
    (nor subgraphs, named blobs or side effects). A blob overwritten by an op that is not
    folded stops being a constant from there on. Ops whose kernel fails are left in place.
    Folded inputs that nothing else reads become dead code (see eliminate_dead_code).

    Args:
        net: the NetDef; not modified.
        constants: blob name -> value of blobs fixed for every run.

    Returns:
        A new NetDef.
    """
    from netbrew.executor import Workspace  # late: the executor imports netdef

    known: dict[str, np.ndarray] = dict(constants or {})
    ws = Workspace()
    ops = []
    for op in net.op:
        inputs = [b for b in op.input if b]
        if _foldable(op) and all(b in known for b in inputs):
            for b in inputs:
                ws.feed_blob(b, known[b])
            try:
                ws.run_operator_once(op)
                values = [ws.fetch_blob(b) if b else None for b in op.output]
            except Exception:  # noqa: BLE001  (the run will report it; folding just skips)
                values = None
            if values is not None and all(_storable(v) for v in values if v is not None):
                for name, value in zip(op.output, values):
                    if not name:
                        continue
                    known[name] = value
                    if op.type == "Constant":
                        ops.append(op)
                    else:
                        ops.append(op_def("Constant", [], [name], name=op.name, value=value))
                        if op.HasField("device_option"):
                            ops[-1].device_option.CopyFrom(op.device_option)
                continue
        for name in op.output:
            known.pop(name, None)
        ops.append(op)
    return copy_net(net, ops)
