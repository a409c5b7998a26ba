"""Net runtimes, chosen by NetDef.type. `simple` runs the ops in order."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

from netbrew.errors import SchemaError
from netbrew.executor.compiled import CompiledOp, compile_op
from netbrew.operators.registry import Registry
from netbrew.proto.netbrew_pb2 import NetDef


class SimpleNet:
    """Runs a created net's ops one after another."""

    def __init__(self, net: NetDef, ops: list[CompiledOp]) -> None:
        self.net = net
        self.ops = ops

    @property
    def name(self) -> str:
        return self.net.name

    def run(self, blobs: MutableMapping[str, Any]) -> None:
        for op in self.ops:
            op.run(blobs)


RUNTIMES: Registry[str, Callable[[NetDef, list[CompiledOp]], Any]] = Registry("net runtime")
RUNTIMES.add("simple", SimpleNet)
# Caffe2's asynchronous runtimes give the same results run in order.
for _alias in ("async_simple", "async_scheduling", "async_dag", "prof_dag"):
    RUNTIMES.add(_alias, SimpleNet)


def create_runtime(net: NetDef) -> Any:
    """Compiles every op of `net` and wraps them in the runtime its type names."""
    net_device = net.device_option if net.HasField("device_option") else None
    ops = [compile_op(i, op, net_device) for i, op in enumerate(net.op)]
    kind = net.type or "simple"
    if kind not in RUNTIMES:
        raise SchemaError(
            f"net {net.name!r}: unknown net type {kind!r}; known types: {', '.join(RUNTIMES)}"
        )
    return RUNTIMES[kind](net, ops)
