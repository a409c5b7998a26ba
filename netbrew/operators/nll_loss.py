"""NegativeLogLikelihoodLoss and its gradient.

    NegativeLogLikelihoodLoss(input, target, weight) -> loss
        backward: NegativeLogLikelihoodLossGradient(input, target, dloss, weight) -> dinput

input holds log-probabilities (N, C, d1, ..., dk), target the class of each (N, d1, ..., dk).
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.losses import check_labels
from netbrew.operators.schema import gradient, kernel, no_gradient, schema

_ARGS = {"ignore_index": None, "reduction": "mean"}
_REDUCTIONS = ("mean", "sum", "none")

schema(
    "NegativeLogLikelihoodLoss",
    inputs=["input", "target", "weight?"],
    outputs=["loss"],
    attrs=_ARGS,
    dtypes={0: "float", 1: "int", 2: "float"},
    doc="loss[n, d...] = -input[n, target[n, d...], d...] * weight[target[n, d...]] (weight 1 "
    "when absent; 0 where target == ignore_index); input (N, C, d1, ..., dk), target (N, d1, "
    "..., dk) int, weight (C,); reduction 'none' keeps that shape, 'sum' sums, 'mean' divides "
    "the sum by the sum of the weights used; defaults reduction='mean', ignore_index unset",
)
schema(
    "NegativeLogLikelihoodLossGradient",
    inputs=["input", "target", "dloss", "weight?"],
    outputs=["dinput"],
    attrs=_ARGS,
    dtypes={0: "float", 1: "int", 2: "float", 3: "float"},
    onnx=False,
    doc="dinput[n, target[n, d...], d...] = -dloss * weight[target] (dloss taken per element "
    "for reduction='none', divided by the sum of the weights used for 'mean'), 0 elsewhere "
    "and where target == ignore_index; dinput has input's shape; defaults as the forward's",
)
no_gradient("NegativeLogLikelihoodLossGradient", "gradient op; second order is not supported")


def _parts(op, x, target, weight, ignore_index, reduction):
    """(target as safe intp indices, per-position weights in x's dtype, 0 where ignored)."""
    if reduction not in _REDUCTIONS:
        raise SchemaError(
            f"{op}: argument reduction={reduction!r}, expected one of {', '.join(_REDUCTIONS)}"
        )
    if x.ndim < 2:
        raise ShapeError(f"{op}: input 'input' has shape {list(x.shape)}, expected (N, C, ...)")
    want = x.shape[:1] + x.shape[2:]
    if target.shape != want:
        raise ShapeError(
            f"{op}: input 'target' has shape {list(target.shape)}, expected {list(want)} "
            "(input's shape without the class axis 1)"
        )
    classes = x.shape[1]
    ignored = target == ignore_index if ignore_index is not None else None
    safe = check_labels(target, classes, op, ignored, slot="target")
    if ignored is not None:
        safe = np.where(ignored, 0, safe)
    if weight is None:
        w = np.ones(safe.shape, x.dtype)
    elif weight.shape != (classes,):
        raise ShapeError(
            f"{op}: input 'weight' has shape {list(weight.shape)}, expected [{classes}]"
        )
    else:
        w = weight[safe].astype(x.dtype, copy=False)
    if ignored is not None:
        w = np.where(ignored, np.zeros((), x.dtype), w)
    return safe, w


@kernel("NegativeLogLikelihoodLoss")
def negative_log_likelihood_loss_cpu(
    x: np.ndarray,
    target: np.ndarray,
    weight: np.ndarray | None = None,
    *,
    ignore_index: int | None,
    reduction: str,
) -> tuple[np.ndarray]:
    op = "NegativeLogLikelihoodLoss"
    safe, w = _parts(op, x, target, weight, ignore_index, reduction)
    loss = -np.take_along_axis(x, safe[:, None], axis=1)[:, 0] * w
    if reduction == "sum":
        loss = np.sum(loss)
    elif reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):  # all ignored: 0 / 0 = NaN
            loss = np.sum(loss) / np.sum(w)
    return (np.asarray(loss).astype(x.dtype, copy=False),)


@kernel("NegativeLogLikelihoodLossGradient")
def negative_log_likelihood_loss_gradient_cpu(
    x: np.ndarray,
    target: np.ndarray,
    dloss: np.ndarray,
    weight: np.ndarray | None = None,
    *,
    ignore_index: int | None,
    reduction: str,
) -> tuple[np.ndarray]:
    op = "NegativeLogLikelihoodLossGradient"
    safe, w = _parts(op, x, target, weight, ignore_index, reduction)
    if reduction == "none":
        if dloss.shape != target.shape:
            raise ShapeError(
                f"{op}: input 'dloss' has shape {list(dloss.shape)}, expected the loss's "
                f"shape {list(target.shape)} (reduction='none')"
            )
        g = -dloss * w
    else:
        if dloss.size != 1:
            raise ShapeError(
                f"{op}: input 'dloss' has shape {list(dloss.shape)}, expected a scalar "
                f"(reduction={reduction!r})"
            )
        g = -dloss.reshape(()) * w
        if reduction == "mean":
            total = np.sum(w)
            g = g / total if total != 0 else np.zeros_like(g)
    dx = np.zeros(x.shape, dloss.dtype)
    np.put_along_axis(dx, safe[:, None], g.astype(dloss.dtype, copy=False)[:, None], axis=1)
    return (dx,)


@gradient("NegativeLogLikelihoodLoss")
def negative_log_likelihood_loss_grad(op, g_out, g_in):
    if not g_in[0]:
        return []
    weight = [op.input[2]] if len(op.input) > 2 and op.input[2] else []
    ins = [op.input[0], op.input[1], g_out[0], *weight]
    return [op_def("NegativeLogLikelihoodLossGradient", ins, [g_in[0]], **copy_attrs(op))]
