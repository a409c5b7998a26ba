"""Turning a brew model data-parallel: sharded data, gradient all-reduce, parameter
broadcast, and checkpoints that every rank resumes from."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from netbrew.distributed.world import init
from netbrew.netdef.net import op_def
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef

BUCKET_BYTES = 1 << 20
"""Gradients are packed into Allreduce ops of up to this many bytes (one MPI call each)."""


def shard(data: Any) -> Any:
    """This rank's contiguous part of `data` (an array or anything sliceable): disjoint
    parts, in rank order, that together cover the whole. A tuple is sharded item by item
    (features and labels alike)."""
    if isinstance(data, tuple):
        return tuple(shard(item) for item in data)
    world = init()
    n = len(data)
    return data[world.rank * n // world.size : (world.rank + 1) * n // world.size]


def _proto(net: Any) -> NetDef:
    return net.proto() if hasattr(net, "proto") else net


def _buckets(names: list[str], shapes: dict[str, tuple], itemsize: int, limit: int):
    """Consecutive groups of `names` whose tensors add up to at most `limit` bytes (a
    tensor bigger than that is a bucket of its own)."""
    bucket: list[str] = []
    size = 0
    for name in names:
        nbytes = int(np.prod(shapes.get(name, (1,)))) * itemsize
        if bucket and size + nbytes > limit:
            yield bucket
            bucket, size = [], 0
        bucket.append(name)
        size += nbytes
    if bucket:
        yield bucket


def allreduce_gradients(
    model: Any, average: bool = True, bucket_bytes: int = BUCKET_BYTES
) -> list[OperatorDef]:
    """Inserts Allreduce ops on every parameter gradient of `model` (after
    add_gradient_operators, before the optimizer). Each bucket's Allreduce comes right
    after the op that finalizes the last gradient in it, so communication overlaps the
    rest of the backward pass under `dag`; each Allreduce waits on the one before it
    (control_input), so every rank runs them in the same order.

    Returns:
        The Allreduce ops, in net order.
    """
    grads = getattr(model, "param_to_grad", {})
    if not grads:
        raise ValueError(
            f"model {getattr(model, 'name', '?')!r} has no gradients: call "
            "add_gradient_operators(losses) before allreduce_gradients"
        )
    proto = _proto(model.net)
    # The last gradient op writing each gradient; optimizer ops (which may also write it in
    # place, as MomentumSGDUpdate does) come after, and must see the reduced values.
    wanted = set(grads.values())
    final = {
        g: i for i, op in enumerate(proto.op) if op.is_gradient_op for g in op.output if g in wanted
    }
    missing = sorted(set(grads.values()) - set(final))
    if missing:
        raise ValueError(f"allreduce_gradients: no op writes gradient(s) {missing}")
    order = sorted(grads, key=lambda p: final[grads[p]])
    shapes = {grads[p]: tuple(model.param_shapes.get(p, (1,))) for p in order}
    reduction = "mean" if average else "sum"
    inserted: list[tuple[int, OperatorDef]] = []
    previous = None
    for bucket in _buckets([grads[p] for p in order], shapes, 4, bucket_bytes):
        op = op_def("Allreduce", bucket, bucket, reduction=reduction)
        if previous is not None:
            op.control_input.append(previous.output[0])
        inserted.append((max(final[g] for g in bucket), op))
        previous = op
    ops = list(proto.op)
    for at, op in reversed(inserted):
        ops.insert(at + 1, op)
    del proto.op[:]
    proto.op.extend(ops)
    return [op for _, op in inserted]


def broadcast_parameters(model: Any, root: int = 0, bucket_bytes: int = BUCKET_BYTES):
    """Appends Broadcast ops to `model.param_init_net` so that every rank starts from rank
    `root`'s parameters (trainable and computed) and optimizer state."""
    names = [str(b) for b in model.get_checkpoint_blobs()]
    shapes = {str(p): tuple(s) for p, s in model.param_shapes.items()}
    ops = []
    for bucket in _buckets(names, shapes, 4, bucket_bytes):
        ops.append(op_def("Broadcast", bucket, bucket, root=root))
    _proto(model.param_init_net).op.extend(ops)
    return ops


def save_checkpoint(path: str | os.PathLike, workspace: Any, model: Any) -> Path | None:
    """Rank 0 writes the model's checkpoint blobs (parameters, running statistics,
    optimizer state) atomically; the running statistics are averaged over the ranks
    first, since each rank saw only its shard. Every rank waits for the write.

    Returns:
        The path on rank 0, None elsewhere.
    """
    from netbrew.distributed import barrier
    from netbrew.netdef.serialize import save_blobs
    from netbrew.operators.collectives import allreduce

    world = init()
    computed = [str(b) for b in model.get_computed_params()]
    if computed:
        averaged = allreduce([workspace.fetch_blob(b) for b in computed], "save_checkpoint",
                             mean=True)  # fmt: skip
        for name, value in zip(computed, averaged):
            workspace.feed_blob(name, value)
    written = None
    if world.rank == 0:
        blobs = {str(b): workspace.fetch_blob(str(b)) for b in model.get_checkpoint_blobs()}
        written = save_blobs(blobs, path)
    barrier()
    return written


def load_checkpoint(path: str | os.PathLike, workspace: Any) -> Sequence[str]:
    """Every rank feeds the blobs of the checkpoint at `path`; returns their names."""
    from netbrew.netdef.serialize import load_blobs

    blobs = load_blobs(path)
    for name, value in blobs.items():
        workspace.feed_blob(name, value)
    return list(blobs)
