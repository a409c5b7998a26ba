"""Runs of ops that one batched kernel runs at once (the simple runtime's batches).

A training net's optimizer is a long run of the same small op, one per parameter: the
ResNet-18-sized net of benchmarks/cuda.py ends with 38 WeightedSums (weight decay) and 56
MomentumSGDUpdates. On a GPU each op is a launch, and issuing them from Python is what
takes the time (about 60 microseconds an op, against a few for the kernel). Where a
kernel registered with `operators.batched_kernel` exists for the op type and device, the
consecutive ops that may run together become one OpBatch, run by one call of it, as
PyTorch's foreach optimizers do.

Ops batch when they are consecutive in the net, share type, device and arguments, take
the same number of inputs, draw no random numbers, and none reads a blob that an earlier
one of the run writes (so running them together reads what running them in order would).
The net is unchanged: profiles and errors still name each op. When the batched kernel
refuses a batch, its ops run one by one, so the error is the op's own.

`NETBREW_BATCH_OPS=0` turns batching off (read when a net is created).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from typing import Any

from netbrew.errors import OperatorError
from netbrew.executor.compiled import CompiledOp
from netbrew.operators.schema import BATCHED

MIN_OPS = 2  # a run this long or longer becomes a batch


def enabled() -> bool:
    return os.environ.get("NETBREW_BATCH_OPS", "1") != "0"


class OpBatch:
    """Consecutive independent ops of one type, run by their batched kernel in one call."""

    def __init__(self, ops: list[CompiledOp], kernel: Any) -> None:
        self.ops = ops
        self.kernel = kernel
        self.attrs = ops[0].attrs

    def __repr__(self) -> str:
        first, last = self.ops[0], self.ops[-1]
        return f"OpBatch({first.op.type} x{len(self.ops)}, ops #{first.index}-#{last.index})"

    def run(self, blobs: MutableMapping[str, Any]) -> None:
        try:
            calls = [op.gather(blobs)[0] for op in self.ops]
            results = self.kernel(calls, **self.attrs)
        except Exception:  # run them one by one: the failing op raises its own error
            for op in self.ops:
                op.run(blobs)
            return
        if len(results) != len(self.ops):
            raise OperatorError(
                f"{self!r}: the batched kernel returned {len(results)} results for "
                f"{len(self.ops)} ops"
            )
        for op, outputs in zip(self.ops, results):
            op.store(blobs, outputs)


def _batch_kernel(op: CompiledOp) -> Any:
    if op.rng is not None or op.schema.wants_scope:
        return None
    return BATCHED.get((op.op.type, op.device.split(":")[0]))


def _joins(run: list[CompiledOp], written: set[str], op: CompiledOp) -> bool:
    first = run[0]
    return (
        op.op.type == first.op.type
        and op.device == first.device
        and len(op.inputs) == len(first.inputs)
        and _same(op.attrs, first.attrs)
        and not written.intersection(op.inputs)
    )


def _same(a: dict, b: dict) -> bool:
    try:
        return bool(a == b)
    except ValueError:  # array-valued arguments
        return False


def batch_ops(ops: list[CompiledOp]) -> list[CompiledOp | OpBatch]:
    """The steps a simple net runs: its ops, with each batchable run made an OpBatch."""
    if not enabled():
        return list(ops)
    steps: list[CompiledOp | OpBatch] = []
    run: list[CompiledOp] = []
    written: set[str] = set()

    def close() -> None:
        if len(run) >= MIN_OPS:
            steps.append(OpBatch(list(run), _batch_kernel(run[0])))
        else:
            steps.extend(run)
        run.clear()
        written.clear()

    for op in ops:
        if not (run and _joins(run, written, op)):
            close()
            if _batch_kernel(op) is None:
                steps.append(op)
                continue
        run.append(op)
        written.update(n for n in op.outputs if n)
    close()
    return steps
