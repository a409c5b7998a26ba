"""ConvShuffle: a Conv (optionally with its Relu) whose output goes through a channel
shuffle, Reshape (N, G, M/G, *S) -> Transpose(0, 2, 1, ...) -> Reshape (N, M, *S) with
constant shapes, as ONNX's ShuffleNet writes it.

Made by netbrew.netdef.passes.fold_channel_shuffle for inference. The three shape ops cost
a copy of the conv's output and three op dispatches; here a grouped conv with G groups
(the usual case: the shuffle interleaves the groups the conv just computed) writes each
group's GEMM straight into its shuffled channels, a strided output BLAS takes at full
speed. Other convs shuffle their output with one copy. The shuffle's shapes are checked at
run time against the conv's output exactly as the Reshape ops would; shapes that do not
describe a channel shuffle run the three ops' semantics literally. The gradient is
Relu's (with relu=1), the shuffle's undone, then Conv's (netbrew.operators.fused_grad); ONNX
export writes the original nodes back (netbrew.converters.onnx.fused_to_onnx).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from netbrew import jit
from netbrew.operators.conv import _ATTRS, check_conv_operands, conv_cpu
from netbrew.operators.conv_last import (
    PARALLEL_MIN_ELEMENTS,
    bias_vector,
    pointwise_rows,
    use_pointwise,
)
from netbrew.operators.conv_numba import use_direct
from netbrew.operators.conv_shift import use_shift
from netbrew.operators.fused import relu_in_place
from netbrew.operators.schema import REQUIRED, kernel, schema
from netbrew.operators.shape import reshape_dims
from netbrew.operators.window import Window, im2col, make_window, scratch, work_dtype

schema(
    "ConvShuffle",
    inputs=["X", "W", "B?"],
    outputs=["Y"],
    attrs={**_ATTRS, "grouped_shape": REQUIRED, "shape": REQUIRED, "relu": 0},
    dtypes="float",
    onnx=False,
    doc="Y = Reshape(Transpose(Reshape(Z, grouped_shape), perm=[0, 2, 1, 3, ...]), shape), "
    "Z = Conv(X, W, B), or max(Conv(X, W, B), 0) if relu=1; grouped_shape (N, G, M/G, *S) "
    "and shape (N, M, *S) as the Reshape ops' shape inputs (0 copies a dim, -1 infers one); "
    "inputs and other attributes as Conv",
)


def shuffle_groups(out_shape: Sequence[int], grouped_shape: Sequence[int], shape: Sequence[int]):
    """G when Reshape(grouped_shape), the swap of axes 1 and 2 and Reshape(shape) shuffle the
    channels of a conv output of `out_shape` (N, M, *S) in G groups and give back
    `out_shape`; else None. Raises ShapeError where either Reshape would. (Remembered per
    shapes: a net asks the same question at every run.)"""
    return _shuffle_groups(tuple(out_shape), tuple(grouped_shape), tuple(shape))


@functools.lru_cache(maxsize=256)
def _shuffle_groups(out_shape: tuple, grouped_shape: tuple, shape: tuple):
    grouped = reshape_dims(out_shape, grouped_shape)
    batch, channels, *spatial = out_shape
    swapped = [grouped[0], *grouped[2:3], *grouped[1:2], *grouped[3:]]
    final = reshape_dims(swapped, shape)
    shuffles = (
        len(grouped) == len(out_shape) + 1
        and grouped[0] == batch
        and grouped[1] * grouped[2] == channels
        and grouped[3:] == spatial
    )
    return grouped[1] if shuffles and final == list(out_shape) else None


@kernel("ConvShuffle")
def conv_shuffle_cpu(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    *,
    grouped_shape: Sequence[int],
    shape: Sequence[int],
    relu: int = 0,
    **conv_attrs: Any,
) -> tuple[np.ndarray]:
    """Conv (then Relu if `relu`), then the channel shuffle `grouped_shape` and `shape`
    describe (see the module docstring); `conv_attrs` are Conv's attributes.

    Returns:
        (Y,), with Y of the shape Reshape(shape) gives, (N, M, O1, ..., On) for a shuffle.
    """
    get = conv_attrs.get
    group = get("group", 1)
    m = check_conv_operands(x, w, b, group, get("kernel_shape"), transposed=False)
    win = make_window(
        x.shape[2:], w.shape[2:], get("strides"), get("dilations"), get("pads"),
        get("auto_pad", "NOTSET"),
    )  # fmt: skip
    groups = shuffle_groups((x.shape[0], m, *win.out), grouped_shape, shape)
    if groups == group and use_pointwise(x, w, win, group, least=1):
        work = work_dtype(x.dtype)
        y = _pointwise_shuffled(
            x.astype(work, copy=False), w.astype(work, copy=False), win, b, group, bool(relu)
        )
        return (y.astype(x.dtype, copy=False),)
    if groups is not None and groups == group and _plain_gemm(x.shape[1], m, win, group):
        work = work_dtype(x.dtype)
        bias = None if b is None else b.astype(work, copy=False)
        y = _grouped_into_shuffled(
            x.astype(work, copy=False), w.astype(work, copy=False), win, group, bias
        ).astype(x.dtype, copy=False)
    else:
        (y,) = conv_cpu(x, w, b, **conv_attrs)
        grouped = reshape_dims(y.shape, grouped_shape)
        swapped = np.swapaxes(y.reshape(grouped), 1, 2)
        y = np.ascontiguousarray(swapped).reshape(reshape_dims(swapped.shape, shape))
    return (relu_in_place(y) if relu else y,)


def _plain_gemm(channels: int, m: int, win: Window, group: int) -> bool:
    """Whether `correlate` would run im2col and one batched GEMM (not its shift-and-add or
    direct paths), the path `_grouped_into_shuffled` writes shuffled."""
    return not use_shift(channels, m, win, group) and not use_direct(channels, group, win)


def _grouped_into_shuffled(
    x: np.ndarray, w: np.ndarray, win: Window, group: int, bias: np.ndarray | None
) -> np.ndarray:
    """`correlate`'s im2col GEMM with group g's output channel j written to channel
    j * group + g: (N, M, O1..On), already shuffled."""
    batch, m = x.shape[0], w.shape[0]
    per = m // group
    cols = im2col(x, win, group)  # (N, G, C/G * K, P)
    out = np.empty((batch, per, group, math.prod(win.out)), x.dtype)
    grouped = out.transpose(0, 2, 1, 3)  # (N, G, M/G, P): rows strided by G * P
    np.matmul(w.reshape(group, per, -1), cols, out=grouped)
    if bias is not None:
        grouped += bias.reshape(group, per, 1)
    return out.reshape(batch, m, *win.out)


def _pointwise_shuffled(
    x: np.ndarray, w: np.ndarray, win: Window, b: np.ndarray | None, group: int, relu: bool
) -> np.ndarray:
    """The grouped 1x1 conv of channels-last x (conv_last.pointwise's GEMMs, into scratch),
    then bias, Relu and the shuffle in one pass: an (N, M, H, W) view of channels-last
    memory, so the depthwise conv that follows in ShuffleNet's units reads it in place.
    Taken however narrow the groups: inside ShuffleNet its first unit's conv (6 channels
    a group, 56x56) ran 0.42 against 0.31 ms on the C-ordered path, and the depthwise conv
    after it 0.14 against 0.40."""
    batch, m = x.shape[0], w.shape[0]
    height, width = win.out
    rows = batch * height * width
    grouped = scratch("shuffle_rows", (rows, m), x.dtype)
    pointwise_rows(x, w, win, group, grouped)
    y = np.empty((batch, height, width, m), x.dtype)
    bias = bias_vector(b, m, x.dtype)
    low = x.dtype.type(0 if relu else -np.inf)
    kernel = _shuffle_rows.pick(y.size, PARALLEL_MIN_ELEMENTS)
    kernel(grouped, bias, y.reshape(rows, m), group, low, x.dtype.type(np.inf))
    return y.transpose(0, 3, 1, 2)


@jit.kernel
def _shuffle_rows(z, bias, y, groups, lo, hi):
    """y[r, j * groups + g] = clamp(z[r, g * per + j] + bias[g * per + j]), per = M /
    groups: each row's channels shuffled. The bias and clamp run over z's row in place
    (vectorised), then `_interleave` writes the groups' runs into y's row."""
    rows, m = z.shape
    for r in jit.prange(rows):
        src = z[r]
        for k in range(m):
            src[k] = jit.clamp(src[k] + bias[k], lo, hi)
        _interleave(src, y[r], groups)


@jit.helper
def _interleave(src, dst, groups):
    """dst[j * groups + g] = src[g * per + j]: the `groups` runs of src, per long,
    interleaved. 2, 3 and 4 groups (ShuffleNet's usual counts) have loops of their own, each
    storing one value from every run per step, which LLVM vectorises as interleaved
    stores (on ShuffleNet's 4-group shapes 0.27-0.5x the time of storing each run with
    stride `groups`, the general loop)."""
    per = src.size // groups
    if groups == 2:
        a, b = src[:per], src[per:]
        for j in range(per):
            dst[2 * j], dst[2 * j + 1] = a[j], b[j]
    elif groups == 3:
        a, b, c = src[:per], src[per : 2 * per], src[2 * per :]
        for j in range(per):
            dst[3 * j], dst[3 * j + 1], dst[3 * j + 2] = a[j], b[j], c[j]
    elif groups == 4:
        a, b, c, d = src[:per], src[per : 2 * per], src[2 * per : 3 * per], src[3 * per :]
        for j in range(per):
            dst[4 * j], dst[4 * j + 1], dst[4 * j + 2], dst[4 * j + 3] = a[j], b[j], c[j], d[j]
    else:
        for g in range(groups):
            run = src[g * per : (g + 1) * per]
            out = dst[g:]
            for j in range(per):
                out[j * groups] = run[j]
