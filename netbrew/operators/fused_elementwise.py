"""FusedElementwise: a DAG of elementwise ops evaluated without an array per step.

Made by netbrew.netdef.passes.fuse_elementwise for inference. Each step is one of the
ops in STEP_SLOTS and reads the op's inputs or earlier steps' results; the op's outputs
are the results of the steps named in `results` (a chain has one: its last step). A step
writes its result with a NumPy ufunc's `out=` into the array of a step result it reads
for the last time (no array per step), unless broadcasting grows the result (which then
takes a new array) or the dtype is not a plain float (the step then runs the op's own
kernel). Results equal the unfused ops' bit for bit: same dtype checks, same
broadcasting, same arithmetic in the same order (Sigmoid and LeakyRelu pick their branch
without masks, as max/min of the same two values). Export expands the op back into its
original nodes (netbrew.converters.onnx.fused_to_onnx). Its gradient is the steps' own
gradients, walked in reverse over the DAG (netbrew.operators.fused_elementwise_grad).

The steps are stored in list arguments:
- `ops`: the op type of each step, e.g. ["Add", "Relu", "Mul"];
- `slots`: for each step, STEP_SLOTS[op] entries naming where each input comes from:
  k >= 0 is input k of the fused op, RUNNING (-1) the previous step's result, ABSENT (-2)
  an omitted optional input (Clip's bounds) and `step_code(j)` = -3 - j step j's result
  (j below the reading step);
- `results`: the steps whose results are the op's outputs, in output order (default: the
  last step alone);
- `params`: for each step, its float attributes in STEP_ATTRS order (NaN: the default);
- `blobs`, `names`: the original intermediate blob names and op names, for export.

Example: `y = Mul(Relu(Add(x, b)), c)` is `y = FusedElementwise(x, b, c,
ops=["Add", "Relu", "Mul"], slots=[0, 1, -1, -1, 2])`; the LSTM cell update
`c2 = f * c + i * g; h2 = o * tanh(c2)` is `c2, h2 = FusedElementwise(f, c, i, g, o,
ops=["Mul", "Mul", "Add", "Tanh", "Mul"], slots=[0, 1, 2, 3, -3, -1, -1, 4, -1],
results=[2, 4])`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef.args import args_dict
from netbrew.netdef.net import op_def
from netbrew.operators import activations, arithmetic, fused_jit  # noqa: F401  (the step ops)
from netbrew.operators.arithmetic import check_broadcast, check_same_dtype
from netbrew.operators.schema import (
    REQUIRED,
    get_kernel,
    get_schema,
    kernel,
    schema,
)
from netbrew.operators.zeros import relu
from netbrew.proto.netbrew_pb2 import OperatorDef

RUNNING = -1
"""Slot code: the previous step's result."""
ABSENT = -2
"""Slot code: an omitted optional input."""
STEP = -3
"""Slot code of step 0's result; step j's is STEP - j (see `step_code`)."""


def step_code(j: int) -> int:
    """The slot code naming step j's result."""
    return STEP - j


def step_of(code: int) -> int | None:
    """The step whose result a (normalised, see `Plan`) slot code names, or None."""
    return STEP - code if code <= STEP else None


STEP_SLOTS: dict[str, int] = {
    **dict.fromkeys(("Add", "Sub", "Mul", "Div", "Sum", "Max", "Min"), 2),  # Sum... of two
    **dict.fromkeys(("Neg", "Abs", "Exp", "Log", "Sqrt", "Reciprocal", "Tanh"), 1),
    **dict.fromkeys(("Relu", "LeakyRelu", "Sigmoid", "HardSigmoid"), 1),
    "Clip": 3,
}
"""The op types a chain may hold -> the input slots each step records."""

STEP_ATTRS: dict[str, tuple[str, ...]] = {"LeakyRelu": ("alpha",), "HardSigmoid": ("alpha", "beta")}
"""Step op types with attributes -> their (float) attribute names, in `params` order."""

_UFUNCS: dict[str, np.ufunc] = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": np.divide,
    "Sum": np.add,
    "Max": np.maximum,
    "Min": np.minimum,
    "Neg": np.negative,
    "Abs": np.absolute,
    "Exp": np.exp,
    "Log": np.log,
    "Sqrt": np.sqrt,
    "Reciprocal": np.reciprocal,
    "Tanh": np.tanh,
}

schema(
    "FusedElementwise",
    inputs=["X*"],
    outputs=["Y*"],
    inplace={0: 0},
    attrs={
        "ops": REQUIRED,
        "slots": REQUIRED,
        "results": (),
        "params": (),
        "blobs": (),
        "names": (),
    },
    onnx=False,
    doc="Y... = the results of n >= 1 elementwise steps (Add, Sub, Mul, Div, Sum, Max, Min "
    "of two inputs; Neg, Abs, Exp, Log, Sqrt, Reciprocal, Tanh, Relu, LeakyRelu, Sigmoid, "
    "HardSigmoid; Clip) forming a DAG; `slots` (required) maps each step's inputs to X "
    "(k >= 0), the previous step (-1), none (-2) or step j's result (-3 - j); `results` "
    "(default: the last step) names the steps whose results are Y, in order; `params` "
    "(default none: all defaults) holds step attributes; each Y has its step's shape "
    "(broadcast) and dtype",
)

Step = Callable[[list, dict, "np.ndarray | None"], np.ndarray]
"""A step's float path: `step(args, attrs, out) -> result`, writing into `out` when given
(`out` then has the result's shape and dtype and is one of `args`)."""


def _relu(args: list, attrs: dict, out: np.ndarray | None) -> np.ndarray:
    return relu(args[0], out=out)


def _leaky_relu(args: list, attrs: dict, out: np.ndarray | None) -> np.ndarray:
    """X if X >= 0 else alpha * X, branch-free: for alpha <= 1 that is max(X, alpha * X),
    for alpha > 1 min(X, alpha * X). alpha = 0 takes the mask (0 * inf is nan)."""
    x, alpha = args[0], attrs["alpha"]
    scaled = np.multiply(x, alpha)
    if alpha == 0 or not math.isfinite(alpha):
        np.copyto(scaled, x, where=np.greater_equal(x, 0))
        return scaled
    return (np.maximum if alpha <= 1 else np.minimum)(x, scaled, out=out)


def _sigmoid(args: list, attrs: dict, out: np.ndarray | None) -> np.ndarray:
    """As Sigmoid's kernel: with e = exp(-|x|), 1 / (1 + e) where x >= 0, else
    e / (1 + e). The numerator, 1 or e, is max(sign(x), e) (e <= 1), so no masks."""
    num = np.sign(args[0])
    e = np.absolute(args[0], out=out)
    np.negative(e, out=e)
    np.exp(e, out=e)
    np.maximum(num, e, out=num)
    np.add(e, 1, out=e)
    return np.divide(num, e, out=e)


def _hard_sigmoid(args: list, attrs: dict, out: np.ndarray | None) -> np.ndarray:
    y = np.multiply(args[0], attrs["alpha"], out=out)
    np.add(y, attrs["beta"], out=y)
    return np.clip(y, 0, 1, out=y)


def _clip(args: list, attrs: dict, out: np.ndarray | None) -> np.ndarray:
    x, y = args[0], args[0]
    for bound, fn in ((args[1], np.maximum), (args[2], np.minimum)):
        if bound is not None:
            y = out = fn(y, bound.reshape(()), out=out)
    if y is x:  # no bounds: a copy, as Clip's kernel (or the chain's own array)
        return x.copy() if out is None else out
    return y


def _ufunc(ufunc: np.ufunc) -> Step:
    def step(args: list, attrs: dict, out: np.ndarray | None) -> np.ndarray:
        return ufunc(*args, out=out)

    step.__name__ = f"_{ufunc.__name__}"
    return step


FAST: dict[str, Step] = {
    **{op: _ufunc(fn) for op, fn in _UFUNCS.items()},
    "Relu": _relu,
    "LeakyRelu": _leaky_relu,
    "Sigmoid": _sigmoid,
    "HardSigmoid": _hard_sigmoid,
    "Clip": _clip,
}
"""Each step op's float path (every op in STEP_SLOTS has one)."""


class Plan(NamedTuple):
    """A FusedElementwise decoded: `steps` as (op type, slot codes, attributes) each, the
    codes normalised to an input index k >= 0, ABSENT or `step_code(j)` (RUNNING becomes
    the previous step's code) and the attributes filled with defaults; `outputs` the
    steps whose results are Y; `last_read[j]` the last step reading step j's result
    (len(steps) for an output: it outlives the steps)."""

    steps: tuple[tuple[str, tuple[int, ...], dict[str, float]], ...]
    outputs: tuple[int, ...]
    last_read: tuple[int, ...]


@functools.lru_cache(maxsize=256)
def _plan(
    ops: tuple[str, ...],
    slots: tuple[int, ...],
    params: tuple[float, ...],
    n_inputs: int,
    outputs: tuple[int, ...] = (),
) -> Plan:
    """The op's Plan; cached, as a net's arguments are the same objects from run to run.

    Raises:
        SchemaError: the arguments do not describe a DAG of steps over `n_inputs` inputs.
    """
    if not ops:
        raise SchemaError("argument 'ops' is empty: a FusedElementwise needs at least one step")
    unknown = [op for op in ops if op not in STEP_SLOTS]
    if unknown:
        raise SchemaError(
            f"argument 'ops': {unknown[0]!r} cannot be fused; FusedElementwise runs "
            f"{', '.join(STEP_SLOTS)}"
        )
    want_slots = sum(STEP_SLOTS[op] for op in ops)
    want_params = sum(len(STEP_ATTRS.get(op, ())) for op in ops)
    if len(slots) != want_slots:
        raise SchemaError(
            f"argument 'slots' has {len(slots)} entries, ops {list(ops)} need {want_slots}"
        )
    if len(params) not in (0, want_params):
        raise SchemaError(f"argument 'params' has {len(params)} values, expected {want_params}")
    outputs = tuple(int(o) for o in outputs) or (len(ops) - 1,)
    bad_out = [o for o in outputs if not 0 <= o < len(ops)]
    if bad_out or len(set(outputs)) != len(outputs):
        raise SchemaError(
            f"argument 'results' is {list(outputs)}; expected distinct step indices below "
            f"{len(ops)}"
        )
    steps, s, p = [], 0, 0
    last_read = [-1] * len(ops)
    for k, op in enumerate(ops):
        where = tuple(int(c) for c in slots[s : s + STEP_SLOTS[op]])
        bad = [
            c
            for c in where
            if c >= n_inputs or (c == RUNNING and k == 0) or (c <= STEP and STEP - c >= k)
        ]
        if bad:
            raise SchemaError(
                f"argument 'slots': step {k} ({op}) has slot {bad[0]}; expected an input index "
                f"below {n_inputs}, {ABSENT} (absent)"
                + (f", {RUNNING} (previous step) or {STEP} - j (step j < {k})" if k else "")
            )
        where = tuple(step_code(k - 1) if c == RUNNING else c for c in where)
        for c in where:
            if c <= STEP:
                last_read[STEP - c] = k
        steps.append((op, where, _attrs(op, params[p : p + len(STEP_ATTRS.get(op, ()))])))
        s, p = s + len(where), p + len(STEP_ATTRS.get(op, ()))
    for o in outputs:
        last_read[o] = len(ops)
    return Plan(tuple(steps), outputs, tuple(last_read))


def _attrs(op: str, values: Sequence[float]) -> dict[str, float]:
    """A step's attributes: its recorded values, its schema's defaults where NaN or none."""
    names = STEP_ATTRS.get(op, ())
    values = [float(v) for v in values] or [math.nan] * len(names)
    return {n: get_schema(op).attrs[n] if math.isnan(v) else v for n, v in zip(names, values)}


def _float_shape(op: str, args: list) -> tuple[int, ...]:
    """The shape of a float step's result, checked as the op's own kernel checks."""
    x = args[0]
    if STEP_SLOTS[op] == 2:
        a, b = args
        if a.dtype != b.dtype:
            check_same_dtype({"A": a, "B": b})  # raises, naming both
        if a.shape == b.shape:
            return a.shape
        return check_broadcast({"A": a, "B": b})
    for name, bound in zip(("min", "max"), args[1:]):  # Clip's bounds
        if bound is None:
            continue
        if bound.size != 1:
            raise ShapeError(f"input {name!r} has shape {list(bound.shape)}, expected a scalar")
        check_same_dtype({"input": x, name: bound}, allow_bool=True)
    return x.shape


def _run_step(op: str, args: list, attrs: dict, spare: list[np.ndarray]) -> tuple[Any, bool]:
    """One step, written into one of `spare` (arrays this kernel made that no later step
    reads, each one of `args`) when one has the result's shape.

    Returns:
        (result, whether the kernel owns it: an array no input shares).
    """
    arrays = [a for a in args if a is not None]
    if not all(isinstance(a, np.ndarray) and a.dtype.kind == "f" for a in arrays):
        get_schema(op).check_dtypes(args)  # ints, bools, bfloat16: the op's own kernel
        (y,) = get_kernel(op)(*args, **attrs)
        fresh = isinstance(y, np.ndarray) and y.base is None and y.flags.writeable
        return y, fresh and (any(y is b for b in spare) or not any(y is a for a in arrays))
    shape = _float_shape(op, args)
    buf = next((b for b in spare if b.shape == shape), None)
    return FAST[op](args, attrs, buf), True  # FAST makes no views


@kernel("FusedElementwise")
def fused_elementwise_cpu(
    *inputs: np.ndarray,
    ops: Sequence[str],
    slots: Sequence[int],
    results: Sequence[int] = (),
    params: Sequence[float] = (),
    blobs: Sequence[str] = (),
    names: Sequence[str] = (),
) -> tuple[np.ndarray, ...]:
    """Runs the steps in order; a step writes into the array of a step result it is the
    last to read (the previous one's, in a chain), where the shapes agree."""
    plan = _plan(tuple(ops), tuple(slots), tuple(params), len(inputs), tuple(results))
    compiled = fused_jit.run(inputs, plan)  # one numba loop, where the steps fit one
    if compiled is not None:
        return compiled
    values: list[Any] = [None] * len(plan.steps)
    owned = [False] * len(plan.steps)  # arrays this kernel made, free to overwrite when dead
    with np.errstate(all="ignore"):  # as the step kernels: inf and nan are results
        for k, (op, where, attrs) in enumerate(plan.steps):
            args = [values[STEP - c] if c <= STEP else None if c == ABSENT else inputs[c]
                    for c in where]  # fmt: skip
            dead = [STEP - c for c in where if c <= STEP and plan.last_read[STEP - c] == k]
            # a binary ufunc may write over either operand; the others over their first
            reusable = where if STEP_SLOTS[op] == 2 else where[:1]
            spare = [values[j] for j in dead if owned[j] and step_code(j) in reusable]
            try:
                values[k], owned[k] = _run_step(op, args, attrs, spare)
            except (SchemaError, ShapeError) as e:
                raise type(e)(f"step {k} ({op}): {e}") from e
            for j in dead:
                values[j] = None
    results = [values[o] for o in plan.outputs]
    for i, y in enumerate(results):  # a step kernel may hand back its input: no two alike
        if any(y is z for z in results[:i]):
            results[i] = y.copy()
    return tuple(results)


def fusible(op: OperatorDef) -> bool:
    """Whether `op` may be a step: a STEP_SLOTS type with as many inputs as slots (Clip:
    1 to 3), one output, no control inputs and no arguments beyond STEP_ATTRS."""
    return (
        op.type in STEP_SLOTS
        and len(op.output) == 1
        and bool(op.output[0])
        and (
            len(op.input) == STEP_SLOTS[op.type]
            or (op.type == "Clip" and 1 <= len(op.input) <= 3 and bool(op.input[0]))
        )
        and not op.control_input
        and not op.is_gradient_op
        and all(a.name in STEP_ATTRS.get(op.type, ()) for a in op.arg)
    )


def fuse_steps(
    steps: Sequence[OperatorDef],
    reads: Sequence[Sequence[int | None]] | None = None,
    outputs: Sequence[int] | None = None,
    blobs: Sequence[str] = (),
) -> OperatorDef:
    """The FusedElementwise op computing `steps` (each `fusible`), in order.

    Args:
        steps: the ops, each reading only blobs from outside and earlier steps' results.
        reads: for each step, for each of its inputs, the index of the step whose result
            it is, or None for a blob from outside the steps. Default: by name, the
            latest earlier step writing it.
        outputs: the steps whose results the op writes, under their blob names (default:
            the last step's).
        blobs: per step, the intermediate blob name to record for export ("" for none).

    Raises:
        SchemaError: a step cannot be fused or reads a later one; two outputs share a
            name; more than one output is written over an input in place.
    """
    n = len(steps)
    outputs = [n - 1] if outputs is None else [int(o) for o in outputs]
    if reads is None:
        latest: dict[str, int] = {}
        reads = []
        for k, step in enumerate(steps):
            reads.append([latest.get(b) if b else None for b in step.input])
            latest[step.output[0]] = k
    inputs: list[str] = []
    slots: list[int] = []
    params: list[float] = []
    for k, step in enumerate(steps):
        if not fusible(step):
            raise SchemaError(f"step {k} ({step.type}) cannot be a FusedElementwise step")
        for i, name in enumerate([*step.input, *[""] * (STEP_SLOTS[step.type] - len(step.input))]):
            j = reads[k][i] if i < len(step.input) else None
            if j is not None and not 0 <= j < k:
                raise SchemaError(f"step {k} ({step.type}) reads step {j}; expected one before it")
            if j is None and name and name not in inputs:
                inputs.append(name)
            slots.append(
                ABSENT if not name and j is None
                else inputs.index(name) if j is None
                else RUNNING if j == k - 1
                else step_code(j)
            )  # fmt: skip
        given = args_dict(step.arg)
        params += [float(given.get(a, math.nan)) for a in STEP_ATTRS.get(step.type, ())]
    out_names = [steps[o].output[0] for o in outputs]
    if len(set(out_names)) != len(out_names) or len(set(outputs)) != len(outputs):
        raise SchemaError(f"outputs {outputs} ({out_names}) name a step or a blob twice")
    in_place = [i for i, name in enumerate(out_names) if name in inputs]
    if len(in_place) > 1:
        raise SchemaError(
            f"outputs {[out_names[i] for i in in_place]} are all written over inputs in "
            "place; FusedElementwise may write only output 0 over input 0"
        )
    if in_place:  # that output and its input go first ({0: 0})
        outputs.insert(0, outputs.pop(in_place[0]))
        out_names.insert(0, out_names.pop(in_place[0]))
        k = inputs.index(out_names[0])
        inputs.insert(0, inputs.pop(k))
        slots = [c if c < 0 else 0 if c == k else c + (c < k) for c in slots]
    last = steps[max(outputs)]
    names = [s.name for s in steps]
    op = op_def(
        "FusedElementwise",
        inputs,
        out_names,
        name=last.name or None,
        ops=[s.type for s in steps],
        slots=slots,
        results=None if outputs == [n - 1] else outputs,
        params=params or None,
        blobs=list(blobs) if any(blobs) else None,
        names=names if any(names) else None,
    )
    if last.HasField("device_option"):
        op.device_option.CopyFrom(last.device_option)
    return op


def fuse_chain(steps: Sequence[OperatorDef], blobs: Sequence[str] = ()) -> OperatorDef:
    """The FusedElementwise op computing `steps`, each of which reads the previous one's
    output (see `fusible`); it writes the last step's output.

    Raises:
        SchemaError: a step cannot be fused or does not read the previous step's output.
    """
    for k, step in enumerate(steps):
        if not fusible(step) or (k and steps[k - 1].output[0] not in step.input):
            raise SchemaError(f"step {k} ({step.type}) cannot follow in a FusedElementwise chain")
    reads = [
        [k - 1 if k and b == steps[k - 1].output[0] else None for b in step.input]
        for k, step in enumerate(steps)
    ]
    return fuse_steps(steps, reads, blobs=blobs)


def plan_of(op: OperatorDef) -> Plan:
    """The Plan of a FusedElementwise op (cached and shared between calls: read it, do
    not modify it).

    Raises:
        SchemaError: the op's arguments do not describe steps over its inputs.
    """
    given = args_dict(op.arg)
    params = tuple(given.get("params", []))
    results = tuple(given.get("results", []))
    plan = _plan(tuple(given["ops"]), tuple(given["slots"]), params, len(op.input), results)
    if len(plan.outputs) != len(op.output):
        raise SchemaError(
            f"{op.type}{f' {op.name!r}' if op.name else ''} has {len(op.output)} outputs, "
            f"argument 'results' names {len(plan.outputs)} steps"
        )
    return plan


def expand(op: OperatorDef) -> list[OperatorDef]:
    """The ops a FusedElementwise computes, one per step: the recorded intermediate blob
    and op names where there are some (fresh `<Y>__step<k>` blob names otherwise)."""
    given = args_dict(op.arg)
    params = tuple(given.get("params", []))
    plan = plan_of(op)
    blobs, names = list(given.get("blobs", [])), list(given.get("names", []))
    out_of = {k: op.output[i] for i, k in enumerate(plan.outputs)}
    # an output written over an input that a later step still reads is written last
    inputs = list(op.input)
    late = {
        k: name
        for k, name in out_of.items()
        if name in inputs
        and any(inputs.index(name) in where for _, where, _ in plan.steps[k + 1 :])
    }
    taken = {*op.input, *op.output}
    out, results, p = [], [], 0
    for k, (step, where, _) in enumerate(plan.steps):
        if k in out_of and k not in late:
            result = out_of[k]
        elif k not in out_of and k < len(blobs) and blobs[k] and blobs[k] not in taken:
            result = blobs[k]
        else:
            result = f"{op.output[0]}__step{k}"
        taken.add(result)
        results.append(result)
        ins = [results[STEP - c] if c <= STEP else "" if c == ABSENT else op.input[c]
               for c in where]  # fmt: skip
        while ins and not ins[-1]:
            ins.pop()
        attrs = {}
        for attr in STEP_ATTRS.get(step, ()):  # the values the op had set, not defaults
            if params and not math.isnan(params[p]):
                attrs[attr] = float(params[p])
            p += 1
        name = names[k] if k < len(names) and names[k] else None
        out.append(op_def(step, ins, [result], name=name, **attrs))
    out += [op_def("Identity", [results[k]], [name]) for k, name in late.items()]
    return out
