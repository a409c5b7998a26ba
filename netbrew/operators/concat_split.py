"""Concat and Split."""

from __future__ import annotations

import math

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.schema import REQUIRED, kernel, schema
from netbrew.operators.shape import int_list

schema(
    "Concat",
    inputs=["inputs*"],
    outputs=["concat_result"],
    attrs={"axis": REQUIRED},
    doc="concat_result[..., sum(n_i), ...] = inputs_i[..., n_i, ...] joined on axis (required, "
    "in [-r, r-1]); all other dims and dtypes equal",
)


@kernel("Concat")
def concat_cpu(*inputs: np.ndarray, axis: int) -> tuple[np.ndarray]:
    first = inputs[0]
    rank = first.ndim
    if not -rank <= axis < rank:
        raise ShapeError(
            f"Concat: axis {axis} is out of range [{-rank}, {rank - 1}] for rank {rank}"
        )
    axis %= rank
    for i, x in enumerate(inputs[1:], start=1):
        if x.dtype != first.dtype:
            raise SchemaError(f"Concat: input {i} has dtype {x.dtype}, expected {first.dtype}")
        if x.ndim != rank or any(
            a != b for d, (a, b) in enumerate(zip(x.shape, first.shape, strict=True)) if d != axis
        ):
            raise ShapeError(
                f"Concat: input {i} has shape {list(x.shape)}, expected {list(first.shape)} "
                f"in every dim but axis {axis}"
            )
    return (np.concatenate(inputs, axis=axis),)


schema(
    "Split",
    inputs=["input", "split?"],
    outputs=["outputs*"],
    attrs={"axis": 0, "num_outputs": None},
    dtypes={1: "int"},
    num_outputs_attr="num_outputs",
    doc="outputs_i = input[..., offset_i : offset_i + split[i], ...] on axis=0; without split, "
    "num_outputs (default: the output count) chunks of ceil(d/n), the last smaller",
)


@kernel("Split")
def split_cpu(
    x: np.ndarray, split: np.ndarray | None = None, *, axis: int, num_outputs: int
) -> tuple[np.ndarray, ...]:
    rank = x.ndim
    if not -rank <= axis < rank:
        raise ShapeError(
            f"Split: axis {axis} is out of range [{-rank}, {rank - 1}] for rank {rank}"
        )
    axis %= rank
    dim = x.shape[axis]
    if split is not None:
        sizes = int_list(split, "split", "Split")
        if len(sizes) != num_outputs:
            raise ShapeError(
                f"Split: input 'split' has {len(sizes)} entries {sizes}, expected {num_outputs} "
                "(one per output)"
            )
        if any(s < 0 for s in sizes) or sum(sizes) != dim:
            raise ShapeError(
                f"Split: input 'split' {sizes} must be non-negative and sum to {dim}, "
                f"the size of axis {axis} of input {list(x.shape)}"
            )
    else:
        if num_outputs < 1:
            raise ShapeError(f"Split: num_outputs is {num_outputs}, expected at least 1")
        chunk = math.ceil(dim / num_outputs)
        last = dim - chunk * (num_outputs - 1)
        if last < 0:
            raise ShapeError(
                f"Split: cannot split axis {axis} of size {dim} into {num_outputs} chunks of "
                f"ceil({dim}/{num_outputs}) = {chunk}; give input 'split' instead"
            )
        sizes = [chunk] * (num_outputs - 1) + [last]
    return tuple(np.split(x, np.cumsum(sizes[:-1]), axis=axis))
