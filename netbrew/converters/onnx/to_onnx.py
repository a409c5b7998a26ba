"""Per-op converters for netbrew ops that ONNX lacks (one named function per op).

ONNX ops need none: they are copied as they are. Each converter returns the ONNX nodes
(and extra initializers) that compute the op, keeping its input and output names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from netbrew.errors import UnsupportedConversion
from netbrew.netdef.args import args_dict
from netbrew.operators.registry import Registry
from netbrew.proto.netbrew_pb2 import OperatorDef


@dataclass
class Converted:
    """What a converter produces."""

    nodes: list[onnx.NodeProto]
    initializers: list[onnx.TensorProto] = field(default_factory=list)


ToOnnx = Callable[[OperatorDef], Converted]
CONVERTERS: Registry[str, ToOnnx] = Registry("ONNX export converter")
NOT_EXPORTABLE: dict[str, str] = {}


def to_onnx(op_type: str) -> Callable[[ToOnnx], ToOnnx]:
    """Registers the ONNX export converter of a netbrew-only op."""
    return CONVERTERS.register(op_type)


def not_exportable(op_type: str, reason: str) -> None:
    """Declares that `op_type` has no ONNX form (training-only ops, gradients)."""
    NOT_EXPORTABLE[op_type] = reason


def _name(op: OperatorDef, suffix: str) -> str:
    return f"{op.output[0]}__{suffix}"


@to_onnx("FC")
def fc_to_onnx(op: OperatorDef) -> Converted:
    """FC(X, W, b) -> Gemm(Flatten(X, axis), W, b, transB=1), for axis_w = 1."""
    args = args_dict(op.arg)
    axis, axis_w = args.get("axis", 1), args.get("axis_w", 1)
    if axis_w != 1 or axis != 1:
        raise UnsupportedConversion(
            f"FC {op.output[0]!r}: only axis=1 and axis_w=1 export to ONNX "
            f"(got axis={axis}, axis_w={axis_w})"
        )
    flat = _name(op, "flat")
    return Converted(
        [
            helper.make_node("Flatten", [op.input[0]], [flat], axis=1, name=_name(op, "flatten")),
            helper.make_node(
                "Gemm", [flat, *op.input[1:]], [op.output[0]], transB=1, name=op.name or None
            ),
        ]
    )


@to_onnx("StopGradient")
def stop_gradient_to_onnx(op: OperatorDef) -> Converted:
    """StopGradient only matters for training: Identity."""
    return Converted([helper.make_node("Identity", [op.input[0]], [op.output[0]])])


@to_onnx("SumReduceLike")
def sum_reduce_like_to_onnx(op: OperatorDef) -> Converted:
    """Not expected in inference nets, but expressible: ReduceSum to B's shape is dynamic."""
    raise UnsupportedConversion("SumReduceLike appears only in gradients; export the forward net")


@to_onnx("LabelCrossEntropy")
def label_cross_entropy_to_onnx(op: OperatorDef) -> Converted:
    """Y = -log(X[i, label_i]) as Log + GatherElements + Neg + Squeeze."""
    x, label = op.input
    idx, log, picked, axes = (_name(op, s) for s in ("idx", "log", "picked", "axes"))
    axes_init = numpy_helper.from_array(np.array([1], np.int64), axes)
    nodes = [
        helper.make_node("Cast", [label], [idx + "_64"], to=onnx.TensorProto.INT64),
        helper.make_node("Unsqueeze", [idx + "_64", axes], [idx]),
        helper.make_node("Log", [x], [log]),
        helper.make_node("GatherElements", [log, idx], [picked], axis=1),
        helper.make_node("Squeeze", [picked, axes], [picked + "_sq"]),
        helper.make_node("Neg", [picked + "_sq"], [op.output[0]]),
    ]
    return Converted(nodes, [axes_init])


@to_onnx("AveragedLoss")
def averaged_loss_to_onnx(op: OperatorDef) -> Converted:
    """mean over every element: ReduceMean with keepdims=0."""
    return Converted([helper.make_node("ReduceMean", [op.input[0]], [op.output[0]], keepdims=0)])


for _op, _why in {
    "Iter": "an optimizer counter",
    "LearningRate": "an optimizer schedule",
    "WeightedSum": "a parameter update",
    "MomentumSGDUpdate": "a parameter update",
    "Adam": "a parameter update",
    "Save": "file I/O",
    "Load": "file I/O",
    "CreateDB": "training data input (a DB reader)",
    "TensorProtosDBInput": "training data input (batches read from a DB)",
    "Accuracy": "a training metric",
    "SoftmaxWithLoss": "a training loss (export the Softmax branch instead)",
    "Allreduce": "a data-parallel training collective",
    "Broadcast": "a data-parallel training collective",
    "Allgather": "a data-parallel training collective",
}.items():
    not_exportable(_op, f"{_op} is {_why}, not part of an inference model")

not_exportable(
    "Scan8",
    "ONNX opset 8's batched Scan, which later opsets cannot write as one node (their Scan "
    "has no batch axis); export an opset-9 Scan inside a loop over the batch instead",
)

from netbrew.converters.onnx import (  # noqa: E402, F401  (register Scale..., ConvRelu...)
    caffe2_utility_to_onnx,
    fused_to_onnx,
    training_to_onnx,
)
