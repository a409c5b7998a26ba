"""If, Loop and Scan: ops that run subgraphs (NetDef arguments) over the enclosing scope.

A subgraph's `external_input` lists its formal inputs in order and `external_output` its
outputs; its ops may also read blobs of the enclosing scope by name (ONNX outer-scope
references). `run_subgraph` binds the formal inputs in a fresh local dict and runs the
subgraph on `ChainMap(local, scope)`: writes land in the local dict, reads fall through
to the outer scope, and nested control flow sees the chain as its own scope.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from netbrew.errors import BlobNotFoundError, SchemaError, ShapeError
from netbrew.operators.schema import REQUIRED, gradient_not_written, kernel, schema
from netbrew.proto.netbrew_pb2 import NetDef

_RUNTIMES: dict[int, tuple[NetDef, Any]] = {}
_MAX_RUNTIMES = 1024


def subgraph_runtime(net: NetDef) -> Any:
    """The created runtime of `net`, cached per NetDef object (loops run bodies often)."""
    hit = _RUNTIMES.get(id(net))
    if hit is not None and hit[0] is net:
        return hit[1]
    from netbrew.executor.runtime import create_runtime  # the executor imports operators

    runtime = create_runtime(net)
    if len(_RUNTIMES) >= _MAX_RUNTIMES:
        _RUNTIMES.pop(next(iter(_RUNTIMES)))
    _RUNTIMES[id(net)] = (net, runtime)  # holding `net` keeps its id from being reused
    return runtime


def run_subgraph(
    net: NetDef, inputs: Sequence[Any], scope: Mapping[str, Any], what: str
) -> list[Any]:
    """Runs `net` with its formal inputs bound to `inputs`; returns its outputs in order."""
    formal = list(net.external_input)
    if len(formal) != len(inputs):
        raise SchemaError(
            f"{what} takes {len(formal)} inputs ({', '.join(formal) or 'none'}), "
            f"the op passes {len(inputs)}"
        )
    maps = scope.maps if isinstance(scope, ChainMap) else [scope]
    blobs = ChainMap(dict(zip(formal, inputs)), *maps)
    subgraph_runtime(net).run(blobs)
    try:
        return [blobs[name] for name in net.external_output]
    except KeyError:
        missing = next(n for n in net.external_output if n not in blobs)
        raise BlobNotFoundError(f"{what}: output {missing!r} was not produced") from None


def empty_scan_output(net: NetDef, index: int) -> tuple[np.dtype, tuple[int, ...]]:
    """(dtype, element shape) of `net`'s output `index` from its value_info, for
    zero-iteration scan outputs; unknown dims count as 0, an unknown type as float32."""
    from netbrew.netdef.tensor import dtype_of

    name = net.external_output[index]
    info = next((v for v in net.value_info if v.name == name), None)
    if info is None or info.unknown_shape:
        return np.dtype(np.float32), (0,)
    try:
        dtype = dtype_of(info.data_type)
    except ValueError:
        dtype = np.dtype(np.float32)
    unknown = set(info.unknown_dims)
    return dtype, tuple(0 if i in unknown else int(d) for i, d in enumerate(info.dims))


def stack(values: list[np.ndarray], what: str) -> np.ndarray:
    """Stacks per-iteration values along a new axis 0; they must agree in shape."""
    arrays = [np.asarray(v) for v in values]
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise ShapeError(f"{what} changes shape between iterations: {sorted(shapes)}")
    return np.stack(arrays)


def _scalar(x: Any, slot: str, op: str) -> Any:
    arr = np.asarray(x)
    if arr.size != 1:
        raise ShapeError(f"{op}: input {slot!r} must hold one element, got shape {list(arr.shape)}")
    return arr.reshape(-1)[0]


def _count_check(n_out: int, have: int, what: str) -> None:
    if n_out > have:
        raise SchemaError(f"{what} yields {have} values, the op lists {n_out} outputs")


# ---------------------------------------------------------------------------------- If
schema(
    "If",
    inputs=["cond"],
    outputs=["outputs*"],
    attrs={"then_branch": REQUIRED, "else_branch": REQUIRED},
    output_mask=True,
    wants_scope=True,
    doc="outputs = then_branch() if cond else else_branch(); cond: one-element bool tensor; "
    "the branches take no inputs, read outer-scope blobs, and may yield values of "
    "different shapes (tensors, sequences or optionals)",
)


@kernel("If")
def if_cpu(cond, *, then_branch, else_branch, scope, output_mask):
    take = bool(_scalar(cond, "cond", "If"))
    branch = then_branch if take else else_branch
    what = "If " + ("then_branch" if take else "else_branch")
    outputs = run_subgraph(branch, [], scope, what)
    _count_check(len(output_mask), len(outputs), what)
    return tuple(outputs)


# -------------------------------------------------------------------------------- Loop
schema(
    "Loop",
    inputs=["M?", "cond?", "v_initial*0"],
    outputs=["v_final_and_scan_outputs*0"],
    attrs={"body": REQUIRED},
    output_mask=True,
    wants_scope=True,
    doc="body(iter_num: int64 scalar, cond: bool, v_1..v_N) -> (cond, v_1..v_N, "
    "scan_1..scan_K); runs while iter_num < M (when given) and cond (initially the cond "
    "input, or true; then the body's cond output); outputs the final v_1..v_N, then each "
    "scan_k stacked over iterations on a new axis 0",
)


@kernel("Loop")
def loop_cpu(m, cond, *v_initial, body, scope, output_mask):
    n = len(v_initial)
    if len(body.external_input) != n + 2:
        raise SchemaError(
            f"Loop body takes {len(body.external_input)} inputs, expected {n + 2} "
            f"(iteration number, cond and the {n} loop-carried values)"
        )
    k = len(body.external_output) - 1 - n
    if k < 0:
        raise SchemaError(
            f"Loop body yields {len(body.external_output)} outputs, expected at least {n + 1} "
            f"(cond and the {n} loop-carried values)"
        )
    _count_check(len(output_mask), n + k, "Loop body")
    trip = None if m is None else int(_scalar(m, "M", "Loop"))
    cond_value = np.array(True) if cond is None else np.asarray(cond)
    keep_going = bool(_scalar(cond_value, "cond", "Loop"))
    carried, scans = list(v_initial), [[] for _ in range(k)]
    i = 0
    while keep_going and (trip is None or i < trip):
        outs = run_subgraph(body, [np.array(i, np.int64), cond_value, *carried], scope, "Loop body")
        cond_value = np.asarray(outs[0])
        keep_going = bool(_scalar(cond_value, "cond (body output 0)", "Loop"))
        carried = outs[1 : 1 + n]
        for j in range(k):
            scans[j].append(outs[1 + n + j])
        i += 1
    results = list(carried)
    for j, values in enumerate(scans):
        if values:
            results.append(stack(values, f"Loop scan output {j}"))
        else:
            dtype, shape = empty_scan_output(body, 1 + n + j)
            results.append(np.empty((0, *shape), dtype))
    return tuple(results)


# -------------------------------------------------------------------------------- Scan
schema(
    "Scan",
    inputs=["initial_state_and_scan_inputs*"],
    outputs=["final_state_and_scan_outputs*"],
    attrs={
        "body": REQUIRED,
        "num_scan_inputs": REQUIRED,
        "scan_input_axes": None,
        "scan_input_directions": None,
        "scan_output_axes": None,
        "scan_output_directions": None,
    },
    output_mask=True,
    wants_scope=True,
    doc="body(s_1..s_N, x_1[t]..x_M[t]) -> (s_1..s_N, y_1..y_K) for t along each scan "
    "input's axis (scan_input_axes, default 0; direction 1 = backward); outputs the final "
    "states, then each y_k stacked on scan_output_axes (default 0; direction 1 = prepend)",
)


def _per_slot(values, count, name, default=0):
    values = [default] * count if values is None else list(values)
    if len(values) != count:
        raise SchemaError(f"Scan: {name} has {len(values)} entries, expected {count}")
    return values


def _axis(axis: int, rank: int, what: str) -> int:
    if not -rank <= axis < rank:
        raise SchemaError(f"Scan: {what} axis {axis} is out of range for rank {rank}")
    return axis % rank


@kernel("Scan")
def scan_cpu(
    *args,
    body,
    num_scan_inputs,
    scan_input_axes,
    scan_input_directions,
    scan_output_axes,
    scan_output_directions,
    scope,
    output_mask,
):
    m = int(num_scan_inputs)
    n = len(args) - m
    if m < 1 or n < 0:
        raise SchemaError(f"Scan: num_scan_inputs={m} but the op has {len(args)} inputs")
    k = len(body.external_output) - n
    if k < 0:
        raise SchemaError(
            f"Scan body yields {len(body.external_output)} outputs, expected at least {n}"
        )
    _count_check(len(output_mask), n + k, "Scan body")
    in_axes = _per_slot(scan_input_axes, m, "scan_input_axes")
    in_dirs = _per_slot(scan_input_directions, m, "scan_input_directions")
    out_axes = _per_slot(scan_output_axes, k, "scan_output_axes")
    out_dirs = _per_slot(scan_output_directions, k, "scan_output_directions")
    sequences = []
    for j, (x, axis, direction) in enumerate(zip(args[n:], in_axes, in_dirs)):
        x = np.asarray(x)
        if x.ndim == 0:
            raise ShapeError(f"Scan: scan input {j} is a scalar; it needs an axis to scan")
        x = np.moveaxis(x, _axis(axis, x.ndim, f"scan input {j}"), 0)
        sequences.append(x[::-1] if direction else x)
    lengths = {len(s) for s in sequences}
    if len(lengths) > 1:
        raise ShapeError(f"Scan: scan inputs differ in length along their axes: {sorted(lengths)}")
    states, collected = list(args[:n]), [[] for _ in range(k)]
    for t in range(lengths.pop()):
        outs = run_subgraph(body, [*states, *(s[t] for s in sequences)], scope, "Scan body")
        states = outs[:n]
        for j in range(k):
            collected[j].append(outs[n + j])
    results = list(states)
    for j, (values, axis, direction) in enumerate(zip(collected, out_axes, out_dirs)):
        if values:
            y = stack(values, f"Scan output {j}")
        else:
            dtype, shape = empty_scan_output(body, n + j)
            y = np.empty((0, *shape), dtype)
        if direction:
            y = y[::-1]
        y = np.moveaxis(y, 0, _axis(axis, y.ndim, f"scan output {j}"))
        results.append(np.ascontiguousarray(y))
    return tuple(results)


for _op in ("If", "Loop", "Scan"):
    gradient_not_written(_op, "control flow: gradients through subgraphs are not built")
