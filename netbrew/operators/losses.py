"""Losses: Caffe2's LabelCrossEntropy, SoftmaxWithLoss and AveragedLoss, and ONNX's
SoftmaxCrossEntropyLoss. Their gradient ops live in losses_grad.py.

Class labels may be int32 or int64 and are checked to lie in [0, classes); softmaxes
are computed from the shifted logits, so large logits never overflow.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.schema import gradient, kernel, schema

LOG_THRESHOLD = 1e-20
"""Caffe2's floor on probabilities before a log (kLOG_THRESHOLD)."""

schema(
    "LabelCrossEntropy",
    inputs=["X", "label"],
    outputs=["Y"],
    dtypes={0: "float", 1: "int"},
    onnx=False,
    doc="Y[i] = -log(max(X[i, label[i]], 1e-20)); X [N, D] probabilities (or [D] as N=1), "
    "label int [N]; Y [N] in X's dtype",
)
schema(
    "SoftmaxWithLoss",
    inputs=["logits", "labels", "weights?"],
    outputs=["softmax", "loss"],
    attrs={"scale": 1.0, "label_prob": 0, "axis": 1},
    dtypes={0: "float", 2: "float"},
    onnx=False,
    doc="softmax = Softmax(logits flattened to [N, D] at axis); loss = scale * "
    "sum_i(w[i] * l[i]) / sum_i(w[i]) (0 when the weights sum to 0), l[i] = "
    "-log softmax[i, labels[i]] (labels int [N]) or -sum_j labels[i, j] * log softmax[i, j] "
    "(label_prob=1, labels [N, D] rows summing to 1); weights [N] default 1; softmax has "
    "logits' shape, loss is a scalar; defaults scale=1.0, label_prob=0, axis=1",
)
schema(
    "SoftmaxCrossEntropyLoss",
    inputs=["scores", "labels", "weights?"],
    outputs=["output", "log_prob?"],
    attrs={"ignore_index": None, "reduction": "mean"},
    dtypes={0: "float", 1: "int", 2: "float"},
    doc="l[n, d...] = -log_prob[n, labels[n, d...], d...] * w[labels[n, d...]], log_prob = "
    "LogSoftmax(scores, axis=1); scores [N, C, d1...], labels int [N, d1...], weights [C] "
    "default 1; labels equal to ignore_index get weight 0; output = l (reduction='none'), "
    "sum(l) ('sum') or sum(l) / sum(w) ('mean', the default); log_prob has scores' shape",
)
schema(
    "AveragedLoss",
    inputs=["X"],
    outputs=["Y"],
    dtypes="float",
    onnx=False,
    doc="Y = mean(X), a scalar in X's dtype",
)


def log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    """Stable log-softmax of `x` along `axis`."""
    s = x - np.max(x, axis=axis, keepdims=True)
    return s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True))


def check_labels(
    labels: np.ndarray, classes: int, op: str, ignored=None, slot: str = "labels"
) -> np.ndarray:
    """`labels` as intp, after checking each (not `ignored`) lies in [0, classes)."""
    bad = (labels < 0) | (labels >= classes)
    if ignored is not None:
        bad &= ~ignored
    if np.any(bad):
        value = labels[bad].flat[0]
        raise ShapeError(
            f"{op}: input {slot!r} holds {value}, out of range for {classes} classes "
            f"(expected 0 to {classes - 1})"
        )
    return labels.astype(np.intp, copy=False)


def flatten_at(x: np.ndarray, axis: int, op: str) -> np.ndarray:
    """`x` as [N, D]: N the product of the dims before `axis`, D of the rest."""
    if not -x.ndim <= axis < x.ndim:
        raise ShapeError(
            f"{op}: argument 'axis' is {axis}, out of range for input 'logits' with "
            f"{x.ndim} dims (expected {-x.ndim} to {x.ndim - 1})"
        )
    n = math.prod(x.shape[: axis % x.ndim])
    d = math.prod(x.shape[axis % x.ndim :])
    if d == 0:
        raise ShapeError(f"{op}: input 'logits' of shape {list(x.shape)} has no classes")
    return x.reshape(n, d)


def label_rows(x: np.ndarray, label: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """LabelCrossEntropy's X as [N, D] and label as intp [N], both checked."""
    x2 = x.reshape(1, -1) if x.ndim == 1 else x
    if x2.ndim != 2:
        raise ShapeError(f"LabelCrossEntropy: input 'X' has {x.ndim} dims, expected 2 (N, D)")
    if label.shape not in ((len(x2),), (len(x2), 1)):
        raise ShapeError(
            f"LabelCrossEntropy: input 'label' has shape {list(label.shape)}, expected "
            f"[{len(x2)}] (one label per row of X)"
        )
    return x2, check_labels(label.reshape(-1), x2.shape[1], "LabelCrossEntropy", slot="label")


@kernel("LabelCrossEntropy")
def label_cross_entropy_cpu(x: np.ndarray, label: np.ndarray) -> tuple[np.ndarray]:
    x2, label = label_rows(x, label)
    picked = x2[np.arange(len(x2)), label]
    return (-np.log(np.maximum(picked, x.dtype.type(LOG_THRESHOLD))),)


def softmax_loss_parts(x, labels, weights, label_prob, axis):
    """SoftmaxWithLoss's [N, D] log-softmax, [N, D] targets and [N] weights, all checked."""
    op = "SoftmaxWithLoss"
    x2 = flatten_at(x, axis, op)
    n, d = x2.shape
    if label_prob:
        if labels.dtype.kind != "f" or labels.size != n * d:
            raise ShapeError(
                f"{op}: with label_prob=1, input 'labels' must be float [{n}, {d}] "
                f"probabilities; got {labels.dtype}{list(labels.shape)}"
            )
        target = labels.reshape(n, d).astype(x.dtype, copy=False)
        sums = target.sum(axis=1, dtype=np.float64)
        if np.any(target < 0) or np.any(np.abs(sums - 1) > 1e-5):
            raise ShapeError(
                f"{op}: with label_prob=1, each row of 'labels' must be >= 0 and sum to 1 "
                f"(within 1e-5); got row sums {sums[np.abs(sums - 1) > 1e-5][:3].tolist()}"
            )
    else:
        if labels.dtype.kind not in "iu" or labels.size != n:
            raise ShapeError(
                f"{op}: input 'labels' must be int [{n}] (one class per row); got "
                f"{labels.dtype}{list(labels.shape)}. Use label_prob=1 for probabilities"
            )
        target = np.zeros_like(x2)
        target[np.arange(n), check_labels(labels.reshape(-1), d, op)] = 1
    if weights is None:
        w = np.ones(n, x.dtype)
    elif weights.size != n:
        raise ShapeError(f"{op}: input 'weights' has {weights.size} values, expected {n}")
    else:
        w = weights.reshape(n).astype(x.dtype, copy=False)
    return log_softmax(x2, 1), target, w


@kernel("SoftmaxWithLoss")
def softmax_with_loss_cpu(x, labels, weights=None, *, scale, label_prob, axis):
    log_p, target, w = softmax_loss_parts(x, labels, weights, label_prob, axis)
    # Targets are exactly 0 where they do not count, so 0 * log_p drops them.
    per_row = -np.sum(np.where(target != 0, target * log_p, 0), axis=1)
    total = np.sum(w)
    loss = scale * np.sum(w * per_row) / total if total != 0 else 0.0
    return np.exp(log_p).reshape(x.shape), np.asarray(loss, x.dtype)


def cross_entropy_parts(scores, labels, weights, ignore_index):
    """SoftmaxCrossEntropyLoss's log_prob, safe labels and per-position weights."""
    op = "SoftmaxCrossEntropyLoss"
    if scores.ndim < 2 or scores.shape[1] == 0:
        raise ShapeError(
            f"{op}: input 'scores' has shape {list(scores.shape)}, expected [N, C, ...]"
        )
    want = scores.shape[:1] + scores.shape[2:]
    if labels.shape != want:
        raise ShapeError(
            f"{op}: input 'labels' has shape {list(labels.shape)}, expected {list(want)} "
            "(scores' shape without the class axis 1)"
        )
    classes = scores.shape[1]
    ignored = labels == ignore_index if ignore_index is not None else None
    safe = check_labels(labels, classes, op, ignored)
    if ignored is not None:
        safe = np.where(ignored, 0, safe)
    if weights is not None and weights.shape != (classes,):
        raise ShapeError(
            f"{op}: input 'weights' has shape {list(weights.shape)}, expected [{classes}]"
        )
    w = np.ones(safe.shape, scores.dtype) if weights is None else weights[safe].astype(scores.dtype)
    if ignored is not None:
        w[ignored] = 0
    return log_softmax(scores, 1), safe, w


def check_reduction(reduction: str) -> None:
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(
            f"SoftmaxCrossEntropyLoss: argument 'reduction' is {reduction!r}, expected "
            "'mean', 'sum' or 'none'"
        )


@kernel("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss_cpu(scores, labels, weights=None, *, ignore_index, reduction):
    check_reduction(reduction)
    log_prob, safe, w = cross_entropy_parts(scores, labels, weights, ignore_index)
    loss = -np.take_along_axis(log_prob, safe[:, None], axis=1)[:, 0] * w
    if reduction == "sum":
        loss = np.sum(loss)
    elif reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):  # all ignored: nan, as ONNX
            loss = np.sum(loss) / np.sum(w)
    return np.asarray(loss, scores.dtype), log_prob


@kernel("AveragedLoss")
def averaged_loss_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    with np.errstate(invalid="ignore"):
        return (np.asarray(np.mean(x), x.dtype),)


@gradient("LabelCrossEntropy")
def label_cross_entropy_grad(op, g_out, g_in):
    if g_in[0] is None:
        return []
    x, label = op.input
    return [op_def("LabelCrossEntropyGradient", [x, label, g_out[0]], [g_in[0]])]


@gradient("SoftmaxWithLoss")
def softmax_with_loss_grad(op, g_out, g_in):
    """Caffe2's inputs (X, labels, weights, softmax, d_loss), plus d_softmax when wanted."""
    if g_in[0] is None:
        return []
    weights = op.input[2] if len(op.input) > 2 else ""
    inputs = [op.input[0], op.input[1], weights, op.output[0], g_out[1] or ""]
    if g_out[0]:
        inputs.append(g_out[0])
    return [op_def("SoftmaxWithLossGradient", inputs, [g_in[0]], **copy_attrs(op))]


@gradient("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss_grad(op, g_out, g_in):
    if g_in[0] is None:
        return []
    weights = op.input[2] if len(op.input) > 2 else ""
    d_log_prob = g_out[1] if len(g_out) > 1 else None
    inputs = [op.input[0], op.input[1], g_out[0] or "", weights, d_log_prob or ""]
    while not inputs[-1]:
        inputs.pop()
    return [op_def("SoftmaxCrossEntropyLossGradient", inputs, [g_in[0]], **copy_attrs(op))]


@gradient("AveragedLoss")
def averaged_loss_grad(op, g_out, g_in):
    return [op_def("AveragedLossGradient", [op.input[0], g_out[0]], [g_in[0]])]
