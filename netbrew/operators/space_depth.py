"""SpaceToDepth, DepthToSpace, CenterCropPad and Col2Im: rearranging spatial data.

    SpaceToDepth(input) -> output     backward: DepthToSpace(doutput) -> dinput
    DepthToSpace(input) -> output     backward: SpaceToDepth(doutput) -> dinput

The two are each other's inverse permutation for the same blocksize and mode, so each one's
gradient is the other. CenterCropPad's and Col2Im's gradients are in space_depth_grad.py.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import REQUIRED, gradient, kernel, schema

_BLOCK_ATTRS = {"blocksize": REQUIRED, "mode": "DCR"}
# Axis orders of the [b, c, h, bs, w, bs] <-> [b, bs, bs, c, h, w] (DCR) or
# [b, c, bs, bs, h, w] (CRD) rearrangements.
_TO_DEPTH = {"DCR": (0, 3, 5, 1, 2, 4), "CRD": (0, 1, 3, 5, 2, 4)}
_TO_SPACE = {"DCR": (0, 3, 4, 1, 5, 2), "CRD": (0, 1, 4, 2, 5, 3)}

schema(
    "SpaceToDepth",
    inputs=["input"],
    outputs=["output"],
    attrs=_BLOCK_ATTRS,
    doc="output[b, :, h, w] = the blocksize x blocksize block of input [b, C, H, W] at (h, w) "
    "moved to depth: shape [b, C * blocksize^2, H / blocksize, W / blocksize], ordered "
    "(row, column, channel) in mode DCR (the default) or (channel, row, column) in CRD",
)
schema(
    "DepthToSpace",
    inputs=["input"],
    outputs=["output"],
    attrs=_BLOCK_ATTRS,
    doc="output = input [b, C, H, W] with depth moved into blocksize x blocksize spatial "
    "blocks: shape [b, C / blocksize^2, H * blocksize, W * blocksize]; depth read as (row, "
    "column, channel) in mode DCR (the default) or (channel, row, column) in CRD",
)
schema(
    "CenterCropPad",
    inputs=["input_data", "shape"],
    outputs=["output_data"],
    attrs={"axes": None},
    dtypes={1: "int"},
    doc="output_data = input_data center-cropped or zero-padded to `shape` (one size per axis) "
    "on `axes` (default: all); an odd difference puts the extra element at the end",
)
schema(
    "Col2Im",
    inputs=["input", "image_shape", "block_shape"],
    outputs=["output"],
    attrs={"dilations": None, "pads": None, "strides": None},
    dtypes={1: "int", 2: "int"},
    doc="output [N, C, *image_shape] = the sum of the sliding blocks of input [N, C * "
    "prod(block_shape), L] put back at their places (the inverse of im2col); dilations, "
    "strides (default 1) and pads (begin..., end...; default 0) as in Conv",
)


def _check_block(x: np.ndarray, blocksize: int, mode: str, op: str) -> None:
    if x.ndim != 4:
        raise ShapeError(f"{op}: input has shape {list(x.shape)}, expected 4-D [N, C, H, W]")
    if blocksize < 1:
        raise ShapeError(f"{op}: blocksize={blocksize}, expected a positive integer")
    if mode not in _TO_DEPTH:
        raise ShapeError(f"{op}: mode={mode!r}, expected 'DCR' or 'CRD'")


@kernel("SpaceToDepth")
def space_to_depth_cpu(x: np.ndarray, blocksize: int, mode: str) -> tuple[np.ndarray]:
    _check_block(x, blocksize, mode, "SpaceToDepth")
    n, c, h, w = x.shape
    bs = blocksize
    if h % bs or w % bs:
        raise ShapeError(
            f"SpaceToDepth: input's H={h} and W={w} must be multiples of blocksize={bs}"
        )
    blocks = x.reshape(n, c, h // bs, bs, w // bs, bs).transpose(_TO_DEPTH[mode])
    return (blocks.reshape(n, c * bs * bs, h // bs, w // bs),)


@kernel("DepthToSpace")
def depth_to_space_cpu(x: np.ndarray, blocksize: int, mode: str) -> tuple[np.ndarray]:
    _check_block(x, blocksize, mode, "DepthToSpace")
    n, c, h, w = x.shape
    bs = blocksize
    if c % (bs * bs):
        raise ShapeError(f"DepthToSpace: input's C={c} must be a multiple of blocksize^2={bs * bs}")
    split = (n, bs, bs, c // bs**2, h, w) if mode == "DCR" else (n, c // bs**2, bs, bs, h, w)
    blocks = x.reshape(split).transpose(_TO_SPACE[mode])
    return (blocks.reshape(n, c // bs**2, h * bs, w * bs),)


@kernel("CenterCropPad")
def center_crop_pad_cpu(
    x: np.ndarray, shape: np.ndarray, axes: list[int] | None
) -> tuple[np.ndarray]:
    axes = list(range(x.ndim)) if axes is None else list(axes)
    sizes = [int(s) for s in np.asarray(shape).reshape(-1)]
    if len(sizes) != len(axes):
        raise ShapeError(
            f"CenterCropPad: input 'shape' has {len(sizes)} values, expected {len(axes)} "
            f"(one per axis in {axes})"
        )
    dims = []
    for a in axes:
        if not -x.ndim <= a < x.ndim:
            raise ShapeError(f"CenterCropPad: axis {a} is out of range for rank {x.ndim}")
        dims.append(a % x.ndim)
    out_shape = list(x.shape)
    src, dst = [slice(None)] * x.ndim, [slice(None)] * x.ndim
    for d, size in zip(dims, sizes):
        if size < 0:
            raise ShapeError(f"CenterCropPad: size {size} for axis {d} is negative")
        have = x.shape[d]
        out_shape[d] = size
        if size < have:
            start = (have - size) // 2
            src[d] = slice(start, start + size)
        elif size > have:
            start = (size - have) // 2
            dst[d] = slice(start, start + have)
    out = np.zeros(check_numel(out_shape, "CenterCropPad output"), x.dtype)
    out[tuple(dst)] = x[tuple(src)]
    return (out,)


@kernel("Col2Im")
def col2im_cpu(
    x: np.ndarray,
    image_shape: np.ndarray,
    block_shape: np.ndarray,
    dilations: list[int] | None,
    pads: list[int] | None,
    strides: list[int] | None,
) -> tuple[np.ndarray]:
    image = [int(v) for v in np.asarray(image_shape).reshape(-1)]
    block = [int(v) for v in np.asarray(block_shape).reshape(-1)]
    nd = len(image)
    dilations = list(dilations or [1] * nd)
    strides = list(strides or [1] * nd)
    pads = list(pads or [0] * (2 * nd))
    if len(block) != nd or len(dilations) != nd or len(strides) != nd or len(pads) != 2 * nd:
        raise ShapeError(
            f"Col2Im: image_shape {image}, block_shape {block}, dilations {dilations}, "
            f"strides {strides} need {nd} values each and pads {pads} {2 * nd}"
        )
    kernel_size = math.prod(block)
    if x.ndim != 3 or x.shape[1] % kernel_size:
        raise ShapeError(
            f"Col2Im: input has shape {list(x.shape)}, expected [N, C * {kernel_size}, L] "
            f"(C * prod(block_shape) on dim 1)"
        )
    n, channels = x.shape[0], x.shape[1] // kernel_size
    padded = [image[d] + pads[d] + pads[d + nd] for d in range(nd)]
    counts = [(padded[d] - dilations[d] * (block[d] - 1) - 1) // strides[d] + 1 for d in range(nd)]
    if any(c < 1 for c in counts) or math.prod(counts) != x.shape[2]:
        raise ShapeError(
            f"Col2Im: input has {x.shape[2]} blocks on dim 2, but image_shape {image} with "
            f"block_shape {block}, pads, strides and dilations gives {counts} blocks"
        )
    out = np.zeros(check_numel([n, channels, *padded], "Col2Im output"), x.dtype)
    cols = x.reshape(n, channels, kernel_size, *counts)
    for k, offset in enumerate(np.ndindex(*block)):
        place = tuple(
            slice(o * dl, o * dl + s * (c - 1) + 1, s)
            for o, dl, s, c in zip(offset, dilations, strides, counts)
        )
        out[(slice(None), slice(None), *place)] += cols[:, :, k]
    crop = tuple(slice(pads[d], pads[d] + image[d]) for d in range(nd))
    return (np.ascontiguousarray(out[(slice(None), slice(None), *crop)]),)


@gradient("SpaceToDepth")
def space_to_depth_grad(op, g_out, g_in):
    if not g_in[0]:
        return []
    return [op_def("DepthToSpace", [g_out[0]], [g_in[0]], **copy_attrs(op))]


@gradient("DepthToSpace")
def depth_to_space_grad(op, g_out, g_in):
    if not g_in[0]:
        return []
    return [op_def("SpaceToDepth", [g_out[0]], [g_in[0]], **copy_attrs(op))]
