"""brew training helpers: losses, accuracy and weight decay."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netbrew.brew.arg_scope import helper
from netbrew.brew.model_helper import ModelHelper, Tags
from netbrew.netdef.net import BlobReference


@helper
def softmax_with_loss(
    model: ModelHelper,
    logits: str,
    labels: str,
    *,
    softmax_out: str = "softmax",
    loss_out: str = "loss",
    scale: float = 1.0,
) -> tuple[BlobReference, BlobReference]:
    """Softmax of `logits` and the mean cross-entropy against int `labels`.

    Emits: SoftmaxWithLoss.
    """
    return model.net.SoftmaxWithLoss([logits, labels], [softmax_out, loss_out], scale=scale)


@helper
def accuracy(
    model: ModelHelper,
    prediction: str | Sequence[str],
    labels: str | None = None,
    blob_out: str = "accuracy",
    *,
    top_k: int = 1,
) -> BlobReference:
    """Fraction of rows whose label is among the top_k predictions. Emits: Accuracy.

    Caffe2's form, accuracy(model, [prediction, labels], blob_out), is accepted too."""
    if not isinstance(prediction, str):
        pair = list(prediction)
        if len(pair) != 2:
            raise ValueError(f"brew.accuracy: expected [prediction, labels], got {pair}")
        if labels is not None:
            blob_out = labels
        prediction, labels = pair
    if labels is None:
        raise TypeError("brew.accuracy: give labels, or pass [prediction, labels]")
    return model.net.Accuracy([prediction, labels], blob_out, top_k=top_k)


@helper
def iter(model: ModelHelper, blob_out: str = "ITER") -> BlobReference:  # noqa: A001
    """An int64 iteration counter filled with 0 by param_init_net and incremented by
    each run of the net (Caffe2's brew.iter). Emits: Iter."""
    model.add_optimizer_state(blob_out, [1], np.int64(0))
    return model.net.Iter(blob_out, blob_out)


@helper
def add_weight_decay(model: ModelHelper, weight_decay: float) -> None:
    """grad += weight_decay * param for every WEIGHT parameter (not biases).

    Call after add_gradient_operators. Emits: WeightedSum per weight, in place on its
    gradient, with constants ONE and `weight_decay_{value}` filled by param_init_net.
    """
    if not model.param_to_grad:
        raise ValueError("add_weight_decay needs gradients: call add_gradient_operators first")
    one = model.add_constant("ONE", np.ones(1, np.float32))
    decay = model.add_constant(
        f"weight_decay_{weight_decay:g}", np.full(1, weight_decay, np.float32)
    )
    for param in model.get_params(Tags.WEIGHT):
        grad = model.param_to_grad.get(param)
        if grad is not None:  # a reference: the name is scoped already
            grad = BlobReference(grad, model.net)
            model.net.WeightedSum([grad, one, param, decay], grad)
