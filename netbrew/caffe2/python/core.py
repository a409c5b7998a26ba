"""caffe2.python.core on netbrew: Net, BlobReference, CreateOperator and the scopes.

`core.Net` is netbrew's Net. An op a script adds with Caffe2's spellings
(`net.Conv(["x", "w", "b"], "y", kernel=3, pad=1, order="NCHW")`) is translated into
netbrew's canonical ops as it is added (netbrew.converters.caffe2); ops that brew and the
optimizers add are canonical already (they run in canonical_scope). Nets get unique
names, as in Caffe2: `Net("train")` twice gives `train` and `train_1`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from netbrew.converters.caffe2.op_by_op import translate_op
from netbrew.converters.caffe2.translate import CANONICAL_MARK, is_canonical
from netbrew.errors import DeviceFallbackWarning
from netbrew.netdef import net as _net
from netbrew.netdef.args import set_args
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.netdef.scope import (
    current_device,
    current_name_scope,
    device_scope,
    in_canonical_scope,
    name_scope,
)
from netbrew.proto.netbrew_pb2 import DeviceOption as _DeviceOption
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef, TensorProto

BlobReference = _net.BlobReference
_as_list = _net._as_list  # None, one name or a sequence of names -> list
DataType = TensorProto.DataType
_CUDA = 1


def DeviceOption(  # noqa: N802  (Caffe2's name)
    device_type: int, device_id: int = 0, random_seed: int | None = None, **fields: Any
) -> _DeviceOption:
    """A DeviceOption proto, as Caffe2's helper made it."""
    option = _DeviceOption(device_type=device_type, device_id=device_id, **fields)
    if random_seed is not None:
        option.random_seed = random_seed
    return option


def cuda_device_count() -> int:
    """GPUs netbrew can use: none until netbrew.cuda (the `[cuda]` extra) finds one."""
    try:
        from netbrew import cuda
    except ImportError:
        return 0
    return cuda.device_count() if cuda.is_available() else 0


def on_cpu_if_no_gpu(
    option: _DeviceOption | None, what: str, stacklevel: int = 3
) -> _DeviceOption | None:
    """`option`, or a CPU option with a DeviceFallbackWarning when it asks for a GPU that
    netbrew cannot use here (stacklevel: frames up to the caller's line)."""
    if option is None or option.device_type != _CUDA or cuda_device_count() > option.device_id:
        return option
    warnings.warn(
        f"{what} asked for CUDA device {option.device_id}, but netbrew has no GPU here; "
        "it runs on the CPU",
        DeviceFallbackWarning,
        stacklevel=stacklevel,
    )
    cpu = _DeviceOption()
    cpu.CopyFrom(option)
    cpu.device_type, cpu.device_id = 0, 0
    return cpu


@contextmanager
def DeviceScope(scope: _DeviceOption | None, node_name: str | None = None) -> Iterator[None]:  # noqa: N802
    """Places the ops made inside on `scope`; a GPU scope runs on the CPU when netbrew has
    no GPU, with one warning."""
    option = on_cpu_if_no_gpu(scope, "DeviceScope", stacklevel=5)  # past contextlib
    if option is None:
        yield
        return
    with device_scope(option):
        yield


@contextmanager
def NameScope(prefix: str, reset: bool = False) -> Iterator[None]:  # noqa: N802
    """Prefixes the blobs made inside with `prefix/`."""
    with name_scope(prefix, reset=reset):
        yield


def ScopedName(name: str) -> str:  # noqa: N802
    return current_name_scope() + name


def ScopedBlobReference(name: str, *args: Any, **kwargs: Any) -> BlobReference:  # noqa: N802
    return BlobReference(ScopedName(name), *args, **kwargs)


def GlobalInit(args: Sequence[str]) -> None:  # noqa: N802
    """Caffe2 parsed its C++ flags here (`--caffe2_log_level`...); netbrew has none to set."""
    if isinstance(args, str) or not all(isinstance(a, str) for a in args):
        raise TypeError(f"GlobalInit expects a list of strings, got {args!r}")


def IsOperator(op_type: str) -> bool:  # noqa: N802
    from netbrew.converters.caffe2.context import TRANSLATORS
    from netbrew.operators import SCHEMAS

    return op_type in SCHEMAS or op_type in TRANSLATORS


def CreateOperator(  # noqa: N802
    operator_type: str,
    inputs: Any,
    outputs: Any,
    name: str = "",
    control_input: Any = None,
    device_option: _DeviceOption | None = None,
    arg: Sequence[Any] | None = None,
    engine: str | None = None,
    **kwargs: Any,
) -> OperatorDef:
    """An OperatorDef in Caffe2's spellings, as written; the workspace translates it when it
    runs (RunOperatorOnce) or when a net holding it is created."""
    op = OperatorDef(
        type=operator_type,
        input=[str(b) for b in _as_list(inputs)],
        output=[str(b) for b in _as_list(outputs)],
    )
    if name:
        op.name = name
    op.control_input.extend(str(b) for b in _as_list(control_input))
    option = device_option if device_option is not None else current_device()
    if option is not None:
        op.device_option.CopyFrom(option)
    if engine:
        op.engine = engine
    if arg:
        op.arg.extend(arg)
    set_args(op, {k: v for k, v in kwargs.items() if v is not None})
    return op


class Net(_net.Net):
    """Caffe2's core.Net: netbrew's Net with Caffe2's method names and op spellings."""

    def __init__(self, name_or_proto: str | NetDef | _net.Net = "net", inplace: bool = False):
        if isinstance(name_or_proto, _net.Net):
            name_or_proto = name_or_proto.proto()
        if isinstance(name_or_proto, NetDef):
            proto = canonical_proto(name_or_proto)
            proto.name = _net.fresh_net_name(proto.name or "net")
            super().__init__(proto)
        else:
            super().__init__(_net.fresh_net_name(name_or_proto))
            self.proto().arg.add(name=CANONICAL_MARK, i=1)
        self._blob_counter = 0

    # -- Caffe2's names for netbrew's methods ---------------------------------------------

    def Proto(self) -> NetDef:  # noqa: N802
        return self.proto()

    def Name(self) -> str:  # noqa: N802
        return self.name

    def AddExternalInput(self, *inputs: Any) -> BlobReference | list[BlobReference]:  # noqa: N802
        refs = self.add_external_input(*map(str, _flatten(inputs)))
        return refs[0] if len(refs) == 1 else refs

    AddExternalInputs = AddExternalInput

    def AddExternalOutput(self, *outputs: Any) -> BlobReference | list[BlobReference]:  # noqa: N802
        refs = self.add_external_output(*map(str, _flatten(outputs)))
        return refs[0] if len(refs) == 1 else refs

    AddExternalOutputs = AddExternalOutput

    def AddGradientOperators(self, ys: Any, skip: int = 0) -> dict[str, str]:  # noqa: N802
        """Appends the backward pass for the losses `ys`; returns blob -> gradient blob."""
        return add_gradient_ops(self, [str(y) for y in _as_list(ys)])

    def Clone(self, name: str, blob_remap: dict | None = None, **kwargs: Any) -> Net:  # noqa: N802
        """A copy under a fresh name based on `name`; blob_remap renames blobs."""
        if kwargs:
            raise TypeError(f"Net.Clone: arguments {sorted(kwargs)} are not supported")
        proto = NetDef()
        proto.CopyFrom(self.proto())
        proto.name = name
        if blob_remap:
            _remap(proto, {str(k): str(v) for k, v in blob_remap.items()})
        return Net(proto)

    def NextName(self, prefix: str | None = None, output_id: int | None = None) -> str:  # noqa: N802
        self._blob_counter += 1
        base = ScopedName(f"{self.name}_{prefix or 'blob'}")
        return f"{base}_{self._blob_counter}" + (f"_{output_id}" if output_id else "")

    def BlobIsDefined(self, blob: str) -> bool:  # noqa: N802
        produced = {o for op in self.proto().op for o in op.output}
        return str(blob) in produced or str(blob) in self.proto().external_input

    def UsesBlob(self, blob: str) -> bool:  # noqa: N802
        return any(str(blob) in op.input or str(blob) in op.output for op in self.proto().op)

    def GetBlobRef(self, name: str) -> BlobReference:  # noqa: N802
        return BlobReference(str(name), self)

    def RunAllOnGPU(self, gpu_id: int = 0, use_cudnn: bool = False) -> None:  # noqa: N802
        """Places the net and every op on CUDA device `gpu_id` (on the CPU, with one
        warning, when netbrew has no GPU)."""
        option = on_cpu_if_no_gpu(DeviceOption(_CUDA, gpu_id), "RunAllOnGPU")
        self.set_device(option)
        for op in self.proto().op:
            op.device_option.CopyFrom(option)

    # -- ops in Caffe2's spellings ---------------------------------------------------------

    def __getattr__(self, op_type: str):
        if op_type.startswith("_"):
            raise AttributeError(op_type)
        if in_canonical_scope():
            return super().__getattr__(op_type)
        if not IsOperator(op_type):
            super().__getattr__(op_type)  # UnknownOperatorError with near names

        def make(inputs: Any = (), outputs: Any = None, **kwargs: Any):
            return self._add_caffe2_op(op_type, inputs, outputs, **kwargs)

        make.__name__ = op_type
        return make

    def _add_caffe2_op(self, op_type: str, inputs: Any, outputs: Any, **kwargs: Any):
        """Adds `op_type` written in Caffe2's spellings, translated; returns its outputs."""
        if outputs is None or isinstance(outputs, int):
            count = 1 if outputs is None else outputs
            names = [self.NextName(op_type.lower(), i if count > 1 else None) for i in range(count)]
        else:
            names = [str(o) if isinstance(o, BlobReference) else ScopedName(o) for o in
                     _as_list(outputs)]  # fmt: skip
        ins = [str(i) if isinstance(i, BlobReference) else ScopedName(i) for i in
               _as_list(inputs)]  # fmt: skip
        op = CreateOperator(op_type, ins, names, **kwargs)
        self.proto().op.extend(translate_op(op))
        refs = [BlobReference(n, self) for n in names]
        return refs[0] if len(refs) == 1 else tuple(refs)


def canonical_proto(proto: NetDef) -> NetDef:
    """A copy of `proto` in canonical ops, marked so: a net a core.Net built (marked) is
    copied as it is, any other has its Caffe2 spellings translated op by op."""
    out = NetDef()
    out.CopyFrom(proto)
    if not is_canonical(proto):
        del out.op[:]
        for op in proto.op:
            out.op.extend(translate_op(op))
        out.arg.add(name=CANONICAL_MARK, i=1)
    return out


def _flatten(items: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        out.extend(item if isinstance(item, (list, tuple)) else [item])
    return out


def _remap(proto: NetDef, mapping: dict[str, str]) -> None:
    for op in proto.op:
        op.input[:] = [mapping.get(b, b) for b in op.input]
        op.output[:] = [mapping.get(b, b) for b in op.output]
    for field in (proto.external_input, proto.external_output):
        field[:] = [mapping.get(b, b) for b in field]
