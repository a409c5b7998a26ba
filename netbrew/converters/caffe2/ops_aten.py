"""Caffe2's ATen op: one ATen function, named by the `operator` argument, with that
function's arguments by name. PyTorch's Caffe2 export (operator_export_type
ONNX_ATEN_FALLBACK, then caffe2.python.onnx) wrote one wherever ONNX had no op.

The ATen functions below translate to canonical ops; any other `operator` is refused
with its name. Overloads are told apart the way ATen's Caffe2 op did: by which arguments
are set and by the input count (max(self, dim, keepdim) against max(self, other)).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from netbrew.converters.caffe2.context import Context, translator
from netbrew.errors import UnsupportedConversion
from netbrew.proto.netbrew_pb2 import OperatorDef

AtenTranslator = Callable[[OperatorDef, Context], list[OperatorDef]]
ATEN: dict[str, AtenTranslator] = {}
INT64_MAX = np.iinfo(np.int64).max

# aten::grid_sampler's integer enums (GridSamplerInterpolation, GridSamplerPadding).
GRID_MODES = {0: "linear", 1: "nearest", 2: "cubic"}
GRID_PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}


def aten(*names: str) -> Callable[[AtenTranslator], AtenTranslator]:
    """Registers the translator of ATen functions `names`."""

    def register(fn: AtenTranslator) -> AtenTranslator:
        for name in names:
            ATEN[name] = fn
        return fn

    return register


@translator("ATen")
def aten_op(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """Dispatches on `operator`; an argument the function's translator did not read is an
    error naming both, since ATen reads every argument it is given."""
    name = ctx.arg("operator")
    ctx.arg("overload_name")  # overloads are told apart by arguments and inputs
    if name not in ATEN:
        raise UnsupportedConversion(
            f"ATen operator {name!r} has no translation to netbrew's ops; translated: "
            f"{', '.join(sorted(ATEN))}"
        )
    ops = ATEN[name](op, ctx)
    unused = ctx.unused()
    if unused:
        raise UnsupportedConversion(
            f"ATen operator {name!r}: argument(s) {', '.join(sorted(unused))} not supported"
        )
    return ops


def _expect_inputs(op: OperatorDef, name: str, counts: tuple[int, ...]) -> None:
    if len(op.input) not in counts:
        raise UnsupportedConversion(
            f"ATen operator {name!r}: {len(op.input)} input(s), expected "
            f"{' or '.join(map(str, counts))}"
        )


@aten("max", "min")
def extremum(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """max(self, other): elementwise; max(self, dim, keepdim=False): values and (if a
    second output is named) the int64 index of the first extremum; max(self): the extremum
    of all elements, a scalar."""
    name = ctx.arg("operator")
    low = name == "min"
    _expect_inputs(op, name, (1, 2))
    if len(op.input) == 2:
        return [ctx.make("Min" if low else "Max", op.input, op.output[:1])]
    reduce_type, arg_type = ("ReduceMin", "ArgMin") if low else ("ReduceMax", "ArgMax")
    dim = ctx.arg("dim")
    keepdim = int(ctx.arg("keepdim", default=0))
    if dim is None:
        return [ctx.make(reduce_type, op.input, op.output[:1], keepdims=0)]
    axes, axes_op = ctx.const([dim])
    ops = [axes_op, ctx.make(reduce_type, [op.input[0], axes], op.output[:1], keepdims=keepdim)]
    if len(op.output) > 1 and op.output[1]:
        ops.append(ctx.make(arg_type, op.input, op.output[1:2], axis=dim, keepdims=keepdim))
    return ops


@aten("unsqueeze")
def unsqueeze(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """A new axis of size 1 at `dim` (negative dims count from the result's end)."""
    axes, axes_op = ctx.const([ctx.arg("dim")])
    return [axes_op, ctx.make("Unsqueeze", [op.input[0], axes], op.output)]


@aten("grid_sampler", "grid_sampler_2d")
def grid_sampler(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """GridSample; ATen's mode enums are 0 bilinear, 1 nearest, 2 bicubic and 0 zeros,
    1 border, 2 reflection."""
    _expect_inputs(op, "grid_sampler", (2,))
    mode, padding = ctx.arg("interpolation_mode", default=0), ctx.arg("padding_mode", default=0)
    if mode not in GRID_MODES or padding not in GRID_PADDINGS:
        raise UnsupportedConversion(
            f"grid_sampler: interpolation_mode {mode}, padding_mode {padding}; expected "
            f"interpolation_mode in {sorted(GRID_MODES)} and padding_mode in "
            f"{sorted(GRID_PADDINGS)}"
        )
    return [
        ctx.make(
            "GridSample", op.input, op.output, mode=GRID_MODES[mode],
            padding_mode=GRID_PADDINGS[padding],
            align_corners=int(ctx.arg("align_corners", default=0)),
        )
    ]  # fmt: skip


@aten("index_select")
def index_select(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """self taken at the 1-D `index` along `dim`: Gather."""
    _expect_inputs(op, "index_select", (2,))
    return [ctx.make("Gather", op.input, op.output, axis=ctx.arg("dim"))]


@aten("flatten")
def flatten(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """Merges axes start_dim..end_dim into one: a Reshape to
    shape[:start_dim] + [-1] + shape[end_dim + 1:], read from the input's shape."""
    start, end = ctx.arg("start_dim", default=0), ctx.arg("end_dim", default=-1)
    n = ctx.name
    shape, head, tail, target = n("shape"), n("head"), n("tail"), n("target")
    zero, zero_op = ctx.const([0])
    start_blob, start_op = ctx.const([start])
    # end_dim -1 keeps no tail: start the tail past the last axis.
    tail_from, tail_op = ctx.const([INT64_MAX if end == -1 else end + 1])
    end_blob, end_op = ctx.const([INT64_MAX])
    minus_one, minus_one_op = ctx.const([-1])
    return [
        zero_op, start_op, tail_op, end_op, minus_one_op,
        ctx.make("Shape", op.input[:1], [shape]),
        ctx.make("Slice", [shape, zero, start_blob], [head]),
        ctx.make("Slice", [shape, tail_from, end_blob], [tail]),
        ctx.make("Concat", [head, minus_one, tail], [target], axis=0),
        ctx.make("Reshape", [op.input[0], target], op.output),
    ]  # fmt: skip


@aten("upsample_nearest2d")
def upsample_nearest2d(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """Nearest-neighbour resize of N, C, H, W to `output_size` (H', W'). PyTorch takes
    source index floor(dst * in / out): Resize's asymmetric transform with floor."""
    size = list(ctx.arg("output_size", default=[]))
    if len(size) != 2:
        raise UnsupportedConversion(
            f"upsample_nearest2d: output_size {size}, expected two sizes (H, W)"
        )
    n = ctx.name
    shape, batch_channels, sizes = n("shape"), n("nc"), n("sizes")
    zero, zero_op = ctx.const([0])
    two, two_op = ctx.const([2])
    hw, hw_op = ctx.const(size)
    return [
        zero_op, two_op, hw_op,
        ctx.make("Shape", op.input[:1], [shape]),
        ctx.make("Slice", [shape, zero, two], [batch_channels]),
        ctx.make("Concat", [batch_channels, hw], [sizes], axis=0),
        ctx.make("Resize", [op.input[0], "", "", sizes], op.output, mode="nearest",
                 coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
    ]  # fmt: skip


@aten("adaptive_avg_pool2d")
def adaptive_avg_pool2d(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """Only the output size 1x1 (a global average pool) has a fixed window."""
    size = list(ctx.arg("output_size", default=[]))
    if size not in ([1], [1, 1]):
        raise UnsupportedConversion(
            f"adaptive_avg_pool2d: output_size {size}, expected [1, 1] (a global average "
            "pool); other sizes have no fixed window"
        )
    return [ctx.make("GlobalAveragePool", op.input[:1], op.output)]


@aten("layer_norm")
def layer_norm(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    """Normalises over the trailing len(normalized_shape) axes, then weight and bias
    (each optional: ones and zeros)."""
    _expect_inputs(op, "layer_norm", (1, 2, 3))
    normalized = list(ctx.arg("normalized_shape", default=[]))
    if not normalized:
        raise UnsupportedConversion("layer_norm: no normalized_shape argument")
    ctx.arg("cudnn_enable")  # an implementation choice
    x, *params = op.input
    ops: list[OperatorDef] = []
    if not params or not params[0]:
        scale, scale_op = ctx.const(np.ones(normalized), np.float32)
        ops.append(scale_op)
        params = [scale, *params[1:]]
    return ops + [
        ctx.make("LayerNormalization", [x, *params], op.output[:1], axis=-len(normalized),
                 epsilon=float(ctx.arg("eps", default=1e-5)))
    ]  # fmt: skip
