"""The gradient of FusedElementwise: its steps' own gradient makers, walked in reverse.

The maker unrolls the op into one op per step (netbrew.operators.fused_elementwise:
`plan_of`), with fresh names for the intermediate results, and runs the reverse walk
that autodiff runs on the unfused ops: each step's registered maker gets the gradient of
its result and writes the gradients of its inputs; a blob or step result read by several
steps (or twice by one: Mul(t, t)), or both an output and read by later steps (a DAG:
the LSTM cell's c), gets the sum of its partial gradients. Steps whose gradients read an
intermediate result (Relu, Sigmoid, Exp and Sqrt read their output, Mul and Div their
operands, Add its operands' shapes) get it recomputed by the step ops themselves, ahead of
the gradient ops, and only those: the step kernels give the fused op's values bit for bit.

An op written in place (output 0 is input 0's blob) has lost that input's value. The
maker of the step writing that output sees the in-place op it is (Add, Sub, Relu... read
only shapes or outputs and pass), and any gradient op that would read the input as
another step saw it is refused, as autodiff refuses the unfused ops whose in-place op
overwrites a blob an earlier one read.
"""

from __future__ import annotations

from collections import defaultdict

from netbrew.errors import SchemaError
from netbrew.netdef.net import op_def
from netbrew.operators.fused_elementwise import ABSENT, STEP, plan_of
from netbrew.operators.grad_util import tmp
from netbrew.operators.schema import GRADIENTS, gradient
from netbrew.proto.netbrew_pb2 import OperatorDef

Source = tuple[str, int]
"""Where a step's input comes from: ("input", k) for input k of the fused op, ("step", k)
for step k's result."""


@gradient("FusedElementwise", inplace_safe=True)
def fused_elementwise_grad(op, g_out, g_in):
    """Reverse walk over the steps; see the module docstring. `inplace_safe`: the maker
    itself refuses reads of an input the op overwrote (autodiff cannot tell such a read from
    a read of Y, the same blob name)."""
    plan = plan_of(op)
    steps = plan.steps
    out_of = {k: i for i, k in enumerate(plan.outputs)}
    base = next((g for g in g_out if g), f"{op.output[0]}_grad")  # scratch names derive from it
    # Steps read an input written over in place under a name that no blob has, so that a
    # gradient op reading it is caught below rather than reading Y.
    lost = {name: f"<{name} as read before {op.type} overwrote it>" for name in op.output}

    def result(k: int) -> str:
        return op.output[out_of[k]] if k in out_of else tmp(base, f"step{k}")

    def source_name(k: int, code: int) -> str:
        if code <= STEP:
            return result(STEP - code)
        if code == ABSENT:
            return ""
        name = op.input[code]
        return name if k in out_of and op.output[out_of[k]] == name else lost.get(name, name)

    step_ops = []
    for k, (step, codes, attrs) in enumerate(steps):
        ins = [source_name(k, c) for c in codes]
        while ins and not ins[-1]:  # trailing omitted inputs (Clip's bounds) are left off
            ins.pop()
        step_ops.append(op_def(step, ins, [result(k)], **attrs))

    # Which step results lead back to a wanted input: only those get gradients.
    leads: list[bool] = []
    for _, codes, _ in steps:
        leads.append(any((c <= STEP and leads[STEP - c]) or (c >= 0 and g_in[c]) for c in codes))

    partial: dict[Source, list[str]] = defaultdict(list)
    for i, k in enumerate(plan.outputs):
        if g_out[i]:
            partial[("step", k)].append(g_out[i])
    grad_ops: list[OperatorDef] = []
    for k in reversed(range(len(steps))):
        parts = partial.pop(("step", k), [])
        if not parts or not leads[k]:
            continue
        d_result = parts[0]
        if len(parts) > 1:
            d_result = tmp(base, f"step{k}_grad")
            grad_ops.append(op_def("Sum", parts, [d_result]))
        step, codes, _ = steps[k]
        sources: list[Source | None] = [
            ("step", STEP - c) if c <= STEP and leads[STEP - c] else
            ("input", c) if c >= 0 and g_in[c] else None
            for c in codes
        ]  # fmt: skip
        names = [None if s is None else tmp(base, f"step{k}_in{j}") for j, s in enumerate(sources)]
        maker = GRADIENTS[step]
        if not callable(maker):
            raise SchemaError(f"{op.type} step {k} ({step}) has no gradient maker: {maker}")
        try:
            made = maker(step_ops[k], [d_result], names[: len(step_ops[k].input)])
        except SchemaError as e:
            raise SchemaError(f"{op.type} step {k} ({step}): {e}") from e
        grad_ops += made
        written = {o for g in made for o in g.output}
        for source, name in zip(sources, names):
            if source is not None and name in written:  # makers skip Clip's bounds
                partial[source].append(name)

    renamed: dict[str, str] = {}
    for i, want in enumerate(g_in):
        parts = partial.get(("input", i), [])
        if not want or not parts:
            continue
        if len(parts) == 1:  # one partial: written under the wanted name directly
            renamed[parts[0]] = want
        else:
            grad_ops.append(op_def("Sum", parts, [want]))
    for g in grad_ops:
        g.input[:] = [renamed.get(b, b) for b in g.input]
        g.output[:] = [renamed.get(b, b) for b in g.output]

    ops = _recomputed(step_ops, grad_ops, set(out_of)) + grad_ops
    unreadable = set(lost.values())
    for g in ops:
        for b in g.input:
            if b in unreadable:
                name = next(n for n, placeholder in lost.items() if placeholder == b)
                raise SchemaError(
                    f"{op.type}{f' {op.name!r}' if op.name else ''}: its gradient needs input "
                    f"{name!r} (read by a step other than the one writing it), which the op "
                    "overwrites in place; write the output to another blob"
                )
    return ops


def _recomputed(step_ops: list[OperatorDef], grad_ops: list[OperatorDef], outputs: set[int]):
    """The step ops, in order, whose results the gradient ops read, with the earlier steps
    those need; the outputs' steps are the fused op's outputs, already there."""
    produced = {s.output[0]: k for k, s in enumerate(step_ops) if k not in outputs}
    needed: set[int] = set()
    todo = [produced[b] for g in grad_ops for b in g.input if b in produced]
    while todo:
        k = todo.pop()
        if k not in needed:
            needed.add(k)
            todo += [produced[b] for b in step_ops[k].input if b in produced]
    return [step_ops[k] for k in sorted(needed)]
