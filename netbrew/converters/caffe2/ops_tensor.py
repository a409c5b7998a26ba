"""Translators for Caffe2's tensor ops as PyTorch -> ONNX -> Caffe2 exports wrote them:
the reductions, Shape, Slice, ScatterAssign and BatchMatMul; the ops that share an ONNX
op's name but not its defaults or arguments (Split, ArgMax/ArgMin, TopK, Tile, OneHot);
the device copies a GPU net holds; and the training ops brew adds, which netbrew spells
as Caffe2 did."""

from __future__ import annotations

import numpy as np

from netbrew.converters.caffe2.context import Context, translator
from netbrew.converters.caffe2.ops_window import nhwc
from netbrew.errors import UnsupportedConversion
from netbrew.proto.netbrew_pb2 import OperatorDef

INT64_MAX = np.iinfo(np.int64).max


@translator("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL1", "ReduceL2")
def reduce(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """Caffe2 reduces over the `axes` argument (all axes when it is empty), keepdims 1 by
    default; ONNX takes the axes as an input and reduces over all when it is absent."""
    axes = list(ctx.arg("axes", default=[]))
    keepdims = int(ctx.arg("keepdims", default=1))
    if not axes:
        return [ctx.make(op.type, op.input[:1], op.output, keepdims=keepdims)]
    blob, axes_op = ctx.const(axes)
    return [axes_op, ctx.make(op.type, [op.input[0], blob], op.output, keepdims=keepdims)]


@translator("Shape")
def shape(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """int64 dims of the input, or only those at `axes` (Caffe2 takes no negative axis)."""
    axes = list(ctx.arg("axes", default=[]))
    if not axes:
        return [ctx.make("Shape", op.input, op.output)]
    if min(axes) < 0:
        raise UnsupportedConversion(f"Shape: axes {axes}, expected non-negative axes")
    full = ctx.name("shape")
    index, index_op = ctx.const(axes)
    return [
        index_op,
        ctx.make("Shape", op.input, [full]),
        ctx.make("Gather", [full, index], op.output),
    ]


def _onnx_bound(value: int) -> int:
    """A Caffe2 slice bound as ONNX reads it. Caffe2 counts a negative bound v as
    dim + 1 + v (so -1 is the end of the axis), ONNX as dim + v; bounds past the end are
    clamped by both."""
    if value >= 0:
        return value
    return value + 1 if value < -1 else INT64_MAX


@translator("Slice")
def slice_op(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """Slice over the first len(starts) axes by `starts`/`ends` given as arguments or as
    the 2nd and 3rd inputs (int32 or int64); the other axes are kept whole."""
    data = op.input[0]
    if len(op.input) >= 3:
        return _slice_by_inputs(op, ctx)
    starts, ends = ctx.arg("starts"), ctx.arg("ends")
    if starts is None or ends is None or len(starts) != len(ends):
        raise UnsupportedConversion(
            f"Slice: expected `starts` and `ends` of one length (arguments or inputs 2 and "
            f"3), got starts={starts}, ends={ends}"
        )
    starts_blob, starts_op = ctx.const([_onnx_bound(v) for v in starts])
    ends_blob, ends_op = ctx.const([_onnx_bound(v) for v in ends])
    return [starts_op, ends_op, ctx.make("Slice", [data, starts_blob, ends_blob], op.output)]


def _slice_by_inputs(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """Bounds known at run time only: each negative bound v becomes dim + 1 + v, with
    the dims of the first len(starts) axes read from the data's shape."""
    data, starts, ends = op.input[:3]
    n = ctx.name
    shape, count, dims, dims1 = n("shape"), n("count"), n("dims"), n("dims1")
    zero, zero_op = ctx.const([0])
    one, one_op = ctx.const(1)
    ops = [
        zero_op,
        one_op,
        ctx.make("Shape", [data], [shape]),
        ctx.make("Shape", [starts], [count]),
        ctx.make("Slice", [shape, zero, count], [dims]),
        ctx.make("Add", [dims, one], [dims1]),
    ]
    bounds = []
    for blob in (starts, ends):
        wide, negative, shifted, bound = n("i64"), n("neg"), n("shifted"), n("bound")
        ops += [
            ctx.make("Cast", [blob], [wide], to=np.int64),
            ctx.make("Less", [wide, zero], [negative]),
            ctx.make("Add", [wide, dims1], [shifted]),
            ctx.make("Where", [negative, shifted, wide], [bound]),
        ]
        bounds.append(bound)
    ops.append(ctx.make("Slice", [data, *bounds], op.output[:1]))
    return ops


@translator("ScatterAssign")
def scatter_assign(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """DATA[INDICES[k]] = SLICES[k] along axis 0. Caffe2 reads only sizes: INDICES is
    taken flat and SLICES as [K] + DATA.shape[1:] whatever their shapes."""
    data, indices, slices = op.input
    names = ("idx", "idx64", "shape", "tail", "rows_shape", "rows", "out")
    flat, wide, shape, tail, rows_shape, rows, scattered = (ctx.name(t) for t in names)
    column, column_op = ctx.const([-1, 1])
    minus_one, minus_one_op = ctx.const([-1])
    one, one_op = ctx.const([1])
    end, end_op = ctx.const([INT64_MAX])
    return [
        column_op,
        minus_one_op,
        one_op,
        end_op,
        ctx.make("Reshape", [indices, column], [flat]),
        ctx.make("Cast", [flat], [wide], to=np.int64),
        ctx.make("Shape", [data], [shape]),
        ctx.make("Slice", [shape, one, end], [tail]),
        ctx.make("Concat", [minus_one, tail], [rows_shape], axis=0),
        ctx.make("Reshape", [slices, rows_shape], [rows]),
        # Caffe2 writes DATA in place; ScatterND may not, so the result is copied back.
        ctx.make("ScatterND", [data, wide, rows], [scattered]),
        ctx.make("Identity", [scattered], op.output),
    ]


@translator("BatchMatMul")
def batch_matmul(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """A @ B over the last two axes, batch axes alike (broadcast=0) or broadcast as
    numpy.matmul does (broadcast=1). trans_a/trans_b swap the last two axes of A/B.

    A vector-vector product is a scalar here, a [1] tensor in Caffe2."""
    ctx.arg("broadcast")  # MatMul broadcasts; Caffe2 without it only refused more shapes
    trans_a, trans_b = ctx.arg("trans_a", default=0), ctx.arg("trans_b", default=0)
    if not trans_a and not trans_b:
        return [ctx.make("MatMul", op.input, op.output)]
    a = "...ki" if trans_a else "...ik"
    b = "...jk" if trans_b else "...kj"
    return [ctx.make("Einsum", op.input, op.output, equation=f"{a},{b}->...ij")]


@translator("CopyGPUToCPU", "CopyCPUToGPU", "CopyFromCPUInput", "EnsureCPUOutput",
            "CopyOnDeviceLike")  # fmt: skip
def device_copy(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """Copies between devices: every blob lives on CPU here, so each is an Identity of
    its first input (CopyOnDeviceLike's second only names the device)."""
    return [ctx.make("Identity", op.input[:1], op.output)]


@translator("AveragedLoss", "LabelCrossEntropy", "Accuracy", "SoftmaxWithLoss", "CreateDB",
            "TensorProtosDBInput")  # fmt: skip
def same_spelling(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """Training ops netbrew spells as Caffe2 did, arguments included (the losses, and the
    DB reader and its batch input)."""
    from netbrew.operators import get_schema

    attrs = get_schema(op.type).attrs
    return [ctx.make(op.type, op.input, op.output, **{k: ctx.arg(k) for k in attrs
                                                      if ctx.has(k)})]  # fmt: skip


def _order_axis(ctx: Context) -> int:
    """Caffe2's `axis` argument, else the channel axis of `order` (GetDimFromOrderString)."""
    if ctx.has("axis"):
        return int(ctx.arg("axis"))
    return 3 if nhwc(ctx) else 1  # nhwc refuses any other order


@translator("Split")
def split(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """Split along `axis` (default: the channel axis of `order`, 1 for NCHW, where ONNX
    splits axis 0), in sizes from the `split` argument or the int 2nd input, else
    equally; add_axis=1 drops the split axis from each piece."""
    axis, sizes = _order_axis(ctx), ctx.arg("split")
    add_axis = int(ctx.arg("add_axis", default=0))
    ops, inputs = [], [op.input[0]]
    if len(op.input) > 1 and sizes is not None:
        raise UnsupportedConversion("Split: sizes given both as `split` and as an input")
    if len(op.input) > 1:
        wide = ctx.name("split")
        ops.append(ctx.make("Cast", [op.input[1]], [wide], to=np.int64))
        inputs.append(wide)
    elif sizes is not None:
        blob, sizes_op = ctx.const(list(sizes))
        ops.append(sizes_op)
        inputs.append(blob)
    if not add_axis:
        return [*ops, ctx.make("Split", inputs, op.output, axis=axis)]
    pieces = [ctx.name("piece") for _ in op.output]
    axes, axes_op = ctx.const([axis])
    squeeze = [ctx.make("Squeeze", [p, axes], [o]) for p, o in zip(pieces, op.output)]
    return [*ops, axes_op, ctx.make("Split", inputs, pieces, axis=axis), *squeeze]


@translator("ArgMax", "ArgMin")
def arg_extreme(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """Caffe2 defaults to the last axis (ONNX: axis 0), keepdims 1 in both."""
    axis, keepdims = int(ctx.arg("axis", default=-1)), int(ctx.arg("keepdims", default=1))
    return [ctx.make(op.type, op.input[:1], op.output, axis=axis, keepdims=keepdims)]


@translator("TopK")
def top_k(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """The k largest along `axis` (default the last), sorted: Caffe2 takes k as an
    argument, ONNX as an input. The optional flattened-indices output is refused."""
    k, axis = ctx.arg("k"), int(ctx.arg("axis", default=-1))
    if k is None or int(k) < 1:
        raise UnsupportedConversion(f"TopK: expected an argument k >= 1, got {k}")
    if len(op.output) > 2 and op.output[2]:
        raise UnsupportedConversion("TopK: the flattened-indices output is not supported")
    blob, k_op = ctx.const([int(k)])
    return [k_op, ctx.make("TopK", [op.input[0], blob], op.output[:2], axis=axis)]


@translator("Tile")
def tile(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """`tiles` copies of the input along `axis` (default 0) given as arguments: a Concat
    of the copies. Tiles or axis given as inputs are refused."""
    if len(op.input) > 1:
        raise UnsupportedConversion("Tile: tiles and axis as inputs, expected arguments")
    tiles, axis = int(ctx.arg("tiles", default=1)), int(ctx.arg("axis", default=0))
    if tiles < 1:
        raise UnsupportedConversion(f"Tile: tiles={tiles}, expected at least 1")
    return [ctx.make("Concat", [op.input[0]] * tiles, op.output, axis=axis)]


@translator("OneHot")
def one_hot(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """float rows of length index_size (the 2nd input, a scalar) with a 1 at each index."""
    indices, size = op.input
    values, values_op = ctx.const([0.0, 1.0], np.float32)
    return [values_op, ctx.make("OneHot", [indices, size, values], op.output, axis=-1)]
