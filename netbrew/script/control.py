"""Lowering `if` on a tensor into If, and `for`/`while` into Loop.

If: each branch is lowered into a subnet of its own (no formal inputs; it reads outer
blobs by name). The If's outputs are the variables either branch assigns that are defined
after both, or, for `if c: return a` / `else: return b`, the returned values. A variable
whose type (kind, dtype, rank) differs between the branches is an error naming it.

Loop: the body becomes a subnet `body(iter_num, cond, v_1..v_N) -> (cond, v_1..v_N,
scan_1..scan_K)` as ONNX defines it. The loop-carried v_i are the variables the body
assigns that are defined before the loop; the scan outputs are the lists the body appends
to (one value per iteration), stacked after the loop. `if c: break` at the top level of
the body folds into the Loop's condition: the statements after it run under If(not c),
and the body's cond output is not c (and, for `while`, the loop test).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

import numpy as np

from netbrew.netdef.args import set_args
from netbrew.netdef.tensor import data_type_of
from netbrew.nn._dispatch import call
from netbrew.nn._tracer import TracedValue
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef, TensorShape
from netbrew.script.expressions import Undefined, as_bool, binary
from netbrew.script.source import BOOL, INT
from netbrew.script.values import (
    TensorList,
    describe,
    is_runtime,
    kind_of,
    materialize,
    signature,
    with_kind,
)

if TYPE_CHECKING:
    from netbrew.script.interpreter import Interpreter


def returns(stmts: list[ast.stmt]) -> bool:
    """Whether the block always ends in a return."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return):
        return True
    return isinstance(last, ast.If) and returns(last.body) and returns(last.orelse)


def assigned_names(stmts: list[ast.stmt]) -> list[str]:
    """Names the statements assign, in order of first assignment."""
    names: dict[str, None] = {}
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names[node.id] = None
    return list(names)


def appended_lists(stmts: list[ast.stmt]) -> list[str]:
    names: dict[str, None] = {}
    for stmt in stmts:
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "append"
                and isinstance(node.func.value, ast.Name)
            ):
                names[node.func.value.id] = None
    return list(names)


class Block:
    """A subnet under construction: the tracer records into `ops` while it is active."""

    def __init__(self, interp: Interpreter) -> None:
        self.tracer = interp.tracer
        self.ops: list[OperatorDef] = []
        self.saved: list[OperatorDef] | None = None

    def __enter__(self) -> Block:
        self.saved, self.tracer.ops = self.tracer.ops, self.ops
        return self

    def __exit__(self, *exc: Any) -> None:
        self.tracer.ops = self.saved

    def produced(self) -> set[str]:
        return {b for op in self.ops for b in op.output}

    def output(self, value: Any, hint: str) -> TracedValue:
        """`value` as a blob this block writes (Identity for numbers, inputs and outer
        blobs: ONNX wants subgraph outputs produced inside)."""
        with self:
            value = materialize(self.tracer, value, hint)
            if value.name in self.produced():
                return value
            with self.tracer.name_scope(hint):
                copy = call("Identity", [value])
            return with_kind(copy, kind_of(value))

    def net(self, name: str, inputs: list[TracedValue], outputs: list[TracedValue]) -> NetDef:
        net = NetDef(name=name)
        net.op.extend(self.ops)
        net.external_input.extend(v.name for v in inputs)
        net.external_output.extend(v.name for v in outputs)
        for v in [*inputs, *outputs]:  # types for exporters (onnxruntime wants them)
            net.value_info.append(
                TensorShape(
                    name=v.name,
                    data_type=data_type_of(v.dtype),
                    dims=list(v.shape),
                    unknown_dims=list(range(v.ndim)),
                )
            )
        return net


def _emit(interp: Interpreter, op_type: str, inputs: list, outs: list[tuple], **nets) -> list:
    """Appends a control-flow op; `outs` holds (hint, example, kind) per output."""
    tracer = interp.tracer
    values = [with_kind(TracedValue(tracer, tracer.fresh(h), ex), k) for h, ex, k in outs]
    op = OperatorDef(
        type=op_type,
        input=["" if v is None else v.name for v in inputs],
        output=[v.name for v in values],
    )
    set_args(op, nets)
    tracer.ops.append(op)
    return values


def _check_same(interp, node, name: str, where: tuple[str, str], a: Any, b: Any) -> None:
    if signature(a) != signature(b):
        raise interp.error(
            node,
            f"variable {name!r} changes type",
            f"it is a {describe(a)} {where[0]} and a {describe(b)} {where[1]}; give it one "
            "type (e.g. start from F.zeros(...) instead of a number)",
        )


def _same_scalar(a: Any, b: Any) -> bool:
    return not is_runtime(a) and not is_runtime(b) and type(a) is type(b) and a == b


# -- If ------------------------------------------------------------------------------------


def lower_if(interp, node, cond, then_body, else_body, returning: bool) -> Any:
    """Lowers `if cond:` on a runtime value; returns the returned value when `returning`."""
    tracer, env = interp.tracer, interp.env
    cond = as_bool(tracer, cond)
    lists = {n: len(v.items) for n, v in env.items() if isinstance(v, TensorList)}
    branches = []
    for body in (then_body, else_body):
        block, child = Block(interp), interp.fork(dict(env))
        with block:
            returned = child.block(body)
        grown = [n for n, k in lists.items() if len(env[n].items) != k]
        if grown:
            raise interp.error(
                node,
                f"append to list {grown[0]!r} under an if on a tensor",
                "compute the value with F.where and append it unconditionally",
            )
        branches.append((block, child.env, returned))
    where = ("in the then-branch", "in the else-branch")
    (tb, tenv, tret), (eb, eenv, eret) = branches
    if returning:
        tvals, evals = _flat(tret.value), _flat(eret.value)
        if len(tvals) != len(evals):
            raise interp.error(
                node,
                "returns of different lengths",
                f"one branch returns {len(tvals)} values, the other {len(evals)}",
            )
        names = [f"returned_{i}" if len(tvals) > 1 else "returned" for i in range(len(tvals))]
    else:
        names = []
        for name in assigned_names([*then_body, *else_body]):
            if name in tenv and name in eenv and not isinstance(tenv[name], Undefined):
                if tenv[name] is eenv[name] or _same_scalar(tenv[name], eenv[name]):
                    env[name] = tenv[name]
                    continue
                names.append(name)
            elif name in tenv or name in eenv:
                env[name] = Undefined(
                    f"it is assigned in only one branch of the if at line "
                    f"{node.lineno}; assign it before the if or in both"
                )
        tvals, evals = [tenv[n] for n in names], [eenv[n] for n in names]
    for name, a, b in zip(names, tvals, evals):
        for v in (a, b):
            if not (is_runtime(v) or kind_of(v)):
                raise interp.error(
                    node, f"variable {name!r}", f"a {describe(v)} cannot leave an if on a tensor"
                )
        _check_same(interp, node, name, where, a, b)
    touts = [tb.output(v, n) for n, v in zip(names, tvals)]
    eouts = [eb.output(v, n) for n, v in zip(names, evals)]
    results = _emit(
        interp,
        "If",
        [cond],
        [(n, v.value, kind_of(v)) for n, v in zip(names, touts)],
        then_branch=tb.net("then", [], touts),
        else_branch=eb.net("else", [], eouts),
    )
    if returning:
        if isinstance(tret.value, tuple):
            return tuple(results)
        return results[0] if results else None
    env.update(zip(names, results))
    return None


def _flat(value: Any) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, tuple) else [value]


# -- Loop ----------------------------------------------------------------------------------


def _split_break(interp, body: list[ast.stmt]):
    """(before, the `if c: break` statement or None, after)."""
    for k, stmt in enumerate(body):
        breaks = [n for n in ast.walk(stmt) if isinstance(n, ast.Break)]
        loops = [n for n in ast.walk(stmt) if isinstance(n, (ast.For, ast.While))]
        if not breaks or loops and isinstance(stmt, (ast.For, ast.While)):
            continue
        if isinstance(stmt, ast.If) and stmt.body and isinstance(stmt.body[-1], ast.Break):
            if len(stmt.body) == 1 and not stmt.orelse and not loops:
                rest = body[k + 1 :]
                if any(isinstance(n, ast.Break) for s in rest for n in ast.walk(s)):
                    raise interp.error(
                        rest[0],
                        "a second break",
                        "combine the conditions into one `if a or b: break`",
                    )
                return body[:k], stmt, rest
        raise interp.error(
            breaks[0],
            "break here",
            "write `if cond: break` alone, at the top level of the loop body",
        )
    return body, None, []


def _is_zero(value: Any) -> bool:
    return not is_runtime(value) and value == 0


def lower_loop(interp, node: ast.For | ast.While) -> None:
    tracer, env = interp.tracer, interp.env
    if isinstance(node, ast.For):
        if not isinstance(node.target, ast.Name) or not 1 <= len(node.iter.args) <= 2:
            raise interp.error(
                node,
                "for loop over range",
                "write `for i in range(n)` or `for i in range(start, stop)`",
            )
        bounds = [interp.eval(a) for a in node.iter.args]
        start, stop = (0, bounds[0]) if len(bounds) == 1 else bounds
        with tracer.name_scope("trip_count"):
            trip = stop if _is_zero(start) else binary(lambda a, b: a - b, stop, start)
        if not is_runtime(trip):
            trip = max(int(trip), 0)
        m, cond0 = materialize(tracer, trip, "trip_count"), None
        m = with_kind(call("Cast", [m], to="INT64"), INT) if m.dtype != np.int64 else m
        counter = node.target.id
    else:
        test = interp.eval(node.test)
        if not is_runtime(test) and not test:
            return
        m, counter, start = None, None, 0
        cond0 = as_bool(tracer, test) if is_runtime(test) else None
    before, brk, after = _split_break(interp, node.body)
    assigned = assigned_names(node.body)
    carried = [n for n in assigned if n in env and not isinstance(env[n], Undefined)]
    defined = counter in env and not isinstance(env[counter], Undefined)  # (None: a while)
    if defined and counter not in carried:  # Python leaves it at its last value
        carried.append(counter)
    for name in carried:
        if isinstance(env[name], TensorList):
            raise interp.error(node, f"list {name!r} assigned in a loop", "append to it instead")
        if not (is_runtime(env[name]) or kind_of(env[name])):
            raise interp.error(
                node, f"variable {name!r}", f"a {describe(env[name])} cannot be carried by a loop"
            )
    scans = [n for n in appended_lists(node.body) if isinstance(env.get(n), TensorList)]
    for name in scans:
        if env[name].items or env[name].stacked is not None:
            raise interp.error(
                node,
                f"list {name!r}",
                "a list a loop appends to must start empty (`outs = []`) right before the loop",
            )
    initial = [materialize(tracer, env[n], n) for n in carried]
    block = Block(interp)
    with block:
        iter_in = with_kind(
            TracedValue(tracer, tracer.fresh(counter or "iter"), np.array(0, np.int64)), INT
        )
        cond_in = with_kind(TracedValue(tracer, tracer.fresh("cond"), np.array(True)), BOOL)
        carried_in = [
            with_kind(TracedValue(tracer, tracer.fresh(n), v.value), kind_of(v))
            for n, v in zip(carried, initial)
        ]
        inner = dict(env)
        inner.update(zip(carried, carried_in))
        for name in scans:
            inner[name] = TensorList()
        if counter is not None:
            with tracer.name_scope(counter):
                inner[counter] = (
                    iter_in if _is_zero(start) else binary(lambda a, b: a + b, iter_in, start)
                )
        child = interp.fork(inner)
        child.block(before)
        cond_out = None
        if brk is not None:
            with tracer.name_scope("stop"):
                stop = as_bool(tracer, child.eval(brk.test))
            if after:
                lower_if(child, brk, call("Not", [stop]), after, [], False)
            with tracer.name_scope("cond"):
                cond_out = with_kind(call("Not", [stop]), BOOL)
        if isinstance(node, ast.While) and cond0 is not None:
            with tracer.name_scope("cond"):
                test = as_bool(tracer, child.eval(node.test))
                cond_out = (
                    test if cond_out is None else with_kind(call("And", [cond_out, test]), BOOL)
                )
    outs = []
    for name, init in zip(carried, initial):
        value = child.env.get(name)
        if isinstance(value, Undefined) or value is None:
            raise interp.error(node, f"variable {name!r}", "it is undefined at the end of the body")
        _check_same(interp, node, name, ("before the loop", "after an iteration"), init, value)
        outs.append(block.output(value, name))
    scan_outs = []
    for name in scans:
        items = child.env[name].items
        if len(items) != 1:
            raise interp.error(
                node,
                f"list {name!r}",
                "append exactly once per iteration, at the top level of the loop body",
            )
        scan_outs.append(block.output(items[0], name))
    cond_blob = block.output(cond_in if cond_out is None else cond_out, "cond")
    body = block.net("body", [iter_in, cond_in, *carried_in], [cond_blob, *outs, *scan_outs])
    specs = [(n, v.value, kind_of(v)) for n, v in zip(carried, outs)]
    specs += [(n, np.stack([v.value]), "tensor") for n, v in zip(scans, scan_outs)]
    results = _emit(interp, "Loop", [m, cond0, *initial], specs, body=body)
    env.update(zip(carried, results))
    for name, value in zip(scans, results[len(carried) :]):
        env[name] = TensorList(stacked=value)
    if counter is not None and not defined:
        env[counter] = Undefined(
            f"it is the counter of the loop at line {node.lineno}; assign it before the "
            "loop to use its last value after"
        )
    for name in assigned:
        if name not in carried and name in child.env:
            env[name] = Undefined(
                f"it is first assigned inside the loop at line {node.lineno}; "
                "assign it before the loop to use it after"
            )
