"""Comparisons with ONNX multidirectional broadcasting (Equal, Less, Greater) and Where.

Comparisons have no gradient (their bool outputs are piecewise constant). Where passes the
output gradient to X where condition holds and to Y elsewhere; condition gets none.
"""

from __future__ import annotations

import numpy as np

from netbrew.netdef.net import op_def
from netbrew.operators.arithmetic import check_broadcast, check_same_dtype
from netbrew.operators.arithmetic_grad import shape_of, value_of
from netbrew.operators.schema import gradient, kernel, no_gradient, schema
from netbrew.operators.sum_reduce_like import sum_to_shape

for _name, _sign, _dtypes in (
    ("Equal", "==", "any"),
    ("Less", "<", "numeric"),
    ("Greater", ">", "numeric"),
):
    schema(
        _name,
        inputs=["A", "B"],
        outputs=["C"],
        dtypes=_dtypes,
        doc=f"C = A {_sign} B; A and B broadcast (ONNX multidirectional), same dtype; "
        "C: bool, broadcast shape",
    )
    no_gradient(_name, "a bool output is piecewise constant: zero gradient almost everywhere")


def _compare(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    named = {"A": a, "B": b}
    check_same_dtype(named, allow_bool=True)
    check_broadcast(named)
    return a, b


@kernel("Equal")
def equal_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    return (np.equal(*_compare(a, b)),)


@kernel("Less")
def less_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    return (np.less(*_compare(a, b)),)


@kernel("Greater")
def greater_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    return (np.greater(*_compare(a, b)),)


schema(
    "Where",
    inputs=["condition", "X", "Y"],
    outputs=["output"],
    inplace={1: 0},
    dtypes={0: "bool"},
    doc="output = condition ? X : Y; condition (bool), X, Y broadcast (ONNX multidirectional); "
    "X and Y share a dtype, which output keeps",
)


@kernel("Where")
def where_cpu(condition: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray]:
    check_same_dtype({"X": x, "Y": y}, allow_bool=True)
    check_broadcast({"condition": condition, "X": x, "Y": y})
    return (np.where(condition, x, y),)


schema(
    "WhereGradient",
    inputs=["condition", "doutput", "X?", "Y?"],
    outputs=["dX", "dY"],
    onnx=False,
    output_mask=True,
    doc="dX = sum_like(condition ? doutput : 0, X), dY = sum_like(condition ? 0 : doutput, Y); "
    "X and Y are read for their shapes only; doutput's dtype",
)


@kernel("WhereGradient")
def where_gradient_cpu(condition, d, x, y, output_mask) -> tuple:
    zero = np.zeros((), d.dtype)
    dx = sum_to_shape(np.where(condition, d, zero), x.shape) if output_mask[0] else None
    dy = sum_to_shape(np.where(condition, zero, d), y.shape) if output_mask[1] else None
    return dx, dy


@gradient("Where", inplace_safe=True)
def where_grad(op, g_out, g_in):
    """Reads condition and the shapes of X and Y, so Where may overwrite X in place."""
    likes = [shape_of(op, i, g_out[0]) if g_in[i] else "" for i in (1, 2)]
    outs = [g_in[i] or "" for i in (1, 2)]
    if not any(outs):
        return []
    return [op_def("WhereGradient", [value_of(op, 0), g_out[0], *likes], outs)]
