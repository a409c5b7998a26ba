"""caffe2.python.workspace on netbrew: the module-level current workspace.

Workspaces are netbrew Workspaces kept by name; "default" is current at start. Nets and
operators may be given as objects (core.Net, NetDef, OperatorDef) or as serialized
bytes, as Caffe2 took them. Ops written in Caffe2's spellings (CreateOperator's output,
a NetDef built by hand) are translated when they run or when their net is created. A
blob that is not there raises BlobNotFound, which `except RuntimeError` catches, as
Caffe2's errors were.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from netbrew.caffe2.python.core import (  # noqa: F401  (GlobalInit: Caffe2 had it here too)
    GlobalInit,
    canonical_proto,
    cuda_device_count,
    on_cpu_if_no_gpu,
)
from netbrew.converters.caffe2.op_by_op import translate_op
from netbrew.errors import BlobNotFoundError
from netbrew.executor import Workspace
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef

GpuDeviceType = 1  # caffe2_pb2.CUDA
has_gpu_support = has_cuda_support = False
has_hip_support = False


class BlobNotFound(BlobNotFoundError, RuntimeError):
    """A blob that is not in the current workspace (Caffe2 raised RuntimeError)."""


_workspaces: dict[str, Workspace] = {"default": Workspace()}
_current = "default"


def C() -> Workspace:  # noqa: N802
    """The current netbrew Workspace."""
    return _workspaces[_current]


def CurrentWorkspace() -> str:  # noqa: N802
    return _current


def Workspaces() -> list[str]:  # noqa: N802
    return sorted(_workspaces)


def SwitchWorkspace(name: str, create_if_missing: bool = False) -> None:  # noqa: N802
    """Makes workspace `name` current; it must exist unless create_if_missing."""
    global _current
    if name not in _workspaces:
        if not create_if_missing:
            raise RuntimeError(
                f"workspace {name!r} does not exist (have: {', '.join(sorted(_workspaces))}); "
                "pass create_if_missing=True to make it"
            )
        _workspaces[name] = Workspace()
    _current = name


_roots: dict[str, str] = {}  # workspace name -> root folder, where one was given


def ResetWorkspace(root_folder: str | None = None) -> bool:  # noqa: N802
    """Drops every blob and net of the current workspace; `root_folder` becomes the folder
    that relative Save and Load paths (absolute_path=0) are under, as in Caffe2."""
    C().reset()
    if root_folder is not None:
        _roots[_current] = os.fspath(root_folder)
    else:
        _roots.pop(_current, None)
    return True


def RootFolder() -> str:  # noqa: N802
    return _roots.get(_current, ".")


def _rooted(op: OperatorDef) -> OperatorDef:
    """A Save or Load whose relative db paths lie under the root folder (Caffe2's
    `absolute_path ? db : root_folder + "/" + db`); other ops as they are."""
    root = _roots.get(_current)
    if root is None or op.type not in ("Save", "Load"):
        return op
    args = {a.name: a for a in op.arg}
    if "absolute_path" in args and args["absolute_path"].i:
        return op
    out = OperatorDef()
    out.CopyFrom(op)
    for arg in out.arg:
        if arg.name == "db" and arg.s:
            arg.s = os.path.join(root, arg.s.decode()).encode()
        elif arg.name == "dbs":
            paths = [os.path.join(root, d.decode()).encode() for d in arg.strings]
            del arg.strings[:]
            arg.strings.extend(paths)
    return out


def NumCudaDevices() -> int:  # noqa: N802
    return cuda_device_count()


NumGpuDevices = NumCudaDevices


# -- blobs -------------------------------------------------------------------------------


def FeedBlob(name: str, arr: Any, device_option: Any = None) -> bool:  # noqa: N802
    """Stores a copy of `arr` as blob `name`, as Caffe2 copied it into a Tensor (later
    writes to `arr` do not reach the blob); a GPU device_option feeds the CPU when there
    is no GPU."""
    on_cpu_if_no_gpu(device_option, f"FeedBlob({str(name)!r})")
    C().feed_blob(str(name), np.array(arr, copy=True))
    return True


def FetchBlob(name: str) -> Any:  # noqa: N802
    """A copy of blob `name`, as Caffe2's: writing into it leaves the workspace alone."""
    try:
        value = C().fetch_blob(str(name))
    except BlobNotFoundError as e:
        raise BlobNotFound(str(e)) from None
    return value.copy() if isinstance(value, np.ndarray) else value


def FetchBlobs(names: Sequence[str]) -> list[Any]:  # noqa: N802
    return [FetchBlob(n) for n in names]


def HasBlob(name: str) -> bool:  # noqa: N802
    return C().has_blob(str(name))


def Blobs() -> list[str]:  # noqa: N802
    return C().blobs()


def RemoveBlob(name: str) -> None:  # noqa: N802
    C().remove_blob(str(name))


class _Blobs:
    """`workspace.blobs[name]` reads, `workspace.blobs[name] = value` feeds."""

    def __getitem__(self, name: str) -> Any:
        return FetchBlob(name)

    def __setitem__(self, name: str, value: Any) -> None:
        FeedBlob(name, value)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and HasBlob(name)

    def __len__(self) -> int:
        return len(Blobs())

    def __iter__(self) -> Iterator[str]:
        return iter(Blobs())


blobs = _Blobs()


# -- operators and nets --------------------------------------------------------------------


def _op(op: OperatorDef | bytes) -> OperatorDef:
    if isinstance(op, (bytes, bytearray)):
        op = OperatorDef.FromString(bytes(op))
    return op


def _canonical_net(net: Any) -> NetDef:
    """A net as netbrew runs it: Caffe2-spelled ops translated, GPU ops on the CPU."""
    if isinstance(net, (bytes, bytearray)):
        net = NetDef.FromString(bytes(net))
    proto = canonical_proto(net.proto() if hasattr(net, "proto") else net)
    if _roots.get(_current) is not None and any(op.type in ("Save", "Load") for op in proto.op):
        rooted = [_rooted(op) for op in proto.op]
        proto = NetDef.FromString(proto.SerializeToString())
        del proto.op[:]
        proto.op.extend(rooted)
    gpu = [op for op in proto.op if op.device_option.device_type == GpuDeviceType]
    if gpu and on_cpu_if_no_gpu(gpu[0].device_option, f"net {proto.name!r}").device_type == 0:
        proto = NetDef.FromString(proto.SerializeToString())
        for op in proto.op:
            if op.device_option.device_type == GpuDeviceType:
                op.device_option.device_type, op.device_option.device_id = 0, 0
    return proto


def RunOperatorOnce(operator: OperatorDef | bytes) -> bool:  # noqa: N802
    for op in translate_op(_op(operator)):
        op = _rooted(op)
        _run(lambda op=op: C().run_operator_once(op))
    return True


def RunOperatorsOnce(operators: Sequence[OperatorDef | bytes]) -> bool:  # noqa: N802
    for op in operators:
        RunOperatorOnce(op)
    return True


def RunNetOnce(net: Any) -> bool:  # noqa: N802
    proto = _canonical_net(net)
    _run(lambda: C().run_net_once(proto))
    return True


def CreateNet(net: Any, overwrite: bool = False, input_blobs: Any = None) -> bool:  # noqa: N802
    """Instantiates `net` (kernels resolved once), to run by name with RunNet."""
    C().create_net(_canonical_net(net), overwrite=overwrite)
    return True


def CreateNetOnce(net: Any) -> bool:  # noqa: N802
    """CreateNet, unless a net of that name exists already."""
    name = _canonical_net(net).name
    if name not in C().nets():
        CreateNet(net)
    return True


def RunNet(name: Any, num_iter: int = 1, allow_fail: bool = False) -> bool:  # noqa: N802
    key = name.Name() if hasattr(name, "Name") else name.name if hasattr(name, "name") else name
    _run(lambda: C().run_net(str(key), num_iter=num_iter))
    return True


def Nets() -> list[str]:  # noqa: N802
    return C().nets()


def _run(fn) -> None:
    try:
        fn()
    except BlobNotFoundError as e:
        raise BlobNotFound(str(e)) from e


class Predictor:
    """Caffe2's Predictor binding: `Predictor(init_net, predict_net).run(inputs)`.

    The nets may be NetDefs or serialized bytes, in Caffe2's spellings or netbrew's
    (converters.caffe2.load translates them); `inputs` is a list, filling the predict
    net's external inputs in order as Caffe2's did, or a dict by name. Returns the
    outputs as a list, in the predict net's external-output order. It runs on netbrew's
    Predictor, in a workspace of its own.
    """

    def __init__(self, init_net: Any, predict_net: Any) -> None:
        from netbrew.converters import caffe2
        from netbrew.executor import Predictor as _Predictor

        init, predict = (_net_proto(n) for n in (init_net, predict_net))
        self._input_order = list(predict.external_input)
        self._predictor = _Predictor(*caffe2.load(init, predict))

    def run(self, inputs: Any) -> list[np.ndarray]:
        if not isinstance(inputs, dict):
            inputs = list(inputs)
            if len(inputs) > len(self._input_order):
                raise ValueError(
                    f"Predictor.run: {len(inputs)} inputs, but the net has only "
                    f"{len(self._input_order)} external inputs: {self._input_order}"
                )
            inputs = dict(zip(self._input_order, inputs))
        outputs = self._predictor.run(inputs)
        return [outputs[name] for name in self._predictor.output_names]


def _net_proto(net: Any) -> NetDef:
    if isinstance(net, (bytes, bytearray)):
        return NetDef.FromString(bytes(net))
    return net.proto() if hasattr(net, "proto") else net
