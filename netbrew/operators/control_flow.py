"""If, Loop and Scan: ops that run subgraphs (NetDef arguments) over the enclosing scope.

A subgraph's `external_input` lists its formal inputs in order and `external_output` its
outputs; its ops may also read blobs of the enclosing scope by name (ONNX outer-scope
references). `run_subgraph` binds the formal inputs in a fresh local dict and runs the
subgraph on `ChainMap(local, scope)`: writes land in the local dict, reads fall through
to the outer scope, and nested control flow sees the chain as its own scope.

Their gradients (IfGradient, LoopGradient, ScanGradient) are in control_flow_grad.py.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netbrew.errors import BlobNotFoundError, SchemaError, ShapeError
from netbrew.operators.schema import REQUIRED, kernel, schema
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


def loop_scan_count(body: NetDef, n: int) -> int:
    """The number of scan outputs of a Loop body carrying `n` values; checks its arity."""
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
    return k


def loop_steps(
    m: Any, cond: Any, v_initial: Sequence[Any], body: NetDef, scope: Mapping[str, Any]
) -> Iterator[tuple[np.ndarray, np.ndarray, list, list]]:
    """Runs Loop's iterations, yielding (iter_num, cond, carried values, body outputs) for
    each: the body's inputs and outputs, which LoopGradient replays backwards."""
    n = len(v_initial)
    trip = None if m is None else int(_scalar(m, "M", "Loop"))
    cond_value = np.array(True) if cond is None else np.asarray(cond)
    keep_going = bool(_scalar(cond_value, "cond", "Loop"))
    carried, i = list(v_initial), 0
    while keep_going and (trip is None or i < trip):
        iter_num = np.array(i, np.int64)
        outs = run_subgraph(body, [iter_num, cond_value, *carried], scope, "Loop body")
        yield iter_num, cond_value, carried, outs
        cond_value = np.asarray(outs[0])
        keep_going = bool(_scalar(cond_value, "cond (body output 0)", "Loop"))
        carried = outs[1 : 1 + n]
        i += 1


@kernel("Loop")
def loop_cpu(m, cond, *v_initial, body, scope, output_mask):
    n = len(v_initial)
    k = loop_scan_count(body, n)
    _count_check(len(output_mask), n + k, "Loop body")
    carried, scans = list(v_initial), [[] for _ in range(k)]
    for _, _, _, outs in loop_steps(m, cond, v_initial, body, scope):
        carried = outs[1 : 1 + n]
        for j in range(k):
            scans[j].append(outs[1 + n + j])
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


@dataclass(frozen=True)
class ScanPlan:
    """Scan's slot counts (n states, m scan inputs, k scan outputs) and per-slot axes and
    directions, checked against its body."""

    n: int
    m: int
    k: int
    in_axes: list[int]
    in_dirs: list[int]
    out_axes: list[int]
    out_dirs: list[int]


def scan_plan(n_inputs: int, n_outputs: int, body: NetDef, attrs: Mapping[str, Any]) -> ScanPlan:
    """The plan of a Scan with `n_inputs` inputs and `n_outputs` listed outputs; `attrs`
    holds num_scan_inputs and, when set, scan_*_axes and scan_*_directions."""
    m = int(attrs["num_scan_inputs"])
    n = n_inputs - m
    if m < 1 or n < 0:
        raise SchemaError(f"Scan: num_scan_inputs={m} but the op has {n_inputs} inputs")
    k = len(body.external_output) - n
    if k < 0:
        raise SchemaError(
            f"Scan body yields {len(body.external_output)} outputs, expected at least {n}"
        )
    _count_check(n_outputs, n + k, "Scan body")
    return ScanPlan(
        n,
        m,
        k,
        _per_slot(attrs.get("scan_input_axes"), m, "scan_input_axes"),
        _per_slot(attrs.get("scan_input_directions"), m, "scan_input_directions"),
        _per_slot(attrs.get("scan_output_axes"), k, "scan_output_axes"),
        _per_slot(attrs.get("scan_output_directions"), k, "scan_output_directions"),
    )


def scan_steps(x: Any, axis: int, direction: int, what: str) -> np.ndarray:
    """`x` with its scanned axis moved first and, for direction 1, reversed: row t is what
    step t sees (of a scan input), or got (of a scan output's gradient)."""
    x = np.asarray(x)
    if x.ndim == 0:
        raise ShapeError(f"Scan: {what} is a scalar; it needs an axis to scan")
    x = np.moveaxis(x, _axis(axis, x.ndim, what), 0)
    return x[::-1] if direction else x


def unscan(rows: np.ndarray, axis: int, direction: int, what: str) -> np.ndarray:
    """The inverse of scan_steps: per-step rows (stacked on axis 0) laid on `axis`."""
    if direction:
        rows = rows[::-1]
    return np.ascontiguousarray(np.moveaxis(rows, 0, _axis(axis, rows.ndim, what)))


def scan_inputs(args: Sequence[Any], plan: ScanPlan) -> tuple[list[np.ndarray], int]:
    """Each scan input as scan_steps rows, and the common number of steps."""
    sequences = [
        scan_steps(x, axis, direction, f"scan input {j}")
        for j, (x, axis, direction) in enumerate(zip(args[plan.n :], plan.in_axes, plan.in_dirs))
    ]
    lengths = {len(s) for s in sequences}
    if len(lengths) > 1:
        raise ShapeError(f"Scan: scan inputs differ in length along their axes: {sorted(lengths)}")
    return sequences, lengths.pop()


@kernel("Scan")
def scan_cpu(*args, body, scope, output_mask, **attrs):
    plan = scan_plan(len(args), len(output_mask), body, attrs)
    n, k = plan.n, plan.k
    sequences, length = scan_inputs(args, plan)
    states, collected = list(args[:n]), [[] for _ in range(k)]
    for t in range(length):
        outs = run_subgraph(body, [*states, *(s[t] for s in sequences)], scope, "Scan body")
        states = outs[:n]
        for j in range(k):
            collected[j].append(outs[n + j])
    results = list(states)
    for j, (values, axis, direction) in enumerate(zip(collected, plan.out_axes, plan.out_dirs)):
        if values:
            y = stack(values, f"Scan output {j}")
        else:
            dtype, shape = empty_scan_output(body, n + j)
            y = np.empty((0, *shape), dtype)
        results.append(unscan(y, axis, direction, f"scan output {j}"))
    return tuple(results)
