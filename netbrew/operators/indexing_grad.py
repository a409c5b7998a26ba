"""Gradients of Slice, Gather and Pad: dY put back where the forward read it.

    Slice(data, starts, ends, axes, steps) -> Y
        backward: SliceGradient(dY, data, starts, ends, axes, steps) -> dX
    Gather(data, indices) -> Y       backward: GatherGradient(dY, data, indices) -> dX
    Pad(data, pads, value, axes) -> Y
        backward: PadGradient(dY, data, pads, value, axes) -> (dX, dvalue)

`data` is read for its shape only. Integer inputs (indices, starts, pads...) get no gradient.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.indexing import PAD_MODES, pad_widths, slice_index
from netbrew.operators.schema import gradient, kernel, schema

schema(
    "SliceGradient",
    inputs=["dY", "data", "starts", "ends", "axes?", "steps?"],
    outputs=["dX"],
    dtypes={0: "float", 2: "int", 3: "int", 4: "int", 5: "int"},
    onnx=False,
    doc="dX = zeros like data (dY's dtype), with dX[the Slice of starts, ends, axes, steps] = dY",
)


@gradient("Slice")
def slice_grad(op, g_out, g_in):
    if not g_in[0]:
        return []
    return [op_def("SliceGradient", [g_out[0], *op.input], [g_in[0]])]


@kernel("SliceGradient")
def slice_gradient_cpu(
    dy: np.ndarray,
    x: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    axes: np.ndarray | None = None,
    steps: np.ndarray | None = None,
) -> tuple[np.ndarray]:
    index = slice_index(x, starts, ends, axes, steps, op="SliceGradient")
    dx = np.zeros(x.shape, dy.dtype)
    dx[index] = dy
    return (dx,)


schema(
    "GatherGradient",
    inputs=["dY", "data", "indices"],
    outputs=["dX"],
    attrs={"axis": 0},
    dtypes={0: "float", 2: "int"},
    onnx=False,
    doc="dX = zeros like data (dY's dtype), then dX[..., indices[q], ...] += dY[..., q, ...] on "
    "axis (repeated indices accumulate; negatives count from the end); default axis=0",
)


@gradient("Gather")
def gather_grad(op, g_out, g_in):
    if not g_in[0]:
        return []
    return [op_def("GatherGradient", [g_out[0], *op.input], [g_in[0]], **copy_attrs(op))]


@kernel("GatherGradient")
def gather_gradient_cpu(
    dy: np.ndarray, x: np.ndarray, indices: np.ndarray, *, axis: int
) -> tuple[np.ndarray]:
    if not -x.ndim <= axis < x.ndim:
        raise ShapeError(f"GatherGradient: axis {axis} is out of range for data of rank {x.ndim}")
    axis %= x.ndim
    idx = np.asarray(indices).astype(np.int64, copy=False)
    idx = np.where(idx < 0, idx + x.shape[axis], idx)
    expected = x.shape[:axis] + idx.shape + x.shape[axis + 1 :]
    if dy.shape != expected:
        raise ShapeError(
            f"GatherGradient: input dY has shape {list(dy.shape)}, expected {list(expected)}"
        )
    dx = np.zeros(x.shape, dy.dtype)
    np.add.at(dx, (slice(None),) * axis + (idx,), dy)
    return (dx,)


schema(
    "PadGradient",
    inputs=["dY", "data", "pads", "constant_value?", "axes?"],
    outputs=["dX", "dconstant_value?"],
    attrs={"mode": "constant"},
    dtypes={0: "float", 2: "int", 4: "int"},
    onnx=False,
    output_mask=True,
    doc="dX = the sum of the dY elements that each data element was copied to (its own place, "
    "and the padding that mode reflect, edge or wrap filled from it), 0 where negative pads "
    "cropped; dconstant_value = sum of dY over the padding in constant mode, else 0; "
    "default mode=constant",
)


@gradient("Pad")
def pad_grad(op, g_out, g_in):
    wanted = [g_in[0] or "", (g_in[2] if len(g_in) > 2 else None) or ""]
    if not any(wanted):
        return []
    return [op_def("PadGradient", [g_out[0], *op.input], wanted, **copy_attrs(op))]


def _unpad_axis(g: np.ndarray, axis: int, size: int, begin: int, end: int, mode: str):
    """Folds the padding of one axis back onto the `size` elements it was copied from."""
    inner = [slice(None)] * g.ndim
    inner[axis] = slice(begin, begin + size)
    out = g[tuple(inner)].copy()
    if mode == "constant" or not (begin or end):
        return out
    # Where np.pad takes each padded element from, found by padding the positions themselves.
    source = np.pad(np.arange(size), (begin, end), mode=mode)
    for part in (slice(0, begin), slice(begin + size, None)):
        inner[axis] = part
        np.add.at(out, (slice(None),) * axis + (source[part],), g[tuple(inner)])
    return out


@kernel("PadGradient")
def pad_gradient_cpu(
    dy: np.ndarray,
    x: np.ndarray,
    pads: np.ndarray,
    constant_value: np.ndarray | None = None,
    axes: np.ndarray | None = None,
    *,
    mode: str,
    output_mask: tuple[bool, ...],
) -> tuple[np.ndarray | None, np.ndarray | None]:
    if mode not in PAD_MODES:
        raise ValueError(f"PadGradient: mode {mode!r} is not one of {', '.join(PAD_MODES)}")
    crop, width = pad_widths(x, pads, axes, op="PadGradient")
    kept = [s.stop - s.start for s in crop]
    expected = [d + b + e for d, (b, e) in zip(kept, width)]
    if list(dy.shape) != expected:
        raise ShapeError(f"PadGradient: input dY has shape {list(dy.shape)}, expected {expected}")
    g = dy
    for axis, (size, (begin, end)) in enumerate(zip(kept, width)):
        g = _unpad_axis(g, axis, size, begin, end, mode)
    dx = dvalue = None
    if output_mask[0]:
        dx = np.zeros(x.shape, dy.dtype)
        dx[crop] = g
    if len(output_mask) > 1 and output_mask[1] and constant_value is not None:
        total = dy.sum() - g.sum() if mode == "constant" else 0
        dvalue = np.full(np.shape(constant_value), total, np.asarray(constant_value).dtype)
    return dx, dvalue
