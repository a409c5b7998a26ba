"""Expand and Tile: copies of a tensor broadcast or repeated to a larger shape.

    Expand(input, shape) -> output     backward: SumReduceLike(doutput, input) -> dinput
    Tile(input, repeats) -> output     backward: TileGradient(doutput, input, repeats) -> dinput

Both read their input for its shape only in the backward pass.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import reduce_like
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import gradient, kernel, schema

schema(
    "Expand",
    inputs=["input", "shape"],
    outputs=["output"],
    dtypes={1: "int"},
    doc="output = input broadcast (numpy rules, both ways) with `shape` (int64 1-D); "
    "output shape = broadcast(input.shape, shape), e.g. [3, 1] with [2, 1, 6] -> [2, 3, 6]",
)
schema(
    "Tile",
    inputs=["input", "repeats"],
    outputs=["output"],
    dtypes={1: "int"},
    doc="output = input repeated repeats[i] times along dim i (int64 1-D of length rank); "
    "output.shape[i] = input.shape[i] * repeats[i]",
)
schema(
    "TileGradient",
    inputs=["doutput", "input", "repeats"],
    outputs=["dinput"],
    dtypes={0: "float", 2: "int"},
    onnx=False,
    doc="dinput = doutput summed over the repeats of Tile: reshaped to [r0, d0, r1, d1, ...] "
    "and summed over the r axes; input's shape, doutput's dtype",
)


def _int_vector(x: np.ndarray, op: str, slot: str) -> list[int]:
    x = np.asarray(x)
    if x.ndim != 1:
        raise ShapeError(f"{op}: input {slot!r} has shape {list(x.shape)}, expected 1-D")
    return [int(v) for v in x.tolist()]


@kernel("Expand")
def expand_cpu(x: np.ndarray, shape: np.ndarray) -> tuple[np.ndarray]:
    dims = _int_vector(shape, "Expand", "shape")
    try:
        out_shape = np.broadcast_shapes(x.shape, tuple(dims))
    except ValueError:
        raise ShapeError(
            f"Expand: input 'input' of shape {list(x.shape)} does not broadcast with shape "
            f"{dims} (each pair of trailing dims must be equal or one of them 1)"
        ) from None
    check_numel(out_shape, "Expand output")
    return (np.broadcast_to(x, out_shape).copy(),)


def _repeats(x: np.ndarray, repeats: np.ndarray, op: str) -> list[int]:
    reps = _int_vector(repeats, op, "repeats")
    if len(reps) != x.ndim:
        raise ShapeError(
            f"{op}: input 'repeats' has {len(reps)} values, expected {x.ndim} (input's rank)"
        )
    if any(r < 0 for r in reps):
        raise ShapeError(f"{op}: input 'repeats' {reps} has a negative value")
    return reps


@kernel("Tile")
def tile_cpu(x: np.ndarray, repeats: np.ndarray) -> tuple[np.ndarray]:
    reps = _repeats(x, repeats, "Tile")
    check_numel([d * r for d, r in zip(x.shape, reps)], "Tile output")
    return (np.tile(x, reps) if x.ndim else x.copy(),)


@kernel("TileGradient")
def tile_gradient_cpu(dy: np.ndarray, x: np.ndarray, repeats: np.ndarray) -> tuple[np.ndarray]:
    reps = _repeats(x, repeats, "TileGradient")
    expected = tuple(d * r for d, r in zip(x.shape, reps))
    if dy.shape != expected:
        raise ShapeError(
            f"TileGradient: input 'doutput' has shape {list(dy.shape)}, expected {list(expected)}"
        )
    split = [n for pair in zip(reps, x.shape) for n in pair]
    dx = dy.reshape(split).sum(axis=tuple(range(0, 2 * x.ndim, 2)))
    return (dx.astype(dy.dtype, copy=False).reshape(x.shape),)


@gradient("Expand")
def expand_grad(op, g_out, g_in):
    """dinput = doutput summed over the broadcast axes."""
    if not g_in[0]:
        return []
    return reduce_like(g_out[0], op.input[0], g_in[0])


@gradient("Tile")
def tile_grad(op, g_out, g_in):
    if not g_in[0]:
        return []
    return [op_def("TileGradient", [g_out[0], *op.input], [g_in[0]])]
