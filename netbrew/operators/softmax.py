"""Softmax and LogSoftmax along one axis (ONNX opset 13 semantics), computed stably."""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.operators.schema import kernel, schema

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


def _shifted(x: np.ndarray, axis: int) -> tuple[np.ndarray, int]:
    """x minus its max along `axis` (so exp never overflows), and the normalised axis."""
    if not -x.ndim <= axis < x.ndim:
        raise ShapeError(
            f"argument 'axis' is {axis}, out of range for input 'input' with {x.ndim} dims "
            f"(expected {-x.ndim} to {x.ndim - 1})"
        )
    axis %= x.ndim
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
