"""Gradients of the ops the inference passes fuse: ConvRelu, GemmRelu, FCRelu, ConvWinograd,
ConvWinogradRelu, ConvShuffle and FusedConv.

Each maker hands the work to the gradient makers of the ops the fused op stands for, so a
net differentiated after its inference passes gets the gradient ops, and the numbers, that
the unfused net would:

    ConvRelu(X, W, B) -> Y          ReluGradient(Y, dY) -> dZ, then Conv's gradient on dZ
                                    (GemmRelu, FCRelu likewise with Gemm's and FC's)
    ConvWinograd(X, W, U, B) -> Y   Conv's gradient of (X, W, B); ConvWinogradRelu first
                                    takes dY through ReluGradient. U, W's transform, is a
                                    constant the winograd_convs pass derived from W: it gets
                                    no gradient, W gets Conv's
    ConvShuffle(X, W, B) -> Y       ReluGradient(Y, dY) if relu=1 (the shuffle only moves
                                    values, so Y > 0 exactly where the conv's Relu passed),
                                    ConvShuffleOutputGradient takes the result back through
                                    the Reshape, Transpose and Reshape to the conv's output
                                    dZ, then Conv's gradient on dZ
    FusedConv(X, W, B, Z, min, max)  ReluGradient(Y, dY) for Relu; for Clip, the conv (and
                                    the Add) run again for ClipGradient's input; Add's
                                    gradient to Z and the conv's output; Conv's gradient

The Relu step reads Y, the fused op's output, which is the Relu's output: exactly what
Relu's own maker reads in the unfused net.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators import conv_shuffle, conv_winograd, fused  # noqa: F401  (the forward ops)
from netbrew.operators.conv import _ATTRS as CONV_ATTRS
from netbrew.operators.conv import check_conv_operands, check_grad_shape
from netbrew.operators.fused import FUSED_RELU
from netbrew.operators.grad_util import copy_attrs, tmp
from netbrew.operators.schema import GRADIENTS, REQUIRED, gradient, kernel, schema
from netbrew.operators.shape import reshape_dims
from netbrew.operators.window import make_window
from netbrew.proto.netbrew_pb2 import OperatorDef

SHUFFLE_ATTRS = ("grouped_shape", "shape", "relu")
"""ConvShuffle's attributes that Conv does not take."""
BASE_OF: dict[str, str] = {fused_type: base for base, fused_type in FUSED_RELU.items()}
"""Fused-with-Relu op type -> its base op type."""


def base_op(
    op: OperatorDef, op_type: str, inputs: Sequence[str], drop: Sequence[str] = ()
) -> OperatorDef:
    """The unfused op that `op` stands for: `op_type` on `inputs`, writing op's output, with
    op's arguments but those in `drop`.

    Args:
        op: the fused forward op.
        op_type: the base op's type (Conv, Gemm, FC).
        inputs: the base op's inputs, a subset of op's.
        drop: the fused op's own attributes, which the base op does not take.
    """
    attrs = {k: v for k, v in copy_attrs(op).items() if k not in drop}
    return op_def(op_type, list(inputs), [op.output[0]], name=op.name or None, **attrs)


def base_gradient(base: OperatorDef, dy: str, g_in: Sequence[str | None]) -> list[OperatorDef]:
    """The gradient ops of `base` for output gradient `dy`, by its registered maker."""
    return GRADIENTS[base.type](base, [dy], list(g_in))


def through_relu(op: OperatorDef, dy: str) -> tuple[list[OperatorDef], str]:
    """Relu's gradient ops for a fused op whose output Y is a Relu's output.

    Returns:
        (ops, name of the gradient before the Relu, which they write).
    """
    relu = op_def("Relu", [op.output[0]], [op.output[0]])  # in place: Y is its output
    dz = tmp(dy, "before_relu")
    return GRADIENTS["Relu"](relu, [dy], [dz]), dz


def _relu_fused_grad(op, g_out, g_in):
    """Relu's gradient, then the base op's: the same ops as for the base op and its Relu."""
    relu_ops, dz = through_relu(op, g_out[0])
    return relu_ops + base_gradient(base_op(op, BASE_OF[op.type], op.input), dz, g_in)


for _fused in FUSED_RELU.values():
    gradient(_fused)(_relu_fused_grad)


def _winograd_grad(op, g_out, g_in):
    """Conv's gradient of (X, W, B); U, the transform of W, gets none (see module doc)."""
    dy, ops = g_out[0], []
    if op.type == "ConvWinogradRelu":
        ops, dy = through_relu(op, dy)
    keep = [i for i in range(len(op.input)) if i != 2]  # all but U
    conv = base_op(op, "Conv", [op.input[i] for i in keep])
    return ops + base_gradient(conv, dy, [g_in[i] for i in keep])


for _fused in ("ConvWinograd", "ConvWinogradRelu"):
    gradient(_fused)(_winograd_grad)


@gradient("ConvShuffle")
def conv_shuffle_grad(op, g_out, g_in):
    """ReluGradient if relu=1, ConvShuffleOutputGradient back to the conv's output, then
    Conv's gradient."""
    attrs = copy_attrs(op)
    dy, ops = g_out[0], []
    if attrs.get("relu", 0):
        ops, dy = through_relu(op, dy)
    dz = tmp(g_out[0], "unshuffled")
    shuffle_attrs = {k: v for k, v in attrs.items() if k != "relu"}
    ops.append(
        op_def("ConvShuffleOutputGradient", [op.input[0], op.input[1], dy], [dz], **shuffle_attrs)
    )
    conv = base_op(op, "Conv", op.input, drop=SHUFFLE_ATTRS)
    return ops + base_gradient(conv, dz, g_in)


schema(
    "ConvShuffleOutputGradient",
    inputs=["X", "W", "dY"],
    outputs=["dZ"],
    attrs={**CONV_ATTRS, "grouped_shape": REQUIRED, "shape": REQUIRED},
    dtypes={2: "float"},
    onnx=False,
    doc="dZ = dY taken back through ConvShuffle's channel shuffle: Reshape(Transpose("
    "Reshape(dY, T), perm=[0, 2, 1, 3, ...]), Z), where Z (N, M, *S) is Conv(X, W)'s "
    "output shape (X and W are read for their shapes only) and T the shape of Reshape(Z, "
    "grouped_shape) with axes 1 and 2 swapped; attributes as ConvShuffle's; dY's dtype",
)


@kernel("ConvShuffleOutputGradient")
def conv_shuffle_output_gradient_cpu(
    x: np.ndarray,
    w: np.ndarray,
    dy: np.ndarray,
    *,
    grouped_shape: Sequence[int],
    shape: Sequence[int],
    **conv_attrs: Any,
) -> tuple[np.ndarray]:
    """The adjoint of ConvShuffle's shuffle: each Reshape's adjoint is a Reshape back, and
    the swap of axes 1 and 2 is its own inverse.

    Raises:
        ShapeError: the shapes do not fit the conv's output, as the forward Reshapes would
            have said, or dY does not have the forward output's shape.
    """
    get = conv_attrs.get
    m = check_conv_operands(x, w, None, get("group", 1), get("kernel_shape"), transposed=False)
    win = make_window(
        x.shape[2:], w.shape[2:], get("strides"), get("dilations"), get("pads"),
        get("auto_pad", "NOTSET"),
    )  # fmt: skip
    z_shape = (x.shape[0], m, *win.out)
    grouped = reshape_dims(z_shape, grouped_shape)
    if len(grouped) < 3:  # the forward Transpose swapped axes 1 and 2
        raise ShapeError(
            f"argument 'grouped_shape' gives {len(grouped)} dims, expected at least 3 "
            "(N, G, M/G, ...)"
        )
    swapped = [grouped[0], grouped[2], grouped[1], *grouped[3:]]
    check_grad_shape(dy, reshape_dims(swapped, shape), "ConvShuffle's output Y")
    dz = np.swapaxes(dy.reshape(swapped), 1, 2)
    return (np.ascontiguousarray(dz).reshape(z_shape),)


@gradient("FusedConv")
def fused_conv_grad(op, g_out, g_in):
    """The unfused ops' gradients in reverse: the activation's, Add's, then Conv's."""
    activation = copy_attrs(op).get("activation", "")
    x, w, b, z, low, high = [*op.input, *[""] * 6][:6]
    conv = base_op(op, "Conv", [x, w, b] if b else [x, w], drop=("activation", "channels_last"))
    dy, ops = g_out[0], []
    conv_out = tmp(g_out[0], "conv_out")
    if z or activation == "Clip":  # Add's gradient reduces like it; ClipGradient reads it
        ops.append(op_def("Conv", list(conv.input), [conv_out], **copy_attrs(conv)))
    if activation == "Relu":
        relu_ops, dy = through_relu(op, dy)
        ops += relu_ops
    elif activation == "Clip":
        before = conv_out
        if z:
            before = tmp(g_out[0], "sum")
            ops.append(op_def("Add", [conv_out, z], [before]))
        clip = op_def("Clip", [before, low, high], [op.output[0]])
        ops += GRADIENTS["Clip"](clip, [dy], [tmp(g_out[0], "before_clip")])
        dy = tmp(g_out[0], "before_clip")
    if z:
        d_conv = tmp(g_out[0], "conv")
        ops += GRADIENTS["Add"](
            op_def("Add", [conv_out, z], [op.output[0]]), [dy], [d_conv, g_in[3]]
        )
        dy = d_conv
    return ops + base_gradient(conv, dy, g_in[: len(conv.input)])
