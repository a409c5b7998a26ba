"""Scan8: ONNX opset 8's Scan, whose tensors carry a batch axis, and its gradient.

    Scan8(sequence_lens?, s..., x...) -> (s_final..., y...)

Every state and scan input has the batch on axis 0 and every scan input its sequence on
axis 1; sequence_lens (int, [batch]) gives each batch entry's length, the whole axis when
omitted. Each batch entry runs as opset 9's Scan over its first sequence_lens[b] steps
(scanned backwards where `directions` says 1); the final states are stacked on axis 0,
the scan outputs on axes 0 and 1, padded with zeros to the longest sequence, as ONNX
Runtime pads them.

Opset 9 dropped the batch axis, and onnx.version_converter's 8 -> 9 adapter drops it
without moving the data, so the ONNX importer keeps opset-8 Scans as Scan8 (see
converters/onnx/importer.py). The gradient runs ScanGradient per batch entry.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.control_flow import empty_scan_output, scan_cpu
from netbrew.operators.control_flow_grad import scan_gradient_cpu, scan_gradient_ops
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.schema import REQUIRED, gradient, kernel, schema
from netbrew.proto.netbrew_pb2 import NetDef

schema(
    "Scan8",
    inputs=["sequence_lens?", "initial_state_and_scan_inputs*"],
    outputs=["final_state_and_scan_outputs*"],
    attrs={"body": REQUIRED, "num_scan_inputs": REQUIRED, "directions": None},
    output_mask=True,
    wants_scope=True,
    onnx=False,
    doc="ONNX opset 8's Scan: states (batch, ...) and scan inputs (batch, sequence, ...); "
    "each batch entry b scanned over its first sequence_lens[b] steps (all when omitted; "
    "backwards where directions is 1); final states (batch, ...), scan outputs (batch, "
    "longest sequence, ...) padded with zeros",
)
schema(
    "Scan8Gradient",
    inputs=["inputs_and_grads*"],
    outputs=["input_and_captured_grads*"],
    attrs={"body": REQUIRED, "num_scan_inputs": REQUIRED, "directions": None, "wrt": None},
    output_mask=True,
    wants_scope=True,
    onnx=False,
    doc="inputs: Scan8's sequence_lens (or empty), s_1..s_N, x_1..x_M, then ds_final_1..N "
    "and dy_1..K (omitted: zero); outputs: ds_1..N, dx_1..M, then d wrt_j for the "
    "outer-scope blobs the body reads; ScanGradient per batch entry",
)


def _layout(args: tuple, body: NetDef, num_scan_inputs: int) -> tuple[int, int, int, list]:
    """(n states, m scan inputs, batch, per-entry lengths), checked."""
    m = int(num_scan_inputs)
    n = len(args) - 1 - m
    if m < 1 or n < 0:
        raise SchemaError(f"Scan8: num_scan_inputs={m} but the op has {len(args) - 1} inputs")
    values = [np.asarray(a) for a in args[1:]]
    for i, v in enumerate(values):
        if v.ndim < (2 if i >= n else 1):
            what = f"scan input {i - n}" if i >= n else f"state {i}"
            raise ShapeError(f"Scan8: {what} has rank {v.ndim}; it needs a batch axis 0"
                             + (" and a sequence axis 1" if i >= n else ""))  # fmt: skip
    batches = {v.shape[0] for v in values}
    if len(batches) > 1:
        raise ShapeError(f"Scan8: the inputs' batch sizes (axis 0) differ: {sorted(batches)}")
    longest = {v.shape[1] for v in values[n:]}
    if len(longest) > 1:
        raise ShapeError(f"Scan8: the scan inputs' lengths (axis 1) differ: {sorted(longest)}")
    batch, steps = batches.pop(), longest.pop()
    if args[0] is None:
        return n, m, batch, [steps] * batch
    lens = np.asarray(args[0]).reshape(-1)
    if lens.dtype.kind not in "iu" or lens.shape != (batch,):
        raise ShapeError(
            f"Scan8: sequence_lens must be {batch} integers (one per batch entry), got "
            f"{lens.dtype}{list(lens.shape)}"
        )
    if lens.min(initial=0) < 0 or lens.max(initial=0) > steps:
        raise ShapeError(f"Scan8: sequence_lens {lens.tolist()} must lie in [0, {steps}]")
    return n, m, batch, [int(v) for v in lens]


def _stack_padded(entries: list, steps: int) -> np.ndarray:
    """Each entry's rows (length, ...) padded with zeros to `steps` and stacked; an entry
    of length 0, whose row shape the body never showed, takes the others'."""
    arrays = [np.asarray(e) for e in entries]
    ran = next((a for a in arrays if len(a)), arrays[0])
    return np.stack([_padded(a if len(a) else ran[:0], steps) for a in arrays])


def _padded(rows: Any, steps: int) -> np.ndarray:
    """Rows (length, ...) padded with zeros to (steps, ...)."""
    rows = np.asarray(rows)
    if rows.shape[0] == steps:
        return rows
    out = np.zeros((steps, *rows.shape[1:]), rows.dtype)
    out[: rows.shape[0]] = rows
    return out


def _stacked(rows: list, like: Any) -> np.ndarray:
    """Per-entry gradients stacked on the batch axis; zeros where there are none (integer
    inputs, or an empty batch)."""
    if not rows or any(r is None for r in rows):
        return np.zeros_like(np.asarray(like))
    return np.stack([np.asarray(r) for r in rows])


def _entry(values: tuple, n: int, b: int, length: int) -> list:
    """Batch entry b's states and its first `length` steps of each scan input."""
    return [np.asarray(s)[b] for s in values[:n]] + [np.asarray(x)[b, :length] for x in values[n:]]


def _entry_attrs(attrs: dict, m: int) -> dict:
    return {"num_scan_inputs": m, "scan_input_directions": attrs.get("directions")}


@kernel("Scan8")
def scan8_cpu(*args, body, scope, output_mask, **attrs):
    n, m, batch, lens = _layout(args, body, attrs["num_scan_inputs"])
    values = args[1:]
    steps = np.asarray(values[n]).shape[1]
    per_entry = []
    for b in range(batch):
        entry = _entry(values, n, b, lens[b])
        per_entry.append(scan_cpu(*entry, body=body, scope=scope, output_mask=output_mask,
                                  **_entry_attrs(attrs, m)))  # fmt: skip
    k = len(output_mask) - n
    if not batch:  # nothing ran: states as given, scan outputs shaped as the body declares
        outs = []
        for j in range(k):
            dtype, shape = empty_scan_output(body, n + j)
            outs.append(np.empty((0, steps, *shape), dtype))
        return (*(np.asarray(s) for s in values[:n]), *outs)
    finals = [np.stack([e[i] for e in per_entry]) for i in range(n)]
    outs = [_stack_padded([e[n + j] for e in per_entry], steps) for j in range(k)]
    return (*finals, *outs)


@gradient("Scan8", captures=True)
def scan8_grad(op, g_out, g_in):
    """Gradients of the initial states, the scan inputs and the captured blobs (none for
    sequence_lens)."""
    attrs = copy_attrs(op)
    n = len(op.input) - 1 - int(attrs["num_scan_inputs"])
    k = len(attrs["body"].external_output) - n
    return scan_gradient_ops(op, g_out, g_in, attrs, n, k, lead=1)


@kernel("Scan8Gradient")
def scan8_gradient_cpu(*args, body, wrt, scope, output_mask, **attrs):
    m = int(attrs["num_scan_inputs"])
    n = len(body.external_input) - m
    k = len(body.external_output) - n
    if n < 0 or k < 0 or len(args) != 1 + 2 * n + m + k:
        raise SchemaError(
            f"Scan8Gradient: got {len(args)} inputs, expected {1 + 2 * n + m + k} "
            "(sequence_lens, states, scan inputs, their final and output gradients)"
        )
    forward = args[: 1 + n + m]
    _, _, batch, lens = _layout(forward, body, m)
    values, d_final, dys = forward[1:], args[1 + n + m : 1 + 2 * n + m], args[1 + 2 * n + m :]
    steps = np.asarray(values[n]).shape[1]
    wrt = list(wrt or [])
    per_entry = []
    for b in range(batch):
        entry = _entry(values, n, b, lens[b])
        entry += [None if d is None else np.asarray(d)[b] for d in d_final]
        entry += [None if d is None else np.asarray(d)[b, : lens[b]] for d in dys]
        per_entry.append(scan_gradient_cpu(*entry, body=body, wrt=wrt, scope=scope,
                                           output_mask=(True,) * (n + m + len(wrt)),
                                           **_entry_attrs(attrs, m)))  # fmt: skip
    results = []
    for i, value in enumerate(values):  # states, then scan inputs (padded back to `steps`)
        rows = [e[i] for e in per_entry]
        if i >= n:
            rows = [None if r is None else _padded(r, steps) for r in rows]
        results.append(_stacked(rows, value))
    for c, name in enumerate(wrt):  # captured blobs: summed over the batch
        parts = [e[n + m + c] for e in per_entry if e[n + m + c] is not None]
        results.append(sum(parts[1:], parts[0]) if parts else np.zeros_like(scope[name]))
    return tuple(r if keep else None for r, keep in zip(results, output_mask))
