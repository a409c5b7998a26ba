"""Softmax and LogSoftmax along one axis (ONNX opset 13 semantics), computed stably.

Both gradients read only the output, so both ops may run in place.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.schema import gradient, kernel, schema

for _name, _formula in (
    ("Softmax", "exp(input) / sum(exp(input), axis)"),
    ("LogSoftmax", "input - log(sum(exp(input), axis))"),
):
    schema(
        _name,
        inputs=["input"],
        outputs=["output"],
        attrs={"axis": -1},
        inplace={0: 0},
        dtypes="float",
        doc=f"output = {_formula} (axis=-1); output has input's shape and dtype",
    )


def _axis(x: np.ndarray, axis: int, slot: str = "input") -> int:
    if not -x.ndim <= axis < x.ndim:
        raise ShapeError(
            f"argument 'axis' is {axis}, out of range for input {slot!r} with {x.ndim} dims "
            f"(expected {-x.ndim} to {x.ndim - 1})"
        )
    return axis % x.ndim


def _shifted(x: np.ndarray, axis: int) -> tuple[np.ndarray, int]:
    """x minus its max along `axis` (so exp never overflows), and the normalised axis."""
    axis = _axis(x, axis)
    if x.size == 0:
        return x.copy(), axis
    with np.errstate(invalid="ignore"):  # inf - inf = nan, as in ONNX's reference
        return x - np.max(x, axis=axis, keepdims=True), axis


@kernel("Softmax")
def softmax_cpu(x: np.ndarray, axis: int) -> tuple[np.ndarray]:
    e, axis = _shifted(x, axis)
    np.exp(e, out=e)
    with np.errstate(invalid="ignore"):
        return (e / np.sum(e, axis=axis, keepdims=True),)


@kernel("LogSoftmax")
def log_softmax_cpu(x: np.ndarray, axis: int) -> tuple[np.ndarray]:
    s, axis = _shifted(x, axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True)),)


for _name, _formula in (
    ("Softmax", "Y * (dY - sum(dY * Y, axis))"),
    ("LogSoftmax", "dY - exp(Y) * sum(dY, axis)"),
):
    schema(
        f"{_name}Gradient",
        inputs=["Y", "dY"],
        outputs=["dX"],
        attrs={"axis": -1},
        onnx=False,
        doc=f"dX = {_formula}, Y = {_name}(X, axis) (axis=-1); same shape and dtype",
    )


@kernel("SoftmaxGradient")
def softmax_gradient_cpu(y: np.ndarray, dy: np.ndarray, axis: int) -> tuple[np.ndarray]:
    axis = _axis(y, axis, "Y")
    return (y * (dy - np.sum(dy * y, axis=axis, keepdims=True)),)


@kernel("LogSoftmaxGradient")
def log_softmax_gradient_cpu(y: np.ndarray, dy: np.ndarray, axis: int) -> tuple[np.ndarray]:
    axis = _axis(y, axis, "Y")
    return (dy - np.exp(y) * np.sum(dy, axis=axis, keepdims=True),)


@gradient("Softmax", inplace_safe=True)
def softmax_grad(op, g_out, g_in):
    return [op_def("SoftmaxGradient", [op.output[0], g_out[0]], [g_in[0]], **copy_attrs(op))]


@gradient("LogSoftmax", inplace_safe=True)
def log_softmax_grad(op, g_out, g_in):
    return [op_def("LogSoftmaxGradient", [op.output[0], g_out[0]], [g_in[0]], **copy_attrs(op))]
