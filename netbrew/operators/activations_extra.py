"""Celu, Swish, HardSwish, Mish, Softsign, ThresholdedRelu, Shrink and Hardmax.

All keep the input's shape and dtype (bfloat16 is computed in float32 and rounded back).
Gradients of all but Hardmax are in activations_extra_grad.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.operators.schema import kernel, no_gradient, schema
from netbrew.operators.unary_math import check_float, check_real, float_apply


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) without overflow, in x's dtype."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def softplus(x: np.ndarray) -> np.ndarray:
    """log(1 + exp(x)) without overflow, in x's dtype."""
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _elementwise(name: str, formula: str, attrs: dict | None = None, slots=("X", "Y")):
    schema(
        name,
        inputs=[slots[0]],
        outputs=[slots[1]],
        attrs=attrs,
        inplace={0: 0},
        doc=f"{slots[1]} = {formula}, elementwise; {slots[0]} float (bfloat16 included); "
        "same shape and dtype",
    )
    return kernel(name)


@_elementwise(
    "Celu", "max(0, X) + min(0, alpha * (exp(X / alpha) - 1)) (alpha=1.0)", {"alpha": 1.0}
)
def celu_cpu(x: np.ndarray, alpha: float) -> tuple[np.ndarray]:
    check_float(x, "X")
    if alpha == 0:
        raise ValueError("argument 'alpha' is 0; Celu divides by it")
    return (
        float_apply(lambda v: np.maximum(v, 0) + np.minimum(0, alpha * np.expm1(v / alpha)), x),
    )


@_elementwise("Swish", "X * sigmoid(alpha * X) (alpha=1.0)", {"alpha": 1.0})
def swish_cpu(x: np.ndarray, alpha: float) -> tuple[np.ndarray]:
    check_float(x, "X")
    return (float_apply(lambda v: v * sigmoid(alpha * v), x),)


@_elementwise("HardSwish", "X * max(0, min(1, X / 6 + 0.5))")
def hard_swish_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    check_float(x, "X")
    return (float_apply(lambda v: v * np.clip(v * (1 / 6) + 0.5, 0, 1), x),)


@_elementwise("Mish", "X * tanh(softplus(X)) = X * tanh(log(1 + exp(X)))")
def mish_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    check_float(x, "X")
    return (float_apply(lambda v: v * np.tanh(softplus(v)), x),)


@_elementwise("Softsign", "input / (1 + |input|)", slots=("input", "output"))
def softsign_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    check_float(x, "input")
    return (float_apply(lambda v: v / (1 + np.abs(v)), x),)


@_elementwise("ThresholdedRelu", "X if X > alpha else 0 (alpha=1.0)", {"alpha": 1.0})
def thresholded_relu_cpu(x: np.ndarray, alpha: float) -> tuple[np.ndarray]:
    check_float(x, "X")
    return (float_apply(lambda v: np.where(v > alpha, v, 0), x),)


schema(
    "Shrink",
    inputs=["input"],
    outputs=["output"],
    attrs={"bias": 0.0, "lambd": 0.5},
    inplace={0: 0},
    doc="output = input + bias if input < -lambd, input - bias if input > lambd, else 0 "
    "(bias=0.0, lambd=0.5), elementwise; input integer or float; same shape and dtype",
)


@kernel("Shrink")
def shrink_cpu(x: np.ndarray, bias: float, lambd: float) -> tuple[np.ndarray]:
    check_real(x, "input")

    def shrink(v):
        return np.where(v < -lambd, v + bias, np.where(v > lambd, v - bias, 0))

    if x.dtype.kind in "iu":
        return (shrink(x.astype(np.float64)).astype(x.dtype),)
    return (float_apply(shrink, x),)


schema(
    "Hardmax",
    inputs=["input"],
    outputs=["output"],
    attrs={"axis": -1},
    doc="output = 1 at the first maximum of input along `axis` (default -1), 0 elsewhere; "
    "input float; same shape and dtype",
)
no_gradient("Hardmax", "a one-hot output is piecewise constant: zero gradient almost everywhere")


@kernel("Hardmax")
def hardmax_cpu(x: np.ndarray, axis: int) -> tuple[np.ndarray]:
    check_float(x, "input")
    if not -x.ndim <= axis < max(x.ndim, 1):
        raise ShapeError(
            f"argument 'axis' is {axis}, out of range for input of rank {x.ndim} "
            f"(expected {-x.ndim} to {x.ndim - 1})"
        )
    if x.ndim == 0:
        return (np.ones_like(x),)
    axis %= x.ndim
    out = np.zeros(x.shape, dtype=x.dtype)
    if x.size:
        values = x if x.dtype.kind == "f" else x.astype(np.float32)
        first = np.expand_dims(np.argmax(values, axis=axis), axis)
        np.put_along_axis(out, first, np.ones((), x.dtype), axis=axis)
    return (out,)
