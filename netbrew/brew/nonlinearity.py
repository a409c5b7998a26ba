"""brew activations: relu, leaky_relu, prelu, sigmoid, tanh, softmax."""

from __future__ import annotations

from typing import Any

from netbrew.brew.arg_scope import helper
from netbrew.brew.initializers import ConstantInit, Initializer, resolve
from netbrew.brew.model_helper import ModelHelper, Tags
from netbrew.netdef.net import BlobReference


@helper
def relu(model: ModelHelper, blob_in: str, blob_out: str, **op_args: Any) -> BlobReference:
    """Y = max(X, 0). Emits: Relu (may be written in place: blob_out == blob_in)."""
    return model.net.Relu(blob_in, blob_out, **op_args)


@helper
def leaky_relu(
    model: ModelHelper, blob_in: str, blob_out: str, *, alpha: float = 0.01
) -> BlobReference:
    """Y = X if X >= 0 else alpha * X. Emits: LeakyRelu."""
    return model.net.LeakyRelu(blob_in, blob_out, alpha=alpha)


@helper
def prelu(
    model: ModelHelper,
    blob_in: str,
    blob_out: str,
    *,
    num_channels: int = 1,
    spatial_dims: int = 2,
    slope_init: Initializer | None = None,
) -> BlobReference:
    """Y = X if X >= 0 else slope * X, one learned slope per channel (NCHW).

    Emits: PRelu. Parameter: `{blob_out}_slope` [num_channels, 1, ...] (WEIGHT, 0.25).
    """
    shape = [num_channels] + [1] * spatial_dims
    slope = model.create_param(
        f"{blob_out}_slope", shape, resolve(slope_init, ConstantInit(0.25)), Tags.WEIGHT
    )
    return model.net.PRelu([blob_in, slope], blob_out)


@helper
def sigmoid(model: ModelHelper, blob_in: str, blob_out: str) -> BlobReference:
    """Y = 1 / (1 + exp(-X)). Emits: Sigmoid."""
    return model.net.Sigmoid(blob_in, blob_out)


@helper
def tanh(model: ModelHelper, blob_in: str, blob_out: str) -> BlobReference:
    """Y = tanh(X). Emits: Tanh."""
    return model.net.Tanh(blob_in, blob_out)


@helper
def softmax(model: ModelHelper, blob_in: str, blob_out: str, *, axis: int = 1) -> BlobReference:
    """Y = exp(X) / sum(exp(X)) along `axis` (default 1, the class axis). Emits: Softmax."""
    return model.net.Softmax(blob_in, blob_out, axis=axis)
