"""Flatten, Reshape, Transpose, Shape, Squeeze and Unsqueeze.

These kernels return NumPy views where they can (no copy), like the ONNX reference.
Gradients: ops that only regroup dims reshape dY back to Shape(X); Transpose transposes
dY by the inverse permutation; Shape has none.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import copy_attrs, tmp
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import gradient, kernel, no_gradient, schema


def normalize_axes(axes: Sequence[int], rank: int, what: str) -> list[int]:
    """Maps axes in [-rank, rank - 1] to [0, rank - 1]; rejects out-of-range and repeated ones.

    Args:
        axes: the requested axes, possibly negative.
        rank: the rank they index.
        what: who asks, for the message (e.g. "Squeeze input 'axes'").
    """
    out = []
    for axis in (int(a) for a in axes):
        if not -rank <= axis < rank:
            raise ShapeError(f"{what}: axis {axis} is out of range [{-rank}, {rank - 1}]")
        out.append(axis % rank if rank else axis)
    if len(set(out)) != len(out):
        raise ShapeError(f"{what}: axes {[int(a) for a in axes]} repeat an axis")
    return out


def int_list(values: np.ndarray | None, name: str, what: str) -> list[int]:
    """A 1-D (or scalar) integer input as a list of Python ints."""
    array = np.asarray(values)
    if array.ndim > 1:
        raise ShapeError(f"{what}: input {name!r} has {array.ndim} dims, expected a 1-D tensor")
    return [int(v) for v in array.reshape(-1)]


schema(
    "Flatten",
    inputs=["input"],
    outputs=["output"],
    attrs={"axis": 1},
    doc="output[prod(d[:axis]), prod(d[axis:])] = input[d...]; axis=1 in [-r, r]",
)


@kernel("Flatten")
def flatten_cpu(x: np.ndarray, axis: int) -> tuple[np.ndarray]:
    rank = x.ndim
    if not -rank <= axis <= rank:
        raise ShapeError(f"Flatten: axis {axis} is out of range [{-rank}, {rank}] for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    return (x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:])),)


schema(
    "Reshape",
    inputs=["data", "shape"],
    outputs=["reshaped"],
    attrs={"allowzero": 0},
    dtypes={1: "int"},
    doc="reshaped[shape'] = data; shape int64 [k]: 0 copies data's dim (allowzero=0), "
    "-1 infers one dim",
)


@kernel("Reshape")
def reshape_cpu(x: np.ndarray, shape: np.ndarray, allowzero: int) -> tuple[np.ndarray]:
    dims = reshape_dims(x.shape, int_list(shape, "shape", "Reshape"), allowzero)
    return (x.reshape(check_numel(dims, "Reshape output shape")),)


def reshape_dims(in_shape: Sequence[int], dims: Sequence[int], allowzero: int = 0) -> list[int]:
    """The dims Reshape gives data of `in_shape` for its `shape` input `dims`: 0 copies
    data's dim (allowzero=0), -1 infers one dim. Raises ShapeError as Reshape does."""
    dims, size = list(dims), math.prod(in_shape)
    where = f"Reshape of data {list(in_shape)} ({size} elements) to shape {dims}"
    if sum(d == -1 for d in dims) > 1:
        raise ShapeError(f"{where}: at most one dimension may be -1")
    if any(d < -1 for d in dims):
        raise ShapeError(f"{where}: dimensions must be >= -1")
    if allowzero and 0 in dims and -1 in dims:
        raise ShapeError(f"{where}: with allowzero=1, shape cannot hold both 0 and -1")
    if not allowzero:
        for i, d in enumerate(dims):
            if d == 0:
                if i >= len(in_shape):
                    raise ShapeError(
                        f"{where}: 0 at position {i} copies a dim of data, which has only "
                        f"{len(in_shape)} dims (set allowzero=1 for a literal 0)"
                    )
                dims[i] = in_shape[i]
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if known == 0 or size % known:
            raise ShapeError(f"{where}: cannot infer the -1 dimension from {known} elements")
        dims[dims.index(-1)] = size // known
    if math.prod(dims) != size:
        raise ShapeError(f"{where}: the new shape holds {math.prod(dims)} elements")
    return dims


schema(
    "Transpose",
    inputs=["data"],
    outputs=["transposed"],
    attrs={"perm": None},
    doc="transposed[d[perm[0]], ..., d[perm[r-1]]] = data; perm defaults to reversed dims",
)


@kernel("Transpose")
def transpose_cpu(x: np.ndarray, perm: Sequence[int] | None) -> tuple[np.ndarray]:
    if perm is None:
        return (x.transpose(),)
    perm = [int(p) for p in perm]
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(
            f"Transpose: perm {perm} is not a permutation of 0..{x.ndim - 1} "
            f"for data of rank {x.ndim}"
        )
    return (x.transpose(perm),)


schema(
    "Shape",
    inputs=["data"],
    outputs=["shape"],
    attrs={"start": 0, "end": None},
    doc="shape[k] int64 = dims(data)[start:end]; start=0, end=rank, negatives add rank, clamped",
)


@kernel("Shape")
def shape_cpu(x: np.ndarray, start: int, end: int | None) -> tuple[np.ndarray]:
    # Python slicing clamps and wraps negatives exactly as ONNX specifies.
    return (np.array(x.shape[start:end], dtype=np.int64),)


schema(
    "Squeeze",
    inputs=["data", "axes?"],
    outputs=["squeezed"],
    dtypes={1: "int"},
    doc="squeezed = data without the size-1 dims in axes int64 [k] (all size-1 dims if omitted)",
)


@kernel("Squeeze")
def squeeze_cpu(x: np.ndarray, axes: np.ndarray | None = None) -> tuple[np.ndarray]:
    if axes is None:
        return (x.reshape([d for d in x.shape if d != 1]),)
    dims = normalize_axes(int_list(axes, "axes", "Squeeze"), x.ndim, "Squeeze input 'axes'")
    wrong = [a for a in dims if x.shape[a] != 1]
    if wrong:
        raise ShapeError(
            f"Squeeze: data {list(x.shape)} has size {x.shape[wrong[0]]} on axis {wrong[0]}, "
            "expected 1"
        )
    return (np.squeeze(x, axis=tuple(dims)),)


schema(
    "Unsqueeze",
    inputs=["data", "axes"],
    outputs=["expanded"],
    dtypes={1: "int"},
    doc="expanded = data with size-1 dims inserted at axes int64 [k] (of the output, rank r + k)",
)


@kernel("Unsqueeze")
def unsqueeze_cpu(x: np.ndarray, axes: np.ndarray) -> tuple[np.ndarray]:
    requested = int_list(axes, "axes", "Unsqueeze")
    dims = normalize_axes(requested, x.ndim + len(requested), "Unsqueeze input 'axes'")
    return (np.expand_dims(x, tuple(dims)),)


def reshape_back_grad(op, g_out, g_in):
    """dX = Reshape(dY, Shape(X)): the gradient of every op that only regroups dims."""
    if not g_in[0]:
        return []
    shape = tmp(g_in[0], "shape")
    return [
        op_def("Shape", [op.input[0]], [shape]),
        # allowzero: a 0 in Shape(X) is an empty dim, not "copy dY's dim".
        op_def("Reshape", [g_out[0], shape], [g_in[0]], allowzero=1),
    ]


for _op in ("Flatten", "Reshape", "Squeeze", "Unsqueeze"):
    gradient(_op)(reshape_back_grad)


@gradient("Transpose", inplace_safe=True)
def transpose_grad(op, g_out, g_in):
    perm = copy_attrs(op).get("perm")
    inverse = None if perm is None else [int(i) for i in np.argsort(perm)]
    return [op_def("Transpose", [g_out[0]], [g_in[0]], perm=inverse)]


no_gradient("Shape", "returns integer dims, which do not vary with the data's values")
