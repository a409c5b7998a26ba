"""Tensor sequences (ONNX seq(tensor)), held as Python lists of arrays.

SequenceConstruct, SequenceEmpty, SequenceInsert, SequenceAt, SequenceErase,
SequenceLength, SplitToSequence, ConcatFromSequence and SequenceMap. Every op returns a new
list; input lists are never changed. Their gradients (a sequence's gradient is a list of
its tensors' gradients) are in sequence_grad.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.control_flow import run_subgraph
from netbrew.operators.schema import REQUIRED, kernel, no_gradient, schema


def _sequence(value: Any, op: str, slot: str = "input_sequence") -> list:
    if not isinstance(value, list):
        raise SchemaError(
            f"{op}: input {slot!r} must be a sequence (list of tensors), got {type(value).__name__}"
        )
    return value


def _position(position: Any, n: int, op: str, insert: bool = False) -> int:
    """A scalar integer position in [-n, n - 1] ([-n, n] when inserting), made >= 0."""
    pos = np.asarray(position)
    if pos.size != 1 or pos.dtype.kind not in "iu":
        raise SchemaError(
            f"{op}: input 'position' must be a scalar integer tensor, got {pos.dtype} "
            f"shape {list(pos.shape)}"
        )
    p, high = int(pos.reshape(-1)[0]), n if insert else n - 1
    if not -n <= p <= high:
        raise ShapeError(f"{op}: position {p} is out of range [{-n}, {high}] for length {n}")
    return p + n if p < 0 else p


def _same_dtype(seq: list, tensor: np.ndarray, op: str) -> None:
    if seq and np.asarray(seq[0]).dtype != tensor.dtype:
        raise SchemaError(
            f"{op}: input 'tensor' has dtype {tensor.dtype}, the sequence holds "
            f"{np.asarray(seq[0]).dtype}"
        )


schema(
    "SequenceConstruct",
    inputs=["inputs*"],
    outputs=["output_sequence"],
    doc="output_sequence = [inputs_0, inputs_1, ...]; all inputs share one dtype",
)


@kernel("SequenceConstruct")
def sequence_construct_cpu(*inputs):
    dtypes = {np.asarray(x).dtype for x in inputs}
    if len(dtypes) > 1:
        raise SchemaError(f"SequenceConstruct: inputs mix dtypes {sorted(map(str, dtypes))}")
    return (list(inputs),)


schema(
    "SequenceEmpty",
    inputs=[],
    outputs=["output"],
    attrs={"dtype": 1},
    doc="output = [], an empty sequence of tensors of `dtype` (default FLOAT)",
)


@kernel("SequenceEmpty")
def sequence_empty_cpu(dtype):
    from netbrew.netdef.dtypes import onnx_np_dtype

    try:
        onnx_np_dtype(dtype)  # checks the type; a list carries no dtype
    except ValueError as e:
        raise SchemaError(f"argument dtype={e}") from None
    return ([],)


schema(
    "SequenceInsert",
    inputs=["input_sequence", "tensor", "position?"],
    outputs=["output_sequence"],
    dtypes={2: "int"},
    doc="output_sequence = input_sequence with tensor inserted before `position` "
    "(in [-n, n], default n: append)",
)


@kernel("SequenceInsert")
def sequence_insert_cpu(seq, tensor, position=None):
    seq = _sequence(seq, "SequenceInsert")
    tensor = np.asarray(tensor)
    _same_dtype(seq, tensor, "SequenceInsert")
    at = len(seq) if position is None else _position(position, len(seq), "SequenceInsert", True)
    return ([*seq[:at], tensor, *seq[at:]],)


schema(
    "SequenceAt",
    inputs=["input_sequence", "position"],
    outputs=["tensor"],
    dtypes={1: "int"},
    doc="tensor = input_sequence[position], position in [-n, n - 1]",
)


@kernel("SequenceAt")
def sequence_at_cpu(seq, position):
    seq = _sequence(seq, "SequenceAt")
    return (seq[_position(position, len(seq), "SequenceAt")],)


schema(
    "SequenceErase",
    inputs=["input_sequence", "position?"],
    outputs=["output_sequence"],
    dtypes={1: "int"},
    doc="output_sequence = input_sequence without the tensor at position "
    "(in [-n, n - 1], default -1: the last)",
)


@kernel("SequenceErase")
def sequence_erase_cpu(seq, position=None):
    seq = _sequence(seq, "SequenceErase")
    n = len(seq)
    if position is None and n == 0:
        raise ShapeError("SequenceErase: cannot erase from an empty sequence")
    at = n - 1 if position is None else _position(position, n, "SequenceErase")
    return ([*seq[:at], *seq[at + 1 :]],)


schema(
    "SequenceLength",
    inputs=["input_sequence"],
    outputs=["length"],
    doc="length = len(input_sequence), an int64 scalar",
)


@kernel("SequenceLength")
def sequence_length_cpu(seq):
    return (np.array(len(_sequence(seq, "SequenceLength")), np.int64),)


schema(
    "SplitToSequence",
    inputs=["input", "split?"],
    outputs=["output_sequence"],
    attrs={"axis": 0, "keepdims": 1},
    dtypes={1: "int"},
    doc="output_sequence = input split along axis: split a scalar -> chunks of that size "
    "(the last may be smaller), a 1-D tensor -> chunks of those lengths (summing to the "
    "axis size), omitted -> chunks of 1, squeezed when keepdims=0",
)


@kernel("SplitToSequence")
def split_to_sequence_cpu(x, split=None, *, axis, keepdims):
    x = np.asarray(x)
    if x.ndim == 0 or not -x.ndim <= axis < x.ndim:
        raise SchemaError(f"SplitToSequence: axis {axis} is out of range for rank {x.ndim}")
    axis %= x.ndim
    size = x.shape[axis]
    if split is None:
        parts = np.split(x, size, axis=axis) if size else []
        return ([p.squeeze(axis) for p in parts] if not keepdims else parts,)
    split = np.asarray(split)
    if split.ndim == 0:
        step = int(split)
        if step <= 0:
            raise ShapeError(f"SplitToSequence: scalar 'split' must be positive, got {step}")
        bounds = list(range(step, size, step))
    elif split.ndim == 1:
        if (split < 0).any() or int(split.sum()) != size:
            raise ShapeError(
                f"SplitToSequence: 'split' {split.tolist()} must be non-negative and sum to "
                f"the size {size} of axis {axis}"
            )
        bounds = np.cumsum(split)[:-1].tolist()
    else:
        raise ShapeError(f"SplitToSequence: 'split' must be a scalar or 1-D, got rank {split.ndim}")
    return (np.split(x, bounds, axis=axis),)


schema(
    "ConcatFromSequence",
    inputs=["input_sequence"],
    outputs=["concat_result"],
    attrs={"axis": REQUIRED, "new_axis": 0},
    doc="concat_result = concatenate(input_sequence, axis) (new_axis=0), or stack(..., axis) "
    "(new_axis=1, axis in [-r-1, r]); the sequence must not be empty",
)


@kernel("ConcatFromSequence")
def concat_from_sequence_cpu(seq, *, axis, new_axis):
    seq = [np.asarray(t) for t in _sequence(seq, "ConcatFromSequence")]
    if not seq:
        raise ShapeError("ConcatFromSequence: the sequence is empty; there is nothing to concat")
    rank = seq[0].ndim + (1 if new_axis else 0)
    if not -rank <= axis < rank:
        raise SchemaError(f"ConcatFromSequence: axis {axis} is out of range for rank {rank}")
    dtypes = {t.dtype for t in seq}
    if len(dtypes) > 1:
        raise SchemaError(f"ConcatFromSequence: tensors mix dtypes {sorted(map(str, dtypes))}")
    try:
        out = np.stack(seq, axis=axis) if new_axis else np.concatenate(seq, axis=axis)
    except ValueError:
        shapes = [list(t.shape) for t in seq]
        raise ShapeError(
            f"ConcatFromSequence: tensor shapes {shapes} do not agree off axis {axis}"
            f"{' (new_axis=1 needs equal shapes)' if new_axis else ''}"
        ) from None
    return (out,)


schema(
    "SequenceMap",
    inputs=["input_sequence", "additional_inputs*0"],
    outputs=["out_sequence*"],
    attrs={"body": REQUIRED},
    output_mask=True,
    wants_scope=True,
    doc="out_sequence_k[i] = body(input_sequence[i], a_1[i] or a_1, ...)_k: sequence "
    "inputs are indexed per sample (same length as input_sequence), tensors passed whole",
)


@kernel("SequenceMap")
def sequence_map_cpu(seq, *extra, body, scope, output_mask):
    seq = _sequence(seq, "SequenceMap")
    for j, e in enumerate(extra):
        if isinstance(e, list) and len(e) != len(seq):
            raise ShapeError(
                f"SequenceMap: additional input {j} has {len(e)} elements, "
                f"input_sequence has {len(seq)}"
            )
    n_out = len(output_mask)
    if len(body.external_output) != n_out:
        raise SchemaError(
            f"SequenceMap: body yields {len(body.external_output)} outputs, the op lists {n_out}"
        )
    results: list[list] = [[] for _ in range(n_out)]
    for i, item in enumerate(seq):
        args = [item, *(e[i] if isinstance(e, list) else e for e in extra)]
        for k, value in enumerate(run_subgraph(body, args, scope, "SequenceMap body")):
            results[k].append(value)
    return tuple(results)


no_gradient("SequenceEmpty", "it has no inputs")
no_gradient("SequenceLength", "its output is an integer count")
