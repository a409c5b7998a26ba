"""ONNX export of OnnxAdagrad, OnnxAdam and OnnxMomentum: their ai.onnx.preview.training
nodes (Adagrad, Adam, Momentum), with the same inputs, outputs and attributes.

Imported at the end of netbrew.converters.onnx.to_onnx, as fused_to_onnx is."""

from __future__ import annotations

from onnx import helper

from netbrew.converters.onnx.to_onnx import Converted, to_onnx
from netbrew.netdef.args import args_dict
from netbrew.operators.onnx_training import DOMAIN, NAMES
from netbrew.proto.netbrew_pb2 import OperatorDef


def preview_training_node(op: OperatorDef) -> Converted:
    """The op as the preview-domain node it was imported from."""
    onnx_type = next(name for name, ours in NAMES.items() if ours == op.type)
    node = helper.make_node(onnx_type, list(op.input), list(op.output), name=op.name or None,
                            domain=DOMAIN)  # fmt: skip
    node.attribute.extend(helper.make_attribute(k, v) for k, v in args_dict(op.arg).items())
    return Converted([node])


for _op in NAMES.values():
    to_onnx(_op)(preview_training_node)
