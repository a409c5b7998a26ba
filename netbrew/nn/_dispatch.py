"""The one place where netbrew.nn runs an operator.

`call(op_type, inputs, **attrs)` is used by every function in `netbrew.nn.functional`:

- **eagerly** (no tracer active) it runs the op's CPU kernel from the operator registry on
  NumPy arrays and returns NumPy arrays. The kernel, the parsed and checked attributes and
  the op's random stream are resolved once per (op type, arity, attributes) and cached, so
  an eager call costs a dict lookup plus the kernel;
- **while tracing** (see `netbrew.converters.module.trace`) it hands the call to the active
  tracer, which appends an OperatorDef to the net it is building and returns traced values.

So a Module and the NetDef traced from it run the very same kernels with the very same
arguments: attributes are normalised here exactly as an OperatorDef stores them.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netbrew.netdef.args import arg_value, make_arg
from netbrew.operators import OpSchema, get_kernel, get_schema

_TRACER: contextvars.ContextVar[Any] = contextvars.ContextVar("netbrew_nn_tracer", default=None)
_GENERATOR: list[np.random.Generator] = [np.random.default_rng()]


def manual_seed(seed: int) -> None:
    """Seeds netbrew.nn's random stream: parameter initialisation and unseeded Dropout.

    Like torch.manual_seed, it makes module creation and training-mode dropout reproducible
    (the numbers differ from PyTorch's: the generator is NumPy's PCG64).
    """
    _GENERATOR[0] = np.random.default_rng(seed)


def generator() -> np.random.Generator:
    """The random stream that manual_seed sets."""
    return _GENERATOR[0]


def active_tracer() -> Any:
    """The tracer recording the current call, or None when running eagerly."""
    return _TRACER.get()


def set_tracer(tracer: Any) -> contextvars.Token:
    """Makes `tracer` active; returns the token that `reset_tracer` takes."""
    return _TRACER.set(tracer)


def reset_tracer(token: contextvars.Token) -> None:
    _TRACER.reset(token)


@dataclass
class EagerOp:
    """An op resolved once: its schema, CPU kernel, normalised attributes and random stream."""

    schema: OpSchema
    kernel: Any
    attrs: dict[str, Any]
    num_outputs: int
    seeded_rng: np.random.Generator | None

    def run(self, arrays: Sequence[Any]) -> tuple:
        """Runs the kernel; returns exactly `num_outputs` results."""
        args = [_plain(a) for a in arrays]
        self.schema.check_dtypes(args, self.schema.name)
        extra = {}
        if self.schema.rng:
            extra["rng"] = self.seeded_rng or _GENERATOR[0]
        results = self.kernel(*args, **extra, **self.attrs)
        return tuple(
            r if isinstance(r, np.ndarray) or r is None else np.asarray(r)
            for r in results[: self.num_outputs]
        )


def _plain(value: Any) -> Any:
    """ndarray subclasses (Parameter) as plain views, so kernels never return subclasses."""
    if value is None or type(value) is np.ndarray:
        return value
    if isinstance(value, np.ndarray):
        return value.view(np.ndarray)
    return np.asarray(value)


_CACHE: dict[tuple, EagerOp] = {}


def _freeze(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    return value


def normalize_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    """Attributes as an OperatorDef gives them back (None dropped, floats as float32...)."""
    return {k: arg_value(make_arg(k, v)) for k, v in attrs.items() if v is not None}


def eager_op(op_type: str, num_inputs: int, num_outputs: int, attrs: dict[str, Any]) -> EagerOp:
    """The cached EagerOp for this op type, arity and attributes."""
    try:
        key = (op_type, num_inputs, num_outputs, *attrs.items())
        hash(key)
    except TypeError:
        key = (op_type, num_inputs, num_outputs, *((k, _freeze(v)) for k, v in attrs.items()))
    op = _CACHE.get(key)
    if op is None:
        op = _CACHE[key] = _resolve(op_type, num_inputs, num_outputs, attrs)
    return op


def _resolve(op_type: str, num_inputs: int, num_outputs: int, attrs: dict[str, Any]) -> EagerOp:
    schema = get_schema(op_type)
    where = f"netbrew.nn {op_type}"
    schema.check_arity(num_inputs, num_outputs, where)
    parsed = schema.parse_attrs(normalize_attrs(attrs), where)
    if schema.num_outputs_attr and parsed.get(schema.num_outputs_attr) is None:
        parsed[schema.num_outputs_attr] = num_outputs
    if schema.output_mask:
        parsed["output_mask"] = (True,) * num_outputs
    if schema.wants_names or schema.wants_scope:
        raise NotImplementedError(f"{where}: ops that read blobs by name cannot run eagerly")
    seed = parsed.get("seed")
    rng = np.random.default_rng(int(seed)) if schema.rng and seed is not None else None
    return EagerOp(schema, get_kernel(op_type, "cpu"), parsed, num_outputs, rng)


def call(op_type: str, inputs: Sequence[Any], *, outputs: int = 1, **attrs: Any) -> Any:
    """Runs (or, while tracing, records) one op.

    Args:
        op_type: a registered op type.
        inputs: arrays or traced values; None is an omitted optional input.
        outputs: how many outputs to compute and return.
        **attrs: the op's attributes; None means unset (the schema's default).

    Returns:
        One array (or traced value) when outputs == 1, else a tuple of them.
    """
    inputs = list(inputs)
    while inputs and inputs[-1] is None:
        inputs.pop()
    tracer = _TRACER.get()
    if tracer is not None:
        results = tracer.record(op_type, inputs, outputs, attrs)
    else:
        results = eager_op(op_type, len(inputs), outputs, attrs).run(inputs)
    return results[0] if outputs == 1 else results


def constant(value: Any, name: str) -> Any:
    """A constant operand: the value itself eagerly; while tracing, an init-net blob named
    `name` (within the calling module's path, e.g. `drop.ratio`)."""
    tracer = _TRACER.get()
    return value if tracer is None else tracer.constant(np.asarray(value), name)


def assign_(target: Any, value: Any) -> None:
    """Writes `value` into `target` in place (running statistics, counters).

    Eagerly it copies into the array; while tracing, `target` is a traced parameter or
    buffer and the traced net writes that blob.
    """
    if isinstance(target, np.ndarray):
        np.copyto(target, np.asarray(value), casting="same_kind")
    else:
        target.assign_(value)
