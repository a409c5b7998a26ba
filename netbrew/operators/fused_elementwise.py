"""FusedElementwise: a chain of elementwise ops evaluated in one buffer.

Made by netbrew.netdef.passes.fuse_elementwise for inference. Each step is one of the
ops in STEP_SLOTS; after the first step, which allocates the buffer, every step writes
its result into that buffer with a NumPy ufunc's `out=` (no array per step), unless
broadcasting grows the result (which then takes a new array) or the dtype is not a plain
float (the step then runs the op's own kernel). Results equal the unfused ops' bit for
bit: same dtype checks, same broadcasting, same arithmetic in the same order (Sigmoid and
LeakyRelu pick their branch without masks, as max/min of the same two values). Export
expands the op back into its original nodes (netbrew.converters.onnx.fused_to_onnx).
Its gradient is the steps' own gradients, chained in reverse
(netbrew.operators.fused_elementwise_grad).

The chain is stored in list arguments:
- `ops`: the op type of each step, e.g. ["Add", "Relu", "Mul"];
- `slots`: for each step, STEP_SLOTS[op] entries naming where each input comes from:
  k >= 0 is input k of the fused op, RUNNING (-1) the previous step's result and
  ABSENT (-2) an omitted optional input (Clip's bounds);
- `params`: for each step, its float attributes in STEP_ATTRS order (NaN: the default);
- `blobs`, `names`: the original intermediate blob names and op names, for export.

Example: `y = Mul(Relu(Add(x, b)), c)` is `y = FusedElementwise(x, b, c,
ops=["Add", "Relu", "Mul"], slots=[0, 1, -1, -1, 2])`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

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
    outputs=["Y"],
    inplace={0: 0},
    attrs={"ops": REQUIRED, "slots": REQUIRED, "params": (), "blobs": (), "names": ()},
    onnx=False,
    doc="Y = ops[n-1](... ops[0](X...)): a chain of n >= 1 elementwise steps (Add, Sub, "
    "Mul, Div, Sum, Max, Min of two inputs; Neg, Abs, Exp, Log, Sqrt, Reciprocal, Tanh, "
    "Relu, LeakyRelu, Sigmoid, HardSigmoid; Clip) in one buffer; `slots` (required) maps "
    "each step's inputs to X (k >= 0), the previous step (-1) or none (-2); `params` "
    "(default none: all defaults) holds step attributes; Y has the last step's shape "
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


@functools.lru_cache(maxsize=256)
def _plan(ops: tuple[str, ...], slots: tuple[int, ...], params: tuple[float, ...], n_inputs: int):
    """The chain as (op type, slot codes, attributes) per step; cached, as a net's
    arguments are the same objects from run to run.

    Raises:
        SchemaError: the arguments do not describe a chain over `n_inputs` inputs.
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
    steps, s, p = [], 0, 0
    for k, op in enumerate(ops):
        where = tuple(int(c) for c in slots[s : s + STEP_SLOTS[op]])
        bad = [c for c in where if c >= n_inputs or c < ABSENT or (c == RUNNING and k == 0)]
        if bad:
            raise SchemaError(
                f"argument 'slots': step {k} ({op}) has slot {bad[0]}; expected an input index "
                f"below {n_inputs}, {ABSENT} (absent)"
                + (f" or {RUNNING} (previous step)" if k else "")
            )
        steps.append((op, where, _attrs(op, params[p : p + len(STEP_ATTRS.get(op, ()))])))
        s, p = s + len(where), p + len(STEP_ATTRS.get(op, ()))
    return tuple(steps)


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


def _run_step(op: str, args: list, attrs: dict, buf: np.ndarray | None) -> tuple[Any, bool]:
    """One step, written into `buf` (an array the chain made, or None) when it can.

    Returns:
        (result, whether the chain owns it: an array no input shares).
    """
    arrays = [a for a in args if a is not None]
    if not all(isinstance(a, np.ndarray) and a.dtype.kind == "f" for a in arrays):
        get_schema(op).check_dtypes(args)  # ints, bools, bfloat16: the op's own kernel
        (y,) = get_kernel(op)(*args, **attrs)
        fresh = isinstance(y, np.ndarray) and y.base is None and y.flags.writeable
        return y, fresh and (y is buf or not any(y is a for a in arrays))
    shape = _float_shape(op, args)
    in_place = buf is not None and buf.shape == shape and any(a is buf for a in arrays)
    return FAST[op](args, attrs, buf if in_place else None), True  # FAST makes no views


@kernel("FusedElementwise")
def fused_elementwise_cpu(
    *inputs: np.ndarray,
    ops: Sequence[str],
    slots: Sequence[int],
    params: Sequence[float],
    blobs: Sequence[str],
    names: Sequence[str],
) -> tuple[np.ndarray]:
    """Runs the steps in order; from the second on, results go into the first's array."""
    steps = _plan(tuple(ops), tuple(slots), tuple(params), len(inputs))
    compiled = fused_jit.run(inputs, steps)  # one numba loop, where the chain fits one
    if compiled is not None:
        return (compiled,)
    buf: np.ndarray | None = None  # an array this kernel made, free to overwrite
    y: Any = None
    with np.errstate(all="ignore"):  # as the step kernels: inf and nan are results
        for k, (op, where, attrs) in enumerate(steps):
            args = [y if c == RUNNING else None if c == ABSENT else inputs[c] for c in where]
            try:
                y, owned = _run_step(op, args, attrs, buf)
            except (SchemaError, ShapeError) as e:
                raise type(e)(f"step {k} ({op}): {e}") from e
            buf = y if owned else None
    return (y,)


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


def fuse_chain(steps: Sequence[OperatorDef], blobs: Sequence[str] = ()) -> OperatorDef:
    """The FusedElementwise op computing `steps`, each of which reads the previous one's
    output (see `fusible`); it writes the last step's output.

    Args:
        steps: the ops, in order.
        blobs: the intermediate blob names to record for export ("" for none).

    Raises:
        SchemaError: a step cannot be fused or does not read the previous step's output.
    """
    inputs: list[str] = []
    slots: list[int] = []
    params: list[float] = []
    for k, step in enumerate(steps):
        prev = steps[k - 1].output[0] if k else None
        if not fusible(step) or (k and prev not in step.input):
            raise SchemaError(f"step {k} ({step.type}) cannot follow in a FusedElementwise chain")
        for name in [*step.input, *[""] * (STEP_SLOTS[step.type] - len(step.input))]:
            if name and name != prev and name not in inputs:
                inputs.append(name)
            slots.append(ABSENT if not name else RUNNING if name == prev else inputs.index(name))
        given = args_dict(step.arg)
        params += [float(given.get(a, math.nan)) for a in STEP_ATTRS.get(step.type, ())]
    last = steps[-1]
    if last.output[0] in inputs[1:]:  # written in place: that input goes first ({0: 0})
        k = inputs.index(last.output[0])
        inputs.insert(0, inputs.pop(k))
        slots = [c if c < 0 else 0 if c == k else c + (c < k) for c in slots]
    names = [s.name for s in steps]
    op = op_def(
        "FusedElementwise",
        inputs,
        [last.output[0]],
        name=last.name or None,
        ops=[s.type for s in steps],
        slots=slots,
        params=params or None,
        blobs=list(blobs) if any(blobs) else None,
        names=names if any(names) else None,
    )
    if last.HasField("device_option"):
        op.device_option.CopyFrom(last.device_option)
    return op


def chain_steps(op: OperatorDef) -> tuple[tuple[str, tuple[int, ...], dict[str, float]], ...]:
    """The steps of a FusedElementwise op: (op type, slot codes, attributes) each, the slot
    codes being input indices, RUNNING or ABSENT and the attributes filled with defaults
    (cached and shared between calls: read them, do not modify them).

    Raises:
        SchemaError: the op's arguments do not describe a chain over its inputs.
    """
    given = args_dict(op.arg)
    params = tuple(given.get("params", []))
    return _plan(tuple(given["ops"]), tuple(given["slots"]), params, len(op.input))


def expand(op: OperatorDef) -> list[OperatorDef]:
    """The ops a FusedElementwise computes, one per step: the recorded intermediate blob
    and op names where there are some (fresh `<Y>__step<k>` blob names otherwise)."""
    given = args_dict(op.arg)
    params = tuple(given.get("params", []))
    steps = chain_steps(op)
    blobs, names = list(given.get("blobs", [])), list(given.get("names", []))
    taken = {*op.input, *op.output}
    out, prev, p = [], "", 0
    for k, (step, where, _) in enumerate(steps):
        if k == len(steps) - 1:
            result = op.output[0]
        elif k < len(blobs) and blobs[k] and blobs[k] not in taken:
            result = blobs[k]
        else:
            result = f"{op.output[0]}__step{k}"
        taken.add(result)
        ins = [prev if c == RUNNING else "" if c == ABSENT else op.input[c] for c in where]
        while ins and not ins[-1]:
            ins.pop()
        attrs = {}
        for attr in STEP_ATTRS.get(step, ()):  # the values the op had set, not defaults
            if params and not math.isnan(params[p]):
                attrs[attr] = float(params[p])
            p += 1
        name = names[k] if k < len(names) and names[k] else None
        out.append(op_def(step, ins, [result], name=name, **attrs))
        prev = result
    return out
