"""Gradients of Range and OneHot with respect to their float scalars.

    Range(start, limit, delta) -> output
        backward: RangeGradient(doutput, start, delta) -> (dstart, ddelta)
    OneHot(indices, depth, values) -> output
        backward: OneHotGradient(doutput, indices, depth, values) -> dvalues

output[i] = start + i * delta, so dstart = sum(doutput) and ddelta = sum(i * doutput). The
element count depends on limit only through a ceil, piecewise constant: limit gets no
gradient. OneHot's output is values[1] where hot and values[0] elsewhere, so each gets the
sum of doutput over its positions; indices and depth are integers and get none.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.generators import one_hot_mask
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.schema import gradient, kernel, schema
from netbrew.operators.window import work_dtype

schema(
    "RangeGradient",
    inputs=["doutput", "start", "delta"],
    outputs=["dstart", "ddelta?"],
    dtypes={0: "float"},
    onnx=False,
    output_mask=True,
    doc="dstart = sum(doutput), ddelta = sum(i * doutput[i]), shaped like start and delta "
    "(scalars), in doutput's dtype; Range's limit has no gradient (piecewise constant)",
)
schema(
    "OneHotGradient",
    inputs=["doutput", "indices", "depth", "values"],
    outputs=["dvalues"],
    attrs={"axis": -1},
    dtypes={0: "float", 1: "numeric", 2: "numeric"},
    onnx=False,
    doc="dvalues = [sum of doutput where not hot, sum of doutput where hot], shaped like values "
    "(OneHot's [off_value, on_value]), in doutput's dtype; hot as OneHot with the same axis "
    "(default -1)",
)


@gradient("Range")
def range_grad(op, g_out, g_in):
    """start and delta only: limit moves the output length by whole steps."""
    wanted = [g_in[0] or "", g_in[2] or ""]
    if not any(wanted):
        return []
    return [op_def("RangeGradient", [g_out[0], op.input[0], op.input[2]], wanted)]


@gradient("OneHot")
def one_hot_grad(op, g_out, g_in):
    if len(g_in) < 3 or not g_in[2]:
        return []
    return [op_def("OneHotGradient", [g_out[0], *op.input], [g_in[2]], **copy_attrs(op))]


@kernel("RangeGradient")
def range_gradient_cpu(
    dy: np.ndarray, start: np.ndarray, delta: np.ndarray, *, output_mask: tuple[bool, ...]
) -> tuple[np.ndarray | None, np.ndarray | None]:
    if dy.ndim != 1:
        raise ShapeError(
            f"RangeGradient: input 'doutput' has shape {list(dy.shape)}, expected 1-D "
            "(Range's output)"
        )
    acc = work_dtype(dy.dtype)  # float16/bfloat16 sum in float32
    g = dy.astype(acc, copy=False)
    d_start = d_delta = None
    if output_mask[0]:
        d_start = np.full(np.shape(start), g.sum(), dy.dtype)
    if len(output_mask) > 1 and output_mask[1]:
        steps = np.arange(dy.size, dtype=acc)
        d_delta = np.full(np.shape(delta), steps @ g, dy.dtype)
    return d_start, d_delta


@kernel("OneHotGradient")
def one_hot_gradient_cpu(
    dy: np.ndarray, indices: np.ndarray, depth: np.ndarray, values: np.ndarray, *, axis: int
) -> tuple[np.ndarray]:
    hot = one_hot_mask(indices, depth, values, axis, op="OneHotGradient")
    if dy.shape != hot.shape:
        raise ShapeError(
            f"OneHotGradient: input 'doutput' has shape {list(dy.shape)}, expected "
            f"{list(hot.shape)} (OneHot's output)"
        )
    acc = work_dtype(dy.dtype)
    sums = [dy.sum(where=mask, dtype=acc) for mask in (~hot, hot)]
    return (np.array(sums, acc).astype(dy.dtype).reshape(np.shape(values)),)
