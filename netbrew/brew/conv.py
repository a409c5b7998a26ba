"""brew.conv and brew.conv_transpose: N-d convolutions (2-D unless the kernel says otherwise)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from netbrew.brew._util import caffe2_window, expand
from netbrew.brew.arg_scope import helper
from netbrew.brew.initializers import ConstantInit, Initializer, XavierInit, resolve
from netbrew.brew.model_helper import ModelHelper, Tags
from netbrew.netdef.net import BlobReference

Ints = int | Sequence[int]


def _weight_and_bias(
    model: ModelHelper,
    blob_out: str,
    shape: list[int],
    dim_out: int,
    no_bias: bool,
    weight_init: Initializer | None,
    bias_init: Initializer | None,
) -> list[BlobReference]:
    """The weight `{blob_out}_w` (Xavier) and, unless no_bias, the bias `{blob_out}_b`."""
    w = model.create_param(f"{blob_out}_w", shape, resolve(weight_init, XavierInit()), Tags.WEIGHT)
    if no_bias:
        return [w]
    init = resolve(bias_init, ConstantInit())
    return [w, model.create_param(f"{blob_out}_b", [dim_out], init, Tags.BIAS)]


@helper
def conv(
    model: ModelHelper,
    blob_in: str,
    blob_out: str,
    dim_in: int,
    dim_out: int,
    kernel: Ints,
    *,
    stride: Ints = 1,
    pad: Ints = 0,
    dilation: Ints = 1,
    group: int = 1,
    no_bias: bool = False,
    weight_init: Initializer | None = None,
    bias_init: Initializer | None = None,
    **op_args: Any,
) -> BlobReference:
    """Convolution with W `{blob_out}_w` [dim_out, dim_in / group, *kernel] and bias `_b`.

    `pad` is one int, one per spatial axis, or begin and end per axis (ONNX order).
    Emits: Conv.
    """
    if dim_in % group or dim_out % group:
        raise ValueError(f"conv {blob_out!r}: group {group} must divide {dim_in} and {dim_out}")
    window = caffe2_window(op_args, kernel, stride, pad, dilation)
    shape = [dim_out, dim_in // group, *window["kernel_shape"]]
    params = _weight_and_bias(model, blob_out, shape, dim_out, no_bias, weight_init, bias_init)
    inputs = [blob_in, *params]
    return model.net.Conv(inputs, blob_out, group=group, **window, **op_args)


@helper
def conv_transpose(
    model: ModelHelper,
    blob_in: str,
    blob_out: str,
    dim_in: int,
    dim_out: int,
    kernel: Ints,
    *,
    stride: Ints = 1,
    pad: Ints = 0,
    dilation: Ints = 1,
    adj: Ints = 0,
    group: int = 1,
    no_bias: bool = False,
    weight_init: Initializer | None = None,
    bias_init: Initializer | None = None,
    **op_args: Any,
) -> BlobReference:
    """Transposed convolution with W `{blob_out}_w` [dim_in, dim_out / group, *kernel].

    `adj` is Caffe2's name for ONNX's output_padding. Emits: ConvTranspose.
    """
    window = caffe2_window(op_args, kernel, stride, pad, dilation)
    shape = [dim_in, dim_out // group, *window["kernel_shape"]]
    params = _weight_and_bias(model, blob_out, shape, dim_out, no_bias, weight_init, bias_init)
    inputs = [blob_in, *params]
    n = len(window["kernel_shape"])
    return model.net.ConvTranspose(
        inputs, blob_out, group=group, output_padding=expand(adj, n, "adj"), **window, **op_args
    )
