"""brew.conv and brew.conv_transpose: N-d convolutions (2-D unless the kernel says otherwise)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from netbrew.brew._util import expand, spatial_rank
from netbrew.brew.arg_scope import helper
from netbrew.brew.initializers import ConstantInit, Initializer, XavierInit, resolve
from netbrew.brew.model_helper import ModelHelper, Tags
from netbrew.netdef.net import BlobReference

Ints = int | Sequence[int]


def _window_args(kernel: Ints, stride: Ints, pad: Ints, dilation: Ints) -> dict[str, list[int]]:
    n = spatial_rank(kernel)
    pads = expand(pad, n, "pad") if isinstance(pad, int) or len(pad) == n else list(pad)
    return {
        "kernel_shape": expand(kernel, n, "kernel"),
        "strides": expand(stride, n, "stride"),
        "pads": pads * 2 if len(pads) == n else expand(pads, 2 * n, "pad"),
        "dilations": expand(dilation, n, "dilation"),
    }


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
    window = _window_args(kernel, stride, pad, dilation)
    shape = [dim_out, dim_in // group, *window["kernel_shape"]]
    w = model.create_param(f"{blob_out}_w", shape, resolve(weight_init, XavierInit()), Tags.WEIGHT)
    inputs = [blob_in, w]
    if not no_bias:
        init = resolve(bias_init, ConstantInit())
        inputs.append(model.create_param(f"{blob_out}_b", [dim_out], init, Tags.BIAS))
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
    window = _window_args(kernel, stride, pad, dilation)
    shape = [dim_in, dim_out // group, *window["kernel_shape"]]
    w = model.create_param(f"{blob_out}_w", shape, resolve(weight_init, XavierInit()), Tags.WEIGHT)
    inputs = [blob_in, w]
    if not no_bias:
        init = resolve(bias_init, ConstantInit())
        inputs.append(model.create_param(f"{blob_out}_b", [dim_out], init, Tags.BIAS))
    n = len(window["kernel_shape"])
    return model.net.ConvTranspose(
        inputs, blob_out, group=group, output_padding=expand(adj, n, "adj"), **window, **op_args
    )
