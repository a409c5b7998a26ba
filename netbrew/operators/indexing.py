"""Slice, Gather and Pad."""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import kernel, schema
from netbrew.operators.shape import int_list, normalize_axes

schema(
    "Slice",
    inputs=["data", "starts", "ends", "axes?", "steps?"],
    outputs=["output"],
    dtypes={1: "int", 2: "int", 3: "int", 4: "int"},
    doc="output = data[starts[i]:ends[i]:steps[i] on axes[i]]; starts/ends/axes/steps int [k], "
    "axes=0..k-1, steps=1; negatives add the dim, then clamped as ONNX",
)


def _effective_slice(dim: int, start: int, end: int, step: int) -> slice:
    """ONNX's clamping of one axis's (start, end, step) to a Python slice."""
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return slice(min(max(start, 0), dim), min(max(end, 0), dim), step)
    start = min(max(start, 0), dim - 1)
    end = min(max(end, -1), dim - 1)
    # end -1 means "before index 0", which a Python slice spells as None.
    return slice(start, end if end >= 0 else None, step)


def slice_index(
    x: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    axes: np.ndarray | None = None,
    steps: np.ndarray | None = None,
    op: str = "Slice",
) -> tuple[slice, ...]:
    """The index that Slice takes from data `x` (shared with SliceGradient)."""
    starts_, ends_ = int_list(starts, "starts", op), int_list(ends, "ends", op)
    n = len(starts_)
    if axes is None and n > x.ndim:
        raise ShapeError(f"{op}: input 'starts' has {n} entries, more than data's rank {x.ndim}")
    axes_ = list(range(n)) if axes is None else int_list(axes, "axes", op)
    steps_ = [1] * n if steps is None else int_list(steps, "steps", op)
    for name, values in (("ends", ends_), ("axes", axes_), ("steps", steps_)):
        if len(values) != n:
            raise ShapeError(
                f"{op}: input {name!r} has {len(values)} entries, expected {n} like 'starts'"
            )
    if 0 in steps_:
        raise ShapeError(f"{op}: input 'steps' {steps_} holds a 0 step")
    index = [slice(None)] * x.ndim
    for axis, start, end, step in zip(
        normalize_axes(axes_, x.ndim, f"{op} input 'axes'"), starts_, ends_, steps_, strict=True
    ):
        index[axis] = _effective_slice(x.shape[axis], start, end, step)
    return tuple(index)


@kernel("Slice")
def slice_cpu(
    x: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    axes: np.ndarray | None = None,
    steps: np.ndarray | None = None,
) -> tuple[np.ndarray]:
    return (x[slice_index(x, starts, ends, axes, steps)],)


schema(
    "Gather",
    inputs=["data", "indices"],
    outputs=["output"],
    attrs={"axis": 0},
    dtypes={1: "int"},
    doc="output[d[:axis] + q + d[axis+1:]] = data taken at indices[q] (in [-s, s-1]) on axis=0",
)


@kernel("Gather")
def gather_cpu(x: np.ndarray, indices: np.ndarray, axis: int) -> tuple[np.ndarray]:
    rank = x.ndim
    if not -rank <= axis < rank:
        raise ShapeError(
            f"Gather: axis {axis} is out of range [{-rank}, {rank - 1}] for rank {rank}"
        )
    axis %= rank
    dim = x.shape[axis]
    idx = np.asarray(indices).astype(np.int64, copy=False)
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        bad = idx[(idx < -dim) | (idx >= dim)].flat[0]
        raise ShapeError(
            f"Gather: input 'indices' holds {bad}, out of range [{-dim}, {dim - 1}] "
            f"for axis {axis} of data {list(x.shape)}"
        )
    return (np.take(x, np.where(idx < 0, idx + dim, idx), axis=axis),)


PAD_MODES = ("constant", "reflect", "edge", "wrap")

schema(
    "Pad",
    inputs=["data", "pads", "constant_value?", "axes?"],
    outputs=["output"],
    attrs={"mode": "constant"},
    dtypes={1: "int", 3: "int"},
    doc="output = data padded by pads int64 [2k] = [begins..., ends...] on axes (default all); "
    "mode=constant (constant_value=0, '' or False), reflect, edge or wrap; negative pads crop",
)


def _default_fill(dtype: np.dtype) -> object:
    return "" if dtype.kind == "O" else np.zeros((), dtype).item()


def pad_widths(
    x: np.ndarray, pads: np.ndarray, axes: np.ndarray | None, op: str = "Pad"
) -> tuple[tuple[slice, ...], list[tuple[int, int]]]:
    """How Pad treats data `x`: the crop that negative pads make, then the (begin, end)
    widths to pad on each dim of the cropped data (shared with PadGradient)."""
    rank = x.ndim
    axes_ = list(range(rank)) if axes is None else int_list(axes, "axes", op)
    axes_ = normalize_axes(axes_, rank, f"{op} input 'axes'")
    amounts = int_list(pads, "pads", op)
    if len(amounts) != 2 * len(axes_):
        raise ShapeError(
            f"{op}: input 'pads' has {len(amounts)} entries, expected {2 * len(axes_)} "
            f"(a begin and an end for each of {len(axes_)} axes)"
        )
    width = [[0, 0] for _ in range(rank)]
    for i, axis in enumerate(axes_):
        width[axis] = [amounts[i], amounts[len(axes_) + i]]
    crop = tuple(
        slice(max(-b, 0), d - max(-e, 0)) for d, (b, e) in zip(x.shape, width, strict=True)
    )
    if any(s.start > s.stop for s in crop):
        raise ShapeError(f"{op}: negative pads {amounts} crop more than data {list(x.shape)} holds")
    return crop, [(max(b, 0), max(e, 0)) for b, e in width]


@kernel("Pad")
def pad_cpu(
    x: np.ndarray,
    pads: np.ndarray,
    constant_value: np.ndarray | None = None,
    axes: np.ndarray | None = None,
    *,
    mode: str,
) -> tuple[np.ndarray]:
    if mode not in PAD_MODES:
        raise ValueError(f"Pad: mode {mode!r} is not one of {', '.join(PAD_MODES)}")
    # Negative pads crop the data first; the positive ones then pad what is left.
    crop, width = pad_widths(x, pads, axes)
    x = x[crop]
    shape = check_numel(
        (d + b + e for d, (b, e) in zip(x.shape, width, strict=True)), "Pad output shape"
    )
    if mode != "constant":
        empty = [a for a in range(x.ndim) if x.shape[a] == 0 and any(width[a])]
        if empty:
            raise ShapeError(f"Pad: mode {mode!r} cannot pad axis {empty[0]}, which is empty")
        return (np.pad(x, width, mode=mode),)
    if constant_value is None or np.size(constant_value) == 0:
        fill = _default_fill(x.dtype)
    elif np.size(constant_value) == 1:
        fill = np.asarray(constant_value).reshape(()).item()
    else:
        raise ShapeError(
            f"Pad: input 'constant_value' has {np.size(constant_value)} elements, expected 1"
        )
    out = np.full(shape, fill, dtype=x.dtype)
    out[tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, width, strict=True))] = x
    return (out,)
