"""Gradients of the activations.

Where the derivative is exactly a function of the output Y, the gradient op reads Y (not X)
and the activation may run in place: Relu, Sigmoid, Tanh, Softplus, HardSigmoid, and
LeakyRelu, Elu and Selu with alpha >= 0 (then Y > 0 exactly where X > 0). With alpha < 0
those three read X as well, and refuse to be differentiated when written in place. PRelu
and Gelu read X.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.netdef.net import op_def
from netbrew.operators.activations import SELU_ALPHA, SELU_GAMMA, align_slope, normal_cdf
from netbrew.operators.activations_jit import relu_gradient
from netbrew.operators.arithmetic_grad import parsed_attrs, value_of
from netbrew.operators.schema import gradient, kernel, schema
from netbrew.operators.sum_reduce_like import sum_to_shape

_GELU_C = 0.044715


def _where(cond: np.ndarray, a: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """a where cond, else 0, in dY's dtype."""
    return np.where(cond, a, np.zeros((), dy.dtype)).astype(dy.dtype, copy=False)


def _from_y(name: str, formula: str, attrs: dict | None = None):
    """Declares `<name>Gradient(Y, dY) -> dX` and the in-place-safe maker of `name`."""
    schema(
        f"{name}Gradient",
        inputs=["Y", "dY"],
        outputs=["dX"],
        attrs=attrs,
        onnx=False,
        doc=f"dX = {formula}, Y = {name}(X); same shape and dtype",
    )

    @gradient(name, inplace_safe=True)
    def maker(op, g_out, g_in):
        args = {k: v for k, v in parsed_attrs(op).items() if k in (attrs or {})}
        return [op_def(f"{name}Gradient", [op.output[0], g_out[0]], [g_in[0]], **args)]

    maker.__name__ = f"{name.lower()}_grad"
    return kernel(f"{name}Gradient")


@_from_y("Relu", "dY where Y > 0, else 0")
def relu_gradient_cpu(y: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray]:
    dx = relu_gradient(y, dy)
    return (_where(y > 0, dy, dy) if dx is None else dx,)


@_from_y("Sigmoid", "dY * Y * (1 - Y)")
def sigmoid_gradient_cpu(y: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray]:
    return (dy * y * (1 - y),)


@_from_y("Tanh", "dY * (1 - Y^2)")
def tanh_gradient_cpu(y: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray]:
    return (dy * (1 - y * y),)


@_from_y("Softplus", "dY * sigmoid(X) = dY * (1 - exp(-Y))")
def softplus_gradient_cpu(y: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray]:
    return (dy * -np.expm1(-y),)


@_from_y(
    "HardSigmoid", "alpha * dY where 0 < Y < 1, else 0 (alpha=0.2, beta=0.5)",
    {"alpha": 0.2, "beta": 0.5},
)  # fmt: skip
def hard_sigmoid_gradient_cpu(y, dy, alpha: float, beta: float) -> tuple[np.ndarray]:
    return (_where((y > 0) & (y < 1), dy * alpha, dy),)


def _maybe_x(op) -> list[str]:
    """[X] when alpha < 0 (Y no longer tells where X > 0), else []."""
    return [value_of(op, 0)] if parsed_attrs(op)["alpha"] < 0 else []


def _y_or_x_grad(op, g_out, g_in):
    """LeakyRelu, Elu, Selu: reads Y, and X too when alpha < 0."""
    args = parsed_attrs(op)
    return [
        op_def(f"{op.type}Gradient", [op.output[0], g_out[0], *_maybe_x(op)], [g_in[0]], **args)
    ]


for _name, _formula, _attrs in (
    ("LeakyRelu", "dY where X > 0, else alpha * dY (alpha=0.01)", {"alpha": 0.01}),
    ("Elu", "dY where X > 0, else dY * (Y + alpha) (alpha=1.0)", {"alpha": 1.0}),
    (
        "Selu",
        "gamma * dY where X > 0, else dY * (Y + gamma * alpha) (ONNX's alpha, gamma)",
        {"alpha": SELU_ALPHA, "gamma": SELU_GAMMA},
    ),
):
    schema(
        f"{_name}Gradient",
        inputs=["Y", "dY", "X?"],
        outputs=["dX"],
        attrs=_attrs,
        onnx=False,
        doc=f"dX = {_formula}; where X > 0 is read from X when given, else from Y (exact for "
        "alpha >= 0); same shape and dtype",
    )
    gradient(_name, inplace_safe=True)(_y_or_x_grad)


@kernel("LeakyReluGradient")
def leaky_relu_gradient_cpu(y, dy, x=None, *, alpha: float) -> tuple[np.ndarray]:
    return (np.where((y if x is None else x) > 0, dy, dy * alpha),)


@kernel("SeluGradient")
def selu_gradient_cpu(y, dy, x=None, *, alpha: float, gamma: float) -> tuple[np.ndarray]:
    positive = (y * gamma if x is None else x) > 0
    return (np.where(positive, dy * gamma, dy * (y + gamma * alpha)).astype(dy.dtype),)


@kernel("EluGradient")
def elu_gradient_cpu(y, dy, x=None, *, alpha: float) -> tuple[np.ndarray]:
    return selu_gradient_cpu(y, dy, x, alpha=alpha, gamma=1.0)


schema(
    "PReluGradient",
    inputs=["X", "slope", "dY"],
    outputs=["dX", "dslope"],
    onnx=False,
    output_mask=True,
    doc="dX = dY where X >= 0, else slope * dY; dslope = sum_like(dY * X where X < 0, slope); "
    "shapes and dtypes of X and slope",
)


@kernel("PReluGradient")
def prelu_gradient_cpu(x, slope, dy, output_mask) -> tuple:
    negative = x < 0
    aligned = align_slope(x, slope)
    dx = np.where(negative, dy * aligned, dy) if output_mask[0] else None
    dslope = None
    if output_mask[1]:
        dslope = sum_to_shape(_where(negative, dy * x, dy), aligned.shape).reshape(slope.shape)
    return dx, dslope


@gradient("PRelu")
def prelu_grad(op, g_out, g_in):
    return [op_def("PReluGradient", [*op.input, g_out[0]], [g or "" for g in g_in])]


schema(
    "GeluGradient",
    inputs=["X", "dY"],
    outputs=["dX"],
    attrs={"approximate": "none"},
    onnx=False,
    doc="dX = dY * (Phi(X) + X * phi(X)) (approximate='none'), or the derivative of the tanh "
    "form (approximate='tanh'); same shape and dtype",
)


@kernel("GeluGradient")
def gelu_gradient_cpu(x: np.ndarray, dy: np.ndarray, approximate: str) -> tuple[np.ndarray]:
    if approximate == "none":
        x64 = x.astype(np.float64)
        pdf = np.exp(-0.5 * x64 * x64) / math.sqrt(2 * math.pi)
        return ((dy * (normal_cdf(x64) + x64 * pdf)).astype(dy.dtype, copy=False),)
    if approximate == "tanh":
        k = math.sqrt(2 / math.pi)
        with np.errstate(over="ignore", invalid="ignore"):
            t = np.tanh(k * (x + _GELU_C * x * x * x))
            sech2 = 1 - t * t
            slope = np.where(sech2 == 0, 0, 0.5 * x * sech2 * k * (1 + 3 * _GELU_C * x * x))
        return ((dy * (0.5 * (1 + t) + slope)).astype(dy.dtype, copy=False),)
    raise ValueError(f"argument 'approximate' is {approximate!r}, expected 'none' or 'tanh'")


@gradient("Gelu")
def gelu_grad(op, g_out, g_in):
    args = parsed_attrs(op)
    return [op_def("GeluGradient", [op.input[0], g_out[0]], [g_in[0]], **args)]
