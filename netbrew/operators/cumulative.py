"""CumSum, CumProd and ReverseSequence: scans and reversals along one axis.

    CumSum(x, axis) -> y                backward: CumSum(dy, axis, reverse=1-reverse) -> dx
    CumProd(x, axis) -> y               backward: CumProdGradient(x, y, dy, axis) -> dx
    ReverseSequence(input, lens) -> Y   backward: ReverseSequence(dY, lens) -> dinput

CumProd's gradient divides by x, so it needs x without zeros.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.schema import gradient, kernel, schema

_SCAN_ATTRS = {"exclusive": 0, "reverse": 0}

schema(
    "CumSum",
    inputs=["x", "axis"],
    outputs=["y"],
    attrs=_SCAN_ATTRS,
    dtypes={1: "int"},
    doc="y[j] = sum of x[i] for i <= j along axis (an int scalar input); i < j if exclusive, "
    "i >= j (or >) if reverse; y has x's shape and dtype; defaults exclusive=0, reverse=0",
)
schema(
    "CumProd",
    inputs=["x", "axis"],
    outputs=["y"],
    attrs=_SCAN_ATTRS,
    dtypes={1: "int"},
    doc="y[j] = product of x[i] for i <= j along axis (an int scalar input); i < j if "
    "exclusive, i >= j (or >) if reverse; y has x's shape and dtype; defaults exclusive=0, "
    "reverse=0",
)
schema(
    "CumProdGradient",
    inputs=["x", "y", "dy", "axis"],
    outputs=["dx"],
    attrs=_SCAN_ATTRS,
    dtypes={0: "float", 3: "int"},
    onnx=False,
    doc="dx[i] = (sum of dy[j] * y[j] over the j whose product includes x[i]) / x[i]; x must "
    "have no zeros; x's shape and dtype",
)
schema(
    "ReverseSequence",
    inputs=["input", "sequence_lens"],
    outputs=["Y"],
    attrs={"batch_axis": 1, "time_axis": 0},
    dtypes={1: "int"},
    doc="Y = input with the first sequence_lens[b] steps along time_axis reversed for each "
    "batch entry b (int64 [batch]); later steps are copied; time_axis and batch_axis are 0 "
    "and 1 in some order; defaults batch_axis=1, time_axis=0",
)


def _axis(axis: np.ndarray, ndim: int, op: str) -> int:
    if np.size(axis) != 1:
        raise ShapeError(f"{op}: input 'axis' has shape {list(np.shape(axis))}, expected a scalar")
    a = int(np.asarray(axis).reshape(-1)[0])
    if not -ndim <= a < ndim:
        raise ShapeError(f"{op}: axis {a} is out of range for x of rank {ndim}")
    return a % ndim


def _scan(x, axis, exclusive, reverse, fn, identity, op) -> np.ndarray:
    """fn (np.cumsum or np.cumprod) along axis, shifted by one when exclusive."""
    dim = _axis(axis, x.ndim, op)
    acc = np.float32 if x.dtype.kind == "V" or x.dtype == np.float16 else x.dtype
    a = np.flip(x, dim) if reverse else x
    y = fn(a, axis=dim, dtype=acc)
    if exclusive and y.shape[dim]:
        head = np.full_like(np.take(y, [0], axis=dim), identity)
        y = np.concatenate([head, np.take(y, np.arange(y.shape[dim] - 1), axis=dim)], axis=dim)
    if reverse:
        y = np.flip(y, dim)
    return np.ascontiguousarray(y).astype(x.dtype, copy=False)


@kernel("CumSum")
def cumsum_cpu(x: np.ndarray, axis: np.ndarray, exclusive: int, reverse: int) -> tuple:
    return (_scan(x, axis, exclusive, reverse, np.cumsum, 0, "CumSum"),)


@kernel("CumProd")
def cumprod_cpu(x: np.ndarray, axis: np.ndarray, exclusive: int, reverse: int) -> tuple:
    return (_scan(x, axis, exclusive, reverse, np.cumprod, 1, "CumProd"),)


@kernel("CumProdGradient")
def cumprod_gradient_cpu(
    x: np.ndarray, y: np.ndarray, dy: np.ndarray, axis: np.ndarray, exclusive: int, reverse: int
) -> tuple[np.ndarray]:
    if not x.shape == y.shape == dy.shape:
        raise ShapeError(
            f"CumProdGradient: x {list(x.shape)}, y {list(y.shape)} and dy {list(dy.shape)} "
            "must have one shape"
        )
    # x[i] enters y[j] for the j after it in scan order: sum dy * y over those, opposite way.
    total = _scan(dy * y, axis, exclusive, 1 - reverse, np.cumsum, 0, "CumProdGradient")
    with np.errstate(divide="ignore", invalid="ignore"):
        return ((total / x).astype(x.dtype, copy=False),)


@kernel("ReverseSequence")
def reverse_sequence_cpu(
    x: np.ndarray, sequence_lens: np.ndarray, batch_axis: int, time_axis: int
) -> tuple[np.ndarray]:
    if {batch_axis, time_axis} != {0, 1} or x.ndim < 2:
        raise ShapeError(
            f"ReverseSequence: batch_axis={batch_axis} and time_axis={time_axis} must be 0 and "
            f"1 in some order, on input of rank >= 2 (got rank {x.ndim})"
        )
    batch, steps = x.shape[batch_axis], x.shape[time_axis]
    lens = np.asarray(sequence_lens).astype(np.int64).reshape(-1)
    if lens.shape != (batch,):
        raise ShapeError(
            f"ReverseSequence: input 'sequence_lens' has shape {list(np.shape(sequence_lens))}"
            f", expected [{batch}] (the batch size)"
        )
    if np.any((lens < 0) | (lens > steps)):
        raise ShapeError(f"ReverseSequence: sequence_lens {lens.tolist()} must lie in [0, {steps}]")
    t = np.arange(steps)
    source = np.where(t < lens[:, None], lens[:, None] - 1 - t, t)  # [batch, steps]
    xm = np.moveaxis(x, (batch_axis, time_axis), (0, 1))
    y = xm[np.arange(batch)[:, None], source]
    return (np.ascontiguousarray(np.moveaxis(y, (0, 1), (batch_axis, time_axis))),)


@gradient("CumSum")
def cumsum_grad(op, g_out, g_in):
    """dx = CumSum(dy) running the other way, with the same exclusive."""
    if not g_in[0]:
        return []
    attrs = copy_attrs(op)
    attrs["reverse"] = 1 - int(attrs.get("reverse", 0))
    return [op_def("CumSum", [g_out[0], op.input[1]], [g_in[0]], **attrs)]


@gradient("CumProd")
def cumprod_grad(op, g_out, g_in):
    if not g_in[0]:
        return []
    inputs = [op.input[0], op.output[0], g_out[0], op.input[1]]
    return [op_def("CumProdGradient", inputs, [g_in[0]], **copy_attrs(op))]


@gradient("ReverseSequence")
def reverse_sequence_grad(op, g_out, g_in):
    """dinput = ReverseSequence(dY): reversing the same prefixes is its own inverse."""
    if not g_in[0]:
        return []
    return [op_def("ReverseSequence", [g_out[0], op.input[1]], [g_in[0]], **copy_attrs(op))]
