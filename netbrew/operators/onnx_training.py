"""The optimizers of ONNX's ai.onnx.preview.training domain: Adagrad, Adam and Momentum.

Their ONNX names clash with Caffe2's optimizer ops (Caffe2's Adam takes one parameter,
its moments, the gradient, the rate and the counter, and steps with a negative rate), so
netbrew keeps them as OnnxAdagrad, OnnxAdam and OnnxMomentum: the ONNX importer maps the
preview-domain nodes to these names and the exporter maps them back.

Each takes R (the learning rate, one value), T (the update count, one int64 value), then
its tensors grouped by role, n of each: OnnxAdagrad X1..Xn, G1..Gn, H1..Hn; OnnxAdam X, G,
V, H; OnnxMomentum X, G, V. It answers the new values grouped the same way (X_new first).
The formulas follow the ONNX spec; the per-update factors are computed in float64 and the
updates in X's dtype.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.schema import REQUIRED, gradient_not_written, kernel, schema

DOMAIN = "ai.onnx.preview.training"
NAMES = {"Adagrad": "OnnxAdagrad", "Adam": "OnnxAdam", "Momentum": "OnnxMomentum"}
"""ONNX preview-training op type -> netbrew op type."""

ROLES = {"OnnxAdagrad": ("X", "G", "H"), "OnnxAdam": ("X", "G", "V", "H"),
         "OnnxMomentum": ("X", "G", "V")}  # fmt: skip
OUTPUTS = {"OnnxAdagrad": 2, "OnnxAdam": 3, "OnnxMomentum": 2}  # new tensors per X

schema(
    "OnnxAdagrad",
    inputs=["R", "T", "inputs*"],
    outputs=["outputs*"],
    attrs={"decay_factor": 0.0, "epsilon": 1e-6, "norm_coefficient": 0.0},
    dtypes={0: "float", 1: "int", 2: "float"},
    onnx=False,
    doc="ONNX preview Adagrad over X1..Xn, G1..Gn, H1..Hn: r = R / (1 + T * decay_factor); "
    "g = norm_coefficient * X + G; H_new = H + g^2; X_new = X - r * g / (sqrt(H_new) + "
    "epsilon); outputs X_new1..n, H_new1..n",
)
schema(
    "OnnxAdam",
    inputs=["R", "T", "inputs*"],
    outputs=["outputs*"],
    attrs={
        "alpha": 0.9,
        "beta": 0.999,
        "epsilon": 1e-6,
        "norm_coefficient": 0.0,
        "norm_coefficient_post": 0.0,
    },  # fmt: skip
    dtypes={0: "float", 1: "int", 2: "float"},
    onnx=False,
    doc="ONNX preview Adam over X, G, V, H (n each): g = norm_coefficient * X + G; V_new = "
    "alpha * V + (1 - alpha) * g; H_new = beta * H + (1 - beta) * g^2; r = R * sqrt(1 - "
    "beta^T) / (1 - alpha^T) if T > 0 else R; X_new = (1 - norm_coefficient_post) * (X - r "
    "* V_new / (sqrt(H_new) + epsilon)); outputs X_new, V_new, H_new",
)
schema(
    "OnnxMomentum",
    inputs=["R", "T", "inputs*"],
    outputs=["outputs*"],
    attrs={"alpha": REQUIRED, "beta": REQUIRED, "mode": REQUIRED, "norm_coefficient": REQUIRED},
    dtypes={0: "float", 1: "int", 2: "float"},
    onnx=False,
    doc="ONNX preview Momentum over X, G, V (n each): g = norm_coefficient * X + G; V_new = "
    "alpha * V + b * g, b = beta if T > 0 else 1; X_new = X - R * V_new (mode 'standard') "
    "or X - R * (g + alpha * V_new) ('nesterov'); outputs X_new, V_new",
)
for _op in NAMES.values():
    gradient_not_written(
        _op, "an optimizer update: differentiating through a training step is not supported"
    )


def _groups(op: str, r, t, tensors) -> tuple[float, int, list[tuple[np.ndarray, ...]]]:
    """(R, T, [(X_i, G_i, ...) for each i]), checked."""
    roles = ROLES[op]
    if not tensors or len(tensors) % len(roles):
        raise SchemaError(
            f"{op}: after R and T, expected {', '.join(roles)} tensors, n of each, got "
            f"{len(tensors)} inputs"
        )
    for name, value in (("R", r), ("T", t)):
        if np.size(value) != 1:
            raise ShapeError(f"{op}: input {name!r} must hold one value, got shape {value.shape}")
    n = len(tensors) // len(roles)
    groups = []
    for i in range(n):
        group = tuple(tensors[k * n + i] for k in range(len(roles)))
        for role, x in zip(roles[1:], group[1:]):
            if x.shape != group[0].shape:
                raise ShapeError(
                    f"{op}: {role}{i + 1} has shape {list(x.shape)}, expected "
                    f"{list(group[0].shape)} like X{i + 1}"
                )
        groups.append(group)
    return float(np.reshape(r, ())), int(np.reshape(t, ())), groups


def _regularized(x: np.ndarray, g: np.ndarray, norm_coefficient: float) -> np.ndarray:
    return g + x.dtype.type(norm_coefficient) * x if norm_coefficient else g


def _ordered(results: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    """Per-tensor result tuples regrouped by role: X_new1..n, then the next role's."""
    return tuple(r[k] for k in range(len(results[0])) for r in results)


@kernel("OnnxAdagrad")
def onnx_adagrad_cpu(r, t, *tensors, decay_factor, epsilon, norm_coefficient):
    rate, count, groups = _groups("OnnxAdagrad", r, t, tensors)
    results = []
    for x, g, h in groups:
        dtype = x.dtype.type
        step = dtype(rate / (1 + count * decay_factor))
        g = _regularized(x, g, norm_coefficient)
        h_new = h + g * g
        results.append((x - step * g / (np.sqrt(h_new) + dtype(epsilon)), h_new))
    return _ordered(results)


@kernel("OnnxAdam")
def onnx_adam_cpu(r, t, *tensors, alpha, beta, epsilon, norm_coefficient, norm_coefficient_post):
    rate, count, groups = _groups("OnnxAdam", r, t, tensors)
    if count > 0:
        rate *= math.sqrt(1 - beta**count) / (1 - alpha**count)
    results = []
    for x, g, v, h in groups:
        dtype = x.dtype.type
        g = _regularized(x, g, norm_coefficient)
        v_new = dtype(alpha) * v + dtype(1 - alpha) * g
        h_new = dtype(beta) * h + dtype(1 - beta) * (g * g)
        x_new = x - dtype(rate) * (v_new / (np.sqrt(h_new) + dtype(epsilon)))
        if norm_coefficient_post:
            x_new = dtype(1 - norm_coefficient_post) * x_new
        results.append((x_new, v_new, h_new))
    return _ordered(results)


@kernel("OnnxMomentum")
def onnx_momentum_cpu(r, t, *tensors, alpha, beta, mode, norm_coefficient):
    if mode not in ("standard", "nesterov"):
        raise SchemaError(f"OnnxMomentum: mode must be 'standard' or 'nesterov', got {mode!r}")
    rate, count, groups = _groups("OnnxMomentum", r, t, tensors)
    results = []
    for x, g, v in groups:
        dtype = x.dtype.type
        g = _regularized(x, g, norm_coefficient)
        v_new = dtype(alpha) * v + dtype(beta if count > 0 else 1.0) * g
        direction = v_new if mode == "standard" else g + dtype(alpha) * v_new
        results.append((x - dtype(rate) * direction, v_new))
    return _ordered(results)
