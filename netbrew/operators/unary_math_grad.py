"""Gradients of Sin ... Atanh and Erf, and the `x_gradient` builder that the extra
activations share.

Each op gets `<Op>Gradient(X, dY) -> dX = dY * f'(X)`, reading the forward op's input, so
these ops can't be differentiated when written in place (the maker then says so).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from netbrew.netdef.net import op_def
from netbrew.operators.arithmetic_grad import parsed_attrs, value_of
from netbrew.operators.schema import gradient, kernel, schema
from netbrew.operators.unary_math import float_apply


def x_gradient(
    name: str, formula: str, deriv: Callable[..., np.ndarray], attrs: dict | None = None
) -> None:
    """Declares `<name>Gradient(X, dY) -> dX = dY * deriv(X)`, its kernel and name's maker.

    Args:
        name: the forward op.
        formula: f'(X), for the doc line.
        deriv: `deriv(x, **attrs)`, the derivative evaluated in x's dtype.
        attrs: the forward op's attributes that deriv takes, with their defaults.
    """
    attrs = dict(attrs or {})
    schema(
        f"{name}Gradient",
        inputs=["X", "dY"],
        outputs=["dX"],
        attrs=attrs,
        onnx=False,
        doc=f"dX = dY * {formula}, X the input of {name}; same shape, dY's dtype",
    )

    def gradient_cpu(x: np.ndarray, dy: np.ndarray, **kw) -> tuple[np.ndarray]:
        slope = float_apply(lambda v: deriv(v, **kw), x)
        return ((dy * slope).astype(dy.dtype, copy=False),)

    gradient_cpu.__name__ = f"{name.lower()}_gradient_cpu"
    kernel(f"{name}Gradient")(gradient_cpu)

    def maker(op, g_out, g_in):
        args = {k: v for k, v in parsed_attrs(op).items() if k in attrs}
        return [op_def(f"{name}Gradient", [value_of(op, 0), g_out[0]], [g_in[0]], **args)]

    maker.__name__ = f"{name.lower()}_grad"
    gradient(name)(maker)


_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)

for _name, _formula, _deriv in (
    ("Sin", "cos(X)", np.cos),
    ("Cos", "-sin(X)", lambda x: -np.sin(x)),
    ("Tan", "1 + tan(X)^2", lambda x: 1 + np.square(np.tan(x))),
    ("Asin", "1 / sqrt(1 - X^2)", lambda x: 1 / np.sqrt(1 - x * x)),
    ("Acos", "-1 / sqrt(1 - X^2)", lambda x: -1 / np.sqrt(1 - x * x)),
    ("Atan", "1 / (1 + X^2)", lambda x: 1 / (1 + x * x)),
    ("Sinh", "cosh(X)", np.cosh),
    ("Cosh", "sinh(X)", np.sinh),
    ("Asinh", "1 / sqrt(X^2 + 1)", lambda x: 1 / np.sqrt(x * x + 1)),
    ("Acosh", "1 / sqrt(X^2 - 1)", lambda x: 1 / np.sqrt(x * x - 1)),
    ("Atanh", "1 / (1 - X^2)", lambda x: 1 / (1 - x * x)),
    ("Erf", "2 / sqrt(pi) * exp(-X^2)", lambda x: _TWO_OVER_SQRT_PI * np.exp(-x * x)),
):
    x_gradient(_name, _formula, _deriv)
