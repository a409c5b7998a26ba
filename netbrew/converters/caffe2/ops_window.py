"""Caffe2's Conv, ConvTranspose, MaxPool and AveragePool spellings -> ONNX's.

Caffe2 writes windows as kernel/kernels/kernel_h/kernel_w, stride(s)/stride_h/stride_w,
pad(s)/pad_t/pad_l/pad_b/pad_r, dilation(s) and legacy_pad, and runs NHWC when
`order` says so. NHWC ops are wrapped in Transposes (and NHWC Conv weights, stored
[M, kH, kW, C], are transposed to [M, C, kH, kW]).
"""

from __future__ import annotations

from netbrew.converters.caffe2.context import Context, translator
from netbrew.errors import UnsupportedConversion
from netbrew.proto.netbrew_pb2 import OperatorDef

# Caffe2's LegacyPadding enum.
NOTSET, VALID, SAME, CAFFE_LEGACY_POOLING = 0, 1, 2, 3


def _per_axis(ctx: Context, plural: str, single: str, h: str, w: str, default: int):
    value = ctx.arg(plural)
    if value is not None:
        return list(value)
    if ctx.has(h, w):
        return [ctx.arg(h, default=default), ctx.arg(w, default=default)]
    one = ctx.arg(single)
    return None if one is None else [one]


def window(ctx: Context, rank: int | None = None) -> dict:
    """ONNX kernel_shape/strides/pads/dilations (+ auto_pad, ceil_mode) from Caffe2 args."""
    kernel = _per_axis(ctx, "kernels", "kernel", "kernel_h", "kernel_w", 1)
    n = len(kernel) if kernel and len(kernel) > 1 else (rank or 2)
    args: dict = {}
    if kernel is not None:
        args["kernel_shape"] = kernel * n if len(kernel) == 1 else kernel
    strides = _per_axis(ctx, "strides", "stride", "stride_h", "stride_w", 1) or [1]
    args["strides"] = strides * n if len(strides) == 1 else strides
    dilations = _per_axis(ctx, "dilations", "dilation", "dilation_h", "dilation_w", 1) or [1]
    args["dilations"] = dilations * n if len(dilations) == 1 else dilations
    pads = ctx.arg("pads")
    if pads is None and ctx.has("pad_t", "pad_l", "pad_b", "pad_r"):
        pads = [ctx.arg(f"pad_{s}", default=0) for s in "tlbr"]
    if pads is None:
        pads = [ctx.arg("pad", default=0)] * (2 * n)
    args["pads"] = list(pads)
    legacy = ctx.arg("legacy_pad", default=NOTSET)
    if legacy == VALID:
        args["auto_pad"], args["pads"] = "VALID", [0] * (2 * n)
    elif legacy == SAME:
        args["auto_pad"], args["pads"] = "SAME_UPPER", [0] * (2 * n)
    elif legacy == CAFFE_LEGACY_POOLING:
        args["ceil_mode"] = 1  # Caffe's rounding up, dropping windows that start in padding
    return args


def nhwc(ctx: Context) -> bool:
    order = ctx.arg("order", default="NCHW")
    if order not in ("NCHW", "NHWC"):
        raise UnsupportedConversion(f"{ctx.op.type}: order {order!r}, expected NCHW or NHWC")
    return order == "NHWC"


def wrap_nhwc(ctx: Context, x: str, y: str, body) -> list[OperatorDef]:
    """Transposes x to NCHW, runs body(x_nchw, y_nchw) ops, transposes the result back."""
    x_nchw, y_nchw = ctx.name("nchw"), ctx.name("nchw_out")
    return [
        ctx.make("Transpose", [x], [x_nchw], perm=[0, 3, 1, 2]),
        *body(x_nchw, y_nchw),
        ctx.make("Transpose", [y_nchw], [y], perm=[0, 2, 3, 1]),
    ]


@translator("Conv", "ConvTranspose")
def conv(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    args = window(ctx)
    args.pop("ceil_mode", None)
    args["group"] = ctx.arg("group", default=1)
    if op.type == "ConvTranspose":
        adj = _per_axis(ctx, "adjs", "adj", "adj_h", "adj_w", 0)
        if adj:
            args["output_padding"] = adj * len(args["strides"]) if len(adj) == 1 else adj
    x, w, *rest = op.input
    if not nhwc(ctx):
        return [ctx.make(op.type, op.input, op.output[:1], **args)]
    w_nchw = ctx.name("w_nchw")
    perm = [
        0,
        3,
        1,
        2,
    ]  # Caffe2 NHWC weights: Conv [M, kH, kW, C/g], ConvTranspose [C, kH, kW, M/g]
    return [ctx.make("Transpose", [w], [w_nchw], perm=perm)] + wrap_nhwc(
        ctx, x, op.output[0], lambda xi, yo: [ctx.make(op.type, [xi, w_nchw, *rest], [yo], **args)]
    )


@translator("MaxPool", "AveragePool", "MaxPool2D", "AveragePool2D", "MaxPool1D", "MaxPool3D",
            "AveragePool1D", "AveragePool3D")  # fmt: skip
def pool(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    kind = "MaxPool" if op.type.startswith("Max") else "AveragePool"
    if ctx.arg("global_pooling", default=0):
        ctx.arg("kernel", "kernels", "stride", "strides", "pad", "pads", "legacy_pad")
        make = [lambda xi, yo: [ctx.make(f"Global{kind}", [xi], [yo])]]
    else:
        args = window(ctx)
        if kind == "AveragePool":
            args["count_include_pad"] = int(ctx.arg("count_include_pad", default=0))
        make = [lambda xi, yo: [ctx.make(kind, [xi], [yo], **args)]]
    if not nhwc(ctx):
        return make[0](op.input[0], op.output[0])
    return wrap_nhwc(ctx, op.input[0], op.output[0], make[0])
