"""Gradients of TopK, Compress and Unique: dY put back where the forward picked it from.

    TopK(X, K) -> (Values, Indices)
        backward: GatherElementsGradient(dValues, X, Indices) -> dX
    Compress(input, condition) -> output
        backward: CompressGradient(doutput, input, condition) -> dinput
    Unique(X) -> (Y, indices, inverse_indices, counts)
        backward: UniqueGradient(dY, X) -> dX

Each picks elements of X by a data-dependent choice that is locally constant, so the
gradient is a scatter: TopK's picks along one axis are distinct, Compress's are the true
condition entries, and Unique's Y[k] is X at the first occurrence of the k-th unique value
(or slice), so dY[k] goes there alone. The integer inputs (K, condition) and outputs
(Indices, indices, inverse_indices, counts) get and pass no gradient.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import copy_attrs, tmp
from netbrew.operators.schema import gradient, kernel, schema
from netbrew.operators.selection import axis_of, unique_cpu

schema(
    "CompressGradient",
    inputs=["doutput", "input", "condition"],
    outputs=["dinput"],
    attrs={"axis": None},
    dtypes={0: "float", 2: "bool"},
    onnx=False,
    doc="dinput = zeros like input (doutput's dtype), with the slices along axis (or the "
    "elements of the flattened input, axis unset) where condition is true set to doutput",
)
schema(
    "UniqueGradient",
    inputs=["dY", "X"],
    outputs=["dX"],
    attrs={"axis": None, "sorted": 1},
    dtypes={0: "float"},
    onnx=False,
    doc="dX = zeros like X (dY's dtype), with dX[first occurrence of the k-th unique element "
    "(or slice along axis)] = dY[k], Unique's order (sorted=1: ascending); defaults axis "
    "unset, sorted=1",
)


@gradient("TopK")
def top_k_grad(op, g_out, g_in):
    """dX = dValues scattered to Indices along axis (GatherElements' adjoint): the K picks
    of a slice are distinct, so nothing accumulates."""
    if not g_in[0] or g_out[0] is None:
        return []
    attrs = copy_attrs(op)
    ops, indices = [], op.output[1] if len(op.output) > 1 else ""
    if not indices:  # the forward left Indices unnamed: compute them again
        indices = tmp(g_in[0], "topk_indices")
        values = tmp(g_in[0], "topk_values")
        ops.append(op_def("TopK", list(op.input), [values, indices], **attrs))
    scatter = op_def(
        "GatherElementsGradient",
        [g_out[0], op.input[0], indices],
        [g_in[0]],
        axis=attrs.get("axis", -1),
    )
    return [*ops, scatter]


@gradient("Compress")
def compress_grad(op, g_out, g_in):
    if not g_in[0]:
        return []
    return [op_def("CompressGradient", [g_out[0], *op.input], [g_in[0]], **copy_attrs(op))]


@gradient("Unique")
def unique_grad(op, g_out, g_in):
    """Only Y is differentiable; the other outputs are integer."""
    if not g_in[0] or g_out[0] is None:
        return []
    return [op_def("UniqueGradient", [g_out[0], op.input[0]], [g_in[0]], **copy_attrs(op))]


def _check_dy(op: str, dy: np.ndarray, expected: tuple[int, ...], what: str) -> None:
    if dy.shape != tuple(expected):
        raise ShapeError(
            f"{op}: input {what} has shape {list(dy.shape)}, expected {list(expected)}, the "
            "shape of the forward output"
        )


@kernel("CompressGradient")
def compress_gradient_cpu(
    dy: np.ndarray, x: np.ndarray, condition: np.ndarray, *, axis: int | None
) -> tuple[np.ndarray]:
    op = "CompressGradient"
    shape, dim = ((x.size,), 0) if axis is None else (x.shape, axis_of(axis, x.ndim, op))
    # entries past the dim's end are false (the forward rejects a true one there)
    keep = np.flatnonzero(np.asarray(condition).reshape(-1)[: shape[dim]])
    _check_dy(op, dy, shape[:dim] + (keep.size,) + shape[dim + 1 :], "doutput")
    dx = np.zeros(shape, dy.dtype)
    dx[(slice(None),) * dim + (keep,)] = dy
    return (dx.reshape(x.shape),)


@kernel("UniqueGradient")
def unique_gradient_cpu(
    dy: np.ndarray,
    x: np.ndarray,
    *,
    axis: int | None,
    sorted: int,  # noqa: A002
) -> tuple[np.ndarray]:
    op = "UniqueGradient"
    shape, dim = ((x.size,), 0) if axis is None else (x.shape, axis_of(axis, x.ndim, op))
    first = unique_cpu(x, axis=axis, sorted=sorted)[1]
    _check_dy(op, dy, shape[:dim] + (first.size,) + shape[dim + 1 :], "dY")
    dx = np.zeros(shape, dy.dtype)
    dx[(slice(None),) * dim + (first,)] = dy  # first occurrences are distinct: no overlap
    return (dx.reshape(x.shape),)
