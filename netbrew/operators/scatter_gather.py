"""GatherElements, GatherND, ScatterElements, ScatterND and TensorScatter.

    GatherElements(data, indices) -> output
        backward: GatherElementsGradient(doutput, data, indices) -> ddata
    GatherND(data, indices) -> output
        backward: GatherNDGradient(doutput, data, indices) -> ddata

The gradients add each output gradient back at the place its element was read from
(repeated indices accumulate); data is read for its shape only. Indices may be negative
(counting from the end of their dimension) and are checked against the data's bounds.
The scatters' gradients, for every reduction, are in scatter_gather_grad.py.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.schema import gradient, kernel, schema

REDUCTIONS = ("none", "add", "mul", "max", "min")
_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}

schema(
    "GatherElements",
    inputs=["data", "indices"],
    outputs=["output"],
    attrs={"axis": 0},
    dtypes={1: "int"},
    doc="output[i][j][k] = data[indices[i][j][k]][j][k] for axis=0 (likewise on other axes); "
    "indices has data's rank and output has indices' shape; default axis=0",
)
schema(
    "GatherND",
    inputs=["data", "indices"],
    outputs=["output"],
    attrs={"batch_dims": 0},
    dtypes={1: "int"},
    doc="output[b..., i...] = data[b..., indices[b..., i..., :]]: the last dim of indices "
    "(size k) indexes data's dims after the first batch_dims; output shape = "
    "indices.shape[:-1] + data.shape[batch_dims + k:]; default batch_dims=0",
)
schema(
    "ScatterElements",
    inputs=["data", "indices", "updates"],
    outputs=["output"],
    attrs={"axis": 0, "reduction": "none"},
    dtypes={1: "int"},
    doc="output = data, then output[indices[i][j]][j] = updates[i][j] for axis=0 (likewise on "
    "other axes), combined by reduction (none, add, mul, max, min); updates has indices' "
    "shape; defaults axis=0, reduction=none",
)
schema(
    "ScatterND",
    inputs=["data", "indices", "updates"],
    outputs=["output"],
    attrs={"reduction": "none"},
    dtypes={1: "int"},
    doc="output = data, then output[indices[i..., :]] = updates[i...], combined by reduction "
    "(none, add, mul, max, min); updates shape = indices.shape[:-1] + data.shape[k:] with "
    "k = indices.shape[-1]; default reduction=none",
)
schema(
    "TensorScatter",
    inputs=["past_cache", "update", "write_indices?"],
    outputs=["present_cache"],
    attrs={"axis": -2, "mode": "linear"},
    dtypes={2: "int"},
    doc="present_cache = past_cache with update written along axis (not 0) at sequence "
    "positions write_indices[b] + s for batch b (int64 [batch], default 0), taken modulo the "
    "cache length in mode circular; update matches past_cache except on axis; "
    "defaults axis=-2, mode=linear",
)
schema(
    "GatherElementsGradient",
    inputs=["doutput", "data", "indices"],
    outputs=["ddata"],
    attrs={"axis": 0},
    dtypes={0: "float", 2: "int"},
    onnx=False,
    doc="ddata = zeros like data (doutput's dtype), then ddata[the element GatherElements "
    "read for output[i]] += doutput[i]; default axis=0",
)
schema(
    "GatherNDGradient",
    inputs=["doutput", "data", "indices"],
    outputs=["ddata"],
    attrs={"batch_dims": 0},
    dtypes={0: "float", 2: "int"},
    onnx=False,
    doc="ddata = zeros like data (doutput's dtype), then ddata[the slice GatherND read for "
    "output[i...]] += doutput[i...]; default batch_dims=0",
)


def _axis(axis: int, ndim: int, op: str) -> int:
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{op}: axis {axis} is out of range for data of rank {ndim}")
    return axis % ndim


def _wrap(idx: np.ndarray, size: int | np.ndarray, op: str, what: str) -> np.ndarray:
    """Indices made non-negative, after checking each is within [-size, size - 1]."""
    idx = np.asarray(idx).astype(np.int64, copy=False)
    bad = (idx < -size) | (idx >= size)
    if np.any(bad):
        first = idx[bad].reshape(-1)[0]
        raise ShapeError(f"{op}: index {first} in input 'indices' is out of range for {what}")
    return np.where(idx < 0, idx + size, idx)


def element_index(data_shape, indices: np.ndarray, axis: int, op: str) -> tuple:
    """The index tuple that GatherElements/ScatterElements use: `indices` on axis, and each
    other dim's own position."""
    ndim = len(data_shape)
    if indices.ndim != ndim:
        raise ShapeError(
            f"{op}: input 'indices' has rank {indices.ndim}, expected data's rank {ndim}"
        )
    axis = _axis(axis, ndim, op)
    for d in range(ndim):
        if d != axis and indices.shape[d] > data_shape[d]:
            raise ShapeError(
                f"{op}: input 'indices' has shape {list(indices.shape)}, larger than data's "
                f"{list(data_shape)} on dim {d}"
            )
    index = []
    for d in range(ndim):
        if d == axis:
            what = f"dim {d} of size {data_shape[d]}"
            index.append(_wrap(indices, data_shape[d], op, what))
        else:
            shape = [1] * ndim
            shape[d] = indices.shape[d]
            index.append(np.arange(indices.shape[d]).reshape(shape))
    return tuple(index)


def nd_index(data_shape, indices: np.ndarray, batch_dims: int, op: str):
    """(index tuple into data reshaped to [B, *data.shape[batch_dims:]], that reshaped shape,
    the output shape) for GatherND, ScatterND (batch_dims=0) and their gradients."""
    b = batch_dims
    if indices.ndim < 1 or not 0 <= b < min(len(data_shape), indices.ndim):
        raise ShapeError(
            f"{op}: batch_dims={b} needs data and indices of rank > {b}; got data "
            f"{list(data_shape)} and indices {list(indices.shape)}"
        )
    if tuple(indices.shape[:b]) != tuple(data_shape[:b]):
        raise ShapeError(
            f"{op}: the first {b} dims of indices {list(indices.shape)} and data "
            f"{list(data_shape)} must match (batch_dims={b})"
        )
    k = indices.shape[-1]
    if k > len(data_shape) - b:
        raise ShapeError(
            f"{op}: the last dim of indices is {k}, more than the {len(data_shape) - b} "
            f"indexable dims of data {list(data_shape)} (batch_dims={b})"
        )
    batch = int(np.prod(data_shape[:b], dtype=np.int64))
    flat_shape = (batch, *data_shape[b:])
    idx = indices.reshape(batch, -1, k)
    sizes = np.asarray(data_shape[b : b + k], np.int64)
    what = f"data of shape {list(data_shape)} (batch_dims={b})"
    idx = _wrap(idx, sizes, op, what)
    index = (np.arange(batch)[:, None], *(idx[..., j] for j in range(k)))
    out_shape = tuple(indices.shape[:-1]) + tuple(data_shape[b + k :])
    return index, flat_shape, out_shape


@kernel("GatherElements")
def gather_elements_cpu(data: np.ndarray, indices: np.ndarray, axis: int) -> tuple[np.ndarray]:
    return (data[element_index(data.shape, indices, axis, "GatherElements")],)


@kernel("GatherElementsGradient")
def gather_elements_gradient_cpu(
    dy: np.ndarray, data: np.ndarray, indices: np.ndarray, axis: int
) -> tuple[np.ndarray]:
    if dy.shape != indices.shape:
        raise ShapeError(
            f"GatherElementsGradient: input 'doutput' has shape {list(dy.shape)}, expected "
            f"indices' shape {list(indices.shape)}"
        )
    dx = np.zeros(data.shape, dy.dtype)
    np.add.at(dx, element_index(data.shape, indices, axis, "GatherElementsGradient"), dy)
    return (dx,)


@kernel("GatherND")
def gather_nd_cpu(data: np.ndarray, indices: np.ndarray, batch_dims: int) -> tuple[np.ndarray]:
    index, flat_shape, out_shape = nd_index(data.shape, indices, batch_dims, "GatherND")
    return (data.reshape(flat_shape)[index].reshape(out_shape),)


@kernel("GatherNDGradient")
def gather_nd_gradient_cpu(
    dy: np.ndarray, data: np.ndarray, indices: np.ndarray, batch_dims: int
) -> tuple[np.ndarray]:
    index, flat_shape, out_shape = nd_index(data.shape, indices, batch_dims, "GatherNDGradient")
    if dy.shape != out_shape:
        raise ShapeError(
            f"GatherNDGradient: input 'doutput' has shape {list(dy.shape)}, expected "
            f"{list(out_shape)}"
        )
    dx = np.zeros(flat_shape, dy.dtype)
    np.add.at(dx, index, dy.reshape(dx[index].shape))
    return (dx.reshape(data.shape),)


def _scatter(out: np.ndarray, index: tuple, updates: np.ndarray, reduction: str, op: str):
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction={reduction!r}, expected one of {', '.join(REDUCTIONS)}")
    if reduction == "none":
        out[index] = updates
    else:
        _UFUNCS[reduction].at(out, index, updates)
    return out


@kernel("ScatterElements")
def scatter_elements_cpu(
    data: np.ndarray, indices: np.ndarray, updates: np.ndarray, axis: int, reduction: str
) -> tuple[np.ndarray]:
    if updates.shape != indices.shape:
        raise ShapeError(
            f"ScatterElements: input 'updates' has shape {list(updates.shape)}, expected "
            f"indices' shape {list(indices.shape)}"
        )
    index = element_index(data.shape, indices, axis, "ScatterElements")
    out = data.copy()
    return (_scatter(out, index, updates.astype(data.dtype), reduction, "ScatterElements"),)


@kernel("ScatterND")
def scatter_nd_cpu(
    data: np.ndarray, indices: np.ndarray, updates: np.ndarray, reduction: str
) -> tuple[np.ndarray]:
    index, flat_shape, out_shape = nd_index(data.shape, indices, 0, "ScatterND")
    if updates.shape != out_shape:
        raise ShapeError(
            f"ScatterND: input 'updates' has shape {list(updates.shape)}, expected "
            f"{list(out_shape)} (indices.shape[:-1] + data.shape[k:])"
        )
    out = data.reshape(flat_shape).copy()
    part = updates.astype(data.dtype).reshape(out[index].shape)
    return (_scatter(out, index, part, reduction, "ScatterND").reshape(data.shape),)


@kernel("TensorScatter")
def tensor_scatter_cpu(
    past: np.ndarray,
    update: np.ndarray,
    write_indices: np.ndarray | None = None,
    *,
    axis: int,
    mode: str,
) -> tuple[np.ndarray]:
    axis, pos = cache_positions(past.shape, update, write_indices, axis, mode, "TensorScatter")
    out = past.copy()
    view = np.moveaxis(out, axis, 1)  # [batch, length, ...], a view into out
    view[np.arange(past.shape[0])[:, None], pos] = np.moveaxis(update, axis, 1).astype(past.dtype)
    return (out,)


def cache_positions(
    past_shape: tuple[int, ...],
    update: np.ndarray,
    write_indices: np.ndarray | None,
    axis: int,
    mode: str,
    op: str,
) -> tuple[int, np.ndarray]:
    """(axis made non-negative, the cache positions [batch, seq] that TensorScatter writes
    update's sequence entries to). Within a batch entry the positions are distinct.

    Raises:
        ShapeError, ValueError: the shapes, axis, mode or write_indices do not fit (the
            messages name `op`).
    """
    if mode not in ("linear", "circular"):
        raise ValueError(f"{op}: mode={mode!r}, expected 'linear' or 'circular'")
    ndim = len(past_shape)
    axis = _axis(axis, ndim, op)
    if axis == 0:
        raise ShapeError(f"{op}: axis is the batch dimension 0; it must be another")
    want = past_shape[:axis] + (update.shape[axis],) + past_shape[axis + 1 :]
    if update.ndim != ndim or update.shape != want or update.shape[axis] > past_shape[axis]:
        raise ShapeError(
            f"{op}: input 'update' has shape {list(update.shape)}, expected "
            f"past_cache's shape {list(past_shape)} except on axis {axis}, there at most "
            f"{past_shape[axis]}"
        )
    batch, length, seq = past_shape[0], past_shape[axis], update.shape[axis]
    if write_indices is None:
        write_indices = np.zeros(batch, np.int64)
    starts = np.asarray(write_indices, np.int64).reshape(-1)
    if starts.shape != (batch,):
        raise ShapeError(
            f"{op}: input 'write_indices' has shape {list(np.shape(write_indices))}, "
            f"expected [{batch}]"
        )
    pos = starts[:, None] + np.arange(seq)
    if mode == "circular":
        pos %= length
    elif seq and (np.any(starts < 0) or np.any(pos[:, -1] >= length)):
        raise ShapeError(
            f"{op}: write_indices {starts.tolist()} + sequence length {seq} run past "
            f"the cache length {length} (mode linear)"
        )
    return axis, pos


@gradient("GatherElements")
def gather_elements_grad(op, g_out, g_in):
    if not g_in[0]:
        return []
    return [op_def("GatherElementsGradient", [g_out[0], *op.input], [g_in[0]], **copy_attrs(op))]


@gradient("GatherND")
def gather_nd_grad(op, g_out, g_in):
    if not g_in[0]:
        return []
    return [op_def("GatherNDGradient", [g_out[0], *op.input], [g_in[0]], **copy_attrs(op))]
