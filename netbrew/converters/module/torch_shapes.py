"""from_torch converters for shapes and indexing: view/reshape, flatten, permute, transpose,
squeeze, cat/stack/split, expand, getitem and casts.

Sizes read off a tensor (`x.size(0)`, `B, T, C = x.shape`) stay dynamic in a reshape: see
`shape_blob`. Other sizes are the example's.
"""

from __future__ import annotations

from typing import Any

from netbrew.converters.module.torch_graph import (
    TorchGraph,
    int64_const,
    np_dtype,
    rank_of,
)
from netbrew.converters.module.torch_ops import converts
from netbrew.errors import UnsupportedConversion
from netbrew.netdef.dtypes import type_name

_INT64_MAX = 2**63 - 1


def _chain(g: TorchGraph, node: Any, x: str, steps: list[tuple]) -> None:
    """Applies (op_type, extra inputs, attrs) steps to x; the last one computes `node`."""
    if not steps:
        g.blobs[node] = x
        return
    for i, (op_type, extra, attrs) in enumerate(steps):
        out = node if i == len(steps) - 1 else f"{node.name}_{op_type.lower()}"
        x = g.emit(op_type, [x, *extra], out, **attrs)


# -- shapes ------------------------------------------------------------------------------


def _size_entries(g: TorchGraph, sizes: Any) -> list[tuple]:
    """("dim", tensor node, d) for sizes read off a tensor, ("const", n) for the others."""
    entries: list[tuple] = []
    for item in sizes if isinstance(sizes, (list, tuple)) else [sizes]:
        prov = g.dims.get(item) if g.is_node(item) else None
        value = g.value(item)
        if isinstance(prov, tuple):
            entries.append(("dim", *prov))
        elif isinstance(prov, list):
            entries.extend(("dim", *p) for p in prov)
        elif isinstance(value, (list, tuple)):
            entries.extend(("const", int(v)) for v in value)
        else:
            entries.append(("const", int(value)))
    return entries


def shape_blob(g: TorchGraph, node: Any, x: Any, sizes: Any, keep: int) -> str:
    """An int64 shape for Reshape (keep=0) or Expand (keep=1) from torch's sizes.

    A size read off x itself at the same position becomes `keep` (the op then copies x's
    dim); sizes read off other tensors become Shape slices, so the net follows the batch
    size at run time; all other sizes are constants.
    """
    entries = _size_entries(g, sizes)
    if keep == 1:  # expand: -1 keeps the dim
        entries = [("const", 1) if e == ("const", -1) else e for e in entries]
    offset = len(entries) - rank_of(g, x) if keep == 1 else 0
    entries = [
        ("const", keep) if e[0] == "dim" and e[1] is x and e[2] == i - offset else e
        for i, e in enumerate(entries)
    ]
    if all(e[0] == "const" for e in entries):
        return int64_const(g, node, [e[1] for e in entries], "shape")
    pieces = []
    for run in _runs(entries):
        if run[0][0] == "const":
            pieces.append(int64_const(g, node, [e[1] for e in run], "dims"))
        else:
            first = run[0][2]
            src = g.blob(run[0][1])
            end = first + len(run)
            pieces.append(g.emit("Shape", [src], f"{node.name}_dims", start=first, end=end))
    if len(pieces) == 1:
        return pieces[0]
    return g.emit("Concat", pieces, f"{node.name}_shape", axis=0)


def _runs(entries: list[tuple]) -> list[list[tuple]]:
    """Entries grouped into runs: constants together, consecutive dims of one tensor
    together (each run becomes one Constant or one Shape(start, end))."""
    runs: list[list[tuple]] = []
    for e in entries:
        last = runs[-1][-1] if runs else None
        if last is not None and last[0] == e[0] == "const":
            runs[-1].append(e)
        elif (
            last is not None and last[0] == e[0] == "dim" and (e[1], e[2]) == (last[1], last[2] + 1)
        ):
            runs[-1].append(e)
        else:
            runs.append([e])
    return runs


def _sizes_arg(node: Any, name: str) -> Any:
    """The sizes of view/reshape/expand: `x.view(a, b)`, `x.view((a, b))` or `shape=`."""
    rest = node.args[1:]
    if name in node.kwargs:
        return node.kwargs[name]
    return rest[0] if len(rest) == 1 and isinstance(rest[0], (list, tuple)) else list(rest)


@converts("Tensor.view", "Tensor.reshape", "torch.reshape")
def reshape(g: TorchGraph, node: Any) -> None:
    """Reshape(x, shape): sizes read off x at the same position become 0 (copy that dim)."""
    sizes = _sizes_arg(node, "shape")
    if any(e == ("const", 0) for e in _size_entries(g, sizes)):
        raise UnsupportedConversion("a reshape to a zero-sized dim")
    x = node.args[0]
    g.emit("Reshape", [g.blob(x), shape_blob(g, node, x, sizes, keep=0)], node)


@converts("Tensor.expand")
def expand(g: TorchGraph, node: Any) -> None:
    """Expand(x, shape) with -1 (keep the dim) as 1."""
    x = node.args[0]
    g.emit("Expand", [g.blob(x), shape_blob(g, node, x, _sizes_arg(node, "size"), keep=1)], node)


@converts("Tensor.expand_as")
def expand_as(g: TorchGraph, node: Any) -> None:
    """Expand(x, Shape(other))."""
    shape = g.emit("Shape", [g.blob(node.args[1])], f"{node.name}_shape")
    g.emit("Expand", [g.blob(node.args[0]), shape], node)


@converts("torch.nn.Flatten", "torch.flatten", "Tensor.flatten")
def flatten(g: TorchGraph, node: Any) -> None:
    """Flatten(axis=1) for flatten(x, 1); otherwise a Reshape that copies the leading dims."""
    x = node.args[0]
    shape = list(g.tensor(x).shape)
    rank = max(len(shape), 1)
    start = int(g.arg(node, 1, "start_dim", 0)) % rank
    end = int(g.arg(node, 2, "end_dim", -1)) % rank
    if not shape:  # a 0-d tensor flattens to one element
        g.emit("Reshape", [g.blob(x), int64_const(g, node, [1], "shape")], node)
    elif start == end:
        g.alias(node, x)
    elif start == 1 and end == rank - 1:
        g.emit("Flatten", [g.blob(x)], node, axis=1)
    else:
        target = [0] * start + [-1] + shape[end + 1 :]
        g.emit("Reshape", [g.blob(x), int64_const(g, node, target, "shape")], node)


def _dims_arg(node: Any, name: str) -> list[int]:
    rest = node.args[1:]
    if name in node.kwargs:
        return list(node.kwargs[name])
    return list(rest[0]) if len(rest) == 1 and isinstance(rest[0], (list, tuple)) else list(rest)


@converts("Tensor.permute", "torch.permute")
def permute(g: TorchGraph, node: Any) -> None:
    """Transpose(x, perm=dims)."""
    rank = rank_of(g, node.args[0])
    perm = [int(d) % rank for d in g.value(_dims_arg(node, "dims"))]
    g.emit("Transpose", [g.blob(node.args[0])], node, perm=perm)


@converts("Tensor.transpose", "torch.transpose", "Tensor.t", "torch.t")
def transpose(g: TorchGraph, node: Any) -> None:
    """Transpose with two dims swapped (the last two for .t())."""
    rank = rank_of(g, node.args[0])
    if rank < 2:
        return g.alias(node, node.args[0])
    if len(node.args) == 1 and not node.kwargs:  # x.t()
        d0, d1 = 0, 1
    else:
        d0, d1 = g.arg(node, 1, "dim0"), g.arg(node, 2, "dim1")
    perm = list(range(rank))
    perm[d0 % rank], perm[d1 % rank] = perm[d1 % rank], perm[d0 % rank]
    g.emit("Transpose", [g.blob(node.args[0])], node, perm=perm)


@converts("Tensor.contiguous", "Tensor.clone", "Tensor.detach", "torch.clone")
def same_tensor(g: TorchGraph, node: Any) -> None:
    """Layout and autograd bookkeeping: the same values, so the same blob."""
    g.alias(node, node.args[0])


@converts("Tensor.to", "Tensor.type", "Tensor.type_as", "Tensor.float", "Tensor.double",
          "Tensor.half", "Tensor.long", "Tensor.int", "Tensor.bool")  # fmt: skip
def cast(g: TorchGraph, node: Any) -> None:
    """Cast to the result's dtype; the same blob where the dtype does not change."""
    dtype = np_dtype(g.values[node].dtype)
    if np_dtype(g.tensor(node.args[0]).dtype) == dtype:
        return g.alias(node, node.args[0])
    g.emit("Cast", [g.blob(node.args[0])], node, to=type_name(dtype))


@converts("Tensor.unsqueeze", "torch.unsqueeze")
def unsqueeze(g: TorchGraph, node: Any) -> None:
    """Unsqueeze(x, [dim])."""
    dim = int(g.arg(node, 1, "dim")) % (rank_of(g, node.args[0]) + 1)
    g.emit("Unsqueeze", [g.blob(node.args[0]), int64_const(g, node, [dim], "axes")], node)


@converts("Tensor.squeeze", "torch.squeeze")
def squeeze(g: TorchGraph, node: Any) -> None:
    """Squeeze of the given size-1 dims (torch skips the others), or of all size-1 dims."""
    shape = list(g.tensor(node.args[0]).shape)
    dim = g.arg(node, 1, "dim")
    dims = range(len(shape)) if dim is None else dim if isinstance(dim, (list, tuple)) else [dim]
    axes = sorted({int(d) % max(len(shape), 1) for d in dims if shape and shape[int(d)] == 1})
    if not axes:
        return g.alias(node, node.args[0])
    g.emit("Squeeze", [g.blob(node.args[0]), int64_const(g, node, axes, "axes")], node)


@converts("torch.cat", "torch.concat", "torch.concatenate")
def cat(g: TorchGraph, node: Any) -> None:
    """Concat(tensors, axis=dim)."""
    tensors = node.args[0]
    axis = int(g.arg(node, 1, "dim", 0)) % rank_of(g, tensors[0])
    g.emit("Concat", [g.blob(t) for t in tensors], node, axis=axis)


@converts("torch.stack")
def stack(g: TorchGraph, node: Any) -> None:
    """Unsqueeze each tensor at dim, then Concat."""
    tensors = node.args[0]
    axis = int(g.arg(node, 1, "dim", 0)) % (rank_of(g, tensors[0]) + 1)
    axes = int64_const(g, node, [axis], "axes")
    parts = [g.emit("Unsqueeze", [g.blob(t), axes], f"{node.name}_part") for t in tensors]
    g.emit("Concat", parts, node, axis=axis)


@converts("Tensor.split", "torch.split", "Tensor.chunk", "torch.chunk", "Tensor.unbind")
def split(g: TorchGraph, node: Any) -> None:
    """Split(x, sizes, axis) with the sizes torch produced (unbind squeezes them too)."""
    x = node.args[0]
    pieces = g.values[node]
    unbind = node.target == "unbind"
    index = 1 if unbind else 2
    axis = int(g.arg(node, index, "dim", 0)) % rank_of(g, x)
    sizes = [1 if unbind else p.shape[axis] for p in pieces]
    g.emit_multi(
        "Split", [g.blob(x), int64_const(g, node, sizes, "split")], node, len(sizes), axis=axis
    )
    if unbind:
        axes = int64_const(g, node, [axis], "axes")
        g.blobs[node] = [g.emit("Squeeze", [b, axes], f"{b}_squeezed") for b in g.blobs[node]]


# -- indexing ----------------------------------------------------------------------------


@converts("operator.getitem")
def getitem(g: TorchGraph, node: Any) -> None:
    """One output of a multi-output op, or x[ints, slices, None, ...] as Slice, Gather
    and Unsqueeze."""
    source, index = node.args
    if isinstance(g.blobs.get(source), list):
        g.blobs[node] = g.blobs[source][g.value(index)]
        return
    if g.is_node(index) and index in g.blobs:
        if g.tensor(index).dtype == g.torch.bool:  # x[mask]: the entries where mask holds
            found = g.emit("NonZero", [g.blob(index)], f"{node.name}_nonzero")
            at = g.emit("Transpose", [found], f"{node.name}_indices", perm=[1, 0])
            g.emit("GatherND", [g.blob(source), at], node)
            return
        g.emit("Gather", [g.blob(source), g.blob(index)], node, axis=0)
        return
    _index(g, node, source, g.value(index))


def _index(g: TorchGraph, node: Any, source: Any, index: Any) -> None:
    items = list(index) if isinstance(index, tuple) else [index]
    rank = rank_of(g, source)
    real = sum(1 for i in items if i is not None and i is not Ellipsis)
    at = next((k for k, i in enumerate(items) if i is Ellipsis), len(items))
    items[at : at + 1] = [slice(None)] * (rank - real)
    slices, gathers, new_axes = [], [], []
    axis = out_axis = 0
    for item in items:
        if item is None:
            new_axes.append(out_axis)
            out_axis += 1
        elif isinstance(item, int):
            gathers.append((axis, item))
            axis += 1
        elif isinstance(item, slice) and (item.step is None or item.step > 0):
            if item != slice(None):
                slices.append((axis, item))
            axis += 1
            out_axis += 1
        else:
            raise UnsupportedConversion(f"index {item!r}")
    steps: list[tuple] = []
    if slices:
        cols = [
            [s.start or 0 for _, s in slices],
            [_INT64_MAX if s.stop is None else s.stop for _, s in slices],
            [a for a, _ in slices],
            [s.step or 1 for _, s in slices],
        ]
        names = ("starts", "ends", "axes", "steps")
        steps.append(("Slice", [int64_const(g, node, c, n) for c, n in zip(cols, names)], {}))
    for a, i in sorted(gathers, reverse=True):
        steps.append(("Gather", [int64_const(g, node, i, "index")], {"axis": a}))
    if new_axes:
        steps.append(("Unsqueeze", [int64_const(g, node, new_axes, "axes")], {}))
    _chain(g, node, g.blob(source), steps)


@converts("builtins.getattr")
def tensor_attribute(g: TorchGraph, node: Any) -> None:
    """x.T (all dims reversed), x.mT (last two swapped), x.data (the same tensor)."""
    x, name = node.args
    rank = rank_of(g, x)
    if name == "data":
        return g.alias(node, x)
    if name not in ("T", "mT"):
        raise UnsupportedConversion(f"tensor attribute {name!r}")
    perm = list(reversed(range(rank))) if name == "T" else [*range(rank - 2), rank - 1, rank - 2]
    g.emit("Transpose", [g.blob(x)], node, perm=perm)
