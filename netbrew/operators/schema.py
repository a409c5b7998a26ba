"""Operator schemas and the registries every op declares itself into.

An op is declared once, in its own module of `netbrew.operators`:

    schema("Relu", inputs=["X"], outputs=["Y"], inplace={0: 0}, doc="Y = max(X, 0)")

    @kernel("Relu")
    def relu_cpu(x):
        return (np.maximum(x, 0),)

Input and output names carry their arity: a trailing "?" marks an optional slot and a
trailing "*" a variadic one (one or more; "*0" allows none).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netbrew.errors import SchemaError, suggest
from netbrew.operators.registry import Registry

REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()
"""Default of an attribute that every op must set."""

Kernel = Callable[..., tuple]

DTYPE_CLASSES: dict[str, Callable[[np.dtype], bool]] = {
    "float": lambda d: d.kind in "fc" or d.name == "bfloat16",
    "int": lambda d: d.kind in "iu",
    "bool": lambda d: d.kind == "b",
    "numeric": lambda d: d.kind in "iufcb" or d.name == "bfloat16",
    "any": lambda d: True,
}


def _arity(names: Sequence[str]) -> tuple[tuple[str, ...], int, float]:
    """Strips arity marks from slot names; returns (names, minimum, maximum)."""
    plain, low, high = [], 0, 0.0
    for name in names:
        if name.endswith("*0"):
            plain.append(name[:-2])
            high = math.inf
        elif name.endswith("*"):
            plain.append(name[:-1])
            low, high = low + 1, math.inf
        elif name.endswith("?"):
            plain.append(name[:-1])
            high += 1
        else:
            plain.append(name)
            low, high = low + 1, high + 1
    return tuple(plain), low, high


@dataclass(frozen=True)
class OpSchema:
    """What an op takes and gives. Built by `schema()`; see there for the fields."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    min_inputs: int
    max_inputs: float
    min_outputs: int
    max_outputs: float
    attrs: Mapping[str, Any]
    doc: str
    inplace: Mapping[int, int]
    dtypes: Mapping[int, str]
    onnx: bool
    rng: bool
    num_outputs_attr: str | None
    output_mask: bool = False
    wants_names: bool = False
    wants_scope: bool = False
    infer: Callable | None = field(default=None, compare=False)

    def inplace_output(self, i: int) -> int | None:
        """The output input `i` may be written to in place, or None. A pair declared for
        the variadic last input slot holds for every input it takes, in step (Allreduce's
        tensor k may become its output k)."""
        if i in self.inplace:
            return self.inplace[i]
        last = len(self.inputs) - 1
        if self.max_inputs == float("inf") and i > last and last in self.inplace:
            return self.inplace[last] + (i - last)
        return None

    def input_name(self, i: int) -> str:
        return self.inputs[min(i, len(self.inputs) - 1)] if self.inputs else f"input {i}"

    def output_name(self, i: int) -> str:
        return self.outputs[min(i, len(self.outputs) - 1)] if self.outputs else f"output {i}"

    def check_arity(self, n_in: int, n_out: int, where: str) -> None:
        """Raises SchemaError when the counts are outside the schema's ranges."""
        for kind, n, low, high in (
            ("inputs", n_in, self.min_inputs, self.max_inputs),
            ("outputs", n_out, self.min_outputs, self.max_outputs),
        ):
            if not low <= n <= high:
                want = f"{low}" if low == high else f"{low} to {_fmt(high)}"
                raise SchemaError(f"{where}: got {n} {kind}, expected {want} ({self.signature()})")

    def signature(self) -> str:
        def slots(names, low):
            return ", ".join(n if i < low else f"[{n}]" for i, n in enumerate(names))

        ins = slots(self.inputs, self.min_inputs) + ("..." if self.max_inputs == math.inf else "")
        outs = slots(self.outputs, self.min_outputs) + (
            "..." if self.max_outputs == math.inf else ""
        )
        return f"{self.name}({ins}) -> ({outs})"

    def parse_attrs(self, given: Mapping[str, Any], where: str) -> dict[str, Any]:
        """Fills defaults, checks names and required attributes, and coerces types."""
        unknown = [k for k in given if k not in self.attrs]
        if unknown:
            hint = suggest(unknown[0], self.attrs)
            known = ", ".join(sorted(self.attrs)) or "none"
            raise SchemaError(
                f"{where}: unknown argument {unknown[0]!r}.{hint} {self.name} takes: {known}"
            )
        out = {}
        for name, default in self.attrs.items():
            if name in given:
                out[name] = _coerce(given[name], default)
            elif default is REQUIRED:
                raise SchemaError(f"{where}: required argument {name!r} is missing")
            else:
                out[name] = default
        return out

    def check_dtypes(self, arrays: Sequence[Any], where: str = "") -> None:
        for i, cls in self.dtypes.items():
            targets = range(i, len(arrays)) if i == len(self.inputs) - 1 else (i,)
            for j in targets:
                if j >= len(arrays) or arrays[j] is None:
                    continue
                dtype = getattr(arrays[j], "dtype", None)
                if dtype is not None and not DTYPE_CLASSES[cls](dtype):
                    prefix = f"{where}: " if where else ""
                    raise SchemaError(
                        f"{prefix}input {self.input_name(j)!r} has dtype {dtype}, "
                        f"expected a {cls} type"
                    )


def _fmt(n: float) -> str:
    return "any number" if n == math.inf else str(int(n))


def _coerce(value: Any, default: Any) -> Any:
    """Matches a parsed argument to the type of its default (ints given for floats...)."""
    if isinstance(default, bool) and isinstance(value, (int, np.integer)):
        return bool(value)
    if isinstance(default, float) and isinstance(value, (int, np.integer)):
        return float(value)
    if isinstance(default, int) and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(default, str) and isinstance(value, bytes):
        return value.decode()
    return value


GradientMaker = Callable[..., list]
"""`maker(op, g_out, g_in) -> list of OperatorDef`.

`op` is the forward OperatorDef, `g_out[k]` the name of the gradient of output k (None
when that output has none) and `g_in[i]` the name the gradient of input i must be
written to (None when it is not wanted). The maker returns ordinary ops that compute
the wanted input gradients (see netbrew.netdef.autodiff). A maker registered with
`captures=True` gets more g_in entries after the declared inputs' ones: one for each
outer-scope blob its op's subgraphs read (netbrew.netdef.autodiff.captured_reads).
"""


@dataclass(frozen=True)
class NoGradient:
    """Marks an op with no gradient: its inputs get none through it, and that is not an error."""

    reason: str


@dataclass(frozen=True)
class GradientNotWritten:
    """Marks an op whose gradient exists in math but that netbrew does not build.

    Autodiff refuses a path from a loss to a wanted blob through such an op, naming it and
    `reason`, instead of stopping there without a word as it does for NoGradient."""

    reason: str


SCHEMAS: Registry[str, OpSchema] = Registry("operator")
KERNELS: Registry[tuple[str, str], Kernel] = Registry("kernel")
# Batched kernels: `fn(calls, **attrs) -> list of output tuples`, one call's inputs per
# entry of `calls`; the simple runtime hands them runs of independent ops of one type
# (netbrew/executor/batching.py). A GPU batched kernel launches once for the whole run.
BATCHED: Registry[tuple[str, str], Callable[..., list]] = Registry("batched kernel")
GRADIENTS: Registry[str, GradientMaker | NoGradient | GradientNotWritten] = Registry("gradient")


def schema(
    name: str,
    *,
    inputs: Sequence[str] = ("X",),
    outputs: Sequence[str] = ("Y",),
    attrs: Mapping[str, Any] | None = None,
    doc: str = "",
    inplace: Mapping[int, int] | None = None,
    dtypes: str | Mapping[int, str] | None = None,
    onnx: bool = True,
    rng: bool = False,
    num_outputs_attr: str | None = None,
    output_mask: bool = False,
    wants_names: bool = False,
    wants_scope: bool = False,
    infer: Callable | None = None,
) -> OpSchema:
    """Declares an op.

    Args:
        name: the op type, as stored in OperatorDef.type.
        inputs: input slot names, with "?" (optional) and "*" (variadic) marks.
        outputs: output slot names, marked the same way.
        attrs: attribute name -> default; REQUIRED for attributes without one,
            None for optional ones the kernel handles itself.
        doc: the formula line, with shapes and defaults.
        inplace: input index -> output index pairs that may share a blob.
        dtypes: a dtype class ("float", "int", "bool", "numeric", "any") for every input,
            or a map from input index to class. The last slot's class covers variadic ones.
        onnx: True when the op is an ONNX op with ONNX semantics (exported unchanged).
        rng: the kernel takes `rng`, a numpy Generator seeded from the op's device option.
        num_outputs_attr: an attribute filled with the op's output count when unset.
        output_mask: the kernel takes `output_mask`, a tuple of bools saying which
            outputs the op actually names, so it can skip work for the others.
        wants_names: the kernel takes `input_names` and `output_names` (tuples of blob
            names), for ops such as Save and Load whose files are keyed by blob name.
        wants_scope: the kernel takes `scope`, the mapping of blobs visible where the op
            runs, for control flow (If, Loop, Scan) whose subgraphs read outer values.
        infer: optional shape and type inference function.
    """
    ins, in_low, in_high = _arity(inputs)
    outs, out_low, out_high = _arity(outputs)
    if isinstance(dtypes, str):
        dtypes = {i: dtypes for i in range(len(ins))}
    op = OpSchema(
        name=name,
        inputs=ins,
        outputs=outs,
        min_inputs=in_low,
        max_inputs=in_high,
        min_outputs=out_low,
        max_outputs=out_high,
        attrs=dict(attrs or {}),
        doc=doc,
        inplace=dict(inplace or {}),
        dtypes=dict(dtypes or {}),
        onnx=onnx,
        rng=rng,
        num_outputs_attr=num_outputs_attr,
        output_mask=output_mask,
        wants_names=wants_names,
        wants_scope=wants_scope,
        infer=infer,
    )
    return SCHEMAS.add(name, op)


def kernel(op_type: str, device: str = "cpu") -> Callable[[Kernel], Kernel]:
    """Registers a kernel: a pure function `(*arrays, **attrs) -> tuple of arrays`."""
    return KERNELS.register((op_type, device))


def batched_kernel(op_type: str, device: str) -> Callable[[Callable], Callable]:
    """Registers a batched kernel of `op_type` on `device`: `fn(calls, **attrs)`, where
    `calls` is a list of input tuples (each as the plain kernel takes them) and the result
    is a list of the plain kernel's output tuples, in order. It must check every call
    before it launches anything, so that an error leaves no partial results."""
    return BATCHED.register((op_type, device))


def gradient(
    op_type: str, *, inplace_safe: bool = False, captures: bool = False
) -> Callable[[GradientMaker], GradientMaker]:
    """Registers the gradient maker of `op_type` (see GradientMaker).

    Args:
        inplace_safe: the gradient reads only the op's outputs (never an input that the op
            may overwrite in place), so autodiff accepts the op written in place.
        captures: the maker also writes gradients of the outer-scope blobs that the op's
            subgraphs read by name (If, Loop...): its g_in lists them after the inputs.
    """

    def register(maker: GradientMaker) -> GradientMaker:
        maker.inplace_safe = inplace_safe
        maker.captures = captures
        return GRADIENTS.add(op_type, maker)

    return register


def no_gradient(op_type: str, reason: str) -> None:
    """Declares that `op_type` has no gradient in math (e.g. Shape, ArgMax): its inputs get
    none through it, and autodiff passes it by without an error."""
    GRADIENTS.add(op_type, NoGradient(reason))


def gradient_not_written(op_type: str, reason: str) -> None:
    """Declares that `op_type` is differentiable but netbrew builds no gradient for it:
    autodiff raises, naming the op and `reason`, when a loss's gradient would pass through."""
    GRADIENTS.add(op_type, GradientNotWritten(reason))


def get_schema(op_type: str) -> OpSchema:
    """The schema of `op_type`; raises UnknownOperatorError with near names."""
    return SCHEMAS[op_type]


def get_kernel(op_type: str, device: str = "cpu") -> Kernel:
    """The kernel for (op_type, device); the error lists the devices that have one."""
    fn = KERNELS.get((op_type, device))
    if fn is None:
        get_schema(op_type)
        devices = sorted(d for (t, d) in KERNELS if t == op_type)
        raise SchemaError(
            f"{op_type} has no {device} kernel; it has kernels for: {', '.join(devices) or 'none'}"
        )
    return fn
