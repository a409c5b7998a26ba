"""Gradients of the tensor-sequence ops.

The gradient of a sequence is a sequence (a Python list) of the gradients of its tensors,
always full: a tensor that gets no gradient gets zeros of its shape. Autodiff sums the
partial gradients of a sequence blob with Sum, which adds lists element by element.

    SequenceConstruct(x...) -> S        SequenceConstructGradient(dS) -> dx...
    SequenceAt(S, p) -> y               SequenceAtGradient(S, p, dy) -> dS (zeros, dy at p)
    SequenceInsert(S, x, p) -> S'       SequenceInsertGradient(dS', p) -> (dS, dx)
    SequenceErase(S, p) -> S'           SequenceEraseGradient(S, dS', p) -> dS (zeros at p)
    SplitToSequence(x, split) -> S      SplitToSequenceGradient(x, dS, split) -> dx
    ConcatFromSequence(S) -> y          ConcatFromSequenceGradient(S, dy) -> dS
    SequenceMap(S, a...) -> out...      SequenceMapGradient(S, a..., dout...) -> (dS, da...,
                                            d captured...)

SequenceMap's gradient runs the body's backward subgraph (subgraph_grad.vjp_net) once per
element; an additional input given as a sequence gets a sequence gradient, one given as a
tensor (the same for every element) the sum over the elements. Positions and splits are
integers and get none.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.control_flow import run_subgraph
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.schema import REQUIRED, gradient, kernel, schema
from netbrew.operators.sequence import _position, _sequence
from netbrew.operators.subgraph_grad import (
    accumulate,
    captured_values,
    captured_wanted,
    check_vjp,
    is_float,
    or_zeros,
    padded,
    scattered,
    summed,
    vjp_net,
    zeros_like,
)
from netbrew.proto.netbrew_pb2 import NetDef


def _same_shape(grad: Any, value: Any, op: str, what: str) -> np.ndarray:
    """`grad` as an array, checked to have the shape of the tensor it is the gradient of."""
    grad, shape = np.asarray(grad), np.shape(value)
    if grad.shape != shape:
        raise ShapeError(f"{op}: {what} has shape {list(grad.shape)}, expected {list(shape)}")
    return grad


# ----------------------------------------------------------------- SequenceConstruct
schema(
    "SequenceConstructGradient",
    inputs=["d_output_sequence"],
    outputs=["d_inputs*"],
    onnx=False,
    output_mask=True,
    doc="d_inputs_i = d_output_sequence[i]; one output per SequenceConstruct input",
)


@gradient("SequenceConstruct", inplace_safe=True)
def sequence_construct_grad(op, g_out, g_in):
    """dx_i = dS[i] (reads only the gradient)."""
    if not any(g_in):
        return []
    return [op_def("SequenceConstructGradient", [g_out[0]], [g or "" for g in g_in])]


@kernel("SequenceConstructGradient")
def sequence_construct_gradient_cpu(ds, *, output_mask):
    ds = _sequence(ds, "SequenceConstructGradient", "d_output_sequence")
    if len(ds) != len(output_mask):
        raise ShapeError(
            f"SequenceConstructGradient: d_output_sequence has {len(ds)} tensors, the op "
            f"lists {len(output_mask)} outputs"
        )
    return tuple(ds)


# ------------------------------------------------------------------------ SequenceAt
schema(
    "SequenceAtGradient",
    inputs=["input_sequence", "position", "dY"],
    outputs=["d_input_sequence"],
    dtypes={1: "int"},
    onnx=False,
    doc="d_input_sequence = zeros like each tensor of input_sequence, with dY at position "
    "(in [-n, n - 1])",
)


@gradient("SequenceAt")
def sequence_at_grad(op, g_out, g_in):
    """dS = zeros like S, with dy at the position."""
    if not g_in[0]:
        return []
    return [op_def("SequenceAtGradient", [op.input[0], op.input[1], g_out[0]], [g_in[0]])]


@kernel("SequenceAtGradient")
def sequence_at_gradient_cpu(seq, position, dy):
    seq = _sequence(seq, "SequenceAtGradient")
    at = _position(position, len(seq), "SequenceAtGradient")
    ds = zeros_like(seq)
    ds[at] = _same_shape(dy, seq[at], "SequenceAtGradient", "dY")
    return (ds,)


# -------------------------------------------------------------------- SequenceInsert
schema(
    "SequenceInsertGradient",
    inputs=["d_output_sequence", "position?"],
    outputs=["d_input_sequence", "d_tensor"],
    dtypes={1: "int"},
    onnx=False,
    output_mask=True,
    doc="d_tensor = d_output_sequence[position], d_input_sequence = the others; position "
    "as SequenceInsert got it (in [-n, n] for the n tensors of its input; default n)",
)


@gradient("SequenceInsert", inplace_safe=True)
def sequence_insert_grad(op, g_out, g_in):
    """dS = dS' without the inserted tensor's slot, dx = that slot."""
    if not g_in[0] and not g_in[1]:
        return []
    position = op.input[2] if len(op.input) > 2 else ""
    return [op_def("SequenceInsertGradient", [g_out[0], position], [g_in[0] or "", g_in[1] or ""])]


@kernel("SequenceInsertGradient")
def sequence_insert_gradient_cpu(ds, position=None, *, output_mask):
    ds = _sequence(ds, "SequenceInsertGradient", "d_output_sequence")
    n = len(ds) - 1  # the input sequence's length
    if n < 0:
        raise ShapeError("SequenceInsertGradient: d_output_sequence is empty; an insert gives one")
    at = n if position is None else _position(position, n, "SequenceInsertGradient", True)
    return ([*ds[:at], *ds[at + 1 :]], ds[at])


# --------------------------------------------------------------------- SequenceErase
schema(
    "SequenceEraseGradient",
    inputs=["input_sequence", "d_output_sequence", "position?"],
    outputs=["d_input_sequence"],
    dtypes={2: "int"},
    onnx=False,
    doc="d_input_sequence = d_output_sequence with zeros like input_sequence[position] "
    "put back at position (in [-n, n - 1], default -1)",
)


@gradient("SequenceErase")
def sequence_erase_grad(op, g_out, g_in):
    """dS = dS' with zeros where the erased tensor was."""
    if not g_in[0]:
        return []
    position = op.input[1] if len(op.input) > 1 else ""
    return [op_def("SequenceEraseGradient", [op.input[0], g_out[0], position], [g_in[0]])]


@kernel("SequenceEraseGradient")
def sequence_erase_gradient_cpu(seq, ds, position=None):
    seq = _sequence(seq, "SequenceEraseGradient")
    ds = _sequence(ds, "SequenceEraseGradient", "d_output_sequence")
    n = len(seq)
    if len(ds) != n - 1:
        raise ShapeError(
            f"SequenceEraseGradient: d_output_sequence has {len(ds)} tensors, expected "
            f"{n - 1} (one less than input_sequence)"
        )
    at = n - 1 if position is None else _position(position, n, "SequenceEraseGradient")
    return ([*ds[:at], zeros_like(seq[at]), *ds[at:]],)


# ------------------------------------------------------------------- SplitToSequence
schema(
    "SplitToSequenceGradient",
    inputs=["input", "d_output_sequence", "split?"],
    outputs=["d_input"],
    attrs={"axis": 0, "keepdims": 1},
    dtypes={2: "int"},
    onnx=False,
    doc="d_input = concatenate(d_output_sequence, axis), or stack(..., axis) where the "
    "split squeezed the axis (no split and keepdims=0); zeros like input when the sequence "
    "is empty; SplitToSequence's attributes",
)


@gradient("SplitToSequence")
def split_to_sequence_grad(op, g_out, g_in):
    """dx = the sequence's gradients joined back along the axis."""
    if not g_in[0]:
        return []
    split = op.input[1] if len(op.input) > 1 else ""
    attrs = copy_attrs(op)
    return [op_def("SplitToSequenceGradient", [op.input[0], g_out[0], split], [g_in[0]], **attrs)]


@kernel("SplitToSequenceGradient")
def split_to_sequence_gradient_cpu(x, ds, split=None, *, axis, keepdims):
    x = np.asarray(x)
    ds = _sequence(ds, "SplitToSequenceGradient", "d_output_sequence")
    if x.ndim == 0 or not -x.ndim <= axis < x.ndim:
        raise SchemaError(f"SplitToSequenceGradient: axis {axis} is out of range for rank {x.ndim}")
    if not ds:
        return (np.zeros_like(x),)
    parts = [np.asarray(d) for d in ds]
    squeezed = split is None and not keepdims
    try:
        dx = np.stack(parts, axis=axis) if squeezed else np.concatenate(parts, axis=axis)
    except ValueError:
        shapes = [list(p.shape) for p in parts]
        raise ShapeError(
            f"SplitToSequenceGradient: d_output_sequence shapes {shapes} do not join on axis {axis}"
        ) from None
    return (_same_shape(dx, x, "SplitToSequenceGradient", "the joined d_output_sequence"),)


# ---------------------------------------------------------------- ConcatFromSequence
schema(
    "ConcatFromSequenceGradient",
    inputs=["input_sequence", "dY"],
    outputs=["d_input_sequence"],
    attrs={"axis": REQUIRED, "new_axis": 0},
    onnx=False,
    doc="d_input_sequence = dY split along axis into the sizes of input_sequence's tensors "
    "(new_axis=0), or unstacked along axis (new_axis=1); ConcatFromSequence's attributes",
)


@gradient("ConcatFromSequence")
def concat_from_sequence_grad(op, g_out, g_in):
    """dS = dy cut back into the tensors' slices."""
    if not g_in[0]:
        return []
    attrs = copy_attrs(op)
    inputs = [op.input[0], g_out[0]]
    return [op_def("ConcatFromSequenceGradient", inputs, [g_in[0]], **attrs)]


@kernel("ConcatFromSequenceGradient")
def concat_from_sequence_gradient_cpu(seq, dy, *, axis, new_axis):
    seq = [np.asarray(t) for t in _sequence(seq, "ConcatFromSequenceGradient")]
    if not seq:
        raise ShapeError("ConcatFromSequenceGradient: input_sequence is empty")
    dy = np.asarray(dy)
    rank = seq[0].ndim + (1 if new_axis else 0)
    if not -rank <= axis < rank or dy.ndim != rank:
        raise ShapeError(
            f"ConcatFromSequenceGradient: dY has rank {dy.ndim} and axis {axis}; the "
            f"concatenation has rank {rank}"
        )
    axis %= rank
    sizes = [1] * len(seq) if new_axis else [t.shape[axis] for t in seq]
    if dy.shape[axis] != sum(sizes):
        raise ShapeError(
            f"ConcatFromSequenceGradient: dY has {dy.shape[axis]} entries on axis {axis}, the "
            f"{len(seq)} tensors of input_sequence give {sum(sizes)}"
        )
    parts = np.split(dy, np.cumsum(sizes)[:-1], axis=axis)
    if new_axis:
        parts = [p.squeeze(axis) for p in parts]
    grads = [
        _same_shape(p, t, "ConcatFromSequenceGradient", f"the slice of dY for tensor {i}")
        for i, (p, t) in enumerate(zip(parts, seq))
    ]
    return (grads,)


# ----------------------------------------------------------------------- SequenceMap
schema(
    "SequenceMapGradient",
    inputs=["input_sequence", "additional_inputs_and_grads*0"],
    outputs=["grads*"],
    attrs={"body": REQUIRED, "wrt": None},
    onnx=False,
    output_mask=True,
    wants_scope=True,
    doc="inputs: SequenceMap's input_sequence and additional inputs a_1..a_J, then the "
    "gradients of its K output sequences (omitted: zero); outputs: d input_sequence, "
    "da_1..da_J (a sequence for a sequence input, the sum over elements for a tensor), then "
    "d wrt_j for the outer-scope blobs wrt the body reads; runs the body's backward per "
    "element",
)


@gradient("SequenceMap", captures=True)
def sequence_map_grad(op, g_out, g_in):
    """Gradients of the input sequence, the additional inputs and the captured blobs."""
    body: NetDef = copy_attrs(op)["body"]
    n_in, k = len(op.input), len(body.external_output)
    wanted = captured_wanted(op, g_in)
    declared = padded(g_in, n_in)[:n_in]
    if not wanted and not any(declared):
        return []
    g_out = padded(g_out, k)
    wrt = [blob for blob, _ in wanted]
    seeded = [q for q in range(k) if g_out[q]]
    check_vjp(body, seeded, [*body.external_input, *wrt], "SequenceMap body")
    inputs = [*op.input, *(g or "" for g in g_out)]
    outputs = [*(g or "" for g in declared), *(g for _, g in wanted)]
    return [op_def("SequenceMapGradient", inputs, outputs, body=body, wrt=wrt)]


def _samples(seq: list, extra: tuple, op: str) -> list[list]:
    """The body's inputs for each element: sequence inputs indexed, tensors whole."""
    for j, e in enumerate(extra):
        if isinstance(e, list) and len(e) != len(seq):
            raise ShapeError(
                f"{op}: additional input {j} has {len(e)} elements, input_sequence has {len(seq)}"
            )
    return [
        [item, *(e[i] if isinstance(e, list) else e for e in extra)] for i, item in enumerate(seq)
    ]


def _output_grads(douts: tuple, n: int) -> list[int]:
    """Indices of the output sequences that have gradients; checks their lengths."""
    given = []
    for q, d in enumerate(douts):
        if d is None:
            continue
        d = _sequence(d, "SequenceMapGradient", f"gradient of out_sequence {q}")
        if len(d) != n:
            raise ShapeError(
                f"SequenceMapGradient: the gradient of out_sequence {q} has {len(d)} "
                f"tensors, input_sequence has {n}"
            )
        given.append(q)
    return given


def _input_grads(inputs: list, samples: list, floats: list, per_sample: list) -> list:
    """Gradients of input_sequence and the additional inputs from the per-element ones."""
    grads = []
    for i, s in enumerate(floats):
        per = [or_zeros(got[i], sample[s]) for got, sample in zip(per_sample, samples)]
        if s == 0 or isinstance(inputs[s], list):
            grads.append(per)
        else:  # one tensor passed to every element: its gradients add up
            total = None
            for g in per:
                total = accumulate(total, g, "SequenceMapGradient")
            grads.append(or_zeros(total, inputs[s]))
    return scattered(floats, grads, inputs)


@kernel("SequenceMapGradient")
def sequence_map_gradient_cpu(seq, *rest, body, wrt, scope, output_mask):
    wrt = list(wrt or [])
    n_extra, k = len(body.external_input) - 1, len(body.external_output)
    if n_extra < 0 or len(rest) != n_extra + k:
        raise SchemaError(
            f"SequenceMapGradient: got {len(rest) + 1} inputs, a body of "
            f"{len(body.external_input)} inputs and {k} outputs needs {n_extra + k + 1}"
        )
    if len(output_mask) != 1 + n_extra + len(wrt):
        raise SchemaError(
            f"SequenceMapGradient: the op lists {len(output_mask)} outputs, expected "
            f"{1 + n_extra + len(wrt)}"
        )
    seq = _sequence(seq, "SequenceMapGradient")
    extra, douts = rest[:n_extra], rest[n_extra:]
    samples = _samples(seq, extra, "SequenceMapGradient")
    given = _output_grads(douts, len(seq))
    captured = captured_values(wrt, scope, "SequenceMapGradient")
    floats = [s for s in range(1 + n_extra) if samples and is_float(samples[0][s])]
    cap = [c for c, v in enumerate(captured) if is_float(v)]
    formal = list(body.external_input)
    vjp = vjp_net(
        body, given, [*(formal[s] for s in floats), *(wrt[c] for c in cap)], "SequenceMap body"
    )
    per_sample = []
    for i, sample in enumerate(samples):
        dys = [douts[q][i] for q in given]
        outs = run_subgraph(vjp.net, [*sample, *dys], scope, "SequenceMap body gradient")
        per_sample.append(vjp.unpack(outs))
    d_inputs = _input_grads([seq, *extra], samples, floats, per_sample)
    d_cap = summed(per_sample, len(floats), [captured[c] for c in cap], "SequenceMapGradient")
    return (*d_inputs, *scattered(cap, d_cap, captured))
