"""SumReduceLike: the reverse of broadcasting, used by the gradients of broadcasting ops.

Its own gradient (second order through those gradients) is the broadcast again:
dA = Expand(dC, Shape(A)). B is read for its shape only and gets none.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import tmp
from netbrew.operators.schema import gradient, kernel, schema

schema(
    "SumReduceLike",
    inputs=["A", "B"],
    outputs=["C"],
    onnx=False,
    doc="C = A summed over the axes where B (broadcast to A's shape) was expanded; "
    "C has B's shape and A's dtype",
)


def sum_to_shape(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sums `a` down to `shape`, the shape of an array that broadcast up to `a`."""
    if a.shape == tuple(shape):
        return a
    lead = a.ndim - len(shape)
    if lead < 0:
        raise ShapeError(f"cannot sum shape {list(a.shape)} down to longer {list(shape)}")
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and a.shape[lead + i] != 1
    )
    for i, d in enumerate(shape):
        if d not in (1, a.shape[lead + i]):
            raise ShapeError(f"shape {list(shape)} does not broadcast to {list(a.shape)}")
    return a.sum(axis=axes, keepdims=True).reshape(shape) if axes else a.reshape(shape)


@kernel("SumReduceLike")
def sum_reduce_like_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    return (sum_to_shape(a, b.shape).astype(a.dtype, copy=False),)


@gradient("SumReduceLike")
def sum_reduce_like_grad(op, g_out, g_in):
    """dA = dC broadcast back to A's shape; B only lends its shape, so it gets no gradient."""
    if g_in[0] is None:
        return []
    shape = tmp(g_in[0], "shape")
    return [
        op_def("Shape", [op.input[0]], [shape]),
        op_def("Expand", [g_out[0], shape], [g_in[0]]),
    ]
