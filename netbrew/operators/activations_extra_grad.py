"""Gradients of Celu, Swish, HardSwish, Mish, Softsign, ThresholdedRelu and Shrink.

Each is `<Op>Gradient(X, dY, attrs...) -> dX = dY * f'(X)` (see unary_math_grad.x_gradient).
At the kinks (Celu is smooth; HardSwish at +-3, ThresholdedRelu at alpha, Shrink at +-lambd)
the one-sided slope of the branch the forward op takes is used.
"""

from __future__ import annotations

import numpy as np

from netbrew.operators.activations_extra import sigmoid, softplus
from netbrew.operators.unary_math_grad import x_gradient


def _celu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x > 0, 1, np.exp(np.minimum(x, 0) / alpha))


def _swish(x: np.ndarray, alpha: float) -> np.ndarray:
    s = sigmoid(alpha * x)
    return s + alpha * x * s * (1 - s)


def _hard_swish(x: np.ndarray) -> np.ndarray:
    return np.where(x < -3, 0, np.where(x > 3, 1, x * (1 / 3) + 0.5))


def _mish(x: np.ndarray) -> np.ndarray:
    t = np.tanh(softplus(x))
    return t + x * (1 - t * t) * sigmoid(x)


x_gradient("Celu", "(1 if X > 0 else exp(X / alpha)) (alpha=1.0)", _celu, {"alpha": 1.0})
x_gradient(
    "Swish",
    "(s + alpha * X * s * (1 - s)), s = sigmoid(alpha * X) (alpha=1.0)",
    _swish,
    {"alpha": 1.0},
)
x_gradient("HardSwish", "(0 if X < -3, 1 if X > 3, else X / 3 + 0.5)", _hard_swish)
x_gradient("Mish", "(t + X * (1 - t^2) * sigmoid(X)), t = tanh(softplus(X))", _mish)
x_gradient("Softsign", "1 / (1 + |X|)^2", lambda x: 1 / np.square(1 + np.abs(x)))
x_gradient(
    "ThresholdedRelu",
    "(1 if X > alpha else 0) (alpha=1.0)",
    lambda x, alpha: np.where(x > alpha, 1, 0),
    {"alpha": 1.0},
)
x_gradient(
    "Shrink",
    "(1 if |X| > lambd else 0) (bias=0.0, lambd=0.5)",
    lambda x, bias, lambd: np.where((x < -lambd) | (x > lambd), 1, 0),
    {"bias": 0.0, "lambd": 0.5},
)
