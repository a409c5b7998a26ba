"""ONNX export of the fused ops: ConvRelu, GemmRelu, FCRelu and BatchNormalizationRelu
become the base op then a Relu; ConvWinograd(Relu) a Conv (then a Relu) on the original
weights; ConvShuffle the Conv, Relu, Reshape, Transpose and Reshape it folded;
FusedElementwise becomes the nodes of its steps; MatMulBias a MatMul, Add (and Gelu);
SkipLayerNormalization an Add then a LayerNormalization.

Imported at the end of netbrew.converters.onnx.to_onnx (netbrew.operators.fused cannot
import the converter registry itself without an import cycle).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.numpy_helper
from onnx import helper

from netbrew.converters.onnx.to_onnx import Converted, fc_to_onnx, to_onnx
from netbrew.netdef.args import args_dict
from netbrew.operators.fused_elementwise import expand
from netbrew.proto.netbrew_pb2 import OperatorDef


def _pre_relu(op: OperatorDef) -> tuple[OperatorDef, str]:
    """The op as its base type, writing `<Y>__prerelu`; returns it and that name."""
    base = OperatorDef()
    base.CopyFrom(op)
    base.type = op.type.removesuffix("Relu")
    pre = f"{op.output[0]}__prerelu"
    base.output[0] = pre
    return base, pre


def _relu(op: OperatorDef, pre: str) -> onnx.NodeProto:
    return helper.make_node("Relu", [pre], [op.output[0]], name=f"{op.output[0]}__relu")


def _node(op_type: str, op: OperatorDef, inputs, output: str) -> onnx.NodeProto:
    """An ONNX `op_type` node with op's name and attributes."""
    node = helper.make_node(op_type, list(inputs), [output], name=op.name or None)
    node.attribute.extend(helper.make_attribute(k, v) for k, v in args_dict(op.arg).items())
    return node


@to_onnx("ConvRelu")
def conv_relu_to_onnx(op: OperatorDef) -> Converted:
    """ConvRelu(X, W, B) -> Relu(Conv(X, W, B))."""
    base, pre = _pre_relu(op)
    return Converted([_node("Conv", op, base.input, pre), _relu(op, pre)])


@to_onnx("BatchNormalizationRelu")
def batch_normalization_relu_to_onnx(op: OperatorDef) -> Converted:
    """BatchNormalizationRelu(X, scale, B, mean, var) -> Relu(BatchNormalization(...))."""
    base, pre = _pre_relu(op)
    return Converted([_node("BatchNormalization", op, base.input, pre), _relu(op, pre)])


@to_onnx("ConvWinograd")
@to_onnx("ConvWinogradRelu")
def conv_winograd_to_onnx(op: OperatorDef) -> Converted:
    """ConvWinograd(X, W, U, B) -> Conv(X, W, B), dropping W's transform U; then a Relu
    for ConvWinogradRelu."""
    inputs = [*op.input[:2], *op.input[3:]]
    if op.type == "ConvWinogradRelu":
        pre = f"{op.output[0]}__prerelu"
        return Converted([_node("Conv", op, inputs, pre), _relu(op, pre)])
    return Converted([_node("Conv", op, inputs, op.output[0])])


@to_onnx("GemmRelu")
def gemm_relu_to_onnx(op: OperatorDef) -> Converted:
    """GemmRelu(A, B, C) -> Relu(Gemm(A, B, C))."""
    base, pre = _pre_relu(op)
    return Converted([_node("Gemm", op, base.input, pre), _relu(op, pre)])


@to_onnx("FCRelu")
def fc_relu_to_onnx(op: OperatorDef) -> Converted:
    """FCRelu(X, W, b) -> Relu(Gemm(Flatten(X), W, b, transB=1)), as FC exports."""
    base, pre = _pre_relu(op)
    converted = fc_to_onnx(base)
    converted.nodes.append(_relu(op, pre))
    return converted


@to_onnx("FusedElementwise")
def fused_elementwise_to_onnx(op: OperatorDef) -> Converted:
    """FusedElementwise -> its steps' original nodes (Add, Relu, ...), in order."""
    return Converted(
        [
            helper.make_node(
                s.type, list(s.input), list(s.output), name=s.name or None, **args_dict(s.arg)
            )
            for s in expand(op)
        ]
    )


@to_onnx("ConvShuffle")
def conv_shuffle_to_onnx(op: OperatorDef) -> Converted:
    """ConvShuffle(X, W, B) -> Conv (then Relu if relu=1), Reshape to grouped_shape,
    Transpose(perm=[0, 2, 1, ...]), Reshape to shape: the nodes the pass folded, with the
    two shapes as initializers."""
    attrs = args_dict(op.arg)
    grouped, final = list(attrs.pop("grouped_shape")), list(attrs.pop("shape"))
    relu = attrs.pop("relu", 0)
    out = op.output[0]
    conv_out = f"{out}__conv"
    nodes = [helper.make_node("Conv", list(op.input), [conv_out], name=op.name or None, **attrs)]
    if relu:
        nodes.append(helper.make_node("Relu", [conv_out], [f"{out}__relu"]))
        conv_out = f"{out}__relu"
    shapes = [f"{out}__grouped_shape", f"{out}__shape"]
    nodes += [
        helper.make_node("Reshape", [conv_out, shapes[0]], [f"{out}__grouped"]),
        helper.make_node(
            "Transpose",
            [f"{out}__grouped"],
            [f"{out}__swapped"],
            perm=[0, 2, 1, *range(3, len(grouped))],
        ),
        helper.make_node("Reshape", [f"{out}__swapped", shapes[1]], [out]),
    ]
    initializers = [
        onnx.numpy_helper.from_array(np.array(dims, np.int64), name)
        for dims, name in zip((grouped, final), shapes)
    ]
    return Converted(nodes, initializers)


@to_onnx("FusedConv")
def fused_conv_to_onnx(op: OperatorDef) -> Converted:
    """FusedConv(X, W, B, Z, min, max) -> Conv, then Add of Z, then Relu or Clip: the nodes
    the fuse_conv_epilogue pass fused."""
    attrs = args_dict(op.arg)
    activation = attrs.pop("activation", "")
    attrs.pop("channels_last", None)  # a memory layout, not part of the conv
    x, w, b, z, low, high = [*op.input, *[""] * 6][:6]
    out = op.output[0]
    steps = [("Add", [z])] if z else []
    steps += {"Relu": [("Relu", [])], "Clip": [("Clip", [low, high])]}.get(activation, [])
    names = [f"{out}__conv", *(f"{out}__{kind.lower()}" for kind, _ in steps[:-1]), out]
    conv_in = [x, w, b] if b else [x, w]
    nodes = [helper.make_node("Conv", conv_in, [names[0]], name=op.name or None, **attrs)]
    for (kind, extra), src, dst in zip(steps, names, names[1:]):
        inputs = [src, *extra]
        while inputs[-1] == "":
            inputs.pop()
        nodes.append(helper.make_node(kind, inputs, [dst], name=f"{dst}__{kind.lower()}"))
    if not steps:
        nodes[0].output[0] = out
    return Converted(nodes)


@to_onnx("MatMulBias")
def matmul_bias_to_onnx(op: OperatorDef) -> Converted:
    """MatMulBias(A, B, C) -> Add(MatMul(A, B), C), then Gelu for activation='Gelu': the
    nodes the fuse_matmul_bias pass fused."""
    activation = args_dict(op.arg).get("activation", "")
    out = op.output[0]
    added = f"{out}__biased" if activation else out
    nodes = [
        helper.make_node("MatMul", list(op.input[:2]), [f"{out}__matmul"], name=op.name or None),
        helper.make_node("Add", [f"{out}__matmul", op.input[2]], [added], name=f"{out}__add"),
    ]
    if activation:
        nodes.append(helper.make_node(activation, [added], [out], name=f"{out}__gelu"))
    return Converted(nodes)


@to_onnx("SkipLayerNormalization")
def skip_layer_normalization_to_onnx(op: OperatorDef) -> Converted:
    """SkipLayerNormalization(X, Skip, Scale, B) -> LayerNormalization(Add(X, Skip), Scale,
    B): the nodes the fuse_skip_layer_norm pass fused."""
    total = f"{op.output[0]}__skip_sum"
    add = helper.make_node("Add", list(op.input[:2]), [total], name=f"{total}__add")
    return Converted([add, _node("LayerNormalization", op, [total, *op.input[2:]], op.output[0])])
