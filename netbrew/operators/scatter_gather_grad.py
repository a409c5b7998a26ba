"""Gradients of ScatterElements, ScatterND (every reduction) and TensorScatter.

    ScatterElements(data, indices, updates) -> output
        backward: ScatterElementsGradient(doutput, data, indices, updates) -> (ddata, dupdates)
    ScatterND(data, indices, updates) -> output
        backward: ScatterNDGradient(doutput, data, indices, updates) -> (ddata, dupdates)
    TensorScatter(past_cache, update, write_indices) -> present_cache
        backward: TensorScatterGradient(dpresent_cache, update, write_indices)
                  -> (dpast_cache, dupdate)

Both scatters come down to one rule on flat positions: update u_k goes to output position p_k,
and output[p] = data[p] combined with every u_k at p. Per reduction:

    none  output[p] = the u_k written last at p (NumPy's write order, which ONNX leaves
          unspecified for repeated indices): ddata = doutput with the written positions
          zeroed; du_k = doutput[p_k] for the write that was kept, 0 for those overwritten.
    add   ddata = doutput; du_k = doutput[p_k].
    mul   output[p] = data[p] * prod_k u_k: ddata = doutput * prod_k u_k, du_k = doutput[p_k] *
          data[p_k] * (product of the other updates at p_k). The product of the others is
          formed without dividing by a zero update (products of the non-zero factors and a
          count of the zero ones), so zeros are handled exactly.
    max   output[p] is the largest of data[p] and the u_k at p: doutput[p] goes to the winner;
    min   where several tie for it, it is split equally among them (as torch's amax does).

TensorScatter overwrites distinct cache positions (each batch entry's sequence positions),
so its gradient is the `none` rule without repeats. Indices and write_indices are integers
and get no gradient.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.scatter_gather import (
    _UFUNCS,
    REDUCTIONS,
    cache_positions,
    element_index,
    nd_index,
)
from netbrew.operators.schema import gradient, kernel, schema
from netbrew.operators.window import work_dtype

_RULE = (
    "by reduction: none, ddata = doutput zeroed where written and dupdates = doutput there "
    "(0 for writes a repeated index overwrote); add, ddata = doutput and dupdates = doutput "
    "there; mul, the product rule (zero updates exact); max/min, doutput to the winner of "
    "data and the updates at each place, split equally among ties"
)

schema(
    "ScatterElementsGradient",
    inputs=["doutput", "data", "indices", "updates"],
    outputs=["ddata", "dupdates?"],
    attrs={"axis": 0, "reduction": "none"},
    dtypes={0: "float", 2: "int"},
    onnx=False,
    output_mask=True,
    doc=f"ddata, dupdates of ScatterElements with the same axis and reduction, {_RULE}; "
    "defaults axis=0, reduction=none",
)
schema(
    "ScatterNDGradient",
    inputs=["doutput", "data", "indices", "updates"],
    outputs=["ddata", "dupdates?"],
    attrs={"reduction": "none"},
    dtypes={0: "float", 2: "int"},
    onnx=False,
    output_mask=True,
    doc=f"ddata, dupdates of ScatterND with the same reduction, {_RULE}; default reduction=none",
)
schema(
    "TensorScatterGradient",
    inputs=["dpresent_cache", "update", "write_indices?"],
    outputs=["dpast_cache", "dupdate?"],
    attrs={"axis": -2, "mode": "linear"},
    dtypes={0: "float", 2: "int"},
    onnx=False,
    output_mask=True,
    doc="dpast_cache = dpresent_cache with the positions TensorScatter wrote zeroed; dupdate = "
    "dpresent_cache read at those positions (update read for its shape); axis and mode as "
    "the forward's, defaults axis=-2, mode=linear",
)


def _scatter_maker(grad_type: str):
    """ddata and dupdates from one gradient op reading doutput and the forward's inputs."""

    def maker(op, g_out, g_in):
        wanted = [g_in[0] or "", g_in[2] or ""]
        if not any(wanted):
            return []
        return [op_def(grad_type, [g_out[0], *op.input], wanted, **copy_attrs(op))]

    maker.__name__ = maker.__qualname__ = f"{grad_type.removesuffix('Gradient').lower()}_grad"
    return maker


gradient("ScatterElements")(_scatter_maker("ScatterElementsGradient"))
gradient("ScatterND")(_scatter_maker("ScatterNDGradient"))


@gradient("TensorScatter")
def tensor_scatter_grad(op, g_out, g_in):
    wanted = [g_in[0] or "", g_in[1] or ""]
    if not any(wanted):
        return []
    inputs = [g_out[0], *op.input[1:]]
    return [op_def("TensorScatterGradient", inputs, wanted, **copy_attrs(op))]


def _check(op: str, name: str, array: np.ndarray, shape: tuple[int, ...]) -> None:
    if array.shape != tuple(shape):
        raise ShapeError(
            f"{op}: input {name} has shape {list(array.shape)}, expected {list(shape)}"
        )


def _reduce_grads(dy, data, updates, pos, reduction: str, op: str):
    """(ddata, dupdates), flat, of output = data with updates[k] combined into flat
    position pos[k] by `reduction`; dy, data, updates and pos are flat, in one float dtype."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction={reduction!r}, expected one of {', '.join(REDUCTIONS)}")
    order = np.arange(pos.size)
    if reduction == "none":
        writer = np.full(dy.size, -1, np.int64)
        writer[pos] = order  # the forward's assignment: which write survives at each place
        ddata = dy.copy()
        ddata[pos] = 0
        return ddata, np.where(writer[pos] == order, dy[pos], 0)
    if reduction == "add":
        return dy.copy(), dy[pos]
    if reduction == "mul":
        return _mul_grads(dy, data, updates, pos)
    out = data.copy()
    _UFUNCS[reduction].at(out, pos, updates)
    data_won, update_won = data == out, updates == out[pos]
    winners = data_won.astype(dy.dtype)
    np.add.at(winners, pos, update_won)
    share = dy / winners  # >= 1 winner everywhere: the result is one of the values
    return share * data_won, share[pos] * update_won


def _mul_grads(dy, data, updates, pos):
    """ddata, dupdates of output[p] = data[p] * prod of updates at p, exact for zeros."""
    zero = updates == 0
    nonzero_prod = np.ones(dy.size, dy.dtype)
    np.multiply.at(nonzero_prod, pos[~zero], updates[~zero])
    zeros = np.zeros(dy.size, np.int64)
    np.add.at(zeros, pos[zero], 1)
    ddata = dy * np.where(zeros > 0, 0, nonzero_prod)
    # the product of the other updates at u_k's place: divide u_k out when it is non-zero;
    # a zero u_k leaves the non-zero product, unless another zero shares its place
    here_prod, here_zeros = nonzero_prod[pos], zeros[pos]
    others = np.where(
        zero,
        np.where(here_zeros == 1, here_prod, 0),
        np.where(here_zeros > 0, 0, here_prod / np.where(zero, 1, updates)),
    )
    return ddata, dy[pos] * data[pos] * others


def _scatter_gradient(dy, data, updates, index, flat_shape, reduction, op, output_mask):
    """Shared by both scatters: `index` addresses data reshaped to `flat_shape` and the
    updates, reshaped to data[index]'s shape, are written there."""
    work = work_dtype(dy.dtype)
    places = np.arange(math.prod(flat_shape)).reshape(flat_shape)[index]
    pos = places.reshape(-1)
    flat = [a.astype(work, copy=False).reshape(-1) for a in (dy, data, updates)]
    ddata, dupdates = _reduce_grads(*flat, pos, reduction, op)
    return (
        ddata.astype(dy.dtype, copy=False).reshape(data.shape) if output_mask[0] else None,
        dupdates.astype(dy.dtype, copy=False).reshape(updates.shape)
        if len(output_mask) > 1 and output_mask[1]
        else None,
    )


@kernel("ScatterElementsGradient")
def scatter_elements_gradient_cpu(
    dy: np.ndarray,
    data: np.ndarray,
    indices: np.ndarray,
    updates: np.ndarray,
    *,
    axis: int,
    reduction: str,
    output_mask: tuple[bool, ...],
) -> tuple[np.ndarray | None, np.ndarray | None]:
    op = "ScatterElementsGradient"
    _check(op, "doutput", dy, data.shape)
    _check(op, "updates", updates, indices.shape)
    index = element_index(data.shape, indices, axis, op)
    return _scatter_gradient(dy, data, updates, index, data.shape, reduction, op, output_mask)


@kernel("ScatterNDGradient")
def scatter_nd_gradient_cpu(
    dy: np.ndarray,
    data: np.ndarray,
    indices: np.ndarray,
    updates: np.ndarray,
    *,
    reduction: str,
    output_mask: tuple[bool, ...],
) -> tuple[np.ndarray | None, np.ndarray | None]:
    op = "ScatterNDGradient"
    _check(op, "doutput", dy, data.shape)
    index, flat_shape, out_shape = nd_index(data.shape, indices, 0, op)
    _check(op, "updates", updates, out_shape)
    return _scatter_gradient(dy, data, updates, index, flat_shape, reduction, op, output_mask)


@kernel("TensorScatterGradient")
def tensor_scatter_gradient_cpu(
    dy: np.ndarray,
    update: np.ndarray,
    write_indices: np.ndarray | None = None,
    *,
    axis: int,
    mode: str,
    output_mask: tuple[bool, ...],
) -> tuple[np.ndarray | None, np.ndarray | None]:
    op = "TensorScatterGradient"
    axis, pos = cache_positions(dy.shape, update, write_indices, axis, mode, op)
    batch = np.arange(dy.shape[0])[:, None]
    d_past = d_update = None
    if output_mask[0]:
        d_past = dy.copy()
        np.moveaxis(d_past, axis, 1)[batch, pos] = 0
    if len(output_mask) > 1 and output_mask[1]:
        d_update = np.moveaxis(np.moveaxis(dy, axis, 1)[batch, pos], 1, axis).copy()
    return d_past, d_update
