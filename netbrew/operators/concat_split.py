"""Concat and Split, each the other's gradient.

Concat's gradient splits dY by the inputs' sizes along the axis (Shape, Concat, Split);
Split's concatenates the dY pieces, or runs SplitGradient when some pieces have none.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import copy_attrs, tmp
from netbrew.operators.schema import REQUIRED, gradient, kernel, schema
from netbrew.operators.shape import int_list

schema(
    "Concat",
    inputs=["inputs*"],
    outputs=["concat_result"],
    attrs={"axis": REQUIRED},
    doc="concat_result[..., sum(n_i), ...] = inputs_i[..., n_i, ...] joined on axis (required, "
    "in [-r, r-1]); all other dims and dtypes equal",
)


@kernel("Concat")
def concat_cpu(*inputs: np.ndarray, axis: int) -> tuple[np.ndarray]:
    first = inputs[0]
    rank = first.ndim
    if not -rank <= axis < rank:
        raise ShapeError(
            f"Concat: axis {axis} is out of range [{-rank}, {rank - 1}] for rank {rank}"
        )
    axis %= rank
    for i, x in enumerate(inputs[1:], start=1):
        if x.dtype != first.dtype:
            raise SchemaError(f"Concat: input {i} has dtype {x.dtype}, expected {first.dtype}")
        if x.ndim != rank or any(
            a != b for d, (a, b) in enumerate(zip(x.shape, first.shape, strict=True)) if d != axis
        ):
            raise ShapeError(
                f"Concat: input {i} has shape {list(x.shape)}, expected {list(first.shape)} "
                f"in every dim but axis {axis}"
            )
    return (np.concatenate(inputs, axis=axis),)


schema(
    "Split",
    inputs=["input", "split?"],
    outputs=["outputs*"],
    attrs={"axis": 0, "num_outputs": None},
    dtypes={1: "int"},
    num_outputs_attr="num_outputs",
    doc="outputs_i = input[..., offset_i : offset_i + split[i], ...] on axis=0; without split, "
    "num_outputs (default: the output count) chunks of ceil(d/n), the last smaller",
)


def split_sizes(
    x: np.ndarray, split: np.ndarray | None, axis: int, num_outputs: int, op: str = "Split"
) -> tuple[int, list[int]]:
    """The normalized axis and the piece sizes that Split cuts `x` into."""
    rank = x.ndim
    if not -rank <= axis < rank:
        raise ShapeError(f"{op}: axis {axis} is out of range [{-rank}, {rank - 1}] for rank {rank}")
    axis %= rank
    dim = x.shape[axis]
    if split is not None:
        sizes = int_list(split, "split", op)
        if len(sizes) != num_outputs:
            raise ShapeError(
                f"{op}: input 'split' has {len(sizes)} entries {sizes}, expected {num_outputs} "
                "(one per output)"
            )
        if any(s < 0 for s in sizes) or sum(sizes) != dim:
            raise ShapeError(
                f"{op}: input 'split' {sizes} must be non-negative and sum to {dim}, "
                f"the size of axis {axis} of input {list(x.shape)}"
            )
        return axis, sizes
    if num_outputs < 1:
        raise ShapeError(f"{op}: num_outputs is {num_outputs}, expected at least 1")
    chunk = math.ceil(dim / num_outputs)
    last = dim - chunk * (num_outputs - 1)
    if last < 0:
        raise ShapeError(
            f"{op}: cannot split axis {axis} of size {dim} into {num_outputs} chunks of "
            f"ceil({dim}/{num_outputs}) = {chunk}; give input 'split' instead"
        )
    return axis, [chunk] * (num_outputs - 1) + [last]


@kernel("Split")
def split_cpu(
    x: np.ndarray, split: np.ndarray | None = None, *, axis: int, num_outputs: int
) -> tuple[np.ndarray, ...]:
    axis, sizes = split_sizes(x, split, axis, num_outputs)
    return tuple(np.split(x, np.cumsum(sizes[:-1]), axis=axis))


@gradient("Concat")
def concat_grad(op, g_out, g_in):
    axis = copy_attrs(op)["axis"]
    # Shape(X_i, start=axis, end=axis + 1) is X_i's size on the axis; end=None when that is 0.
    end = None if axis == -1 else axis + 1
    sizes = [tmp(g_out[0], f"size{i}") for i in range(len(op.input))]
    ops = [op_def("Shape", [x], [n], start=axis, end=end) for x, n in zip(op.input, sizes)]
    split = tmp(g_out[0], "split")
    ops.append(op_def("Concat", sizes, [split], axis=0))
    ops.append(op_def("Split", [g_out[0], split], [g or "" for g in g_in], axis=axis))
    return ops


schema(
    "SplitGradient",
    inputs=["input", "split?", "dY*"],
    outputs=["dX"],
    attrs={"axis": 0},
    dtypes={1: "int", 2: "float"},
    onnx=False,
    doc="dX = the dY pieces (one per Split output; zeros for those named '') joined on axis=0; "
    "input and split as given to the Split; dX has input's shape and dY's dtype",
)


@gradient("Split")
def split_grad(op, g_out, g_in):
    if not g_in[0]:
        return []
    axis = copy_attrs(op).get("axis", 0)
    if all(g_out):
        return [op_def("Concat", list(g_out), [g_in[0]], axis=axis)]
    split = op.input[1] if len(op.input) > 1 else ""
    pieces = [g or "" for g in g_out]
    return [op_def("SplitGradient", [op.input[0], split, *pieces], [g_in[0]], axis=axis)]


@kernel("SplitGradient")
def split_gradient_cpu(
    x: np.ndarray, split: np.ndarray | None, *dys: np.ndarray | None, axis: int
) -> tuple[np.ndarray]:
    axis, sizes = split_sizes(x, split, axis, len(dys), op="SplitGradient")
    dtype = next((d.dtype for d in dys if d is not None), x.dtype)
    dx = np.zeros(x.shape, dtype)
    index = [slice(None)] * x.ndim
    start = 0
    for dy, size in zip(dys, sizes):  # one copy per piece
        index[axis] = slice(start, start + size)
        if dy is not None:
            dx[tuple(index)] = dy
        start += size
    return (dx,)
