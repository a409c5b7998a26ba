"""Gradients of If, Loop and Scan: their subgraphs differentiated by netbrew's own autodiff.

    If(cond) -> y...              backward: IfGradient(cond, dy...) -> d captured...
    Loop(M, cond, v...) -> (v_final..., scan...)
        backward: LoopGradient(M, cond, v..., dv_final..., dscan...) -> (dv..., d captured...)
    Scan(s..., x...) -> (s_final..., y...)
        backward: ScanGradient(s..., x..., ds_final..., dy...) -> (ds..., dx..., d captured...)

"d captured" are the gradients of the outer-scope blobs that the subgraphs read by name
(netbrew.netdef.autodiff.captured_reads); the makers are registered with captures=True,
so autodiff lists those blobs in g_in after the declared inputs. A gradient op reruns its
forward (the taken branch; the iterations, recording what each one was given), then runs
the body's backward subgraph (subgraph_grad.vjp_net, which recomputes the body's forward
ops) once per branch or iteration, last iteration first: the gradient of each
loop-carried value flows to the iteration before, those of scan inputs are stacked as the
inputs were sliced, and those of captured blobs are summed over iterations.

Only float values get gradients: M, cond, iteration numbers, integer counters and integer
captured blobs get zeros where a gradient is asked for. An output without a gradient
(None in g_out) counts as zero.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.control_flow import (
    ScanPlan,
    _scalar,
    loop_scan_count,
    loop_steps,
    run_subgraph,
    scan_inputs,
    scan_plan,
    scan_steps,
    unscan,
)
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.schema import REQUIRED, SCHEMAS, gradient, kernel, schema
from netbrew.operators.subgraph_grad import (
    Vjp,
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


def _check_outputs(output_mask: tuple, want: int, op: str) -> None:
    if len(output_mask) != want:
        raise SchemaError(f"{op}: the op lists {len(output_mask)} outputs, expected {want}")


# ---------------------------------------------------------------------------------- If
schema(
    "IfGradient",
    inputs=["cond", "dY*0"],
    outputs=["dX*"],
    attrs={"then_branch": REQUIRED, "else_branch": REQUIRED, "seeded": REQUIRED, "wrt": REQUIRED},
    onnx=False,
    output_mask=True,
    wants_scope=True,
    doc="dX_j = d(sum_k <y_k, dY_k>)/d wrt_j through the branch that cond takes, y_k the "
    "branch's output seeded[k]; wrt: the outer-scope blobs the branches read (zeros for "
    "those the taken branch does not use, and for non-float ones)",
)


@gradient("If", captures=True)
def if_grad(op, g_out, g_in):
    """Gradients of the captured blobs through the taken branch (cond gets none)."""
    wanted = captured_wanted(op, g_in)
    seeded = [k for k, g in enumerate(g_out) if g]
    if not wanted or not seeded:
        return []
    attrs = copy_attrs(op)
    wrt = [blob for blob, _ in wanted]
    for branch in ("then_branch", "else_branch"):
        check_vjp(attrs[branch], seeded, wrt, f"If {branch}")
    inputs = [op.input[0], *(g_out[k] for k in seeded)]
    outputs = [g for _, g in wanted]
    return [op_def("IfGradient", inputs, outputs, **attrs, seeded=seeded, wrt=wrt)]


@kernel("IfGradient")
def if_gradient_cpu(cond, *dys, then_branch, else_branch, seeded, wrt, scope, output_mask):
    _check_outputs(output_mask, len(wrt), "IfGradient")
    if len(dys) != len(seeded):
        raise SchemaError(
            f"IfGradient: got {len(dys)} output gradients dY, 'seeded' lists {len(seeded)}"
        )
    take = bool(_scalar(cond, "cond", "IfGradient"))
    branch, what = (then_branch, "then_branch") if take else (else_branch, "else_branch")
    values = captured_values(wrt, scope, "IfGradient")
    floats = [blob for blob, v in zip(wrt, values) if is_float(v)]
    vjp = vjp_net(branch, list(seeded), floats, f"If {what}")
    got = vjp.unpack(run_subgraph(vjp.net, list(dys), scope, f"If {what} gradient"))
    grads = dict(zip(floats, got))
    return tuple(or_zeros(grads.get(blob), v) for blob, v in zip(wrt, values))


# ----------------------------------------------------------------- replaying iterations
def replay(
    vjp: Vjp,
    steps: Sequence[Sequence[Any]],
    carried: Sequence[int],
    d_final: Sequence[Any],
    step_dys: Callable[[int], list],
    scope: Mapping[str, Any],
    what: str,
) -> tuple[list[Any], list[list[Any]]]:
    """Runs a body's backward subgraph over the recorded iterations, last first.

    Args:
        vjp: the body's backward subgraph; its wrt slots start with the carried inputs.
        steps: per iteration, the body's formal inputs as the forward gave them.
        carried: indices (into the formal inputs) of the float loop-carried values, whose
            gradients the body's backward hands to the iteration before.
        d_final: gradients of the carried values after the last iteration.
        step_dys: iteration -> gradients of its other seeded outputs (scan outputs).

    Returns:
        The gradients of the carried values before the first iteration, and per iteration
        those of the other wrt slots (None where the backward subgraph has none).
    """
    d_carried, rest = list(d_final), [None] * len(steps)
    for t in reversed(range(len(steps))):
        inputs = list(steps[t])
        outs = run_subgraph(vjp.net, [*inputs, *d_carried, *step_dys(t)], scope, what)
        got = vjp.unpack(outs)
        d_carried = [or_zeros(g, inputs[i]) for i, g in zip(carried, got)]
        rest[t] = got[len(carried) :]
    return d_carried, rest


def _carried_floats(steps: Sequence[Sequence[Any]], first: int, final: Sequence[Any]) -> list:
    """Indices of the carried values that are floats at some iteration: a sequence that
    starts empty (SequenceEmpty) and fills with float tensors carries gradients too."""
    return [
        j
        for j, last in enumerate(final)
        if is_float(last) or any(is_float(step[first + j]) for step in steps)
    ]


def _rows(grad: Any, steps: int, what: str) -> np.ndarray:
    rows = np.asarray(grad)
    if rows.ndim == 0 or rows.shape[0] != steps:
        raise ShapeError(
            f"{what} has shape {list(rows.shape)}, expected {steps} rows (one per iteration)"
        )
    return rows


# -------------------------------------------------------------------------------- Loop
schema(
    "LoopGradient",
    inputs=["M?", "cond?", "v_initial_and_grads*0"],
    outputs=["dv_initial_and_captured*"],
    attrs={"body": REQUIRED, "wrt": None},
    onnx=False,
    output_mask=True,
    wants_scope=True,
    doc="inputs: M, cond, v_1..v_N as the Loop got them, then dv_final_1..N and dscan_1..K "
    "(omitted: zero); outputs: dv_1..dv_N, then d wrt_j for the outer-scope blobs wrt the "
    "body reads; reruns the loop, then the body's backward over the iterations in reverse",
)


@gradient("Loop", captures=True)
def loop_grad(op, g_out, g_in):
    """Gradients of the loop-carried initial values and the captured blobs."""
    wanted = captured_wanted(op, g_in)
    forward_in = [*op.input, *[""] * (2 - len(op.input))]  # M and cond may both be left off
    n = len(forward_in) - 2
    d_initial = padded(g_in, len(forward_in))[2 : 2 + n]
    if not wanted and not any(d_initial):
        return []
    body: NetDef = copy_attrs(op)["body"]
    k = loop_scan_count(body, n)
    g_out = padded(g_out, n + k)
    seeded = [1 + j for j in range(n)] + [1 + n + j for j in range(k) if g_out[n + j]]
    wrt = [blob for blob, _ in wanted]
    check_vjp(body, seeded, [*body.external_input[2:], *wrt], "Loop body")
    inputs = [*forward_in, *(g or "" for g in g_out)]
    outputs = [*(g or "" for g in d_initial), *(g for _, g in wanted)]
    return [op_def("LoopGradient", inputs, outputs, body=body, wrt=wrt)]


def _loop_record(m, cond, v_initial, body, scope) -> tuple[list[list], list]:
    """Reruns the loop: per iteration the body's formal inputs, and the final values."""
    steps, final = [], list(v_initial)
    for iter_num, cond_in, carried, outs in loop_steps(m, cond, v_initial, body, scope):
        steps.append([iter_num, cond_in, *carried])
        final = outs[1 : 1 + len(v_initial)]
    return steps, final


@kernel("LoopGradient")
def loop_gradient_cpu(m, cond, *rest, body, wrt, scope, output_mask):
    wrt = list(wrt or [])
    n = len(body.external_input) - 2
    k = loop_scan_count(body, n)
    if len(rest) != 2 * n + k:
        raise SchemaError(
            f"LoopGradient: got {len(rest) + 2} inputs, expected {2 * n + k + 2} (M, cond, "
            f"the {n} carried values, their {n} final gradients and {k} scan gradients)"
        )
    _check_outputs(output_mask, n + len(wrt), "LoopGradient")
    v_initial, dv_final, dscans = rest[:n], rest[n : 2 * n], rest[2 * n :]
    steps, final = _loop_record(m, cond, v_initial, body, scope)
    captured = captured_values(wrt, scope, "LoopGradient")
    floats = _carried_floats(steps, 2, final)
    scans = [j for j in range(k) if dscans[j] is not None]
    cap = [c for c, v in enumerate(captured) if is_float(v)]
    formal = list(body.external_input)
    vjp = vjp_net(
        body,
        [1 + j for j in floats] + [1 + n + j for j in scans],
        [formal[2 + j] for j in floats] + [wrt[c] for c in cap],
        "Loop body",
    )
    rows = [
        _rows(dscans[j], len(steps), f"LoopGradient: gradient of scan output {j}") for j in scans
    ]
    d_final = [or_zeros(dv_final[j], final[j]) for j in floats]
    carried = [2 + j for j in floats]
    d_init, per_step = replay(
        vjp, steps, carried, d_final, lambda t: [r[t] for r in rows], scope, "Loop body gradient"
    )
    d_cap = summed(per_step, 0, [captured[c] for c in cap], "LoopGradient")
    return (*scattered(floats, d_init, v_initial), *scattered(cap, d_cap, captured))


# -------------------------------------------------------------------------------- Scan
schema(
    "ScanGradient",
    inputs=["inputs_and_grads*"],
    outputs=["input_and_captured_grads*"],
    attrs={**SCHEMAS["Scan"].attrs, "wrt": None},  # the forward's, and the inputs wanted
    onnx=False,
    output_mask=True,
    wants_scope=True,
    doc="inputs: the Scan's s_1..s_N and x_1..x_M, then ds_final_1..N and dy_1..K (omitted: "
    "zero); outputs: ds_1..N, dx_1..M, then d wrt_j for the outer-scope blobs wrt the body "
    "reads; reruns the scan, then the body's backward over the steps in reverse; Scan's "
    "attributes",
)


@gradient("Scan", captures=True)
def scan_grad(op, g_out, g_in):
    """Gradients of the initial states, the scan inputs and the captured blobs."""
    attrs = copy_attrs(op)
    plan = scan_plan(len(op.input), len(op.output), attrs["body"], attrs)
    return scan_gradient_ops(op, g_out, g_in, attrs, plan.n, plan.k)


def scan_gradient_ops(op, g_out, g_in, attrs: dict, n: int, k: int, lead: int = 0) -> list:
    """The `<op.type>Gradient` op of a Scan-like op with n states and k scan outputs,
    whose first `lead` inputs (Scan8's sequence_lens) get no gradient: it reads the op's
    inputs and the outputs' gradients, and writes the gradients of the other inputs and
    of the captured blobs; none when none is wanted."""
    body: NetDef = attrs["body"]
    wanted = captured_wanted(op, g_in)
    declared = padded(g_in, len(op.input))[lead : len(op.input)]
    if not wanted and not any(declared):
        return []
    g_out = padded(g_out, n + k)
    seeded = [*range(n), *(n + j for j in range(k) if g_out[n + j])]
    wrt = [blob for blob, _ in wanted]
    check_vjp(body, seeded, [*body.external_input, *wrt], f"{op.type} body")
    inputs = [*op.input, *(g or "" for g in g_out)]
    outputs = [*(g or "" for g in declared), *(g for _, g in wanted)]
    return [op_def(f"{op.type}Gradient", inputs, outputs, **attrs, wrt=wrt)]


def _scan_record(args, plan, body, scope) -> tuple[list[list], list]:
    """Reruns the scan: per step the body's formal inputs, and the final states."""
    sequences, length = scan_inputs(args, plan)
    states, steps = list(args[: plan.n]), []
    for t in range(length):
        steps.append([*states, *(s[t] for s in sequences)])
        states = run_subgraph(body, steps[-1], scope, "Scan body")[: plan.n]
    return steps, states


def _scan_output_rows(grad: Any, plan: ScanPlan, j: int, steps: int) -> np.ndarray:
    """The gradient of scan output j as per-step rows (as the body yielded them)."""
    what = f"ScanGradient: gradient of scan output {j}"
    return _rows(scan_steps(grad, plan.out_axes[j], plan.out_dirs[j], what), steps, what)


def _scan_input_grads(plan, values, floats, per_step, steps) -> list[np.ndarray]:
    """The gradients of the float scan inputs `floats` (indices into `values`): the
    per-step ones (first in each of `per_step`) stacked and laid back on the input's axis."""
    grads = []
    for i, j in enumerate(floats):
        if not steps:
            grads.append(zeros_like(values[j]))
            continue
        rows = [or_zeros(got[i], steps[t][plan.n + j]) for t, got in enumerate(per_step)]
        stacked = np.stack([np.asarray(r) for r in rows])
        grads.append(unscan(stacked, plan.in_axes[j], plan.in_dirs[j], f"scan input {j}"))
    return grads


@kernel("ScanGradient")
def scan_gradient_cpu(*args, body, wrt, scope, output_mask, **attrs):
    wrt = list(wrt or [])
    m = int(attrs["num_scan_inputs"])
    n = len(body.external_input) - m
    k = len(body.external_output) - n
    if n < 0 or k < 0 or len(args) != 2 * n + m + k:
        raise SchemaError(
            f"ScanGradient: got {len(args)} inputs; a body of {len(body.external_input)} "
            f"inputs and {len(body.external_output)} outputs with num_scan_inputs={m} needs "
            f"{2 * n + m + k} (states, scan inputs, their final and output gradients)"
        )
    _check_outputs(output_mask, n + m + len(wrt), "ScanGradient")
    plan = scan_plan(n + m, n + k, body, attrs)
    forward, d_states, dys = args[: n + m], args[n + m : 2 * n + m], args[2 * n + m :]
    steps, final = _scan_record(forward, plan, body, scope)
    captured = captured_values(wrt, scope, "ScanGradient")
    states = _carried_floats(steps, 0, final)
    xs = [j for j in range(m) if is_float(forward[n + j])]
    outs = [j for j in range(k) if dys[j] is not None]
    cap = [c for c, v in enumerate(captured) if is_float(v)]
    formal = list(body.external_input)
    vjp = vjp_net(
        body,
        [*states, *(n + j for j in outs)],
        [*(formal[j] for j in states), *(formal[n + j] for j in xs), *(wrt[c] for c in cap)],
        "Scan body",
    )
    rows = [_scan_output_rows(dys[j], plan, j, len(steps)) for j in outs]
    d_final = [or_zeros(d_states[j], final[j]) for j in states]
    d_init, per_step = replay(
        vjp, steps, states, d_final, lambda t: [r[t] for r in rows], scope, "Scan body gradient"
    )
    dx = _scan_input_grads(plan, forward[n:], xs, per_step, steps)
    d_cap = summed(per_step, len(xs), [captured[c] for c in cap], "ScanGradient")
    return (
        *scattered(states, d_init, forward[:n]),
        *scattered(xs, dx, forward[n:]),
        *scattered(cap, d_cap, captured),
    )
