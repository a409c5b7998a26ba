"""ONNX export of Caffe2's utility ops (netbrew.operators.caffe2_utility).

Scale becomes a Mul by its constant, SquaredL2Distance Sub, Flatten, ReduceSumSquare and a
Mul by 0.5; Copy, Alias and EnsureCPUOutput the Identity. Constants are stored as float32
and cast to the input's type with CastLike, since a converter does not know the dtype.
Print and Summarize write logs, which ONNX cannot express: they are refused.

Imported at the end of netbrew.converters.onnx.to_onnx, as fused_to_onnx is.
"""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from netbrew.converters.onnx.to_onnx import Converted, not_exportable, to_onnx
from netbrew.netdef.args import args_dict
from netbrew.proto.netbrew_pb2 import OperatorDef


def _name(op: OperatorDef, suffix: str) -> str:
    return f"{op.output[0]}__{suffix}"


def _constant_like(op: OperatorDef, value: float, like: str, tag: str) -> Converted:
    """`value` as an initializer, and a CastLike node giving it `like`'s type."""
    raw, cast = _name(op, tag), _name(op, f"{tag}_cast")
    init = numpy_helper.from_array(np.array(value, np.float32), raw)
    return Converted([helper.make_node("CastLike", [raw, like], [cast])], [init])


@to_onnx("Scale")
def scale_to_onnx(op: OperatorDef) -> Converted:
    """Y = Mul(X, CastLike(scale, X))."""
    scale = float(args_dict(op.arg).get("scale", 1.0))
    const = _constant_like(op, scale, op.input[0], "scale")
    mul = helper.make_node(
        "Mul", [op.input[0], const.nodes[0].output[0]], [op.output[0]], name=op.name or None
    )
    return Converted([*const.nodes, mul], const.initializers)


@to_onnx("SquaredL2Distance")
def squared_l2_distance_to_onnx(op: OperatorDef) -> Converted:
    """Z = 0.5 * ReduceSumSquare(Flatten(X - Y, axis=1), axes=[1], keepdims=0).

    Flatten needs a rank of 1 or more: a 0-d pair (Z of shape [1] in netbrew) does not
    export."""
    x, y = op.input
    diff, flat, axes, total = (_name(op, s) for s in ("diff", "flat", "axes", "sumsq"))
    half = _constant_like(op, 0.5, x, "half")
    nodes = [
        helper.make_node("Sub", [x, y], [diff]),
        helper.make_node("Flatten", [diff], [flat], axis=1),
        helper.make_node("ReduceSumSquare", [flat, axes], [total], keepdims=0),
        *half.nodes,
        helper.make_node(
            "Mul", [total, half.nodes[0].output[0]], [op.output[0]], name=op.name or None
        ),
    ]
    axes_init = numpy_helper.from_array(np.array([1], np.int64), axes)
    return Converted(nodes, [axes_init, *half.initializers])


def _identity(op: OperatorDef) -> Converted:
    """On one device, with ONNX's immutable values: the Identity."""
    return Converted(
        [helper.make_node("Identity", [op.input[0]], [op.output[0]], name=op.name or None)]
    )


# The device copies too: ONNX has no devices, a copy between them is the Identity.
for _op in ("Copy", "Alias", "EnsureCPUOutput", "CopyCPUToGPU", "CopyGPUToCPU"):
    to_onnx(_op)(_identity)

for _op in ("Print", "Summarize"):
    not_exportable(_op, f"{_op} is a logging op (it writes to stdout or a file), not a tensor op")
