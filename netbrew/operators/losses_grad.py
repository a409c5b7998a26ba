"""Gradient ops of the losses in losses.py (their makers sit beside the forward ops)."""

from __future__ import annotations

import numpy as np

from netbrew.operators.losses import (
    LOG_THRESHOLD,
    check_reduction,
    cross_entropy_parts,
    flatten_at,
    label_rows,
    softmax_loss_parts,
)
from netbrew.operators.schema import kernel, no_gradient, schema

schema(
    "LabelCrossEntropyGradient",
    inputs=["X", "label", "dY"],
    outputs=["dX"],
    onnx=False,
    doc="dX[i, label[i]] = -dY[i] / max(X[i, label[i]], 1e-20), 0 elsewhere; dX has X's shape",
)
schema(
    "SoftmaxWithLossGradient",
    inputs=["X", "labels", "weights?", "softmax", "d_loss", "d_softmax?"],
    outputs=["dX"],
    attrs={"scale": 1.0, "label_prob": 0, "axis": 1},
    onnx=False,
    doc="dX = (softmax - target) * w[i] * scale * d_loss / sum(w), target one-hot(labels) or "
    "the label probabilities; plus softmax * (d_softmax - sum(d_softmax * softmax)) when "
    "d_softmax is given. Caffe2's (X, labels, [weights], softmax, d_loss) layout (softmax is "
    "recomputed from X, stably); empty weights or d_loss names mean none",
)
schema(
    "SoftmaxCrossEntropyLossGradient",
    inputs=["scores", "labels", "d_output?", "weights?", "d_log_prob?"],
    outputs=["d_scores"],
    attrs={"ignore_index": None, "reduction": "mean"},
    onnx=False,
    doc="d_scores = g * (softmax(scores) - one_hot(labels)) along axis 1 with g = "
    "d_output * w[labels] (divided by sum(w) for reduction='mean'), plus d_log_prob - "
    "softmax * sum(d_log_prob, axis 1); empty d_output / d_log_prob names count as zero",
)
schema(
    "AveragedLossGradient",
    inputs=["X", "dY"],
    outputs=["dX"],
    onnx=False,
    doc="dX = full(X.shape, dY / size(X)) in X's dtype",
)
for _op in (
    "LabelCrossEntropyGradient",
    "SoftmaxWithLossGradient",
    "SoftmaxCrossEntropyLossGradient",
    "AveragedLossGradient",
):
    no_gradient(_op, "gradient op; second order is not supported")


@kernel("LabelCrossEntropyGradient")
def label_cross_entropy_gradient_cpu(x, label, dy) -> tuple[np.ndarray]:
    x2, label = label_rows(x, label)
    rows = np.arange(len(x2))
    dx = np.zeros_like(x2)
    dx[rows, label] = -dy.reshape(-1) / np.maximum(x2[rows, label], x.dtype.type(LOG_THRESHOLD))
    return (dx.reshape(x.shape),)


def _softmax_backward(p: np.ndarray, dp: np.ndarray, axis: int) -> np.ndarray:
    """Gradient through p = softmax(x, axis) given dL/dp."""
    return p * (dp - np.sum(dp * p, axis=axis, keepdims=True))


@kernel("SoftmaxWithLossGradient")
def softmax_with_loss_gradient_cpu(*args, scale, label_prob, axis) -> tuple[np.ndarray]:
    if len(args) == 4:  # Caffe2's layout without weights
        args = (args[0], args[1], None, args[2], args[3])
    x, labels, weights, _, d_loss, *rest = args
    log_p, target, w = softmax_loss_parts(x, labels, weights, label_prob, axis)
    p = np.exp(log_p)
    dx = np.zeros_like(p)
    total = np.sum(w)
    if d_loss is not None and total != 0:
        dx += (p - target) * (w * (scale * d_loss.reshape(()) / total))[:, None]
    if rest and rest[0] is not None:
        dx += _softmax_backward(p, flatten_at(rest[0], axis, "SoftmaxWithLossGradient"), 1)
    return (dx.reshape(x.shape).astype(x.dtype, copy=False),)


@kernel("SoftmaxCrossEntropyLossGradient")
def softmax_cross_entropy_loss_gradient_cpu(
    scores, labels, d_output=None, weights=None, d_log_prob=None, *, ignore_index, reduction
) -> tuple[np.ndarray]:
    check_reduction(reduction)
    log_prob, safe, w = cross_entropy_parts(scores, labels, weights, ignore_index)
    p = np.exp(log_prob)
    dx = np.zeros_like(p)
    if d_output is not None:
        g = d_output * w
        if reduction == "mean":
            with np.errstate(invalid="ignore", divide="ignore"):
                g = g / np.sum(w)
        dx += g[:, None] * p
        at_label = np.take_along_axis(dx, safe[:, None], axis=1) - g[:, None]
        np.put_along_axis(dx, safe[:, None], at_label, axis=1)
    if d_log_prob is not None:
        dx += d_log_prob - p * np.sum(d_log_prob, axis=1, keepdims=True)
    return (dx.astype(scores.dtype, copy=False),)


@kernel("AveragedLossGradient")
def averaged_loss_gradient_cpu(x: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray]:
    return (np.full(x.shape, dy.reshape(()) / max(x.size, 1), dtype=x.dtype),)
