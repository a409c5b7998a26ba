"""Net runtimes, chosen by NetDef.type. `simple` runs the ops in order; `dag` (alias
`parallel`) runs independent ops on a thread pool (see dag.py).

A runtime's `run(blobs, profile=None)` runs every op against `blobs`; with a Profile
(profiler.py) it times each op through `profile.time(op, blobs)`."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

from netbrew.errors import SchemaError
from netbrew.executor.batching import batch_ops
from netbrew.executor.compiled import CompiledOp, compile_op
from netbrew.executor.dag import DagNet
from netbrew.executor.memory import retain_freed_memory
from netbrew.operators.registry import Registry
from netbrew.proto.netbrew_pb2 import NetDef


class SimpleNet:
    """Runs a created net's ops one after another; runs of ops that a batched kernel can
    take run as one step (batching.py), except when profiled."""

    def __init__(self, net: NetDef, ops: list[CompiledOp]) -> None:
        self.net = net
        self.ops = ops
        self.steps = batch_ops(ops)

    @property
    def name(self) -> str:
        return self.net.name

    def run(self, blobs: MutableMapping[str, Any], profile: Any = None) -> None:
        if profile is None:
            for step in self.steps:
                step.run(blobs)
        else:
            for op in self.ops:
                profile.time(op, blobs)


RUNTIMES: Registry[str, Callable[[NetDef, list[CompiledOp]], Any]] = Registry("net runtime")
RUNTIMES.add("simple", SimpleNet)
RUNTIMES.add("dag", DagNet)
# Caffe2's other runtime names: the ones that schedule by dependencies map to dag, the
# rest give the same results run in order.
for _alias in ("parallel", "async_dag", "async_scheduling"):
    RUNTIMES.add(_alias, DagNet)
for _alias in ("async_simple", "prof_dag"):
    RUNTIMES.add(_alias, SimpleNet)


def create_runtime(net: NetDef) -> Any:
    """Compiles every op of `net` and wraps them in the runtime its type names."""
    retain_freed_memory()
    net_device = net.device_option if net.HasField("device_option") else None
    ops = [compile_op(i, op, net_device) for i, op in enumerate(net.op)]
    kind = net.type or "simple"
    if kind not in RUNTIMES:
        raise SchemaError(
            f"net {net.name!r}: unknown net type {kind!r}; known types: {', '.join(RUNTIMES)}"
        )
    return RUNTIMES[kind](net, ops)
