"""Gradients of CenterCropPad and Col2Im (SpaceToDepth's and DepthToSpace's are in
space_depth.py: each is the other).

    CenterCropPad(input_data, shape) -> output_data
        backward: CenterCropPad(doutput_data, Shape(input_data)) -> dinput_data
    Col2Im(input, image_shape, block_shape) -> output
        backward: Col2ImGradient(doutput, image_shape, block_shape) -> dinput

Center cropping from size a to b and center padding from b to a put the kept block at the same
offset, (a - b) // 2, so each is the other's adjoint: the gradient crops (or zero-pads) dY back
to the input's shape, on every axis (the axes the forward left alone already match). Col2Im
sums sliding blocks into an image; its adjoint reads each block back out of the image, which
is im2col (window.py) with the same block shape, strides, dilations and pads. The integer
inputs (shape, image_shape, block_shape) get no gradient.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import copy_attrs, tmp
from netbrew.operators.schema import gradient, kernel, schema
from netbrew.operators.window import im2col, make_window

schema(
    "Col2ImGradient",
    inputs=["doutput", "image_shape", "block_shape"],
    outputs=["dinput"],
    attrs={"dilations": None, "pads": None, "strides": None},
    dtypes={0: "float", 1: "int", 2: "int"},
    onnx=False,
    doc="dinput [N, C * prod(block_shape), L] = im2col of doutput [N, C, *image_shape]: "
    "dinput[n, c * K + k, l] = doutput at pixel k of block l (0 in the padding), blocks placed "
    "as Col2Im places them; dilations, strides (default 1) and pads (default 0) as Col2Im's",
)


@gradient("CenterCropPad")
def center_crop_pad_grad(op, g_out, g_in):
    """dX = CenterCropPad(dY, Shape(X)) over all axes: it undoes the crop or pad."""
    if not g_in[0]:
        return []
    shape = tmp(g_in[0], "shape")
    return [
        op_def("Shape", [op.input[0]], [shape]),
        op_def("CenterCropPad", [g_out[0], shape], [g_in[0]]),
    ]


@gradient("Col2Im")
def col2im_grad(op, g_out, g_in):
    if not g_in[0]:
        return []
    inputs = [g_out[0], op.input[1], op.input[2]]
    return [op_def("Col2ImGradient", inputs, [g_in[0]], **copy_attrs(op))]


@kernel("Col2ImGradient")
def col2im_gradient_cpu(
    dy: np.ndarray,
    image_shape: np.ndarray,
    block_shape: np.ndarray,
    *,
    dilations: list[int] | None,
    pads: list[int] | None,
    strides: list[int] | None,
) -> tuple[np.ndarray]:
    image = tuple(int(v) for v in np.asarray(image_shape).reshape(-1))
    block = [int(v) for v in np.asarray(block_shape).reshape(-1)]
    if dy.ndim != len(image) + 2 or dy.shape[2:] != image:
        raise ShapeError(
            f"Col2ImGradient: input doutput has shape {list(dy.shape)}, expected [N, C, "
            f"*image_shape] with image_shape {list(image)}"
        )
    if len(block) != len(image):
        raise ShapeError(
            f"Col2ImGradient: block_shape {block} needs {len(image)} values, one per image axis"
        )
    win = make_window(image, block, strides, dilations, pads)
    cols = im2col(dy, win, 1)  # scratch: copied out below
    return (cols.reshape(dy.shape[0], -1, cols.shape[-1]).copy(),)
