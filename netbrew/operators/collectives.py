"""Collective ops on MPI: Allreduce, Broadcast and Allgather (netbrew.distributed's world).

They are ordinary ops: they print, profile, save in NetDefs and run under `dag`. Each
carries many tensors in one MPI call (flattened into one buffer per dtype, the bucket),
through mpi4py's buffer interface, never pickling. In a world of one they copy. The
first run of each distinct set of blob names, shapes and dtypes compares a fingerprint
across the ranks, so a rank that built another net fails there, naming the blob.

Gradients (for nets differentiated through a collective): Allreduce's is Allreduce of
the output gradients with the same reduction; Broadcast's sums the gradients onto the
root (zeros elsewhere); Allgather's sums them and keeps this rank's slice.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netbrew.distributed import world as _w
from netbrew.errors import SchemaError
from netbrew.netdef.net import op_def
from netbrew.operators.schema import gradient, kernel, schema

_ANY_IN_PLACE = {0: 0}  # on the variadic slot: tensor k may be written back to output k

schema(
    "Allreduce",
    inputs=["tensors*"],
    outputs=["reduced*"],
    attrs={"reduction": "sum"},
    dtypes="numeric",
    inplace=_ANY_IN_PLACE,
    onnx=False,
    wants_names=True,
    doc="reduced[i] = sum (or mean, reduction='mean') of tensors[i] over the ranks; in place "
    "allowed; one MPI call per dtype for all tensors; default reduction='sum'",
)
schema(
    "Broadcast",
    inputs=["tensors*"],
    outputs=["broadcast*"],
    attrs={"root": 0},
    dtypes="any",
    inplace=_ANY_IN_PLACE,
    onnx=False,
    wants_names=True,
    doc="broadcast[i] = tensors[i] of rank `root` on every rank (same shapes everywhere); "
    "in place allowed; default root=0",
)
schema(
    "Allgather",
    inputs=["X"],
    outputs=["Y"],
    dtypes="any",
    onnx=False,
    wants_names=True,
    doc="Y = concat over ranks (in rank order) of X along axis 0; X (n, *S) on every "
    "rank -> Y (world_size * n, *S)",
)


def _mpi_sum():
    from mpi4py import MPI

    return MPI.SUM


def _by_dtype(tensors: Sequence[np.ndarray]) -> dict[np.dtype, list[int]]:
    groups: dict[np.dtype, list[int]] = {}
    for i, t in enumerate(tensors):
        groups.setdefault(t.dtype, []).append(i)
    return groups


def _flat(tensors: Sequence[np.ndarray], idx: list[int]) -> np.ndarray:
    if len(idx) == 1:
        return np.ascontiguousarray(tensors[idx[0]]).reshape(-1)
    return np.concatenate([tensors[i].reshape(-1) for i in idx])


def _unflat(buffer: np.ndarray, tensors: Sequence[np.ndarray], idx: list[int], out: list) -> None:
    start = 0
    for i in idx:
        out[i] = buffer[start : start + tensors[i].size].reshape(tensors[i].shape)
        start += tensors[i].size


def allreduce(
    tensors: Sequence[np.ndarray], what: str, mean: bool = False, in_place: bool = False
) -> list[np.ndarray]:
    """Sums (or averages) each tensor over the ranks: one Iallreduce per dtype.

    in_place: reduce into the tensors' own buffers where each is a contiguous, writeable
    array of its own (the op writes each tensor back to itself, as allreduce_gradients'
    ops do): no receive buffer to allocate, which on 25 MB saved more than the copy."""
    world = _w.world()
    if mean and any(t.dtype.kind not in "fc" for t in tensors):
        raise SchemaError(f"{what}: reduction='mean' needs floating-point tensors")
    out: list = [None] * len(tensors)
    for idx in _by_dtype(tensors).values():
        own = in_place and world.size > 1 and all(_own_buffer(tensors[i]) for i in idx)
        if own and len(idx) == 1:
            recv = tensors[idx[0]].reshape(-1)
            _reduce(world, None, recv, what)
        else:
            send = _flat(tensors, idx)
            recv = send if own else np.empty_like(send)  # a bucket's concatenation is new
            _reduce(world, None if own else send, recv, what)
        if mean and world.size > 1:
            recv /= recv.dtype.type(world.size)
        if own:  # the results are in the tensors' own arrays, which the outputs stay
            if len(idx) > 1:
                for i, view in zip(idx, _views(recv, tensors, idx)):
                    np.copyto(tensors[i], view)
            for i in idx:
                out[i] = tensors[i]
        else:
            _unflat(recv, tensors, idx, out)
    return out


def _own_buffer(t: np.ndarray) -> bool:
    return t.base is None and t.flags.c_contiguous and t.flags.writeable


def _views(buffer: np.ndarray, tensors: Sequence[np.ndarray], idx: list[int]) -> list:
    out: list = [None] * len(tensors)
    _unflat(buffer, tensors, idx, out)
    return [out[i] for i in idx]


def _reduce(world, send: np.ndarray | None, recv: np.ndarray, what: str) -> None:
    """recv = sum over ranks of send (of recv itself when send is None: MPI_IN_PLACE)."""
    if world.size == 1:
        if send is not None:
            recv[...] = send
        return
    from mpi4py import MPI

    with world.lock:
        source = MPI.IN_PLACE if send is None else send
        _w.wait(world.comm.Iallreduce(source, recv, op=_mpi_sum()), what)


@kernel("Allreduce")
def allreduce_cpu(*tensors, reduction, input_names, output_names):
    if reduction not in ("sum", "mean"):
        raise SchemaError(f"argument reduction={reduction!r} must be 'sum' or 'mean'")
    what = f"Allreduce({', '.join(input_names)})"
    _w.check_agreement("Allreduce", list(input_names), list(tensors))
    in_place = tuple(input_names) == tuple(output_names)
    return tuple(allreduce(tensors, what, mean=reduction == "mean", in_place=in_place))


@kernel("Broadcast")
def broadcast_cpu(*tensors, root, input_names, output_names):
    world = _w.world()
    if not 0 <= root < world.size:
        raise SchemaError(f"argument root={root} is not a rank of a world of {world.size}")
    _w.check_agreement("Broadcast", list(input_names), list(tensors))
    out: list = [None] * len(tensors)
    for idx in _by_dtype(tensors).values():
        buffer = _flat(tensors, idx).copy()
        if world.size > 1:
            with world.lock:
                _w.wait(world.comm.Ibcast(buffer, root=root), f"Broadcast({input_names[idx[0]]})")
        _unflat(buffer, tensors, idx, out)
    return tuple(out)


@kernel("Allgather")
def allgather_cpu(x, input_names, output_names):
    world = _w.world()
    _w.check_agreement("Allgather", list(input_names), [x])
    x = np.ascontiguousarray(x)
    if x.ndim == 0:
        raise SchemaError(f"input {input_names[0]!r} is a scalar; Allgather joins along axis 0")
    y = np.empty((world.size * x.shape[0], *x.shape[1:]), x.dtype)
    if world.size == 1:
        y[...] = x
    else:
        with world.lock:
            _w.wait(world.comm.Iallgather(x, y), f"Allgather({input_names[0]})")
    return (y,)


schema(
    "BroadcastGradient",
    inputs=["dbroadcast*"],
    outputs=["dtensors*"],
    attrs={"root": 0},
    dtypes="float",
    onnx=False,
    wants_names=True,
    doc="dtensors[i] = sum over ranks of dbroadcast[i] on rank `root`, zeros elsewhere",
)
schema(
    "AllgatherGradient",
    inputs=["dY", "X"],
    outputs=["dX"],
    dtypes={0: "float", 1: "any"},
    onnx=False,
    wants_names=True,
    doc="dX = (sum over ranks of dY)[rank * n : (rank + 1) * n], n = X.shape[0]",
)


@kernel("BroadcastGradient")
def broadcast_gradient_cpu(*grads, root, input_names, output_names):
    summed = allreduce(grads, f"BroadcastGradient({', '.join(input_names)})")
    if _w.world().rank != root:
        summed = [np.zeros_like(g) for g in summed]
    return tuple(summed)


@kernel("AllgatherGradient")
def allgather_gradient_cpu(dy, x, input_names, output_names):
    (summed,) = allreduce([dy], f"AllgatherGradient({input_names[0]})")
    n, rank = x.shape[0], _w.world().rank
    return (np.ascontiguousarray(summed[rank * n : (rank + 1) * n]),)


@gradient("Allreduce", inplace_safe=True)
def allreduce_grad(op, g_out, g_in):
    pairs = [(g, d) for g, d in zip(g_out, g_in) if g and d]
    if not pairs:
        return []
    reduction = next((a.s.decode() for a in op.arg if a.name == "reduction"), "sum")
    ins, outs = zip(*pairs)
    return [op_def("Allreduce", list(ins), list(outs), reduction=reduction)]


@gradient("Broadcast", inplace_safe=True)
def broadcast_grad(op, g_out, g_in):
    pairs = [(g, d) for g, d in zip(g_out, g_in) if g and d]
    if not pairs:
        return []
    root = next((a.i for a in op.arg if a.name == "root"), 0)
    ins, outs = zip(*pairs)
    return [op_def("BroadcastGradient", list(ins), list(outs), root=root)]


@gradient("Allgather")
def allgather_grad(op, g_out, g_in):
    if not (g_out[0] and g_in[0]):
        return []
    return [op_def("AllgatherGradient", [g_out[0], op.input[0]], [g_in[0]])]
