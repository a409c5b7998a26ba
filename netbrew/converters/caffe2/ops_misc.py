"""Translators for Caffe2's non-window ops: broadcasting arithmetic, Concat, Reshape,
Softmax, FC, SpatialBN, Dropout, LRN and the shape/elementwise family."""

from __future__ import annotations

import numpy as np

from netbrew.converters.caffe2.context import Context, refuse, translator
from netbrew.converters.caffe2.ops_window import nhwc, wrap_nhwc
from netbrew.errors import UnsupportedConversion
from netbrew.proto.netbrew_pb2 import OperatorDef


@translator("Add", "Sub", "Mul", "Div", "Pow")
def broadcast_arith(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """Caffe2's broadcast=1 with `axis` (or `axis_str`, a letter of `order`) aligns B with
    A's dims from `axis` on; B is reshaped to B.shape + [1] * (rank(A) - axis - rank(B))
    so NumPy broadcasting matches. Pow's exponent may be an argument instead of B."""
    ops: list[OperatorDef] = []
    if op.type == "Pow" and len(op.input) == 1:
        if not ctx.has("exponent"):
            raise UnsupportedConversion("Pow: expected an `exponent` argument or a 2nd input")
        exponent, exponent_op = ctx.const(float(ctx.arg("exponent")), np.float32)
        ops.append(exponent_op)
        a, b = op.input[0], exponent
    elif len(op.input) == 2:
        a, b = op.input
    else:
        raise UnsupportedConversion(f"expected 2 inputs (A, B), got {len(op.input)}")
    broadcast, axis = ctx.arg("broadcast", default=0), ctx.arg("axis", default=-1)
    if ctx.has("axis_str"):
        axis = _semantic_axis(ctx)
    if not broadcast or axis == -1:
        return [*ops, ctx.make(op.type, [a, b], op.output)]
    n = ctx.name
    sa, ra, sb, rb, pad, ones, new_shape, b2 = (n(t) for t in
        ("sa", "ra", "sb", "rb", "pad", "ones", "shape", "b"))  # fmt: skip
    axis_blob, axis_op = ctx.const([axis])
    return [
        *ops,
        axis_op,
        ctx.make("Shape", [a], [sa]),
        ctx.make("Size", [sa], [ra]),
        ctx.make("Shape", [b], [sb]),
        ctx.make("Size", [sb], [rb]),
        ctx.make("Sub", [ra, rb], [pad + "_0"]),
        ctx.make("Sub", [pad + "_0", axis_blob], [pad]),
        ctx.make("ConstantOfShape", [pad], [ones], value=np.ones(1, np.int64)),
        ctx.make("Concat", [sb, ones], [new_shape], axis=0),
        ctx.make("Reshape", [b, new_shape], [b2]),
        ctx.make(op.type, [a, b2], op.output),
    ]


def _semantic_axis(ctx: Context) -> int:
    """The axis `axis_str` names within `order` ("C" in "NCHW" is 1), as Caffe2 reads it."""
    if ctx.has("axis"):
        raise UnsupportedConversion("arguments axis and axis_str cannot be used together")
    letter, order = ctx.arg("axis_str"), ctx.arg("order", default="NCHW")
    if len(letter) != 1 or letter not in order:
        raise UnsupportedConversion(f"axis_str {letter!r} is not an axis of order {order!r}")
    return order.index(letter)


@translator("Sum")
def sum_op(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    return [ctx.make("Sum", op.input, op.output)]


@translator("Concat", "DepthConcat")
def concat(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """Concat along `axis` (or the channel axis of `order`), with Caffe2's split_info
    output (int32 sizes of each input along the axis) when it is asked for."""
    order = ctx.arg("order", default="NCHW")
    axis = ctx.arg("axis", default=3 if order == "NHWC" else 1)
    if ctx.arg("add_axis", default=0):
        pieces = [ctx.name("unsq") for _ in op.input]
        axes, axes_op = ctx.const([axis])
        ops = [axes_op] + [ctx.make("Unsqueeze", [x, axes], [p]) for x, p in zip(op.input, pieces)]
        ops.append(ctx.make("Concat", pieces, op.output[:1], axis=axis))
        return ops
    ops = [ctx.make("Concat", op.input, op.output[:1], axis=axis)]
    if len(op.output) > 1 and op.output[1]:
        index, index_op = ctx.const([axis])
        ops.append(index_op)
        sizes = []
        for x in op.input:
            shape, size = ctx.name("shape"), ctx.name("size")
            ops += [ctx.make("Shape", [x], [shape]), ctx.make("Gather", [shape, index], [size])]
            sizes.append(size)
        packed = ctx.name("sizes")
        ops.append(ctx.make("Concat", sizes, [packed], axis=0))
        ops.append(ctx.make("Cast", [packed], [op.output[1]], to=np.int32))
    return ops


@translator("Reshape")
def reshape(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """Reshape by the `shape` argument or second input; old_shape output = Shape(data)."""
    ops = []
    if len(op.input) > 1:
        shape = op.input[1]
    else:
        shape, const_op = ctx.const(ctx.arg("shape"))
        ops.append(const_op)
    ops.append(ctx.make("Reshape", [op.input[0], shape], op.output[:1]))
    if len(op.output) > 1 and op.output[1]:
        ops.insert(0, ctx.make("Shape", [op.input[0]], [op.output[1]]))
    return ops


@translator("Softmax", "LogSoftmax")
def softmax(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """Caffe2 flattens to 2-D at `axis` (default 1) and normalises each row."""
    axis = ctx.arg("axis", default=1)
    flat, out, shape = ctx.name("flat"), ctx.name("rows"), ctx.name("shape")
    return [
        ctx.make("Shape", [op.input[0]], [shape]),
        ctx.make("Flatten", [op.input[0]], [flat], axis=axis),
        ctx.make(op.type, [flat], [out], axis=1),
        ctx.make("Reshape", [out, shape], op.output),
    ]


@translator("FC")
def fc(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    return [ctx.make("FC", op.input, op.output, axis=ctx.arg("axis", default=1),
                     axis_w=ctx.arg("axis_w", default=1))]  # fmt: skip


@translator("FCTransposed")
def fc_transposed(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """W is stored [K, N]: transpose it, then FC."""
    wt = ctx.name("wt")
    x, w, *b = op.input
    return [
        ctx.make("Transpose", [w], [wt], perm=[1, 0]),
        ctx.make("FC", [x, wt, *b], op.output, axis=ctx.arg("axis", default=1)),
    ]


@translator("SpatialBN")
def spatial_bn(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """Inference (is_test=1) or training BatchNormalization, channel axis from `order`."""
    is_test = ctx.arg("is_test", default=0)
    args = {"epsilon": float(ctx.arg("epsilon", default=1e-5)),
            "momentum": float(ctx.arg("momentum", default=0.9))}  # fmt: skip
    outputs = op.output[:1] if is_test else [op.output[0], op.input[3], op.input[4]]
    args["training_mode"] = 0 if is_test else 1

    def body(xi, yo):
        return [ctx.make("BatchNormalization", [xi, *op.input[1:5]], [yo, *outputs[1:]], **args)]

    if nhwc(ctx):
        return wrap_nhwc(ctx, op.input[0], op.output[0], body)
    return body(op.input[0], op.output[0])


@translator("Dropout")
def dropout(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """is_test -> identity Dropout; training -> Dropout with ratio and training_mode inputs."""
    ratio = float(ctx.arg("ratio", default=0.5))
    if ctx.arg("is_test", default=0):
        return [ctx.make("Dropout", op.input[:1], op.output[:1])]
    r, r_op = ctx.const(ratio, np.float32)
    t, t_op = ctx.const(True, np.bool_)
    return [r_op, t_op, ctx.make("Dropout", [op.input[0], r, t], op.output)]


@translator("LRN")
def lrn(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    args = {"size": ctx.arg("size"), "alpha": float(ctx.arg("alpha", default=1e-4)),
            "beta": float(ctx.arg("beta", default=0.75)),
            "bias": float(ctx.arg("bias", default=1.0))}  # fmt: skip
    body = lambda xi, yo: [ctx.make("LRN", [xi], [yo], **args)]  # noqa: E731
    return (
        wrap_nhwc(ctx, op.input[0], op.output[0], body)
        if nhwc(ctx)
        else body(*op.input[:1], op.output[0])
    )


@translator("Transpose")
def transpose(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    axes = ctx.arg("axes", "perm")
    return [ctx.make("Transpose", op.input, op.output, perm=list(axes) if axes else None)]


@translator("Squeeze", "ExpandDims")
def squeeze(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    axes, axes_op = ctx.const(ctx.arg("dims", default=[]))
    kind = "Squeeze" if op.type == "Squeeze" else "Unsqueeze"
    return [axes_op, ctx.make(kind, [op.input[0], axes], op.output)]


@translator("Clip")
def clip(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    low, low_op = ctx.const(ctx.arg("min", default=-np.finfo(np.float32).max), np.float32)
    high, high_op = ctx.const(ctx.arg("max", default=np.finfo(np.float32).max), np.float32)
    return [low_op, high_op, ctx.make("Clip", [op.input[0], low, high], op.output)]


@translator("Cast")
def cast(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """`to` is Caffe2's TensorProto.DataType (an int, or its name), which is netbrew's own:
    op_def reads it as the Python API reads any type (netbrew.netdef.dtypes)."""
    return [ctx.make("Cast", op.input, op.output, to=ctx.arg("to"))]


@translator("Flatten")
def flatten(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    return [ctx.make("Flatten", op.input, op.output, axis=ctx.arg("axis", default=1))]


@translator("ChannelShuffle")
def channel_shuffle(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """[N, C, *S] -> [N, g, C/g, *S] -> swap axes 1, 2 -> [N, C, *S] (NCHW, 4-D)."""
    g = ctx.arg("group", default=1)
    shape, grouped, swapped = ctx.name("shape"), ctx.name("grouped"), ctx.name("swapped")
    target, target_op = ctx.const([0, g, -1])
    tail = ctx.name("tail")
    start, start_op = ctx.const([2])
    end, end_op = ctx.const([np.iinfo(np.int64).max])
    full = ctx.name("full")

    def body(xi, yo):
        return [
            target_op, start_op, end_op,
            ctx.make("Shape", [xi], [shape]),
            ctx.make("Slice", [shape, start, end], [tail]),
            ctx.make("Concat", [target, tail], [full], axis=0),
            ctx.make("Reshape", [xi, full], [grouped]),
            ctx.make("Transpose", [grouped], [swapped], perm=[0, 2, 1, 3, 4]),
            ctx.make("Reshape", [swapped, shape], [yo]),
        ]  # fmt: skip

    if nhwc(ctx):
        return wrap_nhwc(ctx, op.input[0], op.output[0], body)
    return body(op.input[0], op.output[0])


@translator(
    "Relu",
    "Sigmoid",
    "Tanh",
    "Softplus",
    "Elu",
    "LeakyRelu",
    "Exp",
    "Log",
    "Sqrt",
    "Abs",
    "Neg",
    "Identity",
    "Copy",
    "StopGradient",
    "Max",
    "Min",
)
def same_name(op: OperatorDef, ctx: Context) -> list[OperatorDef]:  # fmt: skip
    """Ops whose Caffe2 and ONNX forms agree (Copy is Identity)."""
    args = {k: ctx.arg(k) for k in ("alpha",) if ctx.has(k)}
    ctx.arg("order")
    kind = "Identity" if op.type == "Copy" else op.type
    return [ctx.make(kind, op.input, op.output, **args)]


@translator("PRelu")
def prelu(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """Caffe2's slope ([C], or [1] shared) runs along the channel axis of `order`. NHWC's
    is the last axis, where PRelu broadcasts it; NCHW's slope is reshaped to
    [C, 1, ..., 1] (rank(X) - 2 ones), since [C] would align with W."""
    x, slope = op.input
    if nhwc(ctx):
        return [ctx.make("PRelu", [x, slope], op.output)]
    n = ctx.name
    shape, rank, pad, ones, target, channel_slope = (
        n("shape"), n("rank"), n("pad"), n("ones"), n("target"), n("slope"))  # fmt: skip
    two, two_op = ctx.const([2])
    minus_one, minus_one_op = ctx.const([-1])
    return [
        two_op, minus_one_op,
        ctx.make("Shape", [x], [shape]),
        ctx.make("Size", [shape], [rank]),
        ctx.make("Sub", [rank, two], [pad]),
        ctx.make("ConstantOfShape", [pad], [ones], value=np.ones(1, np.int64)),
        ctx.make("Concat", [minus_one, ones], [target], axis=0),
        ctx.make("Reshape", [slope, target], [channel_slope]),
        ctx.make("PRelu", [x, channel_slope], op.output),
    ]  # fmt: skip


@translator(
    "ConstantFill",
    "GivenTensorFill",
    "GivenTensorDoubleFill",
    "GivenTensorIntFill",
    "GivenTensorInt64Fill",
    "GivenTensorBoolFill",
    "GivenTensorInt16Fill",
    "GivenTensorStringFill",
    "Constant",  # netbrew's exact fill for other dtypes (add_given_fill)
    "GaussianFill",
    "UniformFill",
    "XavierFill",
    "MSRAFill",
)
def filler(op: OperatorDef, ctx: Context) -> list[OperatorDef]:  # fmt: skip
    """netbrew's fillers are Caffe2's: copied as they are."""
    ctx.used.update(ctx.args)
    copy = OperatorDef()
    copy.CopyFrom(op)
    return [copy]


refuse(
    "a data-reading layer: feed the data to the Predictor instead",
    "ImageInput", "VideoInput", "HSoftmaxSearch",
)  # fmt: skip
