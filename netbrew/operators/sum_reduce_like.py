"""SumReduceLike: the reverse of broadcasting, used by the gradients of broadcasting ops."""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.operators.schema import kernel, no_gradient, schema

schema(
    "SumReduceLike",
    inputs=["A", "B"],
    outputs=["C"],
    onnx=False,
    doc="C = A summed over the axes where B (broadcast to A's shape) was expanded; "
    "C has B's shape and A's dtype",
)
no_gradient("SumReduceLike", "appears only inside gradients; second order is not supported")


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
