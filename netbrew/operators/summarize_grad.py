"""The gradient of Summarize (caffe2_utility.py): SummarizeGradient.

    Summarize(X) -> S = [min, max, mean, std]    backward: SummarizeGradient(X, dS) -> dX

Caffe2 registered no gradient for Summarize (a logging op), but its statistics are
differentiable almost everywhere, and netbrew declares no gradient only where math has
none. Where several elements share the minimum (or the maximum) the subgradient used splits
dS[0] (dS[1]) among them equally. A Summarize without an output gets no gradient ops: no
loss can depend on it.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators import caffe2_utility  # noqa: F401  (declares Summarize)
from netbrew.operators.conv import check_grad_shape
from netbrew.operators.schema import gradient, kernel, schema

schema(
    "SummarizeGradient",
    inputs=["X", "dS"],
    outputs=["dX"],
    dtypes={0: "numeric", 1: "float"},
    onnx=False,
    doc="dX = dS[0] / #argmin where X == min(X) + dS[1] / #argmax where X == max(X) + dS[2] / "
    "n + dS[3] * (X - mean) / ((n - 1) * std) (that term 0 where std = 0), over the n "
    "elements of X, in float64; dS [4]; X's shape and dtype (zeros for an integer X)",
)


@gradient("Summarize")
def summarize_grad(op, g_out, g_in):
    """SummarizeGradient(X, dS); nothing when the op has no output."""
    if not op.output or not g_out[0] or not g_in[0]:
        return []
    return [op_def("SummarizeGradient", [op.input[0], g_out[0]], [g_in[0]])]


@kernel("SummarizeGradient")
def summarize_gradient_cpu(x: np.ndarray, ds: np.ndarray) -> tuple[np.ndarray]:
    """Each statistic's derivative in X (see the schema), summed in float64 as Summarize
    computes its statistics.

    Raises:
        ShapeError: dS is not [4], the shape of Summarize's output, or X is empty.
    """
    check_grad_shape(ds, (4,), "Summarize's output", slot="dS")
    if x.size == 0:
        raise ShapeError(
            f"SummarizeGradient: input 'X' of shape {list(x.shape)} is empty; Summarize "
            "needs at least one value"
        )
    if x.dtype.kind not in "fc" and x.dtype.name != "bfloat16":
        return (np.zeros_like(x),)  # integers and bools have no derivative to speak of
    v = x.reshape(-1).astype(np.float64)
    d_min, d_max, d_mean, d_std = (float(g) for g in ds.astype(np.float64))
    lowest, highest = v == v.min(), v == v.max()
    dx = np.full(v.shape, d_mean / v.size)
    dx += lowest * (d_min / np.count_nonzero(lowest))
    dx += highest * (d_max / np.count_nonzero(highest))
    if v.size > 1:
        mean = float(np.mean(v))  # as Summarize: the same float64 mean and std
        std = math.sqrt(float(np.sum((v - mean) ** 2)) / (v.size - 1))
        if std > 0:
            dx += (v - mean) * (d_std / ((v.size - 1) * std))
    return (dx.reshape(x.shape).astype(x.dtype, copy=False),)
