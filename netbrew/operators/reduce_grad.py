"""Gradients of ReduceSum, ReduceMean and ReduceMax; ArgMax has none.

    ReduceSum(data, axes) -> reduced    backward: ReduceSumGradient(dY, data, axes) -> dX
    ReduceMean(data, axes) -> reduced   backward: ReduceMeanGradient(dY, data, axes) -> dX
    ReduceMax(data, axes) -> reduced    backward: ReduceMaxGradient(dY, data, reduced, axes) -> dX

The gradient ops take the forward's `axes` input and arguments, and read `data` for its shape
(ReduceMax also for where the maxima are).
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.reduce import _REDUCE_ATTRS, _axes
from netbrew.operators.schema import gradient, kernel, no_gradient, schema

_DOC = (
    "dY (reduced's shape) broadcast back over the reduced `axes` of data (int64 1-D input; "
    "all dims when absent or empty, none if noop_with_empty_axes=1); dX has data's shape; "
    "arguments as the forward's, defaults keepdims=1, noop_with_empty_axes=0"
)

schema(
    "ReduceSumGradient",
    inputs=["dY", "data", "axes?"],
    outputs=["dX"],
    attrs=_REDUCE_ATTRS,
    dtypes={0: "float", 1: "numeric", 2: "int"},
    onnx=False,
    doc=f"dX = {_DOC}",
)
schema(
    "ReduceMeanGradient",
    inputs=["dY", "data", "axes?"],
    outputs=["dX"],
    attrs=_REDUCE_ATTRS,
    dtypes={0: "float", 1: "numeric", 2: "int"},
    onnx=False,
    doc=f"dX = {_DOC}, divided by the number of elements reduced into each output",
)
schema(
    "ReduceMaxGradient",
    inputs=["dY", "data", "reduced", "axes?"],
    outputs=["dX"],
    attrs=_REDUCE_ATTRS,
    dtypes={0: "float", 1: "numeric", 2: "numeric", 3: "int"},
    onnx=False,
    doc=f"dX = {_DOC}, kept only where data equals its maximum (reduced) and shared equally "
    "between tied maxima",
)
no_gradient("ArgMax", "returns integer indices, which are piecewise constant")


def _maker(grad_type: str, reads_output: bool):
    def maker(op, g_out, g_in):
        if not g_in[0]:
            return []
        ins = [g_out[0], op.input[0]] + ([op.output[0]] if reads_output else [])
        ins += [op.input[1]] if len(op.input) > 1 and op.input[1] else []
        return [op_def(grad_type, ins, [g_in[0]], **copy_attrs(op))]

    maker.__name__ = maker.__qualname__ = f"{grad_type.removesuffix('Gradient').lower()}_grad"
    return maker


for _op in ("ReduceSum", "ReduceMean", "ReduceMax"):
    gradient(_op)(_maker(f"{_op}Gradient", _op == "ReduceMax"))


def _expand(
    op: str, dy: np.ndarray, x: np.ndarray, axes: np.ndarray | None, keepdims: int, noop: int
) -> tuple[np.ndarray, tuple[int, ...]]:
    """dY with the reduced dims put back as 1 (broadcastable to data), and those dims."""
    dims = _axes(op, axes, x.ndim, noop)
    if dims is None:
        return dy, ()
    kept = tuple(1 if i in dims else d for i, d in enumerate(x.shape))
    if dy.size != math.prod(kept):
        raise ValueError(
            f"{op}: input dY has shape {list(dy.shape)}, expected the reduced shape of data "
            f"{list(x.shape)} over axes {list(dims)} (keepdims={keepdims})"
        )
    return dy.reshape(kept), dims


@kernel("ReduceSumGradient")
def reduce_sum_gradient_cpu(
    dy: np.ndarray,
    x: np.ndarray,
    axes: np.ndarray | None = None,
    *,
    keepdims: int,
    noop_with_empty_axes: int,
) -> tuple[np.ndarray]:
    g, _ = _expand("ReduceSumGradient", dy, x, axes, keepdims, noop_with_empty_axes)
    return (np.broadcast_to(g, x.shape).copy(),)


@kernel("ReduceMeanGradient")
def reduce_mean_gradient_cpu(
    dy: np.ndarray,
    x: np.ndarray,
    axes: np.ndarray | None = None,
    *,
    keepdims: int,
    noop_with_empty_axes: int,
) -> tuple[np.ndarray]:
    g, dims = _expand("ReduceMeanGradient", dy, x, axes, keepdims, noop_with_empty_axes)
    count = math.prod(x.shape[d] for d in dims)
    g = g / count if count else g  # an empty reduction has no elements to pass a gradient to
    return (np.broadcast_to(g, x.shape).astype(dy.dtype),)


@kernel("ReduceMaxGradient")
def reduce_max_gradient_cpu(
    dy: np.ndarray,
    x: np.ndarray,
    reduced: np.ndarray,
    axes: np.ndarray | None = None,
    *,
    keepdims: int,
    noop_with_empty_axes: int,
) -> tuple[np.ndarray]:
    g, dims = _expand("ReduceMaxGradient", dy, x, axes, keepdims, noop_with_empty_axes)
    if not dims:
        return (g.copy(),)
    hit = x == reduced.reshape(g.shape)
    ties = hit.sum(axis=dims, keepdims=True)
    return ((hit * (g / np.maximum(ties, 1))).astype(dy.dtype, copy=False),)
