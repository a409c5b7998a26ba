"""CUDA kernels of Caffe2's losses (losses.cu), checked against the NumPy kernels:
LabelCrossEntropy, SoftmaxWithLoss (labels or label_prob, weights, scale, axis),
AveragedLoss, their gradient ops, and Accuracy (top_k).

Data are float32/16/64 (Accuracy's predictions any of those or int32/64), labels int32 or
int64. Labels are read back to the host and checked as the CPU kernels check them (so the
errors match); label probabilities (label_prob=1) too. Weights, d_loss and dY are converted
on the device to the accumulation dtype (float32, float64 for float64 data). Reductions over
rows and the loss's total run in thread blocks; no value of the loss returns to the host.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.cuda import is_gpu_array, to_gpu
from netbrew.errors import ShapeError
from netbrew.operators.cuda.launch import empty, grid, suffix
from netbrew.operators.cuda.reduce import (
    FLOATS,
    VALUES,
    acc_dtype,
    block_launch,
    cast,
    fill,
    fn,
    host,
    reduce_values,
)
from netbrew.operators.losses import LOG_THRESHOLD, check_labels
from netbrew.operators.schema import kernel as register

FAMILY = "losses"
NULL = np.uintp(0)  # a null pointer argument
ONE_BLOCK = {"grid": (1, 1, 1), "block": (256, 1, 1)}


def _k(name: str):
    return fn(name, FAMILY)


def _or_null(a):
    return NULL if a is None else a


def _labels(labels, classes: int, op: str, slot: str = "labels"):
    """(labels checked on the host as the CPU kernel does, as int32/int64 on the GPU, its
    kernel-name tag)."""
    values = check_labels(host(labels).reshape(-1), classes, op, slot=slot)
    if is_gpu_array(labels) and labels.dtype in (np.int32, np.int64):
        return labels, suffix(labels.dtype, op, ("i32", "i64"))
    return to_gpu(values.astype(np.int64), device=None), "i64"


# -- LabelCrossEntropy -------------------------------------------------------------------------


def _label_rows(x, label) -> tuple[int, int]:
    """LabelCrossEntropy's X as (N, D) after losses.label_rows' checks."""
    shape = tuple(x.shape)
    if len(shape) == 1:
        shape = (1, shape[0])
    if len(shape) != 2:
        raise ShapeError(f"LabelCrossEntropy: input 'X' has {len(x.shape)} dims, expected 2 (N, D)")
    if tuple(label.shape) not in ((shape[0],), (shape[0], 1)):
        raise ShapeError(
            f"LabelCrossEntropy: input 'label' has shape {list(label.shape)}, expected "
            f"[{shape[0]}] (one label per row of X)"
        )
    return shape


def _threshold(dtype) -> np.float64:
    """Caffe2's 1e-20 floor as X's dtype holds it (0 in float16)."""
    return np.float64(np.dtype(dtype).type(LOG_THRESHOLD))


@register("LabelCrossEntropy", device="cuda")
def label_cross_entropy_cuda(x, label):
    op = "LabelCrossEntropy"
    n, d = _label_rows(x, label)
    tag = suffix(x.dtype, op, FLOATS)
    lab, ltag = _labels(label, d, op, "label")
    y = empty((n,), x.dtype)
    if n:
        _k(f"label_xent_{tag}_{ltag}")(
            x, lab, y, np.int64(n), np.int64(d), _threshold(x.dtype), **grid(n)
        )
    return (y,)


@register("LabelCrossEntropyGradient", device="cuda")
def label_cross_entropy_gradient_cuda(x, label, dy):
    op = "LabelCrossEntropyGradient"
    n, d = _label_rows(x, label)
    tag = suffix(x.dtype, op, FLOATS)
    lab, ltag = _labels(label, d, "LabelCrossEntropy", "label")
    if dy.size not in (n, 1):
        raise ValueError(f"{op}: input dY has {dy.size} values, expected {n} (one per row of X)")
    dx = empty(x.shape, x.dtype)
    if dx.size:
        g = cast(dy, x.dtype, op)
        _k(f"label_xent_grad_{tag}_{ltag}")(
            x, lab, g, dx, np.int64(n), np.int64(d), np.int64(1 if dy.size == n else 0),
            _threshold(x.dtype), **grid(dx.size),
        )  # fmt: skip
    return (dx,)


# -- SoftmaxWithLoss ---------------------------------------------------------------------------


def _flatten(shape, axis: int, op: str, slot: str = "logits") -> tuple[int, int]:
    """losses.flatten_at's (N, D) of `shape`, with its errors."""
    nd = len(shape)
    if not -nd <= axis < nd:
        raise ShapeError(
            f"{op}: argument 'axis' is {axis}, out of range for input {slot!r} with "
            f"{nd} dims (expected {-nd} to {nd - 1})"
        )
    n, d = math.prod(shape[: axis % nd]), math.prod(shape[axis % nd :])
    if d == 0:
        raise ShapeError(f"{op}: input {slot!r} of shape {list(shape)} has no classes")
    return n, d


def _softmax_loss_parts(x, labels, weights, label_prob: int, axis: int):
    """(n, d, labels on the GPU or None, their tag, target in X's dtype or None, weights in
    the accumulation dtype or None), checked as losses.softmax_loss_parts checks them."""
    op = "SoftmaxWithLoss"
    n, d = _flatten(tuple(x.shape), axis, op)
    lab, ltag, target = None, "i32", None
    if label_prob:
        if labels.dtype.kind != "f" or labels.size != n * d:
            raise ShapeError(
                f"{op}: with label_prob=1, input 'labels' must be float [{n}, {d}] "
                f"probabilities; got {labels.dtype}{list(labels.shape)}"
            )
        values = host(labels).reshape(n, d).astype(x.dtype, copy=False)
        sums = values.sum(axis=1, dtype=np.float64)
        if np.any(values < 0) or np.any(np.abs(sums - 1) > 1e-5):
            raise ShapeError(
                f"{op}: with label_prob=1, each row of 'labels' must be >= 0 and sum to 1 "
                f"(within 1e-5); got row sums {sums[np.abs(sums - 1) > 1e-5][:3].tolist()}"
            )
        if not is_gpu_array(labels):
            labels = to_gpu(np.ascontiguousarray(host(labels)), device=None)
        target = cast(labels, x.dtype, op, (n, d))
    else:
        if labels.dtype.kind not in "iu" or labels.size != n:
            raise ShapeError(
                f"{op}: input 'labels' must be int [{n}] (one class per row); got "
                f"{labels.dtype}{list(labels.shape)}. Use label_prob=1 for probabilities"
            )
        lab, ltag = _labels(labels, d, op)
    w = None
    if weights is not None:
        if weights.size != n:
            raise ShapeError(f"{op}: input 'weights' has {weights.size} values, expected {n}")
        w = cast(weights, acc_dtype(x.dtype), op, (n,))
    return n, d, lab, ltag, target, w


@register("SoftmaxWithLoss", device="cuda")
def softmax_with_loss_cuda(x, labels, weights=None, *, scale, label_prob, axis):
    op = "SoftmaxWithLoss"
    tag = suffix(x.dtype, op, FLOATS)
    n, d, lab, ltag, target, w = _softmax_loss_parts(x, labels, weights, label_prob, axis)
    prob, loss = empty(x.shape, x.dtype), empty((), x.dtype)
    row_loss = empty((n,), acc_dtype(x.dtype))
    if n:
        _k(f"softmax_loss_rows_{tag}_{ltag}")(
            x, _or_null(lab), _or_null(target), prob, row_loss, np.int64(n), np.int64(d),
            **block_launch(n, d),
        )  # fmt: skip
    _k(f"softmax_loss_total_{tag}")(
        row_loss, _or_null(w), loss, np.int64(n), np.float64(scale), **ONE_BLOCK
    )
    return prob, loss


@register("SoftmaxWithLossGradient", device="cuda")
def softmax_with_loss_gradient_cuda(*args, scale, label_prob, axis):
    op = "SoftmaxWithLossGradient"
    if len(args) == 4:  # Caffe2's layout without weights
        args = (args[0], args[1], None, args[2], args[3])
    x, labels, weights, _, d_loss, *rest = args
    tag = suffix(x.dtype, op, FLOATS)
    n, d, lab, ltag, target, w = _softmax_loss_parts(x, labels, weights, label_prob, axis)
    acc = acc_dtype(x.dtype)
    dl = None
    if d_loss is not None:
        if d_loss.size != 1:
            raise ValueError(
                f"{op}: input d_loss has shape {list(d_loss.shape)}, expected a scalar"
            )
        dl = cast(d_loss, acc, op, (1,))
    dsm = rest[0] if rest else None
    if dsm is not None:
        if _flatten(tuple(dsm.shape), axis, op, "d_softmax") != (n, d):
            raise ValueError(
                f"{op}: input d_softmax has shape {list(dsm.shape)}, expected {list(x.shape)}"
            )
        dsm = cast(dsm, x.dtype, op)
    coef = empty((2,), acc)
    _k(f"softmax_loss_coef_{suffix(acc, op, FLOATS)}")(
        _or_null(w), _or_null(dl), coef, np.int64(n), np.float64(scale), **ONE_BLOCK
    )
    dx = empty(x.shape, x.dtype)
    if dx.size:
        _k(f"softmax_loss_grad_{tag}_{ltag}")(
            x, _or_null(lab), _or_null(target), _or_null(w), coef, _or_null(dsm), dx,
            np.int64(n), np.int64(d), **block_launch(n, d),
        )  # fmt: skip
    return (dx,)


# -- AveragedLoss ------------------------------------------------------------------------------


@register("AveragedLoss", device="cuda")
def averaged_loss_cuda(x):
    suffix(x.dtype, "AveragedLoss", FLOATS)
    return (reduce_values(x, tuple(range(len(x.shape))), "mean", 0, "AveragedLoss"),)


@register("AveragedLossGradient", device="cuda")
def averaged_loss_gradient_cuda(x, dy):
    op = "AveragedLossGradient"
    tag = suffix(x.dtype, op, FLOATS)
    if dy.size != 1:
        raise ValueError(f"{op}: input dY has shape {list(dy.shape)}, expected a scalar")
    dx = empty(x.shape, x.dtype)
    if dx.size:
        g = cast(dy, acc_dtype(x.dtype), op, (1,))
        _k(f"averaged_loss_grad_{tag}")(
            g, dx, np.int64(dx.size), np.float64(max(dx.size, 1)), **grid(dx.size)
        )
    return (dx,)


# -- Accuracy ----------------------------------------------------------------------------------


@register("Accuracy", device="cuda")
def accuracy_cuda(predictions, labels, *, top_k):
    op = "Accuracy"
    if len(predictions.shape) != 2:
        raise ShapeError(
            f"{op}: input 'predictions' has {len(predictions.shape)} dims, expected 2 (N, D)"
        )
    n, d = (int(v) for v in predictions.shape)
    if tuple(labels.shape) not in ((n,), (n, 1)):
        raise ShapeError(f"{op}: input 'labels' has shape {list(labels.shape)}, expected [{n}]")
    if top_k < 1:
        raise ValueError(f"{op}: argument 'top_k' is {top_k}, expected >= 1")
    tag = suffix(predictions.dtype, op, VALUES)
    lab, ltag = _labels(labels, d, op)
    correct = fill((1,), np.int64, 0)
    if n:
        _k(f"accuracy_rows_{tag}_{ltag}")(
            predictions, lab, correct, np.int64(n), np.int64(d), np.int64(top_k),
            **block_launch(n, d),
        )  # fmt: skip
    out = empty((), np.float32)
    _k("accuracy_finish")(correct, out, np.int64(n), grid=(1, 1, 1), block=(32, 1, 1))
    return (out,)
