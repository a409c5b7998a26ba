"""An op resolved once at create_net: kernel, parsed arguments and checks, ready to run."""

from __future__ import annotations

import functools
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netbrew import cuda  # light: PyCUDA loads only when a GPU is first asked for
from netbrew.errors import BlobNotFoundError, NetbrewError, OperatorError, SchemaError, suggest
from netbrew.netdef.args import args_dict
from netbrew.netdef.scope import device_name
from netbrew.operators import OpSchema, get_kernel, get_schema
from netbrew.proto.netbrew_pb2 import DeviceOption, OperatorDef


@dataclass
class CompiledOp:
    """One op of a created net. `run` does no protobuf work."""

    index: int
    op: OperatorDef
    schema: OpSchema
    kernel: Any
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any]
    device: str
    rng: np.random.Generator | None = field(default=None, repr=False)
    _checked: tuple | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def device_id(self) -> int | None:
        """The CUDA ordinal of a GPU op, None for a CPU op."""
        kind, _, index = self.device.partition(":")
        return int(index or 0) if kind == "cuda" else None

    @property
    def where(self) -> str:
        name = f" {self.op.name!r}" if self.op.name else ""
        return f"op #{self.index} {self.op.type}{name}"

    def run(self, blobs: MutableMapping[str, Any]) -> None:
        args, extra = self.gather(blobs)
        try:
            results = self.kernel(*args, **extra, **self.attrs)
        except Exception as e:
            raise OperatorError(self.describe(blobs, e)) from e
        self.store(blobs, results)

    def gather(self, blobs: MutableMapping[str, Any]) -> tuple[list, dict[str, Any]]:
        """The kernel's inputs and its extra keywords (rng, scope), with the device made
        current and the dtypes checked against the schema."""
        try:
            args = [blobs[n] if n else None for n in self.inputs]
        except KeyError:
            missing = next(n for n in self.inputs if n and n not in blobs)
            raise BlobNotFoundError(
                f"{self.where}: input {missing!r} is not in the workspace."
                f"{suggest(missing, blobs)} Feed it, or run the net that produces it first."
            ) from None
        try:
            if self.device_id is not None:  # the op's GPU context, current on this thread
                cuda.activate(self.device_id)
            dtypes = tuple([getattr(a, "dtype", None) for a in args])
            if dtypes != self._checked:  # a net's ops see the same dtypes run after run
                self.schema.check_dtypes(args)
                self._checked = dtypes
        except Exception as e:
            raise OperatorError(self.describe(blobs, e)) from e
        extra = {}
        if self.rng is not None:
            extra["rng"] = self.rng
        if self.schema.wants_scope:
            extra["scope"] = blobs
        return args, extra

    def store(self, blobs: MutableMapping[str, Any], results: Any) -> None:
        """Puts the kernel's results under the op's output names."""
        if len(results) < len(self.outputs):
            raise OperatorError(
                self.describe(
                    blobs,
                    SchemaError(
                        f"kernel returned {len(results)} outputs, the op asks for "
                        f"{len(self.outputs)}"
                    ),
                )
            )
        for name, value in zip(self.outputs, results):
            if name:
                # sequences (lists), empty optionals (None) and GPU arrays stay as they are
                keep = value is None or isinstance(value, (np.ndarray, list))
                keep = keep or hasattr(value, "gpudata")
                blobs[name] = value if keep else np.asarray(value)

    def describe(self, blobs: MutableMapping[str, Any], error: BaseException) -> str:
        """The failure message: op, blobs with shapes and dtypes, device, original error."""

        def show(names):
            return ", ".join(f"{n}: {_meta(blobs.get(n))}" if n else "<none>" for n in names)

        reason = (
            str(error) if isinstance(error, NetbrewError) else f"{type(error).__name__}: {error}"
        )
        return (
            f"{self.where} failed on {self.device}: {reason}\n"
            f"  inputs:  {show(self.inputs) or '()'}\n"
            f"  outputs: {', '.join(self.outputs)}"
        )


def _meta(value: Any) -> str:
    if value is None:
        return "<missing>"
    shape = getattr(value, "shape", None)
    if shape is None:
        return type(value).__name__
    where = " on cuda" if hasattr(value, "gpudata") else ""
    return f"{value.dtype}[{', '.join(map(str, shape))}]{where}"


def compile_op(index: int, op: OperatorDef, net_device: DeviceOption | None = None) -> CompiledOp:
    """Resolves an op's kernel for its device and parses and checks its arguments.

    Raises:
        UnknownOperatorError: the op type is not registered.
        SchemaError: arity or arguments do not match the schema, or no kernel for the device.
    """
    option = op.device_option if op.HasField("device_option") else net_device
    device = device_name(option)
    where = f"op #{index} {op.type}" + (f" {op.name!r}" if op.name else "")
    schema = get_schema(op.type)
    schema.check_arity(len(op.input), len(op.output), where)
    attrs = schema.parse_attrs(args_dict(op.arg), where)
    count_attr = schema.num_outputs_attr
    if count_attr and attrs.get(count_attr) is None:
        attrs[count_attr] = len(op.output)
    elif count_attr and attrs[count_attr] != len(op.output):
        raise SchemaError(
            f"{where}: {count_attr}={attrs[count_attr]} but the op lists {len(op.output)} outputs"
        )
    try:
        kernel = get_kernel(op.type, device.split(":")[0])
    except SchemaError as e:
        raise SchemaError(f"{where}: {e}") from None
    if schema.output_mask:
        attrs["output_mask"] = tuple(bool(o) for o in op.output)
    if schema.wants_names:
        attrs["input_names"], attrs["output_names"] = tuple(op.input), tuple(op.output)
    rng = np.random.default_rng(_seed(index, op, attrs, net_device)) if schema.rng else None
    return CompiledOp(
        index, op, schema, kernel, tuple(op.input), tuple(op.output), attrs, device, rng
    )


def _seed(index: int, op: OperatorDef, attrs: dict, net_device: DeviceOption | None):
    """The seed of an op's random stream: its `seed` argument, else its device option's
    random_seed, else the net's random_seed mixed with the op's index (so that two fillers
    in one seeded init net differ), else None (fresh entropy). The stream is created once
    per created net and advances from run to run."""
    if attrs.get("seed") is not None:
        return int(attrs["seed"])
    if op.HasField("device_option") and op.device_option.HasField("random_seed"):
        return op.device_option.random_seed
    if net_device is not None and net_device.HasField("random_seed"):
        return (net_device.random_seed, index)
    return None
